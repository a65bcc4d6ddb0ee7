// app: the composition root. Builds the parts from settings, runs them, drains on SIGTERM.
#pragma once

#include "config/config.hpp"

namespace tokenmeter::app {

// Runs the proxy until SIGTERM/SIGINT and the drain finish. Returns the process exit code.
int run(const config::settings& settings);

}  // namespace tokenmeter::app
