// app/config_checks: the config checks that need another module's knowledge. config/ knows no
// module (it is below all of them), so rules such as "a route names a known API" are checked
// here, where the config and the modules meet, and reported with the same dotted keys.
#pragma once

#include <vector>

#include "config/config.hpp"

namespace tokenmeter::app {

// Every error of this kind in `s`; empty when none. Run after config::validate wherever a
// config is accepted: start-up, --check-config and reload.
std::vector<config::config_error> module_config_errors(const config::settings& s);

}  // namespace tokenmeter::app
