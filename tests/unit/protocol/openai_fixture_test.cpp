// The OpenAI adapter on recorded-format streams, fed through the SSE parser split at every byte.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "protocol/openai.hpp"
#include "sse/parser.hpp"

namespace tokenmeter::protocol {
namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in.good()) << path;
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

struct recorded_chunk {
    std::string content, reasoning, tool, finish;
    bool role_only = false;
    bool error = false;
    std::optional<token_usage> usage;
};

class recording_sink final : public chunk_sink {
  public:
    void on_chunk(const response_chunk& chunk, core::time_point) override {
        chunks.push_back({std::string(chunk.content), std::string(chunk.reasoning),
                          std::string(chunk.tool_arguments), std::string(chunk.finish_reason),
                          chunk.role_only, chunk.error, chunk.usage});
    }
    void on_done_marker(core::time_point) override { ++done_markers; }
    void on_parse_error(parse_error) override { ++parse_errors; }

    std::vector<recorded_chunk> chunks;
    int done_markers = 0;
    int parse_errors = 0;
};

recording_sink run(api_kind kind, const std::string& stream, std::size_t split) {
    recording_sink sink;
    openai_adapter adapter(kind);
    sse::parser parser;
    auto deliver = [&](const sse::event& ev) {
        adapter.on_event(ev.type, ev.data, core::time_point{}, sink);
    };
    parser.feed(std::string_view(stream).substr(0, split), deliver);
    parser.feed(std::string_view(stream).substr(split), deliver);
    EXPECT_TRUE(parser.finish());
    return sink;
}

void expect_optional(const nlohmann::json& expected, const char* key,
                     const std::optional<std::uint64_t>& actual, const std::string& where) {
    if (expected.contains(key)) {
        ASSERT_TRUE(actual.has_value()) << where << " " << key;
        EXPECT_EQ(*actual, expected[key].get<std::uint64_t>()) << where << " " << key;
    } else {
        EXPECT_FALSE(actual.has_value()) << where << " " << key;
    }
}

void check_fixture(const std::string& name) {
    std::string dir = TOKENMETER_FIXTURES_DIR "/openai/";
    std::string stream = read_file(dir + name + ".sse");
    auto expected = nlohmann::json::parse(read_file(dir + name + ".expected.json"));
    api_kind kind = expected.value("api", "chat") == "completions"
                        ? api_kind::openai_completions
                        : api_kind::openai_chat_completions;
    for (std::size_t split = 0; split <= stream.size(); ++split) {
        auto sink = run(kind, stream, split);
        std::string where = name + " split at " + std::to_string(split);
        ASSERT_EQ(sink.chunks.size(), expected["chunks"].size()) << where;
        EXPECT_EQ(sink.done_markers, expected["done_markers"].get<int>()) << where;
        EXPECT_EQ(sink.parse_errors, expected["parse_errors"].get<int>()) << where;
        for (std::size_t i = 0; i < sink.chunks.size(); ++i) {
            const auto& want = expected["chunks"][i];
            const auto& got = sink.chunks[i];
            std::string at = where + " chunk " + std::to_string(i);
            EXPECT_EQ(got.content, want["content"].get<std::string>()) << at;
            EXPECT_EQ(got.reasoning, want["reasoning"].get<std::string>()) << at;
            EXPECT_EQ(got.tool, want["tool"].get<std::string>()) << at;
            EXPECT_EQ(got.finish, want["finish"].get<std::string>()) << at;
            EXPECT_EQ(got.role_only, want["role_only"].get<bool>()) << at;
            EXPECT_EQ(got.error, want.value("error", false)) << at;
            if (want.contains("usage")) {
                ASSERT_TRUE(got.usage.has_value()) << at;
                const auto& u = want["usage"];
                expect_optional(u, "input", got.usage->input_tokens, at);
                expect_optional(u, "output", got.usage->output_tokens, at);
                expect_optional(u, "reasoning", got.usage->reasoning_tokens, at);
                expect_optional(u, "cached_input", got.usage->cached_input_tokens, at);
            } else {
                EXPECT_FALSE(got.usage.has_value()) << at;
            }
        }
    }
}

TEST(OpenAiFixtures, ChatStreamWithUsage) {
    check_fixture("chat_stream_usage");
}
TEST(OpenAiFixtures, ReasoningToolCallsAndContinuousUsage) {
    check_fixture("chat_stream_reasoning_tools");
}
TEST(OpenAiFixtures, CompletionsWithGarbageAndErrorEvent) {
    check_fixture("completions_garbage");
}

TEST(OpenAiAdapter, NonStreamedBody) {
    auto body = read_file(TOKENMETER_FIXTURES_DIR "/openai/chat_nonstream.json");
    recording_sink sink;
    openai_adapter adapter(api_kind::openai_chat_completions);
    adapter.on_body(body, core::time_point{}, sink);
    ASSERT_EQ(sink.chunks.size(), 1u);
    EXPECT_EQ(sink.chunks[0].content, "The answer is 42.");
    EXPECT_EQ(sink.chunks[0].reasoning, "Compute.");
    EXPECT_EQ(sink.chunks[0].finish, "stop");
    ASSERT_TRUE(sink.chunks[0].usage);
    EXPECT_EQ(sink.chunks[0].usage->input_tokens, 30u);
    EXPECT_EQ(sink.chunks[0].usage->output_tokens, 7u);
    EXPECT_EQ(sink.chunks[0].usage->reasoning_tokens, 2u);
    EXPECT_EQ(sink.chunks[0].usage->cached_input_tokens, 16u);
    EXPECT_EQ(sink.parse_errors, 0);
}

