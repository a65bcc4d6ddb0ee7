#include "protocol/dialects.hpp"

#include <array>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "protocol/dialect_adapters.hpp"
#include "protocol/json_limits.hpp"
#include "protocol/openai.hpp"

namespace tokenmeter::protocol {
namespace {

using json = nlohmann::json;

struct named_api {
    api_kind kind;
    std::string_view name;
};

constexpr std::array<named_api, 10> api_names{{
    {api_kind::none, "none"},
    {api_kind::openai_chat_completions, "openai_chat"},
    {api_kind::openai_completions, "openai_completions"},
    {api_kind::openai_responses, "openai_responses"},
    {api_kind::anthropic_messages, "anthropic_messages"},
    {api_kind::tgi_generate, "tgi_generate"},
    {api_kind::llamacpp_completion, "llamacpp_completion"},
    {api_kind::ollama_chat, "ollama_chat"},
    {api_kind::ollama_generate, "ollama_generate"},
    {api_kind::gemini_generate, "gemini_generate"},
}};

std::string_view path_of(std::string_view target) noexcept {
    return target.substr(0, target.find('?'));
}

// Gemini's method suffix: "…/models/<model>:streamGenerateContent" (also under Vertex's
// projects/…/publishers/google/models/). Returns the model and whether it streams.
struct gemini_target {
    std::string_view model;
    bool stream = false;
};
std::optional<gemini_target> parse_gemini_path(std::string_view path) noexcept {
    constexpr std::string_view stream_method = ":streamGenerateContent";
    constexpr std::string_view method = ":generateContent";
    gemini_target out;
    std::string_view rest;
    if (path.ends_with(stream_method)) {
        out.stream = true;
        rest = path.substr(0, path.size() - stream_method.size());
    } else if (path.ends_with(method)) {
        rest = path.substr(0, path.size() - method.size());
    } else {
        return std::nullopt;
    }
    auto models = rest.rfind("/models/");
    if (models == std::string_view::npos) {
        return std::nullopt;
    }
    out.model = rest.substr(models + 8);
    if (out.model.empty() || out.model.find('/') != std::string_view::npos) {
        return std::nullopt;
    }
    return out;
}

const json* member(const json& object, const char* key) {
    if (!object.is_object()) {
        return nullptr;
    }
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) {
        return nullptr;
    }
    return &*it;
}

// Text a prompt carries: a string, or parts/blocks with "text" (OpenAI, Anthropic, Gemini).
// Iterative, with an explicit stack: the body's nesting cannot reach the call stack.
std::uint64_t text_chars(const json& root) {
    std::uint64_t chars = 0;
    std::vector<const json*> todo{&root};
    while (!todo.empty()) {
        const json* value = todo.back();
        todo.pop_back();
        if (value->is_string()) {
            chars += value->get_ref<const std::string&>().size();
        } else if (value->is_array()) {
            for (const auto& item : *value) {
                todo.push_back(&item);
            }
        } else if (value->is_object()) {
            for (const char* key : {"text", "content", "parts"}) {
                if (const json* inner = member(*value, key)) {
                    todo.push_back(inner);
                }
            }
        }
    }
    return chars;
}

}  // namespace

std::string_view to_string(api_kind kind) noexcept {
    for (const auto& named : api_names) {
        if (named.kind == kind) {
            return named.name;
        }
    }
    return "none";
}

std::string_view to_string(parse_error reason) noexcept {
    switch (reason) {
        case parse_error::invalid_json:
            return "invalid_json";
        case parse_error::unexpected_shape:
            return "unexpected_shape";
        case parse_error::unknown_event:
            return "unknown_event";
        case parse_error::oversized_event:
            return "oversized_event";
        case parse_error::truncated_event:
            return "truncated_event";
    }
    return "unexpected_shape";
}

std::optional<api_kind> api_from_name(std::string_view name) noexcept {
    for (const auto& named : api_names) {
        if (named.name == name) {
            return named.kind;
        }
    }
    return std::nullopt;
}

api_kind api_for_path(std::string_view target) noexcept {
    std::string_view path = path_of(target);
    // OpenAI's paths, also served by vLLM, SGLang, TGI, llama.cpp and Ollama; llama.cpp also
    // serves them without the /v1 prefix.
    if (path == "/v1/chat/completions" || path == "/chat/completions") {
        return api_kind::openai_chat_completions;
    }
    if (path == "/v1/completions") {
        return api_kind::openai_completions;
    }
    if (path == "/v1/responses") {
        return api_kind::openai_responses;
    }
    if (path == "/v1/messages") {
        return api_kind::anthropic_messages;
    }
    if (path == "/generate" || path == "/generate_stream") {
        return api_kind::tgi_generate;
    }
    // llama.cpp's native endpoint and its alias (not to be confused with /v1/completions).
    if (path == "/completion" || path == "/completions") {
        return api_kind::llamacpp_completion;
    }
    if (path == "/api/chat") {
        return api_kind::ollama_chat;
    }
    if (path == "/api/generate") {
        return api_kind::ollama_generate;
    }
    if (parse_gemini_path(path)) {
        return api_kind::gemini_generate;
    }
    return api_kind::none;
}

