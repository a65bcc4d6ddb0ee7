#include "protocol/routes.hpp"

#include <utility>

#include "protocol/dialects.hpp"

namespace tokenmeter::protocol {

route_table::route_table(std::vector<route_rule> rules, bool usage_injection_default)
    : rules_(std::move(rules)), usage_injection_default_(usage_injection_default) {}

route_choice route_table::choose(std::string_view target) const noexcept {
    std::string_view path = target.substr(0, target.find('?'));
    for (const auto& rule : rules_) {
        bool match = rule.prefix ? path.starts_with(rule.path) : path == rule.path;
        if (match) {
            bool inject = rule.usage_injection.value_or(usage_injection_default_);
            return {rule.api, inject, inject && rule.continuous_usage_stats};
        }
    }
    return {api_for_path(target), usage_injection_default_};
}

}  // namespace tokenmeter::protocol
