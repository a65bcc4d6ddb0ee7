// protocol/routes: configured routes, resolved once at start-up. A route names the API of a path
// that is not (or not only) recognized by its well-known path, e.g. an OpenAI-compatible server
// under /llm/ or Ollama behind /ollama/. app/ builds the rules from the config; per request
// choose() only compares paths.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/types.hpp"

namespace tokenmeter::protocol {

struct route_rule {
    std::string path;  // the exact request path, or the prefix when `prefix`
    bool prefix = false;
    api_kind api = api_kind::none;
    std::optional<bool> usage_injection;  // overrides the table's default
    bool continuous_usage_stats = false;  // with injection: usage in every chunk too
};

struct route_choice {
    api_kind api = api_kind::none;
    bool usage_injection = false;   // the route allows adding stream_options.include_usage
    bool continuous_usage = false;  // ... and stream_options.continuous_usage_stats
};

class route_table {
  public:
    route_table() = default;
    route_table(std::vector<route_rule> rules, bool usage_injection_default);

    // The API of a POST to `target` (path and optional query): the first rule whose path
    // matches, else the well-known path.
    [[nodiscard]] route_choice choose(std::string_view target) const noexcept;

    [[nodiscard]] const std::vector<route_rule>& rules() const noexcept { return rules_; }

  private:
    std::vector<route_rule> rules_;
    bool usage_injection_default_ = false;
};

}  // namespace tokenmeter::protocol