route_choice choose_route(std::string_view target, const std::vector<config::route>& routes,
                          bool usage_injection_default) noexcept {
    std::string_view path = path_of(target);
    for (const auto& r : routes) {
        std::string_view want = r.path;
        bool match =
            want.ends_with('*') ? path.starts_with(want.substr(0, want.size() - 1)) : path == want;
        if (match) {
            bool inject = r.usage_injection.value_or(usage_injection_default);
            return {api_from_name(r.api).value_or(api_kind::none), inject,
                    inject && r.continuous_usage_stats};
        }
    }
    return {api_for_path(target), usage_injection_default};
}

request_info parse_request(api_kind api, std::string_view target, std::string_view body) {
    request_info info;
    if (api == api_kind::none) {
        return info;
    }
    if (api == api_kind::openai_chat_completions || api == api_kind::openai_completions) {
        info = parse_openai_request(body);
    } else {
        // Past the depth limit the body is not looked into (it is still forwarded as it is).
        json root = json_depth_within(body, max_json_depth())
                        ? json::parse(body.begin(), body.end(), nullptr, false)
                        : json(json::value_t::discarded);
        if (!root.is_discarded() && root.is_object()) {
            info.body_parsed = true;
            if (const json* model = member(root, "model"); model != nullptr && model->is_string()) {
                info.model = model->get<std::string>();
            }
            const json* stream = member(root, "stream");
            if (stream != nullptr && stream->is_boolean()) {
                info.stream = stream->get<bool>();
            } else if (api == api_kind::ollama_chat || api == api_kind::ollama_generate) {
                info.stream = true;  // Ollama streams unless the request says "stream": false
            }
            for (const char* key :
                 {"messages", "prompt", "input", "inputs", "contents", "system"}) {
                if (const json* prompt = member(root, key)) {
                    info.prompt_chars += text_chars(*prompt);
                }
            }
        } else if (api == api_kind::ollama_chat || api == api_kind::ollama_generate) {
            info.stream = true;
        }
    }
    std::string_view path = path_of(target);
    if (api == api_kind::tgi_generate) {
        info.stream = path.ends_with("_stream");
    } else if (api == api_kind::gemini_generate) {
        if (auto gemini = parse_gemini_path(path)) {
            info.stream = gemini->stream;
            if (info.model.empty()) {
                info.model = std::string(gemini->model);
            }
        }
    }
    return info;
}

bool can_inject_usage(api_kind api, const request_info& info) noexcept {
    return (api == api_kind::openai_chat_completions || api == api_kind::openai_completions) &&
           info.body_parsed && info.stream && !info.include_usage;
}

std::optional<std::string> inject_usage_request(std::string_view body, bool continuous) {
    if (!json_depth_within(body, max_json_depth())) {
        return std::nullopt;
    }
    json root = json::parse(body.begin(), body.end(), nullptr, false);
    if (root.is_discarded() || !root.is_object()) {
        return std::nullopt;
    }
    const std::string_view option =
        continuous ? R"("stream_options":{"include_usage":true,"continuous_usage_stats":true})"
                   : R"("stream_options":{"include_usage":true})";
    if (!root.contains("stream_options")) {
        // Insert the member right after the opening brace: every other byte of the client's
        // body reaches the server as it was written.
        auto brace = body.find('{');
        if (brace == std::string_view::npos) {
            return std::nullopt;
        }
        std::string out;
        out.reserve(body.size() + option.size() + 1);
        out.append(body.substr(0, brace + 1));
        out.append(option);
        if (!root.empty()) {
            out.push_back(',');
        }
        out.append(body.substr(brace + 1));
        return out;
    }
    // stream_options is there but does not ask for usage: re-serialize (keys keep their order
    // only as far as the JSON library keeps it; this case is rare).
    json& options = root["stream_options"];
    if (!options.is_object()) {
        options = json::object();
    }
    options["include_usage"] = true;
    if (continuous) {
        options["continuous_usage_stats"] = true;
    }
    return root.dump();
}

std::unique_ptr<adapter> make_adapter(api_kind api) {
    switch (api) {
        case api_kind::openai_chat_completions:
        case api_kind::openai_completions:
            return std::make_unique<openai_adapter>(api);
        case api_kind::openai_responses:
            return make_openai_responses_adapter();
        case api_kind::anthropic_messages:
            return make_anthropic_adapter();
        case api_kind::tgi_generate:
            return make_tgi_adapter();
        case api_kind::llamacpp_completion:
            return make_llamacpp_adapter();
        case api_kind::ollama_chat:
        case api_kind::ollama_generate:
            return make_ollama_adapter();
        case api_kind::gemini_generate:
            return make_gemini_adapter();
        case api_kind::none:
            break;
    }
    return nullptr;
}

}  // namespace tokenmeter::protocol
