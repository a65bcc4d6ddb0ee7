// Text to speech (protocol/speech): the JSON request read for its model, text and stream
// format, the SSE events' usage, and the rule that audio out is never counted as text.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exchange_run.hpp"
#include "meter/billing.hpp"
#include "meter/exchange.hpp"
#include "protocol/dialects.hpp"

namespace tokenmeter::protocol {
namespace {

request_info read(std::string_view body) {
    return parse_request(api_kind::openai_speech, "/v1/audio/speech", body);
}

TEST(Speech, PathAndName) {
    EXPECT_EQ(api_for_path("/v1/audio/speech"), api_kind::openai_speech);
    EXPECT_EQ(to_string(api_kind::openai_speech), "openai_speech");
}

TEST(SpeechRequest, ModelTextAndStreamFormat) {
    auto info = read(R"({"model":"gpt-4o-mini-tts","input":"Hello there.","voice":"alloy",)"
                     R"("instructions":"Speak softly.","response_format":"mp3"})");
    EXPECT_TRUE(info.body_parsed);
    EXPECT_EQ(info.model, "gpt-4o-mini-tts");
    EXPECT_FALSE(info.stream);
    EXPECT_EQ(info.prompt_text, "Hello there.\nSpeak softly.");
    EXPECT_EQ(info.prompt_chars, info.prompt_text.size());
    EXPECT_TRUE(info.countable_input);
    EXPECT_FALSE(info.countable_output);
    ASSERT_TRUE(info.max_output_tokens);
    EXPECT_EQ(*info.max_output_tokens, 0U);

    EXPECT_TRUE(read(R"({"model":"m","input":"x","stream_format":"sse"})").stream);
    EXPECT_FALSE(read(R"({"model":"m","input":"x","stream_format":"audio"})").stream);
    // A member named twice counts as Python's json reads it: the last one, whatever its type.
    auto twice = read(R"({"model":"a","input":"first","input":7,"model":"b"})");
    EXPECT_EQ(twice.model, "b");
    EXPECT_EQ(twice.prompt_text, "");
}

TEST(SpeechRequest, HostileBodiesAreForwardedUnread) {
    for (std::string_view body : {"", "[]", "{", "not json", R"({"input":["a","b"]})"}) {
        auto info = read(body);
        EXPECT_TRUE(info.model.empty()) << body;
        EXPECT_FALSE(info.countable_output) << body;
    }
    EXPECT_FALSE(read("[]").body_parsed);
    // Deeper than the walk's bound: not read, not a crash.
    EXPECT_FALSE(read(std::string(100000, '[')).body_parsed);
}

meter::request_summary run(bool sse, std::string_view content_type,
                           std::initializer_list<std::string_view> reads) {
    return run_exchange(api_kind::openai_speech,
                        read(sse ? R"({"model":"tts","input":"Hi.","stream_format":"sse"})"
                                 : R"({"model":"tts","input":"Hi."})"),
                        content_type, reads);
}

TEST(SpeechResponse, StreamedUsageIsReported) {
    auto s = run(true, "text/event-stream",
                 {"data: {\"type\":\"speech.audio.delta\",\"audio\":\"AAAA\"}\n\n",
                  "data: {\"type\":\"speech.audio.delta\",\"audio\":\"BBBB\"}\n\n",
                  "data: {\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":14,"
                  "\"output_tokens\":101,\"total_tokens\":115}}\n\n"});
    EXPECT_EQ(s.parse_errors, 0U);
    EXPECT_EQ(s.output_chars, 0U);  // base64 audio is not text
    const auto billed = meter::billed(s);
    EXPECT_EQ(billed.input, (meter::token_count{14, meter::token_source::reported}));
    EXPECT_EQ(billed.output, (meter::token_count{101, meter::token_source::reported}));
    EXPECT_EQ(billed.output_audio, (meter::token_count{101, meter::token_source::reported}));
}

TEST(SpeechResponse, AudioOutWithoutAReportIsUnknownNeverZero) {
    // The audio itself: not read, no parse error, and no output count.
    auto audio = run(false, "audio/mpeg", {std::string_view("\xff\xf3\x44\xc4\x00\x01", 6)});
    EXPECT_EQ(audio.parse_errors, 0U);
    EXPECT_TRUE(audio.output_not_text);
    EXPECT_FALSE(meter::billed(audio).output.value);
    EXPECT_EQ(meter::billed(audio).output.source, meter::token_source::none);

    auto stream = run(true, "text/event-stream",
                      {"data: {\"type\":\"speech.audio.delta\",\"audio\":\"AAAA\"}\n\n",
                       "data: {\"type\":\"speech.audio.done\"}\n\n"});
    EXPECT_EQ(stream.parse_errors, 0U);
    EXPECT_FALSE(meter::billed(stream).output.value);
}

TEST(SpeechResponse, ErrorsAndUnknownEvents) {
    auto error = run(false, "application/json", {R"({"error":{"message":"bad voice"}})"});
    EXPECT_TRUE(error.stream_error);
    auto unknown = run(
        true, "text/event-stream",
        {"data: {\"type\":\"speech.audio.other\"}\n\n", "data: [1,2]\n\n", "data: {\"type\":\n\n"});
    EXPECT_EQ(unknown.parse_errors, 3U);
}

}  // namespace
}  // namespace tokenmeter::protocol
