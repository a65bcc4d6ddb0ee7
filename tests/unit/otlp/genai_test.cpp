// A finished request in the GenAI conventions: the span's attributes and times, what an
// unsampled or failed request leaves, and the cumulative histograms.
#include "otlp/genai.hpp"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <map>
#include <string>

namespace tokenmeter::otlp {
namespace {

using namespace std::chrono_literals;

meter::request_summary streamed_chat() {
    meter::request_summary s;
    s.api = protocol::api_kind::openai_chat_completions;
    s.model = "gpt-4o";
    s.status = 200;
    s.request_received = core::time_point{} + 10s;
    s.first_token = s.request_received + 250ms;
    s.end = s.request_received + 2s;
    s.time_to_first_token = 0.25;
    s.time_per_output_token = 0.05;
    s.duration_seconds = 2.0;
    s.finish_reason = "stop";
    s.response_model = "gpt-4o-2024-08-06";
    return s;
}

meter::billed_counts counts() {
    meter::billed_counts c;
    c.served = true;
    c.input = {120, meter::token_source::reported};
    c.output = {36, meter::token_source::reported};
    c.cached_input = {100, meter::token_source::reported};
    c.reasoning = {8, meter::token_source::reported};
    return c;
}

core::trace_context sampled_trace() {
    core::trace_context t;
    t.trace[0] = 0xab;
    t.span[0] = 0xcd;
    t.parent[0] = 0xef;
    t.flags = core::trace_flag_sampled;
    return t;
}

std::map<std::string, attribute> by_key(const attributes& attrs) {
    std::map<std::string, attribute> out;
    for (const attribute& a : attrs) {
        EXPECT_TRUE(out.emplace(a.key, a).second) << "twice: " << a.key;
    }
    return out;
}

TEST(GenAiSpan, SampledRequestCarriesTheConventions) {
    const std::int64_t end_ns = 1'700'000'010'000'000'000;
    const finished_request r =
        describe(streamed_chat(), counts(), sampled_trace(), {"model-server", 8000}, end_ns);
    ASSERT_TRUE(r.traced);
    const span& s = *r.traced;
    EXPECT_EQ(s.trace, sampled_trace().trace);
    EXPECT_EQ(s.id, sampled_trace().span);  // the id the upstream got as its parent
    EXPECT_EQ(s.parent, sampled_trace().parent);
    EXPECT_EQ(s.name, "chat gpt-4o");
    EXPECT_EQ(s.kind, span_kind::client);
    EXPECT_EQ(s.end_unix_ns, end_ns);
    EXPECT_EQ(s.start_unix_ns, end_ns - 2'000'000'000);
    const auto a = by_key(s.attrs);
    EXPECT_EQ(std::get<std::string>(a.at("gen_ai.operation.name").value), "chat");
    EXPECT_EQ(std::get<std::string>(a.at("gen_ai.provider.name").value), "openai");
    EXPECT_EQ(std::get<std::string>(a.at("gen_ai.request.model").value), "gpt-4o");
    EXPECT_EQ(std::get<std::string>(a.at("gen_ai.response.model").value), "gpt-4o-2024-08-06");
    EXPECT_EQ(std::get<std::int64_t>(a.at("gen_ai.usage.input_tokens").value), 120);
    EXPECT_EQ(std::get<std::int64_t>(a.at("gen_ai.usage.output_tokens").value), 36);
    EXPECT_EQ(std::get<std::int64_t>(a.at("gen_ai.usage.cache_read.input_tokens").value), 100);
    EXPECT_EQ(std::get<std::int64_t>(a.at("gen_ai.usage.reasoning.output_tokens").value), 8);
    EXPECT_EQ(a.count("gen_ai.usage.cache_creation.input_tokens"), 0U);  // unknown: left out
    EXPECT_EQ(std::get<std::string>(a.at("server.address").value), "model-server");
    EXPECT_EQ(std::get<std::int64_t>(a.at("server.port").value), 8000);
    EXPECT_EQ(a.count("error.type"), 0U);
    EXPECT_EQ(s.status, status_code::unset);
    ASSERT_EQ(s.events.size(), 1U);
    EXPECT_EQ(s.events[0].name, "gen_ai.first_token");
    EXPECT_EQ(s.events[0].time_unix_ns, end_ns - 1'750'000'000);
}

TEST(GenAiSpan, NoResponseModelWhenTheResponseNamedNone) {
    meter::request_summary s = streamed_chat();
    s.response_model.clear();
    const finished_request r = describe(s, counts(), sampled_trace(), {"model-server", 8000}, 1);
    ASSERT_TRUE(r.traced);
    EXPECT_EQ(by_key(r.traced->attrs).count("gen_ai.response.model"), 0U);
}

TEST(GenAiSpan, UnsampledRequestLeavesOnlyMetricValues) {
    core::trace_context t = sampled_trace();
    t.flags = 0;
    const finished_request r = describe(streamed_chat(), counts(), t, {}, 0);
    EXPECT_FALSE(r.traced);
    EXPECT_EQ(r.operation, "chat");
    EXPECT_EQ(r.model, "gpt-4o");
    EXPECT_EQ(r.time_to_first_token, 0.25);
    EXPECT_EQ(r.input_tokens, 120U);
    EXPECT_FALSE(describe(streamed_chat(), counts(), core::trace_context{}, {}, 0).traced);
}

TEST(GenAiSpan, ErrorType) {
    meter::request_summary s = streamed_chat();
    EXPECT_EQ(error_type(s), "");
    s.status = 503;
    s.result = meter::outcome::upstream_error;
    EXPECT_EQ(error_type(s), "503");
    s.status = 0;
    s.local_answer = "upstream_unreachable";
    EXPECT_EQ(error_type(s), "upstream_unreachable");
    s.local_answer.clear();
    s.status = 200;
    s.result = meter::outcome::upstream_truncated;
    EXPECT_EQ(error_type(s), "upstream_truncated");
    const finished_request r = describe(s, counts(), sampled_trace(), {}, 0);
    ASSERT_TRUE(r.traced);
    EXPECT_EQ(r.traced->status, status_code::error);
    EXPECT_EQ(by_key(r.traced->attrs).count("error.type"), 1U);
    // TTFT and TPOT are for successful responses only; the duration counts every request.
    EXPECT_FALSE(r.time_to_first_token);
    EXPECT_FALSE(r.time_per_output_token);
    EXPECT_EQ(r.duration_seconds, 2.0);
}

TEST(GenAiSpan, ProvidersAndOperations) {
    meter::request_summary s = streamed_chat();
    s.api = protocol::api_kind::anthropic_messages;
    EXPECT_EQ(describe(s, counts(), {}, {}, 0).provider, "anthropic");
    s.api = protocol::api_kind::gemini_generate;
    EXPECT_EQ(describe(s, counts(), {}, {}, 0).provider, "gcp.gemini");
    EXPECT_EQ(describe(s, counts(), {}, {}, 0).operation, "generate_content");
    s.api = protocol::api_kind::openai_completions;
    EXPECT_EQ(describe(s, counts(), {}, {}, 0).operation, "text_completion");
}

const histogram& named(const std::vector<histogram>& all, const std::string& name) {
    for (const histogram& h : all) {
        if (h.name == name) {
            return h;
        }
    }
    ADD_FAILURE() << name;
    return all.front();
}

TEST(GenAiMetrics, CumulativeBucketsWithTheConventionsBounds) {
    genai_metrics m;
    EXPECT_TRUE(m.empty());
    finished_request r = describe(streamed_chat(), counts(), {}, {}, 0);
    m.record(r);
    r.time_to_first_token = 0.1;  // on a bound: in that bucket
    m.record(r);
    const auto all = m.snapshot();
    const histogram& ttft = named(all, "gen_ai.server.time_to_first_token");
    EXPECT_EQ(ttft.unit, "s");
    EXPECT_EQ(ttft.bounds, time_to_first_token_bounds());
    ASSERT_EQ(ttft.points.size(), 1U);
    const histogram_point& p = ttft.points[0];
    EXPECT_EQ(p.count, 2U);
    EXPECT_DOUBLE_EQ(p.sum, 0.35);
    EXPECT_DOUBLE_EQ(p.min, 0.1);
    EXPECT_DOUBLE_EQ(p.max, 0.25);
    ASSERT_EQ(p.bucket_counts.size(), ttft.bounds.size() + 1);
    EXPECT_EQ(p.bucket_counts[7], 1U);  // (0.08, 0.1]
    EXPECT_EQ(p.bucket_counts[8], 1U);  // (0.1, 0.25]
    const histogram& tokens = named(all, "gen_ai.client.token.usage");
    EXPECT_EQ(tokens.unit, "{token}");
    ASSERT_EQ(tokens.points.size(), 2U);  // input and output
    std::map<std::string, std::uint64_t> sums;
    for (const histogram_point& q : tokens.points) {
        const auto a = by_key(q.attrs);
        sums[std::get<std::string>(a.at("gen_ai.token.type").value)] =
            static_cast<std::uint64_t>(q.sum);
    }
    EXPECT_EQ(sums["input"], 240U);
    EXPECT_EQ(sums["output"], 72U);
    EXPECT_EQ(named(all, "gen_ai.server.request.duration").points.at(0).count, 2U);
    EXPECT_EQ(named(all, "gen_ai.server.time_per_output_token").bounds.back(), 2.5);
}

TEST(GenAiMetrics, SeriesAreBounded) {
    genai_metrics m(2);
    finished_request r = describe(streamed_chat(), counts(), {}, {}, 0);
    for (const char* model : {"a", "b", "c", "d"}) {
        r.model = model;
        m.record(r);
    }
    const auto all = m.snapshot();
    const histogram& d = named(all, "gen_ai.server.request.duration");
    ASSERT_EQ(d.points.size(), 3U);  // a, b, then other
    std::uint64_t other = 0;
    for (const histogram_point& p : d.points) {
        if (std::get<std::string>(by_key(p.attrs).at("gen_ai.request.model").value) == "other") {
            other = p.count;
        }
    }
    EXPECT_EQ(other, 2U);
}

TEST(GenAiSpan, InputOnlyAndAudioApisAreNamedByTheirApi) {
    meter::request_summary s = streamed_chat();
    s.model = "e5";
    const std::array<std::pair<protocol::api_kind, const char*>, 3> names{{
        {protocol::api_kind::openai_embeddings, "embeddings"},
        {protocol::api_kind::rerank, "rerank"},
        {protocol::api_kind::openai_transcriptions, "transcription"},
    }};
    for (const auto& [api, operation] : names) {
        s.api = api;
        const finished_request r = describe(s, counts(), sampled_trace(), {"model-server", 8000},
                                            1'700'000'000'000'000'000);
        EXPECT_EQ(r.operation, operation);
        ASSERT_TRUE(r.traced);
        EXPECT_EQ(r.traced->name, std::string(operation) + " e5");
    }
}

}  // namespace
}  // namespace tokenmeter::otlp
