// protocol/realtime: the reader of OpenAI Realtime events, one message at a time.
#include "protocol/realtime.hpp"

#include <gtest/gtest.h>

#include <string>

#include "protocol/dialects.hpp"

namespace tokenmeter::protocol {
namespace {

TEST(RealtimeReader, ReadsResponseDoneUsageWithItsDetails) {
    realtime_reader reader;
    parse_error problem = parse_error::unexpected_shape;
    const auto* e = reader.read(
        R"({"type":"response.done","event_id":"ev_1","response":{"id":"resp_7","status":"completed",)"
        R"("usage":{"total_tokens":190,"input_tokens":120,"output_tokens":70,)"
        R"("input_token_details":{"text_tokens":20,"audio_tokens":100,"cached_tokens":64,)"
        R"("cached_tokens_details":{"text_tokens":0,"audio_tokens":64}},)"
        R"("output_token_details":{"text_tokens":15,"audio_tokens":55}}}})",
        false, problem);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->type, realtime_event_type::response_done);
    EXPECT_EQ(e->response_id, "resp_7");
    EXPECT_EQ(e->status, "completed");
    ASSERT_TRUE(e->usage);
    EXPECT_EQ(e->usage->input_tokens, 120u);
    EXPECT_EQ(e->usage->output_tokens, 70u);
    EXPECT_EQ(e->usage->cached_input_tokens, 64u);
    EXPECT_EQ(e->usage->input_audio_tokens, 100u);
    EXPECT_EQ(e->usage->output_audio_tokens, 55u);
}

TEST(RealtimeReader, ResponseDoneWithoutUsageHasNone) {
    realtime_reader reader;
    parse_error problem{};
    const auto* e = reader.read(
        R"({"type":"response.done","response":{"id":"r","status":"cancelled","usage":null}})",
        false, problem);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->type, realtime_event_type::response_done);
    EXPECT_FALSE(e->usage);
    EXPECT_EQ(e->status, "cancelled");
}

TEST(RealtimeReader, ClassifiesServerDeltas) {
    realtime_reader reader;
    parse_error problem{};
    for (const char* type :
         {"response.text.delta", "response.output_text.delta", "response.audio_transcript.delta",
          "response.output_audio_transcript.delta"}) {
        const std::string text = std::string(R"({"type":")") + type +
                                 R"(","response_id":"resp_1","item_id":"i","delta":"Hé\n"})";
        const auto* e = reader.read(text, false, problem);
        ASSERT_NE(e, nullptr) << type;
        EXPECT_EQ(e->type, realtime_event_type::text_delta) << type;
        EXPECT_EQ(e->delta, "Hé\n") << type;
        EXPECT_EQ(e->response_id, "resp_1");
    }
    const auto* tool = reader.read(
        R"({"type":"response.function_call_arguments.delta","response_id":"r","delta":"{\"a\""})",
        false, problem);
    ASSERT_NE(tool, nullptr);
    EXPECT_EQ(tool->type, realtime_event_type::tool_delta);
    EXPECT_EQ(tool->delta, R"({"a")");
    for (const char* type : {"response.audio.delta", "response.output_audio.delta"}) {
        const std::string text =
            std::string(R"({"type":")") + type + R"(","response_id":"r","delta":"AAAAAAAA"})";
        const auto* audio = reader.read(text, false, problem);
        ASSERT_NE(audio, nullptr);
        EXPECT_EQ(audio->type, realtime_event_type::audio_delta);
        EXPECT_TRUE(audio->delta.empty()) << "audio is not kept";
    }
}

