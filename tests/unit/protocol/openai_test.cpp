// The OpenAI adapter (through the dialect table, as the exchange builds it) on single events and
// whole bodies, and the OpenAI request reader. Its recorded streams are in the dialect fixture
// harness (dialect_fixture_test.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "protocol/dialects.hpp"
#include "protocol/openai.hpp"
#include "recording_sink.hpp"

namespace tokenmeter::protocol {
namespace {

using test_support::read_file;
using test_support::recording_sink;

// Feeds SSE data events (type "message" unless given) to a fresh chat adapter.
class openai_events {
  public:
    explicit openai_events(api_kind api = api_kind::openai_chat_completions)
        : adapter_(make_adapter(api)) {}
    openai_events& operator()(std::string_view data, std::string_view type = "message") {
        adapter_->on_event(type, data, core::time_point{}, sink);
        return *this;
    }
    recording_sink sink;

  private:
    std::unique_ptr<adapter> adapter_;
};

TEST(OpenAiAdapter, NonStreamedBody) {
    auto body = read_file(TOKENMETER_FIXTURES_DIR "/openai/chat_nonstream.json");
    recording_sink sink;
    make_adapter(api_kind::openai_chat_completions)->on_body(body, core::time_point{}, sink);
    ASSERT_EQ(sink.chunks.size(), 1u);
    EXPECT_EQ(sink.chunks[0].content, "The answer is 42.");
    EXPECT_EQ(sink.chunks[0].reasoning, "Compute.");
    EXPECT_EQ(sink.chunks[0].finish, "stop");
    ASSERT_TRUE(sink.chunks[0].usage);
    EXPECT_EQ(sink.chunks[0].usage->input_tokens, 30u);
    EXPECT_EQ(sink.chunks[0].usage->output_tokens, 7u);
    EXPECT_EQ(sink.chunks[0].usage->reasoning_tokens, 2u);
    EXPECT_EQ(sink.chunks[0].usage->cached_input_tokens, 16u);
    EXPECT_EQ(sink.parse_errors(), 0);
}

TEST(OpenAiAdapter, ExplicitZeroUsageIsKeptAndNullUsageIsAbsent) {
    openai_events feed;
    feed(R"({"choices":[],"usage":{"prompt_tokens":0,"completion_tokens":0}})")(
        R"({"choices":[{"delta":{"content":"x"}}],"usage":null})");
    const auto& sink = feed.sink;
    ASSERT_EQ(sink.chunks.size(), 2u);
    ASSERT_TRUE(sink.chunks[0].usage);
    EXPECT_EQ(sink.chunks[0].usage->output_tokens, 0u);
    EXPECT_EQ(sink.chunks[0].usage->input_tokens, 0u);
    EXPECT_FALSE(sink.chunks[1].usage);
}

TEST(OpenAiAdapter, MalformedAndForeignJsonAreParseErrors) {
    openai_events feed;
    feed("{\"choices\": [")("[1,2,3]")(R"({"object":"something.else"})")("{}", "ping");
    EXPECT_EQ(feed.sink.parse_errors(), 4);
    EXPECT_TRUE(feed.sink.chunks.empty());
}

TEST(OpenAiAdapter, LookalikeFieldsElsewhereAreIgnored) {
    openai_events feed;
    // logprobs.content holds token objects, an extension holds "content" and "usage"-like keys,
    // and a nested "error" is not a stream error: none of it is generated text or usage.
    feed(R"({"choices":[{"index":0,"delta":{"content":"ok","extra":{"content":"no"}},)"
         R"("logprobs":{"content":[{"token":"ok","logprob":-0.1}]},"finish_reason":null}],)"
         R"("meta":{"usage":{"completion_tokens":99},"error":"x"},"usage":null,"error":null})");
    const auto& sink = feed.sink;
    ASSERT_EQ(sink.chunks.size(), 1u);
    EXPECT_EQ(sink.chunks[0].content, "ok");
    EXPECT_FALSE(sink.chunks[0].usage);
    EXPECT_FALSE(sink.chunks[0].error);
    EXPECT_EQ(sink.parse_errors(), 0);
}

TEST(OpenAiAdapter, TopLevelErrorStringOrObjectIsAnError) {
    openai_events feed;
    feed(R"({"error":"boom"})")(R"({"error":{"message":"overloaded","code":529}})", "error");
    ASSERT_EQ(feed.sink.chunks.size(), 2u);
    EXPECT_TRUE(feed.sink.chunks[0].error);
    EXPECT_TRUE(feed.sink.chunks[1].error);
}

TEST(OpenAiAdapter, ErrorNeedsANonNullValueAtTheRoot) {
    openai_events feed;
    feed(R"({"error":false})")(R"({"error":-1})")(R"({"error":[]})")(R"({"error":null})");
    ASSERT_EQ(feed.sink.chunks.size(), 3u);
    for (const auto& chunk : feed.sink.chunks) {
        EXPECT_TRUE(chunk.error);
    }
    EXPECT_EQ(feed.sink.parse_errors(), 1);  // null: neither choices, error nor usage
}

TEST(OpenAiAdapter, FractionalCountsAreTruncated) {
    openai_events feed;
    feed(R"({"choices":[],"usage":{"prompt_tokens":12.7,"completion_tokens":3.0,)"
         R"("completion_tokens_details":{"reasoning_tokens":-1}}})");
    ASSERT_EQ(feed.sink.chunks.size(), 1u);
    ASSERT_TRUE(feed.sink.chunks[0].usage);
    EXPECT_EQ(feed.sink.chunks[0].usage->input_tokens, 12u);
    EXPECT_EQ(feed.sink.chunks[0].usage->output_tokens, 3u);
    EXPECT_FALSE(feed.sink.chunks[0].usage->reasoning_tokens);
}

TEST(OpenAiAdapter, CompletionsTextAndChatDeltaAreNotMixedUp) {
    openai_events completions(api_kind::openai_completions);
    completions(R"({"choices":[{"text":"a","delta":{"content":"b"}}]})");
    openai_events chat;
    chat(R"({"choices":[{"text":"a","delta":{"content":"b"}}]})");
    ASSERT_EQ(completions.sink.chunks.size(), 1u);
    ASSERT_EQ(chat.sink.chunks.size(), 1u);
    EXPECT_EQ(completions.sink.chunks[0].content, "a");
    EXPECT_EQ(chat.sink.chunks[0].content, "b");
}

TEST(OpenAiAdapter, DoneMarkerAndToolCalls) {
    openai_events feed;
    feed(R"({"choices":[{"delta":{"role":"assistant","tool_calls":[{"function":)"
         R"({"name":"f","arguments":"{}"}}]}}]})")("[DONE]");
    ASSERT_EQ(feed.sink.chunks.size(), 1u);
    EXPECT_EQ(feed.sink.chunks[0].tool, "f{}");
    EXPECT_FALSE(feed.sink.chunks[0].role_only);
    EXPECT_EQ(feed.sink.done_markers, 1);
}

TEST(OpenAiAdapter, SeveralChoicesAreOneChunk) {
    openai_events feed;
    feed(R"({"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]})");
    ASSERT_EQ(feed.sink.chunks.size(), 1u);
    EXPECT_EQ(feed.sink.chunks[0].content, "ab");
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
