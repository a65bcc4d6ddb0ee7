// A JSON response larger than the meter reads (limits.max_buffered_response_bytes): the usage
// report at its end is still read from the tail kept of it, and without one the output is
// unknown, never a confident 0.
#include <gtest/gtest.h>

#include <string>

#include "meter/billing.hpp"
#include "meter/exchange.hpp"

namespace tokenmeter::meter {
namespace {

using namespace std::chrono_literals;

request_summary run(protocol::api_kind api, const std::string& body, std::size_t limit) {
    protocol::request_info info;
    info.model = "m";
    info.body_parsed = true;
    exchange_limits limits;
    limits.max_buffered_response_bytes = limit;
    const core::time_point t0{};
    exchange ex(api, info, t0, nullptr, limits);
    ex.on_request_sent();
    ex.on_response_head(200, "application/json", t0 + 1ms);
    // In reads of 1,000 bytes, as a socket would hand them over.
    for (std::size_t at = 0; at < body.size(); at += 1000) {
        ex.on_body(std::string_view(body).substr(at, 1000), t0 + 2ms);
    }
    EXPECT_LE(ex.buffered_bytes(), std::max(limit, 2 * response_tail_bytes) + 1000);
    return ex.finish(end_reason::upstream_complete, t0 + 3ms);
}

// 300 KiB of text (logprobs, a large n) before the usage report.
std::string long_text() {
    return std::string(300 * 1024, 'x');
}

TEST(Oversize, OpenAiUsageIsReadFromTheTail) {
    const std::string body = R"({"id":"c","object":"chat.completion","choices":[{"index":0,)"
                             R"("message":{"role":"assistant","content":")" +
                             long_text() +
                             R"("},"finish_reason":"length"}],"usage":{"prompt_tokens":12,)"
                             R"("completion_tokens":70000,"prompt_tokens_details":)"
                             R"({"cached_tokens":4}},"system_fingerprint":"fp"})";
    const request_summary s = run(protocol::api_kind::openai_chat_completions, body, 64 * 1024);
    EXPECT_TRUE(s.response_unread);
    EXPECT_EQ(s.reported.input_tokens, 12u);
    EXPECT_EQ(s.reported.output_tokens, 70000u);
    EXPECT_EQ(s.reported.cached_input_tokens, 4u);
    EXPECT_EQ(billed(s).output, (token_count{70000, token_source::reported}));
    // The same body within the limit is read whole, with the same counts.
    const request_summary whole = run(protocol::api_kind::openai_chat_completions, body, 1 << 20);
    EXPECT_FALSE(whole.response_unread);
    EXPECT_EQ(whole.reported.output_tokens, 70000u);
}

TEST(Oversize, AnthropicResponsesAndGeminiUsageIsReadFromTheTail) {
    const std::string anthropic = R"({"id":"msg","type":"message","role":"assistant","content":)"
                                  R"([{"type":"text","text":")" +
                                  long_text() +
                                  R"("}],"stop_reason":"max_tokens","usage":{"input_tokens":5,)"
                                  R"("cache_creation_input_tokens":7,"cache_read_input_tokens":3,)"
                                  R"("output_tokens":64000}})";
    const request_summary a = run(protocol::api_kind::anthropic_messages, anthropic, 64 * 1024);
    EXPECT_TRUE(a.response_unread);
    EXPECT_EQ(a.reported.input_tokens, 15u);
    EXPECT_EQ(a.reported.cache_write_tokens, 7u);
    EXPECT_EQ(a.reported.output_tokens, 64000u);

    const std::string responses =
        R"({"id":"resp","object":"response","status":"completed","output":[{"type":"message",)"
        R"("content":[{"type":"output_text","text":")" +
        long_text() +
        R"("}]}],"usage":{"input_tokens":9,"output_tokens":65000,"output_tokens_details":)"
        R"({"reasoning_tokens":100},"total_tokens":65009},"user":null,"metadata":{}})";
    const request_summary r = run(protocol::api_kind::openai_responses, responses, 64 * 1024);
    EXPECT_EQ(r.reported.input_tokens, 9u);
    EXPECT_EQ(r.reported.output_tokens, 65000u);
    EXPECT_EQ(r.reported.reasoning_tokens, 100u);

    const std::string gemini = R"({"candidates":[{"content":{"parts":[{"text":")" + long_text() +
                               R"("}],"role":"model"},"finishReason":"MAX_TOKENS"}],)"
                               R"("usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":)"
                               R"(60000,"totalTokenCount":60008},"modelVersion":"g"})";
    const request_summary g = run(protocol::api_kind::gemini_generate, gemini, 64 * 1024);
    EXPECT_EQ(g.reported.input_tokens, 8u);
    EXPECT_EQ(g.reported.output_tokens, 60000u);
}

TEST(Oversize, WithoutAUsageReportTheOutputIsUnknownNotZero) {
    // The text holds the member name, escaped as JSON escapes it: no report to be found there.
    const std::string body = R"({"choices":[{"message":{"content":"say \"usage\": )" +
                             long_text() + R"("}}]})";
    const request_summary s = run(protocol::api_kind::openai_chat_completions, body, 64 * 1024);
    EXPECT_TRUE(s.response_unread);
    EXPECT_FALSE(s.reported.output_tokens);
    EXPECT_EQ(billed(s).output, token_count{}) << "unknown: null, never 0";
    EXPECT_EQ(s.parse_errors_by_reason[static_cast<std::size_t>(
                  protocol::parse_error::oversized_event)],
              1u);
}

TEST(Oversize, AMemberNamedUsageInsideTheTextIsNotTakenForTheReport) {
    // A document nested in the text, unescaped only where JSON allows: within a string every
    // quote is escaped, so "usage": followed by a colon cannot appear there.
    const std::string body =
        R"({"choices":[{"message":{"content":")" + long_text() +
        R"( {\"usage\":{\"completion_tokens\":1}}"}}],"usage":{"prompt_tokens":2,)"
        R"("completion_tokens":3}})";
    const request_summary s = run(protocol::api_kind::openai_chat_completions, body, 64 * 1024);
    EXPECT_EQ(s.reported.output_tokens, 3u);
}

}  // namespace
}  // namespace tokenmeter::meter
