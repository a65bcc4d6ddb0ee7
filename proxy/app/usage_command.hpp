// app/usage_command: `tokenmeter usage`, the usage report and the capacity plan (usage/report,
// usage/plan) read from a spool directory, named by --spool or by a config file's
// usage.spool_dir.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tokenmeter::app {

// args: the words after "usage". Returns the exit status: 0, 1 (unreadable config or spool, or a
// bad line under --strict), 2 (a wrong argument).
int usage_command(const std::vector<std::string>& args);

// A config file's usage.spool_dir; nullopt after printing the file's errors to stderr.
std::optional<std::string> spool_dir_from_config(const std::string& path);

}  // namespace tokenmeter::app