TEST(RealtimeReader, ClientAndServerTypesDiffer) {
    realtime_reader reader;
    parse_error problem{};
    const auto* update = reader.read(
        R"({"type":"session.update","session":{"type":"realtime","model":"gpt-realtime"}})", true,
        problem);
    ASSERT_NE(update, nullptr);
    EXPECT_EQ(update->type, realtime_event_type::session_update);
    EXPECT_EQ(update->model, "gpt-realtime");
    const auto* create = reader.read(R"({"type":"response.create"})", true, problem);
    ASSERT_NE(create, nullptr);
    EXPECT_EQ(create->type, realtime_event_type::response_create);
    const auto* commit = reader.read(R"({"type":"input_audio_buffer.commit"})", true, problem);
    ASSERT_NE(commit, nullptr);
    EXPECT_EQ(commit->type, realtime_event_type::input_committed);
    // A server's event type from the client is nothing the meter reads.
    const auto* spoofed = reader.read(
        R"({"type":"response.done","response":{"usage":{"output_tokens":1}}})", true, problem);
    ASSERT_NE(spoofed, nullptr);
    EXPECT_EQ(spoofed->type, realtime_event_type::other);
    const auto* created =
        reader.read(R"({"type":"session.created","session":{"model":"gpt-4o-realtime-preview"}})",
                    false, problem);
    ASSERT_NE(created, nullptr);
    EXPECT_EQ(created->type, realtime_event_type::session_state);
    EXPECT_EQ(created->model, "gpt-4o-realtime-preview");
}

TEST(RealtimeReader, RefusesWhatIsNoEvent) {
    realtime_reader reader;
    parse_error problem{};
    EXPECT_EQ(reader.read(R"({"type":"response.done",)", false, problem), nullptr);
    EXPECT_EQ(problem, parse_error::invalid_json);
    EXPECT_EQ(
        reader.read("{\"type\":\"response.text.delta\",\"delta\":\"\xff\xfe\"}", false, problem),
        nullptr)
        << "invalid UTF-8 inside a string";
    EXPECT_EQ(problem, parse_error::invalid_json);
    EXPECT_EQ(reader.read(R"([1,2])", false, problem), nullptr);
    EXPECT_EQ(problem, parse_error::unexpected_shape);
    EXPECT_EQ(reader.read(R"({"delta":"x"})", false, problem), nullptr);
    EXPECT_EQ(problem, parse_error::unexpected_shape);
    EXPECT_EQ(reader.read("", false, problem), nullptr);
    EXPECT_EQ(problem, parse_error::invalid_json);
    std::string deep(100000, '[');
    EXPECT_EQ(reader.read(deep, false, problem), nullptr);
}

TEST(RealtimeReader, TypeAfterDeltaStillReadsTheText) {
    realtime_reader reader;
    parse_error problem{};
    const auto* e =
        reader.read(R"({"delta":"late","response_id":"r","type":"response.output_text.delta"})",
                    false, problem);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->type, realtime_event_type::text_delta);
    EXPECT_EQ(e->delta, "late");
}

TEST(RealtimeReader, LongIdsAreCut) {
    realtime_reader reader;
    parse_error problem{};
    const std::string id(5000, 'x');
    const auto* e = reader.read(R"({"type":"response.created","response":{"id":")" + id + R"("}})",
                                false, problem);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->response_id.size(), max_realtime_id_bytes);
}

