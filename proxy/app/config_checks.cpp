#include "app/config_checks.hpp"

#include <string>

#include "protocol/dialects.hpp"

namespace tokenmeter::app {

std::vector<config::config_error> module_config_errors(const config::settings& s) {
    std::vector<config::config_error> errors;
    for (std::size_t i = 0; i < s.routes.size(); ++i) {
        const std::string& api = s.routes[i].api;
        if (!protocol::api_from_name(api)) {
            errors.push_back({"routes[" + std::to_string(i) + "].api",
                              "unknown api \"" + api +
                                  "\" (expected openai_chat, openai_completions, "
                                  "openai_responses, anthropic_messages, tgi_generate, "
                                  "llamacpp_completion, ollama_chat, ollama_generate, "
                                  "gemini_generate or none)"});
        }
    }
    return errors;
}

}  // namespace tokenmeter::app
