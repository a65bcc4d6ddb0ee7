#include "app/config_checks.hpp"

#include <string>
#include <string_view>
#include <utility>

#include "protocol/dialects.hpp"

namespace tokenmeter::app {
namespace {

std::string quote(std::string_view s) {
    return "\"" + std::string(s) + "\"";
}

}  // namespace

route_rules build_route_rules(const std::vector<config::route>& routes) {
    route_rules out;
    out.rules.reserve(routes.size());
    for (std::size_t i = 0; i < routes.size(); ++i) {
        const config::route& r = routes[i];
        // The path's form is config's own rule (config::validate); the API names are the
        // protocol table's.
        auto api = protocol::api_from_name(r.api);
        if (!api) {
            out.errors.push_back(
                {"routes[" + std::to_string(i) + "].api",
                 "unknown api " + quote(r.api) + " (expected " + protocol::api_names_list() + ")"});
        }
        protocol::route_rule rule;
        rule.prefix = r.path.ends_with('*');
        rule.path = rule.prefix ? r.path.substr(0, r.path.size() - 1) : r.path;
        rule.api = api.value_or(protocol::api_kind::none);
        rule.usage_injection = r.usage_injection;
        rule.continuous_usage_stats = r.continuous_usage_stats;
        out.rules.push_back(std::move(rule));
    }
    return out;
}

std::vector<config::config_error> module_config_errors(const config::settings& s) {
    return build_route_rules(s.routes).errors;
}

protocol::route_table make_route_table(const config::settings& s) {
    return protocol::route_table(build_route_rules(s.routes).rules, s.usage_injection);
}

}  // namespace tokenmeter::app
