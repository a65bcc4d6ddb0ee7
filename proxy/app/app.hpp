// app: the composition root. Builds the parts from settings, runs them, drains on SIGTERM.
#pragma once

#include <functional>

#include "config/config.hpp"

namespace tokenmeter::app {

// Reads the configuration again (the same file and flags as at start), for SIGHUP.
using reloader = std::function<config::load_result()>;

// Runs the proxy until SIGTERM/SIGINT and the drain finish. Returns the process exit code.
// SIGHUP calls `reload` (when given) and applies what can change without a restart.
int run(const config::settings& settings, const reloader& reload = {});

}  // namespace tokenmeter::app
