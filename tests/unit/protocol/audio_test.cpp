// Audio transcriptions and translations (protocol/audio): the multipart form read for its model
// and stream flag (the upload skipped, hostile forms refused), and the answer's text and usage,
// whole or streamed, through the adapter and the meter.
#include <gtest/gtest.h>

#include <string>

#include "exchange_run.hpp"
#include "meter/billing.hpp"
#include "meter/exchange.hpp"
#include "protocol/dialects.hpp"

namespace tokenmeter::protocol {
namespace {

std::string form(std::initializer_list<std::pair<std::string, std::string>> fields,
                 std::string_view boundary = "XyZ123") {
    std::string body;
    for (const auto& [name, value] : fields) {
        body += "--";
        body += boundary;
        body += "\r\n";
        if (name == "file") {
            body +=
                "Content-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n"
                "Content-Type: audio/wav\r\n\r\n";
        } else {
            body += "Content-Disposition: form-data; name=\"" + name + "\"\r\n\r\n";
        }
        body += value;
        body += "\r\n";
    }
    body += "--";
    body += boundary;
    body += "--\r\n";
    return body;
}

request_info read(std::string_view body) {
    return parse_request(api_kind::openai_transcriptions, "/v1/audio/transcriptions", body);
}

TEST(Audio, Paths) {
    EXPECT_EQ(api_for_path("/v1/audio/transcriptions"), api_kind::openai_transcriptions);
    EXPECT_EQ(api_for_path("/v1/audio/translations"), api_kind::openai_translations);
    EXPECT_EQ(api_for_path("/v1/audio/speech"), api_kind::openai_speech);
    EXPECT_EQ(to_string(api_kind::openai_transcriptions), "openai_transcriptions");
}

TEST(AudioRequest, FormFields) {
    // The upload holds bytes that look like form syntax: skipped, not read.
    std::string audio = "RIFF";
    audio.append(2, '\0');
    audio += "WAVE name=\"model\"\r\n\r\n--Xy";
    audio += std::string(100'000, '\x7f');
    auto info = read(form({{"file", audio},
                           {"model", "whisper-1"},
                           {"stream", "true"},
                           {"response_format", "json"}}));
    EXPECT_TRUE(info.body_parsed);
    EXPECT_EQ(info.model, "whisper-1");
    EXPECT_TRUE(info.stream);
    EXPECT_FALSE(info.countable_input);
    EXPECT_TRUE(info.prompt_text.empty());

    auto plain = read(form({{"model", "m"}, {"file", "x"}, {"stream", "false"}}));
    EXPECT_TRUE(plain.body_parsed);
    EXPECT_FALSE(plain.stream);
    // A filename= parameter is not the field's name.
    auto named = read(form({{"file", "x"}}));
    EXPECT_TRUE(named.body_parsed);
    EXPECT_EQ(named.model, "");
}

TEST(AudioRequest, HostileForms) {
    const std::string good = form({{"model", "m"}, {"file", "abc"}});
    // Cut anywhere before the closing boundary: not read as a whole form.
    for (std::size_t cut = 0; cut + 4 < good.size(); ++cut) {
        auto info = read(good.substr(0, cut));
        EXPECT_FALSE(info.body_parsed) << cut;
    }
    EXPECT_FALSE(read("{\"model\":\"m\"}").body_parsed);                    // JSON is not a form
    EXPECT_FALSE(read("--\r\n\r\n").body_parsed);                           // no boundary
    EXPECT_FALSE(read("--" + std::string(200, 'b') + "\r\n").body_parsed);  // boundary too long
    // A field value is kept to 1 KiB.
    auto huge = read(form({{"model", std::string(100'000, 'm')}}));
    EXPECT_TRUE(huge.body_parsed);
    EXPECT_EQ(huge.model.size(), 1024U);
    // Many empty parts: linear, and still read.
    std::string many;
    for (int i = 0; i < 20'000; ++i) {
        many += "--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n\r\n";
    }
    many += "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nlast\r\n--b--";
    auto parts = read(many);
    EXPECT_TRUE(parts.body_parsed);
    EXPECT_EQ(parts.model, "last");
}

meter::request_summary run(bool stream, std::string_view content_type,
                           std::initializer_list<std::string_view> reads) {
    return run_exchange(api_kind::openai_transcriptions,
                        read(form({{"model", "w"}, {"stream", stream ? "true" : "false"}})),
                        content_type, reads);
}

TEST(AudioResponse, OpenAiStreamTtftAndUsage) {
    auto s = run(true, "text/event-stream",
                 {"data: {\"type\":\"transcript.text.delta\",\"delta\":\"Hello\"}\n\n",
                  "data: {\"delta\":\" world\",\"type\":\"transcript.text.delta\"}\n\n",
                  "data: {\"type\":\"transcript.text.done\",\"text\":\"Hello world\",\"usage\":"
                  "{\"type\":\"tokens\",\"input_tokens\":14,\"input_token_details\":"
                  "{\"text_tokens\":0,\"audio_tokens\":14},\"output_tokens\":3,"
                  "\"total_tokens\":17}}\n\n"});
    EXPECT_EQ(s.parse_errors, 0U);
    EXPECT_TRUE(s.streamed);
    ASSERT_TRUE(s.time_to_first_token);
    EXPECT_DOUBLE_EQ(*s.time_to_first_token, 0.010);  // the first delta's read
    EXPECT_EQ(s.output_chars, 11U);                   // the done event's text is not counted
    const auto billed = meter::billed(s);
    EXPECT_EQ(billed.input, (meter::token_count{14, meter::token_source::reported}));
    EXPECT_EQ(billed.output, (meter::token_count{3, meter::token_source::reported}));
    EXPECT_EQ(billed.input_audio, (meter::token_count{14, meter::token_source::reported}));
    EXPECT_FALSE(s.reported.audio_seconds);
}

TEST(AudioResponse, VllmStreamAndWholeBodies) {
    auto vllm = run(true, "text/event-stream",
                    {"data: {\"object\":\"transcription.chunk\",\"choices\":[{\"delta\":"
                     "{\"content\":\"hi\"}}]}\n\n",
                     "data: {\"object\":\"transcription.chunk\",\"choices\":[],\"usage\":"
                     "{\"prompt_tokens\":20,\"completion_tokens\":2,\"total_tokens\":22}}\n\n",
                     "data: [DONE]\n\n"});
    EXPECT_EQ(vllm.parse_errors, 0U);
    ASSERT_TRUE(vllm.time_to_first_token);
    EXPECT_EQ(meter::billed(vllm).input.value, 20U);
    EXPECT_EQ(meter::billed(vllm).output.value, 2U);

    // A whole body with usage in seconds: the text counts, the input is unknown (never 0).
    auto seconds = run(false, "application/json",
                       {R"({"text":"one two three","usage":{"type":"duration","seconds":9}})"});
    EXPECT_EQ(seconds.parse_errors, 0U);
    EXPECT_FALSE(seconds.time_to_first_token);
    EXPECT_EQ(seconds.output_chars, 13U);
    EXPECT_FALSE(meter::billed(seconds).input.value);
    ASSERT_TRUE(seconds.reported.audio_seconds);
    EXPECT_DOUBLE_EQ(*seconds.reported.audio_seconds, 9.0);
    auto fraction = run(false, "application/json",
                        {R"({"text":"a","usage":{"seconds":2.25,"type":"duration"}})"});
    ASSERT_TRUE(fraction.reported.audio_seconds);
    EXPECT_DOUBLE_EQ(*fraction.reported.audio_seconds, 2.25);
    // Seconds under a usage that is not a duration, or negative: no figure.
    EXPECT_FALSE(run(false, "application/json",
                     {R"({"text":"a","usage":{"type":"tokens","seconds":3,"input_tokens":1}})"})
                     .reported.audio_seconds);
    EXPECT_FALSE(run(false, "application/json",
                     {R"({"text":"a","usage":{"type":"duration","seconds":-3.5}})"})
                     .reported.audio_seconds);

    auto error = run(false, "application/json", {R"({"error":{"message":"bad audio"}})"});
    EXPECT_TRUE(error.stream_error);
    auto odd = run(false, "application/json", {R"({"unknown":1})"});
    EXPECT_EQ(odd.parse_errors, 1U);
}

}  // namespace
}  // namespace tokenmeter::protocol
