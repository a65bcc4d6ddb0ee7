// app/healthcheck_command: `tokenmeter healthcheck`, one GET of a running instance's admin
// /healthz (or /readyz) over loopback, for a container's HEALTHCHECK where no curl is installed.
// A blocking socket with a deadline: it runs once and exits, so it needs no event loop.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "config/parse.hpp"

namespace tokenmeter::app {

// Where the probe connects for an admin listener bound to `admin`: an unspecified address
// (0.0.0.0, ::) is reached through the loopback of its family; any other address as it is.
config::endpoint probe_address(const config::endpoint& admin);

// The status code of an HTTP/1.x response's status line ("HTTP/1.1 200 OK\r\n..."), or nullopt
// when `head` does not start with one.
std::optional<int> response_status(const std::string& head);

// args: those after "healthcheck". Exit 0 when the endpoint answers 200, 1 when it does not (or
// cannot be reached in time), 2 on a usage error.
int healthcheck_command(const std::vector<std::string>& args);

}  // namespace tokenmeter::app
