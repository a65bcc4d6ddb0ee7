// app/config_checks: the config checks that need another module's knowledge, and the
// translation of those config sections into the modules' own types. config/ knows no module (it
// is below all of them), so rules such as "a route names a known API" are checked here, where
// the config and the modules meet, and reported with the same dotted keys.
#pragma once

#include <vector>

#include "config/config.hpp"
#include "protocol/routes.hpp"

namespace tokenmeter::app {

// Every error of this kind in `s`; empty when none. Run after config::validate wherever a
// config is accepted: start-up, --check-config and reload.
std::vector<config::config_error> module_config_errors(const config::settings& s);

// The configured routes as protocol rules: API names resolved once, a trailing '*' made a
// prefix. `errors`: the unknown API names (module_config_errors); such an entry is built with
// api_kind::none.
struct route_rules {
    std::vector<protocol::route_rule> rules;
    std::vector<config::config_error> errors;
};
route_rules build_route_rules(const std::vector<config::route>& routes);

// The route table the proxy chooses each request's API with, built once at start-up.
protocol::route_table make_route_table(const config::settings& s);

}  // namespace tokenmeter::app
