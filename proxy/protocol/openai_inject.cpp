// protocol/openai_inject: usage injection into an OpenAI streamed request
// (stream_options.include_usage), every other byte of the client's body kept as written.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "protocol/dialects.hpp"
#include "protocol/json_limits.hpp"
#include "protocol/openai.hpp"

namespace tokenmeter::protocol {

using json = nlohmann::json;

namespace {

// Inserts the member right after the opening brace: every other byte of the client's body
// reaches the server as it was written.
std::optional<std::string> insert_stream_options(std::string_view body, std::string_view option,
                                                 bool empty_object) {
    auto brace = body.find('{');
    if (brace == std::string_view::npos) {
        return std::nullopt;
    }
    std::string out;
    out.reserve(body.size() + option.size() + 1);
    out.append(body.substr(0, brace + 1));
    out.append(option);
    if (!empty_object) {
        out.push_back(',');
    }
    out.append(body.substr(brace + 1));
    return out;
}

}  // namespace

std::optional<std::string> inject_usage_request(std::string_view body, bool continuous,
                                                const request_info* parsed) {
    const std::string_view option =
        continuous ? R"("stream_options":{"include_usage":true,"continuous_usage_stats":true})"
                   : R"("stream_options":{"include_usage":true})";
    if (parsed != nullptr && parsed->body_parsed && !parsed->has_stream_options) {
        // parse_openai_request read this body: a JSON object (within the depth limit) without
        // the member, so there is nothing to parse again.
        return insert_stream_options(body, option, parsed->empty_object);
    }
    if (!json_depth_within(body, max_json_depth())) {
        return std::nullopt;
    }
    json root = json::parse(body.begin(), body.end(), nullptr, false);
    if (root.is_discarded() || !root.is_object()) {
        return std::nullopt;
    }
    if (!root.contains("stream_options")) {
        return insert_stream_options(body, option, root.empty());
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
}  // namespace tokenmeter::protocol
