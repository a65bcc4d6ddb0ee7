// Bounded JSON: request bodies and response events nested past limits.max_json_depth are not
// looked into (and cannot reach the call stack), at any depth up to a million.
#include "protocol/json_limits.hpp"

#include <gtest/gtest.h>

#include <array>
#include <string>

#include "protocol/dialect.hpp"
#include "protocol/dialects.hpp"
#include "protocol/realtime.hpp"

namespace tokenmeter::protocol {
namespace {

std::string nested(std::string_view key, std::size_t depth) {
    std::string body = "{\"model\":\"m\",\"" + std::string(key) + "\":";
    body.append(depth, '[');
    body += "\"deep text\"";
    body.append(depth, ']');
    body += '}';
    return body;
}

TEST(JsonLimits, DepthScanIgnoresBracketsInStrings) {
    EXPECT_TRUE(json_depth_within(R"({"a":"[[[[[[[[[[[[[[[[[[[[[[[[[[["})", 2));
    EXPECT_TRUE(json_depth_within(R"({"a":"\"[[[["})", 1));
    EXPECT_TRUE(json_depth_within("[[1]]", 2));
    EXPECT_FALSE(json_depth_within("[[[1]]]", 2));
    EXPECT_FALSE(json_depth_within(nested("system", 300), 256));
    EXPECT_TRUE(json_depth_within(nested("system", 200), 256));
}

TEST(JsonLimits, DeepRequestBodiesAreNotParsedAndDoNotCrash) {
    const std::array<std::pair<api_kind, const char*>, 8> apis{{
        {api_kind::anthropic_messages, "/v1/messages"},
        {api_kind::openai_responses, "/v1/responses"},
        {api_kind::tgi_generate, "/generate_stream"},
        {api_kind::llamacpp_completion, "/completion"},
        {api_kind::ollama_generate, "/api/generate"},
        {api_kind::ollama_chat, "/api/chat"},
        {api_kind::gemini_generate, "/v1beta/models/m:streamGenerateContent"},
        {api_kind::openai_chat_completions, "/v1/chat/completions"},
    }};
    const std::string deep = nested("system", 1'000'000);
    for (const auto& [api, path] : apis) {
        request_info info = parse_request(api, path, deep);
        EXPECT_FALSE(info.body_parsed) << path;
        EXPECT_EQ(info.prompt_chars, 0u) << path;
    }
    EXPECT_FALSE(inject_usage_request(deep, false)) << "an unparsed body is forwarded as it is";
}

TEST(JsonLimits, BodiesWithinTheLimitAreStillRead) {
    request_info info =
        parse_request(api_kind::anthropic_messages, "/v1/messages", nested("system", 100));
    EXPECT_TRUE(info.body_parsed);
    EXPECT_EQ(info.model, "m");
    EXPECT_EQ(info.prompt_chars, 9u);  // "deep text"
}

class counting_sink final : public chunk_sink {
  public:
    void on_chunk(const response_chunk&, core::time_point) override { ++chunks; }
    void on_done_marker(core::time_point) override {}
    void on_parse_error(parse_error) override { ++errors; }
    int chunks = 0;
    int errors = 0;
};

TEST(JsonLimits, DeepResponseEventsAreParseErrors) {
    std::string deep = "{\"choices\":[{\"delta\":{\"content\":";
    deep.append(100'000, '[');
    deep.append(100'000, ']');
    deep += "}}]}";
    for (const dialect* d : dialect_table()) {
        api_kind api = d->api;
        auto adapter = make_adapter(api);
        if (!adapter) {
            // A tunnel's API reads no body: its session reads whole messages (realtime_test).
            EXPECT_TRUE(is_tunnel_api(api)) << to_string(api);
            continue;
        }
        counting_sink sink;
        adapter->on_body(deep, core::time_point{}, sink);
        EXPECT_EQ(sink.errors, 1) << to_string(api);
        EXPECT_EQ(sink.chunks, 0) << to_string(api);
    }
}

}  // namespace
}  // namespace tokenmeter::protocol