TEST(RealtimeReader, ReadsInputTranscriptionEvents) {
    realtime_reader reader;
    parse_error problem{};
    const auto* delta = reader.read(
        R"({"type":"conversation.item.input_audio_transcription.delta","item_id":"item_3",)"
        R"("content_index":0,"delta":"Bon"})",
        false, problem);
    ASSERT_NE(delta, nullptr);
    EXPECT_EQ(delta->type, realtime_event_type::transcription_delta);
    EXPECT_EQ(delta->item_id, "item_3");
    EXPECT_EQ(delta->delta, "Bon");
    const auto* completed = reader.read(
        R"({"type":"conversation.item.input_audio_transcription.completed","item_id":"item_3",)"
        R"("transcript":"Bonjour","usage":{"type":"tokens","total_tokens":30,"input_tokens":25,)"
        R"("input_token_details":{"text_tokens":0,"audio_tokens":25},"output_tokens":5}})",
        false, problem);
    ASSERT_NE(completed, nullptr);
    EXPECT_EQ(completed->type, realtime_event_type::transcription_completed);
    EXPECT_EQ(completed->transcript, "Bonjour");
    ASSERT_TRUE(completed->usage);
    EXPECT_EQ(completed->usage->input_tokens, 25u);
    EXPECT_EQ(completed->usage->input_audio_tokens, 25u);
    EXPECT_EQ(completed->usage->output_tokens, 5u);
    const auto* seconds = reader.read(
        R"({"type":"conversation.item.input_audio_transcription.completed","item_id":"i",)"
        R"("transcript":"x","usage":{"type":"duration","seconds":3}})",
        false, problem);
    ASSERT_NE(seconds, nullptr);
    EXPECT_FALSE(seconds->usage) << "seconds of audio are no token count";
    const auto* failed =
        reader.read(R"({"type":"conversation.item.input_audio_transcription.failed","item_id":"i",)"
                    R"("error":{"message":"no"}})",
                    false, problem);
    ASSERT_NE(failed, nullptr);
    EXPECT_EQ(failed->type, realtime_event_type::transcription_failed);
    const auto* committed = reader.read(
        R"({"type":"input_audio_buffer.committed","previous_item_id":null,"item_id":"item_3"})",
        false, problem);
    ASSERT_NE(committed, nullptr);
    EXPECT_EQ(committed->type, realtime_event_type::input_committed);
    EXPECT_EQ(committed->item_id, "item_3");
    for (
        const char* session :
        {R"({"type":"session.updated","session":{"model":"m","input_audio_transcription":{"model":"whisper-1"}}})",
         R"({"type":"session.updated","session":{"model":"m","audio":{"input":{"transcription":{"model":"whisper-1"}}}}})"}) {
        const auto* e = reader.read(session, false, problem);
        ASSERT_NE(e, nullptr);
        EXPECT_EQ(e->transcription_model, "whisper-1");
        EXPECT_EQ(e->model, "m");
    }
}

TEST(RealtimeTunnel, OnlyTheRealtimePathIsMetered) {
    EXPECT_EQ(tunnel_api_for_path("/v1/realtime"), api_kind::openai_realtime);
    EXPECT_EQ(tunnel_api_for_path("/v1/realtime?model=gpt-realtime"), api_kind::openai_realtime);
    EXPECT_EQ(tunnel_api_for_path("/v1/realtimex"), api_kind::none);
    EXPECT_EQ(tunnel_api_for_path("/ws"), api_kind::none);
    EXPECT_EQ(tunnel_api_for_path("/v1/chat/completions"), api_kind::none);
    EXPECT_EQ(tunnel_api_for_path("/v1/responses"), api_kind::openai_responses);
    // Never chosen for a POST by its path.
    EXPECT_EQ(api_for_path("/v1/realtime"), api_kind::none);
    EXPECT_EQ(to_string(api_kind::openai_realtime), "openai_realtime");
    EXPECT_EQ(api_from_name("openai_realtime"), api_kind::openai_realtime);
}

TEST(RealtimeTunnel, ModelFromTheQuery) {
    EXPECT_EQ(model_from_query("/v1/realtime?model=gpt-realtime"), "gpt-realtime");
    EXPECT_EQ(model_from_query("/v1/realtime?x=1&model=gpt%2D4o%20mini&y=2"), "gpt-4o mini");
    EXPECT_EQ(model_from_query("/v1/realtime?amodel=x"), "");
    EXPECT_EQ(model_from_query("/v1/realtime"), "");
    EXPECT_EQ(model_from_query("/v1/realtime?model=%zz%4"), "%zz%4");
    EXPECT_EQ(model_from_query("/v1/realtime?model=" + std::string(10000, 'm')).size(), 256u);
}

}  // namespace
}  // namespace tokenmeter::protocol
