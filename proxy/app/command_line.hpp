// app/command_line: the proxy's own flags (app/flags) and the settings they give:
// the config file with the flags on top, validated by config/ and by the modules. Subcommands
// (`usage`, `tokenize`) are dispatched by main before this parser sees their arguments.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace tokenmeter::app {

struct command_line {
    enum class action { run, help, version, check_config, print_config };
    action what = action::run;
    std::string config_path;        // --config, or the file of --check-config
    std::string check_config_path;  // --check-config
    bool print_config = false;      // --print-config (with --check-config: after the check)
    // Overrides, as written; build_settings parses and validates them.
    std::optional<std::string> listen;
    std::optional<std::string> upstream;
    std::optional<std::string> admin;
    std::optional<std::string> threads;
    std::optional<std::string> log_level;
    bool access_log = false;
};

struct parsed_command_line {
    std::optional<command_line> value;
    std::string error;  // when value is empty: one line, e.g. "unknown argument '--x'"
};

// args: argv[1..]. Both "--flag value" and "--flag=value".
parsed_command_line parse_command_line(const std::vector<std::string>& args);

// The --help text.
std::string_view usage_text();

// The file (when given) with the flags on top, then every check: config::validate and
// module_errors. Called again on SIGHUP with the same command line.
config::load_result build_settings(const command_line& flags);

// --check-config FILE with the proxy's flags on top: the settings as the proxy would build them,
// then every file and secret they name and every tokenizer loaded; prints every error with its
// key (and tokenizer warnings) and returns 1 when there is one, else 0.
int check_config(const command_line& flags);

// --print-config: the effective settings (file, then flags) as YAML on stdout, secrets redacted;
// 1 with the errors when the settings are invalid.
int print_config(const command_line& flags);

// Prints errors as "source: key: message", one per line, to stderr.
void print_errors(const std::vector<config::config_error>& errors, const std::string& source);

}  // namespace tokenmeter::app
