// app: the composition root. Builds the parts from settings, runs them, drains on SIGTERM.
#pragma once

#include <functional>
#include <memory>

#include "config/config.hpp"

namespace tokenmeter::observe {
class observer;
}  // namespace tokenmeter::observe

namespace tokenmeter::app {

// Reads the configuration again (the same file and flags as at start), for SIGHUP.
using reloader = std::function<config::load_result()>;

// An observer put around the metering one, inside the guard the sessions see. The proxy's own
// main passes none; the test binary tokenmeter-faults (tests/faults) passes one that throws, to
// show that a failure inside metering never reaches a stream.
using metering_wrap =
    std::function<std::unique_ptr<observe::observer>(observe::observer& metering)>;

// Runs the proxy until SIGTERM/SIGINT and the drain finish. Returns the process exit code.
// SIGHUP calls `reload` (when given) and applies what can change without a restart.
int run(const config::settings& settings, const reloader& reload = {},
        const metering_wrap& wrap = {});

}  // namespace tokenmeter::app
