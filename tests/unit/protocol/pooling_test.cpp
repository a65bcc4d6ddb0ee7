// The input-only APIs (protocol/pooling): embeddings, rerank, score, classify, pooling and
// moderations. Paths, the request reader on ordinary and hostile bodies, and the usage rule of
// the answer, through the adapter and the meter.
#include <gtest/gtest.h>

#include <string>

#include "meter/billing.hpp"
#include "meter/exchange.hpp"
#include "protocol/dialects.hpp"
#include "protocol/json_limits.hpp"
#include "recording_sink.hpp"

namespace tokenmeter::protocol {
namespace {

using test_support::recording_sink;

request_info read(api_kind api, std::string_view body) {
    return parse_request(api, "/x", body);
}

TEST(Pooling, ApiByWellKnownPath) {
    EXPECT_EQ(api_for_path("/v1/embeddings"), api_kind::openai_embeddings);
    EXPECT_EQ(api_for_path("/embeddings?x=1"), api_kind::openai_embeddings);
    EXPECT_EQ(api_for_path("/rerank"), api_kind::rerank);
    EXPECT_EQ(api_for_path("/v1/rerank"), api_kind::rerank);
    EXPECT_EQ(api_for_path("/v2/rerank"), api_kind::rerank);
    EXPECT_EQ(api_for_path("/score"), api_kind::score);
    EXPECT_EQ(api_for_path("/v1/score"), api_kind::score);
    EXPECT_EQ(api_for_path("/classify"), api_kind::classify);
    EXPECT_EQ(api_for_path("/pooling"), api_kind::pooling);
    EXPECT_EQ(api_for_path("/v1/moderations"), api_kind::openai_moderations);
    EXPECT_EQ(api_for_path("/v1/embeddings/x"), api_kind::none);
    EXPECT_EQ(api_for_path("/v3/rerank"), api_kind::none);
    request_info streamed;
    streamed.stream = true;
    for (auto kind : {api_kind::openai_embeddings, api_kind::rerank, api_kind::score,
                      api_kind::classify, api_kind::pooling, api_kind::openai_moderations}) {
        EXPECT_EQ(api_from_name(to_string(kind)), kind) << to_string(kind);
        EXPECT_FALSE(can_inject_usage(kind, streamed));
    }
    EXPECT_EQ(to_string(api_kind::openai_embeddings), "openai_embeddings");
    EXPECT_EQ(to_string(api_kind::openai_moderations), "openai_moderations");
    EXPECT_TRUE(names_model_in_body(api_kind::openai_embeddings));
    EXPECT_FALSE(names_model_in_body(api_kind::rerank));
}

TEST(PoolingRequest, EmbeddingsInputShapes) {
    auto one = read(api_kind::openai_embeddings, R"({"model":"e5","input":"hello world"})");
    EXPECT_TRUE(one.body_parsed);
    EXPECT_EQ(one.model, "e5");
    EXPECT_FALSE(one.stream);
    EXPECT_EQ(one.prompt_text, "hello world");
    EXPECT_EQ(one.prompt_chars, 11U);
    EXPECT_EQ(one.prompt_token_ids, 0U);
    // Nothing is generated: no output is reserved for it.
    EXPECT_EQ(one.max_output_tokens, 0U);

    auto many = read(api_kind::openai_embeddings, R"({"input":["a b","c"],"model":"m"})");
    EXPECT_EQ(many.prompt_text, "a b\nc");
    EXPECT_EQ(many.prompt_chars, 4U);

    auto ids = read(api_kind::openai_embeddings, R"({"input":[1,2,3,4],"model":"m"})");
    EXPECT_TRUE(ids.body_parsed);
    EXPECT_EQ(ids.prompt_text, "");
    EXPECT_EQ(ids.prompt_token_ids, 4U);

    auto batches = read(api_kind::openai_embeddings, R"({"input":[[1,2],[3],[4,5,6]]})");
    EXPECT_EQ(batches.prompt_token_ids, 6U);
    EXPECT_EQ(batches.model, "");

    // vLLM's chat form of an embeddings request.
    auto chat = read(api_kind::openai_embeddings,
                     R"({"messages":[{"role":"user","content":"hi"},)"
                     R"({"role":"user","content":[{"type":"text","text":"there"},)"
                     R"({"type":"image_url","image_url":{"url":"http://x/y.png"}}]}]})");
    EXPECT_EQ(chat.prompt_text, "hi\nthere");
}

TEST(PoolingRequest, RerankScoreAndModerationsInputs) {
    auto rerank =
        read(api_kind::rerank, R"({"model":"bge","query":"q one","documents":["d1",{"text":"d2"}],)"
                               R"("top_n":1,"return_documents":true})");
    EXPECT_EQ(rerank.prompt_text, "q one\nd1\nd2");
    EXPECT_EQ(rerank.model, "bge");
    EXPECT_EQ(rerank.max_output_tokens, 0U);

    auto score = read(api_kind::score, R"({"text_1":"left","text_2":["r1","r2"]})");
    EXPECT_EQ(score.prompt_text, "left\nr1\nr2");

    auto moderation = read(api_kind::openai_moderations,
                           R"({"input":[{"type":"text","text":"is this ok"},)"
                           R"({"type":"image_url","image_url":{"url":"data:x"}}]})");
    EXPECT_EQ(moderation.prompt_text, "is this ok");
    EXPECT_EQ(moderation.prompt_token_ids, 0U);

    auto classify = read(api_kind::classify, R"({"model":"c","input":["x","y z"]})");
    EXPECT_EQ(classify.prompt_text, "x\ny z");
}

TEST(PoolingRequest, HostileBodies) {
    // Not JSON, not an object: not parsed (the unparsable-body policy decides), no model.
    for (std::string_view body : {R"({"input":"x","model":"m")", R"(["input"])", "", "nul",
                                  R"({"model":"m","input":"x"} trailing)"}) {
        auto info = read(api_kind::openai_embeddings, body);
        EXPECT_FALSE(info.body_parsed) << body;
        EXPECT_EQ(info.model, "") << body;
        EXPECT_EQ(info.prompt_text, "") << body;
    }
    // Wrong types are not input: numbers as model, booleans, nulls, negative and fractional
    // "ids", token arrays nested deeper than an array of arrays.
    auto wrong = read(api_kind::openai_embeddings,
                      R"({"model":7,"input":[true,null,-1,1.5,{"a":"b"},[[9]],[[[8]]]],)"
                      R"("dimensions":"x"})");
    EXPECT_TRUE(wrong.body_parsed);
    EXPECT_EQ(wrong.model, "");
    EXPECT_EQ(wrong.prompt_text, "");
    EXPECT_EQ(wrong.prompt_token_ids, 0U);
    // Strings outside the input members are not input.
    auto outside = read(api_kind::openai_embeddings,
                        R"({"input":"in","user":"not input","extra":{"input":"nested"}})");
    EXPECT_EQ(outside.prompt_text, "in");
    // A member named twice is read as Python's json reads it: the last one.
    auto twice = read(api_kind::openai_embeddings,
                      R"({"model":"a","input":["x","y"],"model":"b","input":[1,2,3]})");
    EXPECT_EQ(twice.model, "b");
    EXPECT_EQ(twice.prompt_text, "");
    EXPECT_EQ(twice.prompt_token_ids, 3U);
    auto twice_string = read(api_kind::rerank, R"({"query":"first","query":"second"})");
    EXPECT_EQ(twice_string.prompt_text, "second");
    // NaN (Python's json reads it) does not make the body unreadable.
    auto python = read(api_kind::openai_embeddings, R"({"input":"x","dimensions":NaN})");
    EXPECT_TRUE(python.body_parsed);
    EXPECT_EQ(python.prompt_text, "x");
}

TEST(PoolingRequest, NestingPastTheLimitIsNotLookedInto) {
    std::string deep = R"({"input":)";
    const std::size_t depth = max_json_depth() + 10;
    deep.append(depth, '[');
    deep += "1";
    deep.append(depth, ']');
    deep += "}";
    auto info = read(api_kind::openai_embeddings, deep);
    EXPECT_FALSE(info.body_parsed);
    EXPECT_EQ(info.prompt_token_ids, 0U);
}

TEST(PoolingRequest, AHugeTokenArrayIsCountedWithoutCopies) {
    std::string body = R"({"model":"m","input":[)";
    constexpr std::size_t ids = 200'000;
    for (std::size_t i = 0; i < ids; ++i) {
        body += i == 0 ? "" : ",";
        body += std::to_string(i % 50'000);
    }
    body += "]}";
    auto info = read(api_kind::openai_embeddings, body);
    EXPECT_TRUE(info.body_parsed);
    EXPECT_EQ(info.prompt_token_ids, ids);
    EXPECT_TRUE(info.prompt_text.empty());
    EXPECT_EQ(info.prompt_text.capacity() < 64, true);
}

std::vector<test_support::recorded_chunk> decode(api_kind api, std::string_view body,
                                                 recording_sink& sink) {
    auto adapter = make_adapter(api);
    adapter->on_body(body, core::time_point{}, sink);
    return sink.chunks;
}

TEST(PoolingResponse, UsageRule) {
    {
        recording_sink sink;
        auto chunks =
            decode(api_kind::openai_embeddings,
                   R"({"object":"list","data":[{"index":0,"embedding":[0.1,-0.2]}],)"
                   R"("usage":{"prompt_tokens":7,"total_tokens":7,"completion_tokens":0}})",
                   sink);
        ASSERT_EQ(chunks.size(), 1U);
        EXPECT_EQ(sink.parse_errors(), 0);
        EXPECT_EQ(*chunks[0].usage->input_tokens, 7U);
        EXPECT_EQ(*chunks[0].usage->output_tokens, 0U);
        EXPECT_TRUE(chunks[0].role_only);  // no text: not a token
    }
    {
        // vLLM's rerank: only total_tokens.
        recording_sink sink;
        auto chunks = decode(api_kind::rerank,
                             R"({"id":"r","model":"m","usage":{"total_tokens":19},)"
                             R"("results":[{"index":1,"relevance_score":0.9}]})",
                             sink);
        ASSERT_EQ(chunks.size(), 1U);
        EXPECT_EQ(*chunks[0].usage->input_tokens, 19U);
        EXPECT_FALSE(chunks[0].usage->output_tokens);
    }
    {
        // Cohere's form.
        recording_sink sink;
        auto chunks = decode(api_kind::rerank,
                             R"({"results":[],"meta":{"api_version":{"version":"2"},)"
                             R"("billed_units":{"search_units":1,"input_tokens":12}}})",
                             sink);
        ASSERT_EQ(chunks.size(), 1U);
        EXPECT_EQ(*chunks[0].usage->input_tokens, 12U);
    }
    {
        // A moderation answer reports nothing.
        recording_sink sink;
        auto chunks = decode(api_kind::openai_moderations,
                             R"({"id":"modr-1","model":"m","results":[{"flagged":false}]})", sink);
        ASSERT_EQ(chunks.size(), 1U);
        EXPECT_FALSE(chunks[0].usage);
        EXPECT_FALSE(chunks[0].error);
    }
    {
        // Usage values of the wrong type are not counts.
        recording_sink sink;
        auto chunks =
            decode(api_kind::score,
                   R"({"data":[],"usage":{"prompt_tokens":"9","total_tokens":-1}})", sink);
        ASSERT_EQ(chunks.size(), 1U);
        EXPECT_FALSE(chunks[0].usage);
    }
}

TEST(PoolingResponse, ErrorsAndUnexpectedShapes) {
    {
        recording_sink sink;
        auto chunks = decode(api_kind::openai_embeddings,
                             R"({"object":"error","message":"too long","code":400})", sink);
        ASSERT_EQ(chunks.size(), 1U);
        EXPECT_TRUE(chunks[0].error);
    }
    {
        recording_sink sink;
        auto chunks = decode(api_kind::classify, R"({"error":{"message":"x"}})", sink);
        ASSERT_EQ(chunks.size(), 1U);
        EXPECT_TRUE(chunks[0].error);
    }
    for (std::string_view body : {R"([1,2])", R"({"unknown":1})", R"("text")"}) {
        recording_sink sink;
        decode(api_kind::openai_embeddings, body, sink);
        EXPECT_TRUE(sink.chunks.empty()) << body;
        EXPECT_EQ(sink.errors[static_cast<std::size_t>(parse_error::unexpected_shape)], 1) << body;
    }
    {
        recording_sink sink;
        decode(api_kind::openai_embeddings, R"({"data":[)", sink);
        EXPECT_EQ(sink.errors[static_cast<std::size_t>(parse_error::invalid_json)], 1);
    }
}

// Through the meter: a non-streamed answer has no first token, whatever its size, and the input
// bills as the server reported it.
TEST(PoolingResponse, ThroughTheMeterNoTtftAndReportedInput) {
    static const std::vector<double> bounds = {0.01, 0.1};
    request_info info = read(api_kind::openai_embeddings, R"({"model":"e","input":"a b c"})");
    meter::exchange ex(api_kind::openai_embeddings, info, core::time_point{}, &bounds, {});
    ex.on_request_sent();
    ex.on_response_head(200, "application/json", core::time_point{} + std::chrono::milliseconds(5));
    ex.on_body(R"({"data":[{"embedding":[1,2]}],"usage":{"prompt_tokens":3,"total_tokens":3}})",
               core::time_point{} + std::chrono::milliseconds(6));
    auto s = ex.finish(meter::end_reason::upstream_complete,
                       core::time_point{} + std::chrono::milliseconds(7));
    EXPECT_EQ(s.result, meter::outcome::complete);
    EXPECT_FALSE(s.streamed);
    EXPECT_FALSE(s.time_to_first_token);
    EXPECT_FALSE(s.first_token);
    EXPECT_EQ(s.parse_errors, 0U);
    auto billed = meter::billed(s);
    EXPECT_EQ(billed.input, (meter::token_count{3, meter::token_source::reported}));
    EXPECT_EQ(billed.output.value.value_or(99), 0U);
}

// "stream": true asks nothing of these APIs: the request is read as not streamed.
TEST(PoolingRequest, StreamFlagIsIgnored) {
    auto info = read(api_kind::openai_embeddings, R"({"input":"x","stream":true})");
    EXPECT_FALSE(info.stream);
}

}  // namespace
}  // namespace tokenmeter::protocol
