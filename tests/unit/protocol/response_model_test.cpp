// The model a response names (protocol::response_chunk::model), as each dialect writes it: read
// where the server puts it, on the fast chunk reader's path and the general walk alike, and
// carried to the request's summary from the first chunk that names one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "meter/stream_meter.hpp"
#include "protocol/chunk_builder.hpp"
#include "protocol/dialects.hpp"
#include "recording_sink.hpp"

namespace tokenmeter::protocol {
namespace {

using test_support::recording_sink;

std::vector<std::string> models_of(api_kind api, const std::vector<std::string>& events,
                                   bool streamed = true, std::string_view type = "message") {
    auto adapter = make_adapter(api);
    recording_sink sink;
    for (const std::string& e : events) {
        if (streamed) {
            adapter->on_event(type, e, core::time_point{}, sink);
        } else {
            adapter->on_body(e, core::time_point{}, sink);
        }
    }
    EXPECT_EQ(sink.parse_errors(), 0);
    std::vector<std::string> out;
    for (const auto& c : sink.chunks) {
        out.push_back(c.model);
    }
    return out;
}

TEST(ResponseModel, OpenAiChunksOnTheFastReaderAndTheWalk) {
    // The first two have the shape the fast reader takes; the third an escape, so it is walked.
    const std::vector<std::string> chunks = {
        R"({"id":"c1","object":"chat.completion.chunk","model":"llama-3.1-8b","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})",
        R"({"id":"c1","object":"chat.completion.chunk","model":"llama-3.1-8b","choices":[{"index":0,"delta":{"content":"Hi"}}]})",
        R"({"id":"c1","object":"chat.completion.chunk","model":"llama-3.1-8b","choices":[{"index":0,"delta":{"content":"\n"}}]})",
    };
    const auto models = models_of(api_kind::openai_chat_completions, chunks);
    ASSERT_EQ(models.size(), 3U);
    EXPECT_EQ(models[0], "llama-3.1-8b") << "read by the fast reader";
    EXPECT_EQ(models[2], "llama-3.1-8b") << "read by the walk";
    EXPECT_EQ(
        models_of(api_kind::openai_chat_completions,
                  {R"({"model":"caf\u00e9","choices":[{"index":0,"message":{"content":"x"}}]})"},
                  false)[0],
        "caf\xc3\xa9");
    EXPECT_EQ(models_of(api_kind::openai_completions,
                        {R"({"model":"m1","choices":[{"index":0,"text":"x"}]})"})[0],
              "m1");
}

TEST(ResponseModel, AModelNestedElsewhereIsNotTheResponses) {
    const auto models = models_of(
        api_kind::openai_chat_completions,
        {R"({"choices":[{"index":0,"delta":{"content":"x","model":"not-it"}}],"usage":null})"});
    ASSERT_EQ(models.size(), 1U);
    EXPECT_EQ(models[0], "");
}

TEST(ResponseModel, AnthropicOllamaGeminiResponsesAndPooling) {
    EXPECT_EQ(
        models_of(
            api_kind::anthropic_messages,
            {R"({"type":"message_start","message":{"id":"m","model":"claude-sonnet-4-5","usage":{"input_tokens":3,"output_tokens":1}}})"},
            true, "message_start")[0],
        "claude-sonnet-4-5");
    EXPECT_EQ(
        models_of(
            api_kind::anthropic_messages,
            {R"({"type":"message","model":"claude-x","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}})"},
            false)[0],
        "claude-x");
    EXPECT_EQ(
        models_of(
            api_kind::ollama_chat,
            {R"({"model":"llama3.2","message":{"role":"assistant","content":"hi"},"done":false})"})
            [0],
        "llama3.2");
    EXPECT_EQ(
        models_of(
            api_kind::gemini_generate,
            {R"({"candidates":[{"content":{"parts":[{"text":"hi"}]}}],"modelVersion":"gemini-2.5-flash"})"})
            [0],
        "gemini-2.5-flash");
    const auto responses = models_of(
        api_kind::openai_responses,
        {R"({"type":"response.output_text.delta","delta":"hi"})",
         R"({"type":"response.completed","response":{"model":"gpt-5","status":"completed","usage":{"input_tokens":3,"output_tokens":1}}})"});
    ASSERT_EQ(responses.size(), 2U);
    EXPECT_EQ(responses[1], "gpt-5");
    EXPECT_EQ(
        models_of(
            api_kind::openai_embeddings,
            {R"({"object":"list","model":"bge-m3","data":[],"usage":{"prompt_tokens":3,"total_tokens":3}})"},
            false)[0],
        "bge-m3");
}

TEST(ResponseModel, ALongNameIsCut) {
    const std::string name(1000, 'm');
    const auto models = models_of(
        api_kind::openai_chat_completions,
        {R"({"model":")" + name + R"(","choices":[{"index":0,"delta":{"content":"x"}}]})"});
    ASSERT_EQ(models.size(), 1U);
    EXPECT_EQ(models[0], std::string(chunk_builder::max_model_bytes, 'm'));
}

TEST(ResponseModel, TheSummaryKeepsTheFirstNamed) {
    meter::stream_meter m(api_kind::openai_chat_completions, "requested", true, core::time_point{},
                          nullptr);
    m.on_request_sent();
    m.on_response_head(200, core::time_point{});
    response_chunk first;
    first.content = "a";
    m.on_chunk(first, core::time_point{});  // names none
    response_chunk named = first;
    named.model = "served-1";
    m.on_chunk(named, core::time_point{});
    named.model = "served-2";
    m.on_chunk(named, core::time_point{});
    const meter::request_summary s =
        m.finish(meter::end_reason::upstream_complete, core::time_point{});
    EXPECT_EQ(s.model, "requested");
    EXPECT_EQ(s.response_model, "served-1");
}

}  // namespace
}  // namespace tokenmeter::protocol
