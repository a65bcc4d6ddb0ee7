// The meter with a manual clock: exact TTFT, ITL, TPOT and TPS for known timings.
#include "meter/stream_meter.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "meter/exchange.hpp"

namespace tokenmeter::meter {
namespace {

using namespace std::chrono_literals;
using protocol::api_kind;
using protocol::response_chunk;

const std::vector<double> itl_bounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1};

core::time_point at(std::chrono::nanoseconds offset) {
    return core::time_point{} + 1s + offset;
}

response_chunk text(std::string_view content) {
    response_chunk chunk;
    chunk.content = content;
    return chunk;
}

response_chunk with_running_usage(std::string_view content, std::uint64_t output) {
    response_chunk chunk = text(content);
    chunk.usage = protocol::token_usage{};
    chunk.usage->output_tokens = output;
    return chunk;
}

TEST(StreamMeter, TotalGivenOnlyWithTheLastTextIsNotCountedTwice) {
    // TGI: one token per event without usage, then the last token with generated_tokens.
    stream_meter meter(api_kind::tgi_generate, "m", true, at(0ms), &itl_bounds);
    meter.on_chunk(text("a"), at(10ms));
    meter.on_chunk(text("b"), at(20ms));
    meter.on_chunk(with_running_usage("c", 3), at(30ms));
    auto s = meter.finish(end_reason::upstream_complete, at(31ms));
    EXPECT_EQ(s.counted_output_tokens, 3u);
    EXPECT_EQ(s.inter_token_latency.count(), 2u);
    EXPECT_EQ(s.output_tokens, 3u);
}

TEST(StreamMeter, ExactTimingsForOneTokenPerChunk) {
    stream_meter meter(api_kind::openai_chat_completions, "m", true, at(0ms), &itl_bounds);
    meter.on_response_head(200, at(2ms));
    response_chunk role;
    role.role_only = true;
    meter.on_chunk(role, at(5ms));      // role-only: not a token
    meter.on_chunk(text(""), at(6ms));  // empty content: not a token
    meter.on_chunk(text("Hello"), at(100ms));
    meter.on_chunk(text(" wor"), at(110ms));
    meter.on_chunk(text("ld"), at(125ms));
    meter.on_chunk(text("!"), at(140ms));
    response_chunk usage;
    usage.usage.emplace();
    usage.usage->input_tokens = 12;
    usage.usage->output_tokens = 4;
    meter.on_chunk(usage, at(141ms));
    meter.on_done_marker(at(141ms));
    auto s = meter.finish(end_reason::upstream_complete, at(142ms));

    EXPECT_EQ(s.result, outcome::complete);
    ASSERT_TRUE(s.time_to_first_token);
    EXPECT_DOUBLE_EQ(*s.time_to_first_token, 0.100);
    EXPECT_EQ(s.inter_token_latency.count(), 3u);
    EXPECT_NEAR(s.inter_token_latency.sum(), 0.040, 1e-12);
    // 0.010 lands in le=0.01, both 0.015 in le=0.025.
    EXPECT_EQ(s.inter_token_latency.bucket_increments()[3], 1.0);
    EXPECT_EQ(s.inter_token_latency.bucket_increments()[4], 2.0);
    EXPECT_EQ(s.output_tokens, 4u);
    EXPECT_EQ(s.counted_output_tokens, 4u);
    ASSERT_TRUE(s.time_per_output_token);
    EXPECT_NEAR(*s.time_per_output_token, 0.040 / 3, 1e-12);
    ASSERT_TRUE(s.decode_tokens_per_second);
    EXPECT_NEAR(*s.decode_tokens_per_second, 3 / 0.040, 1e-9);
    ASSERT_TRUE(s.output_tokens_per_second);
    EXPECT_NEAR(*s.output_tokens_per_second, 4 / 0.142, 1e-9);
    EXPECT_NEAR(s.duration_seconds, 0.142, 1e-12);
    EXPECT_TRUE(s.done_marker);
    EXPECT_EQ(s.reported.input_tokens, 12u);
    EXPECT_EQ(s.output_chars, 12u);
}

TEST(StreamMeter, RunningUsageSplitsAChunkIntoItsTokens) {
    stream_meter meter(api_kind::openai_chat_completions, "m", true, at(0ms), &itl_bounds);
    meter.on_response_head(200, at(1ms));
    meter.on_chunk(with_running_usage("", 0), at(2ms));
    meter.on_chunk(with_running_usage("A", 1), at(50ms));
    meter.on_chunk(with_running_usage("BCD", 4), at(80ms));  // 3 tokens after 30 ms
    meter.on_chunk(with_running_usage("E", 5), at(90ms));
    auto s = meter.finish(end_reason::upstream_complete, at(91ms));

    EXPECT_DOUBLE_EQ(*s.time_to_first_token, 0.050);
    EXPECT_EQ(s.inter_token_latency.count(), 4u);
    EXPECT_NEAR(s.inter_token_latency.sum(), 0.040, 1e-12);
    EXPECT_EQ(s.inter_token_latency.bucket_increments()[3], 4.0);  // all four are exactly 0.010
    EXPECT_EQ(s.output_tokens, 5u);
    EXPECT_NEAR(*s.time_per_output_token, 0.040 / 4, 1e-12);
}

TEST(StreamMeter, FirstChunkWithSeveralTokensGivesZeroGaps) {
    stream_meter meter(api_kind::openai_chat_completions, "m", true, at(0ms), &itl_bounds);
    meter.on_response_head(200, at(1ms));
    meter.on_chunk(with_running_usage("abc", 3), at(20ms));
    meter.on_chunk(with_running_usage("d", 4), at(30ms));
    auto s = meter.finish(end_reason::upstream_complete, at(31ms));
    EXPECT_EQ(s.inter_token_latency.count(), 3u);
    EXPECT_EQ(s.inter_token_latency.bucket_increments()[0], 2.0);
    EXPECT_NEAR(s.inter_token_latency.sum(), 0.010, 1e-12);
    EXPECT_NEAR(*s.time_per_output_token, 0.010 / 3, 1e-12);
}

TEST(StreamMeter, TextWithoutNewTokensKeepsThePreviousTokenTime) {
    stream_meter meter(api_kind::openai_chat_completions, "m", true, at(0ms), &itl_bounds);
    meter.on_chunk(with_running_usage("a", 1), at(10ms));
    meter.on_chunk(with_running_usage("held back text", 1), at(15ms));
    meter.on_chunk(with_running_usage("b", 2), at(30ms));
    auto s = meter.finish(end_reason::upstream_complete, at(31ms));
    EXPECT_EQ(s.inter_token_latency.count(), 1u);
    EXPECT_NEAR(s.inter_token_latency.sum(), 0.020, 1e-12);
    EXPECT_EQ(s.text_chunks, 3u);
}

TEST(StreamMeter, ReasoningAndToolTextAreTokens) {
    stream_meter meter(api_kind::openai_chat_completions, "m", true, at(0ms), &itl_bounds);
    response_chunk thinking;
    thinking.reasoning = "hmm";
    meter.on_chunk(thinking, at(7ms));
    response_chunk tool;
    tool.tool_arguments = "{\"a\":1}";
    meter.on_chunk(tool, at(9ms));
    auto s = meter.finish(end_reason::upstream_complete, at(10ms));
    EXPECT_DOUBLE_EQ(*s.time_to_first_token, 0.007);
    EXPECT_EQ(s.counted_output_tokens, 2u);
}

TEST(StreamMeter, ExplicitZeroUsageIsNotReplacedByTheCount) {
    stream_meter meter(api_kind::openai_chat_completions, "m", true, at(0ms), &itl_bounds);
    meter.on_chunk(text("a"), at(10ms));
    meter.on_chunk(text("b"), at(20ms));
    response_chunk usage;
    usage.usage.emplace();
    usage.usage->input_tokens = 0;
    usage.usage->output_tokens = 0;
    meter.on_chunk(usage, at(21ms));
    auto s = meter.finish(end_reason::upstream_complete, at(22ms));
    EXPECT_EQ(s.output_tokens, 0u);
    EXPECT_EQ(s.counted_output_tokens, 2u);
    EXPECT_FALSE(s.output_tokens_per_second);
}

TEST(StreamMeter, LaterUsageReportsMergeFieldByField) {
    stream_meter meter(api_kind::openai_chat_completions, "m", true, at(0ms), &itl_bounds);
    response_chunk first;
    first.usage.emplace();
    first.usage->input_tokens = 100;
    first.usage->cached_input_tokens = 20;
    meter.on_chunk(first, at(1ms));
    response_chunk second;
    second.usage.emplace();
    second.usage->output_tokens = 9;
    second.usage->reasoning_tokens = 3;
    meter.on_chunk(second, at(2ms));
    auto s = meter.finish(end_reason::upstream_complete, at(3ms));
    EXPECT_EQ(s.reported.input_tokens, 100u);
    EXPECT_EQ(s.reported.cached_input_tokens, 20u);
    EXPECT_EQ(s.reported.output_tokens, 9u);
    EXPECT_EQ(s.reported.reasoning_tokens, 3u);
}

TEST(StreamMeter, Outcomes) {
    auto end_with = [](int status, end_reason reason) {
        stream_meter meter(api_kind::openai_chat_completions, "m", true, at(0ms), &itl_bounds);
        meter.on_response_head(status, at(1ms));
        return meter.finish(reason, at(2ms)).result;
    };
    EXPECT_EQ(end_with(200, end_reason::upstream_complete), outcome::complete);
    EXPECT_EQ(end_with(503, end_reason::upstream_complete), outcome::upstream_error);
    EXPECT_EQ(end_with(200, end_reason::upstream_truncated), outcome::upstream_truncated);
    EXPECT_EQ(end_with(200, end_reason::client_cancel), outcome::client_cancel);
    EXPECT_EQ(end_with(502, end_reason::upstream_failed), outcome::upstream_error);
    EXPECT_EQ(end_with(400, end_reason::rejected), outcome::rejected);

    stream_meter meter(api_kind::openai_chat_completions, "m", true, at(0ms), &itl_bounds);
    meter.on_response_head(200, at(1ms));
    response_chunk error;
    error.error = true;
    meter.on_chunk(error, at(2ms));
    EXPECT_EQ(meter.finish(end_reason::upstream_complete, at(3ms)).result, outcome::upstream_error);
}

TEST(StreamMeter, NonStreamedHasNoTokenTimings) {
    stream_meter meter(api_kind::openai_chat_completions, "m", false, at(0ms), &itl_bounds);
    meter.on_response_head(200, at(400ms));
    response_chunk body = text("The whole answer");
    body.usage.emplace();
    body.usage->input_tokens = 10;
    body.usage->output_tokens = 8;
    meter.on_chunk(body, at(500ms));
    auto s = meter.finish(end_reason::upstream_complete, at(500ms));
    EXPECT_FALSE(s.time_to_first_token);
    EXPECT_FALSE(s.time_per_output_token);
    EXPECT_EQ(s.inter_token_latency.count(), 0u);
    EXPECT_EQ(s.output_tokens, 8u);
    EXPECT_NEAR(*s.output_tokens_per_second, 8 / 0.5, 1e-9);
}

TEST(HistogramBatch, BoundaryValuesFallInTheirOwnBucket) {
    histogram_batch batch(&itl_bounds);
    batch.observe(0.001);
    batch.observe(0.0010001);
    batch.observe(1.0);
    batch.observe(0.0, 3);
    EXPECT_EQ(batch.bucket_increments()[0], 4.0);
    EXPECT_EQ(batch.bucket_increments()[1], 1.0);
    EXPECT_EQ(batch.bucket_increments()[itl_bounds.size()], 1.0);
    EXPECT_EQ(batch.count(), 6u);
}

TEST(HistogramBatch, EveryValueLandsWhereABinarySearchPutsIt) {
    // observe() tries the last value's bucket first; whatever the order of values (runs in one
    // bucket, jumps, bounds exactly, below the first, past the last), each must land in the
    // bucket of the first bound >= it.
    std::mt19937 rng(11);
    std::vector<double> values;
    for (double b : itl_bounds) {
        values.push_back(b);
        values.push_back(std::nextafter(b, 0.0));
        values.push_back(std::nextafter(b, 1e9));
    }
    values.push_back(0.0);
    values.push_back(-1.0);
    values.push_back(1e9);
    std::uniform_real_distribution<double> gap(0.0, 0.12);
    for (int i = 0; i < 2000; ++i) {
        values.push_back(i % 3 == 0 ? values[rng() % values.size()] : gap(rng));
    }
    histogram_batch batch(&itl_bounds);
    std::vector<double> want(itl_bounds.size() + 1, 0.0);
    for (double v : values) {
        batch.observe(v);
        want[static_cast<std::size_t>(std::lower_bound(itl_bounds.begin(), itl_bounds.end(), v) -
                                      itl_bounds.begin())] += 1;
    }
    EXPECT_EQ(batch.bucket_increments(), want);
    EXPECT_EQ(batch.count(), values.size());

    // for_each_bucket visits exactly the nonzero increments, in index order.
    std::vector<double> visited(itl_bounds.size() + 1, 0.0);
    std::size_t previous = 0;
    bool first = true;
    batch.for_each_bucket([&](std::size_t index, std::uint64_t n) {
        ASSERT_LT(index, visited.size());
        EXPECT_GT(n, 0u);
        EXPECT_TRUE(first || index > previous);
        first = false;
        previous = index;
        visited[index] = static_cast<double>(n);
    });
    EXPECT_EQ(visited, want);
}

TEST(HistogramBatch, ForEachBucketOfAnEmptyBatchVisitsNothing) {
    histogram_batch batch(&itl_bounds);
    int visits = 0;
    batch.for_each_bucket([&](std::size_t, std::uint64_t) { ++visits; });
    EXPECT_EQ(visits, 0);
}

// ---- exchange: bytes in, summary out --------------------------------------------------------

protocol::request_info streamed_request() {
    protocol::request_info info;
    info.model = "m";
    info.stream = true;
    info.body_parsed = true;
    return info;
}

TEST(Exchange, TimesEachTokenByTheReadThatCompletedIt) {
    const std::string stream =
        "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"content\":\"A\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"content\":\"B\"}}]}\n\n"
        "data: [DONE]\n\n";
    // Split the second content event across two reads: it belongs to the later read.
    auto cut = stream.find("\"B\"");
    exchange ex(api_kind::openai_chat_completions, streamed_request(), at(0ms), &itl_bounds, {});
    ex.on_response_head(200, "text/event-stream; charset=utf-8", at(1ms));
    ex.on_body(std::string_view(stream).substr(0, cut), at(30ms));
    ex.on_body(std::string_view(stream).substr(cut), at(45ms));
    auto s = ex.finish(end_reason::upstream_complete, at(46ms));
    EXPECT_DOUBLE_EQ(*s.time_to_first_token, 0.030);
    EXPECT_NEAR(s.inter_token_latency.sum(), 0.015, 1e-12);
    EXPECT_EQ(s.parse_errors, 0u);
    EXPECT_TRUE(s.done_marker);
}

TEST(Exchange, NonEventStreamForAStreamedRequestIsCounted) {
    exchange ex(api_kind::openai_chat_completions, streamed_request(), at(0ms), &itl_bounds, {});
    ex.on_response_head(200, "text/plain", at(1ms));
    ex.on_body("just some text", at(2ms));
    auto s = ex.finish(end_reason::upstream_complete, at(3ms));
    EXPECT_EQ(s.parse_errors, 1u);
    EXPECT_EQ(s.result, outcome::complete);
}

TEST(Exchange, BodyEndingInsideAnEventIsCounted) {
    exchange ex(api_kind::openai_chat_completions, streamed_request(), at(0ms), &itl_bounds, {});
    ex.on_response_head(200, "text/event-stream", at(1ms));
    ex.on_body("data: {\"choices\":[{\"delta\":{\"content\":\"A\"}}]}\n\ndata: {\"cho", at(2ms));
    auto s = ex.finish(end_reason::upstream_complete, at(3ms));
    EXPECT_EQ(s.parse_errors, 1u);
    EXPECT_EQ(s.counted_output_tokens, 1u);
}

TEST(Exchange, JsonBodyIsDecodedAtTheEndAndBounded) {
    protocol::request_info info;
    info.model = "m";
    info.body_parsed = true;
    const std::string body =
        R"({"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}})";
    exchange ex(api_kind::openai_chat_completions, info, at(0ms), &itl_bounds, {});
    ex.on_response_head(200, "application/json", at(5ms));
    ex.on_body(std::string_view(body).substr(0, 10), at(6ms));
    ex.on_body(std::string_view(body).substr(10), at(7ms));
    auto s = ex.finish(end_reason::upstream_complete, at(8ms));
    EXPECT_EQ(s.output_tokens, 1u);
    EXPECT_EQ(s.reported.input_tokens, 3u);

    exchange small(api_kind::openai_chat_completions, info, at(0ms), &itl_bounds,
                   exchange_limits{1024, 16});
    small.on_response_head(200, "application/json", at(5ms));
    small.on_body(body, at(6ms));
    // Too large to read whole: only the tail is kept (a body this small is its own tail), and
    // the usage report at its end is still read.
    EXPECT_EQ(small.buffered_bytes(), body.size());
    auto t = small.finish(end_reason::upstream_complete, at(8ms));
    EXPECT_EQ(t.parse_errors, 1u);
    EXPECT_TRUE(t.response_unread);
    EXPECT_EQ(t.reported.output_tokens, 1u);
    EXPECT_EQ(t.counted_output_tokens, 0u) << "the text was not read";
}

}  // namespace
}  // namespace tokenmeter::meter