TEST(OpenAiAdapter, ExplicitZeroUsageIsKeptAndNullUsageIsAbsent) {
    recording_sink sink;
    openai_adapter adapter(api_kind::openai_chat_completions);
    adapter.on_event("message",
                     R"({"choices":[],"usage":{"prompt_tokens":0,"completion_tokens":0}})",
                     core::time_point{}, sink);
    adapter.on_event("message", R"({"choices":[{"delta":{"content":"x"}}],"usage":null})",
                     core::time_point{}, sink);
    ASSERT_EQ(sink.chunks.size(), 2u);
    ASSERT_TRUE(sink.chunks[0].usage);
    EXPECT_EQ(sink.chunks[0].usage->output_tokens, 0u);
    EXPECT_EQ(sink.chunks[0].usage->input_tokens, 0u);
    EXPECT_FALSE(sink.chunks[1].usage);
}

TEST(OpenAiAdapter, MalformedAndForeignJsonAreParseErrors) {
    recording_sink sink;
    openai_adapter adapter(api_kind::openai_chat_completions);
    adapter.on_event("message", "{\"choices\": [", core::time_point{}, sink);
    adapter.on_event("message", "[1,2,3]", core::time_point{}, sink);
    adapter.on_event("message", R"({"object":"something.else"})", core::time_point{}, sink);
    adapter.on_event("ping", "{}", core::time_point{}, sink);
    EXPECT_EQ(sink.parse_errors, 4);
    EXPECT_TRUE(sink.chunks.empty());
}

TEST(OpenAiAdapter, LookalikeFieldsElsewhereAreIgnored) {
    recording_sink sink;
    openai_adapter adapter(api_kind::openai_chat_completions);
    // logprobs.content holds token objects, an extension holds "content" and "usage"-like keys,
    // and a nested "error" is not a stream error: none of it is generated text or usage.
    adapter.on_event(
        "message",
        R"({"choices":[{"index":0,"delta":{"content":"ok","extra":{"content":"no"}},)"
        R"("logprobs":{"content":[{"token":"ok","logprob":-0.1}]},"finish_reason":null}],)"
        R"("meta":{"usage":{"completion_tokens":99},"error":"x"},"usage":null,"error":null})",
        core::time_point{}, sink);
    ASSERT_EQ(sink.chunks.size(), 1u);
    EXPECT_EQ(sink.chunks[0].content, "ok");
    EXPECT_FALSE(sink.chunks[0].usage);
    EXPECT_FALSE(sink.chunks[0].error);
    EXPECT_EQ(sink.parse_errors, 0);
}

TEST(OpenAiAdapter, TopLevelErrorStringOrObjectIsAnError) {
    recording_sink sink;
    openai_adapter adapter(api_kind::openai_chat_completions);
    adapter.on_event("message", R"({"error":"boom"})", core::time_point{}, sink);
    adapter.on_event("error", R"({"error":{"message":"overloaded","code":529}})",
                     core::time_point{}, sink);
    ASSERT_EQ(sink.chunks.size(), 2u);
    EXPECT_TRUE(sink.chunks[0].error);
    EXPECT_TRUE(sink.chunks[1].error);
}

TEST(OpenAiAdapter, SeveralChoicesAreOneChunk) {
    recording_sink sink;
    openai_adapter adapter(api_kind::openai_chat_completions);
    adapter.on_event(
        "message",
        R"({"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]})",
        core::time_point{}, sink);
    ASSERT_EQ(sink.chunks.size(), 1u);
    EXPECT_EQ(sink.chunks[0].content, "ab");
}

TEST(OpenAiRequest, ReadsModelStreamAndUsageOption) {
    auto info = parse_openai_request(
        R"({"model":"llama","stream":true,"stream_options":{"include_usage":true},)"
        R"("messages":[{"role":"user","content":"hello"},{"role":"user","content":[{"type":"text","text":"abc"}]}]})");
    EXPECT_TRUE(info.body_parsed);
    EXPECT_EQ(info.model, "llama");
    EXPECT_TRUE(info.stream);
    EXPECT_TRUE(info.include_usage);
    EXPECT_EQ(info.prompt_chars, 8u);

    auto bad = parse_openai_request("not json");
    EXPECT_FALSE(bad.body_parsed);
    EXPECT_TRUE(bad.model.empty());
    EXPECT_FALSE(bad.stream);

    auto completions = parse_openai_request(R"({"model":7,"prompt":"four","stream":"yes"})");
    EXPECT_TRUE(completions.body_parsed);
    EXPECT_TRUE(completions.model.empty());
    EXPECT_FALSE(completions.stream);
    EXPECT_EQ(completions.prompt_chars, 4u);
}

}  // namespace
}  // namespace tokenmeter::protocol
