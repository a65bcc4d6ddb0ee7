// The SLO counter (good/bad per target), its gauges, and the TTFT histogram's prompt_class label.
#include "metrics/slo.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "meter/stream_meter.hpp"
#include "metrics/registry.hpp"

namespace tokenmeter::metrics {
namespace {

using namespace std::chrono_literals;

bool contains(const std::string& text, const std::string& needle) {
    return text.find(needle) != std::string::npos;
}

// A streamed request: first token at ttft, then `tokens - 1` more, `gap` apart.
meter::request_summary streamed(const registry& r, const std::string& model,
                                std::chrono::milliseconds ttft, std::chrono::milliseconds gap,
                                int tokens, std::optional<std::uint64_t> input_tokens) {
    meter::stream_meter m(protocol::api_kind::openai_chat_completions, model, true,
                          core::time_point{}, &r.inter_token_latency_bounds());
    m.on_request_sent();  // served: the server got it
    m.on_response_head(200, core::time_point{} + 1ms);
    protocol::response_chunk chunk;
    chunk.content = "a";
    auto at = core::time_point{} + ttft;
    for (int i = 0; i < tokens; ++i) {
        m.on_chunk(chunk, at);
        at += gap;
    }
    if (input_tokens) {
        protocol::response_chunk usage;
        usage.usage = protocol::token_usage{*input_tokens, static_cast<std::uint64_t>(tokens),
                                            std::nullopt,  std::nullopt,
                                            std::nullopt,  std::nullopt,
                                            std::nullopt,  std::nullopt,
                                            std::nullopt};
        m.on_chunk(usage, at);
    }
    return m.finish(meter::end_reason::upstream_complete, at);
}

slo_options two_models() {
    slo_options slo;
    slo.models["fast"] = *slo_preset("interactive");  // 500 ms, 30 ms
    slo.models["slow"] = *slo_preset("server");       // 2 s, 100 ms
    slo.models["slow"].objective = 0.999;
    return slo;
}

TEST(Slo, CountsGoodAndBadAgainstEachTarget) {
    registry r(registry_options{}, two_models());
    r.record(streamed(r, "fast", 400ms, 20ms, 5, 10));   // ttft good, tpot good
    r.record(streamed(r, "fast", 600ms, 40ms, 5, 10));   // ttft bad, tpot bad
    r.record(streamed(r, "fast", 500ms, 30ms, 5, 10));   // exactly at the target: good
    r.record(streamed(r, "slow", 2500ms, 50ms, 5, 10));  // ttft bad, tpot good
    const std::string text = r.expose();
    EXPECT_TRUE(
        contains(text, R"(tokenmeter_slo_requests_total{model="fast",result="good",slo="ttft"} 2)"))
        << text;
    EXPECT_TRUE(
        contains(text, R"(tokenmeter_slo_requests_total{model="fast",result="bad",slo="ttft"} 1)"))
        << text;
    EXPECT_TRUE(
        contains(text, R"(tokenmeter_slo_requests_total{model="fast",result="good",slo="tpot"} 2)"))
        << text;
    EXPECT_TRUE(
        contains(text, R"(tokenmeter_slo_requests_total{model="fast",result="bad",slo="tpot"} 1)"))
        << text;
    EXPECT_TRUE(
        contains(text, R"(tokenmeter_slo_requests_total{model="slow",result="bad",slo="ttft"} 1)"))
        << text;
    EXPECT_TRUE(
        contains(text, R"(tokenmeter_slo_requests_total{model="slow",result="good",slo="tpot"} 1)"))
        << text;
    EXPECT_TRUE(contains(text, R"(tokenmeter_slo_objective_ratio{model="slow",slo="ttft"} 0.999)"))
        << text;
    EXPECT_TRUE(contains(text, R"(tokenmeter_slo_objective_ratio{model="fast",slo="tpot"} 0.99)"))
        << text;
    EXPECT_TRUE(contains(text, R"(tokenmeter_slo_target_seconds{model="fast",slo="tpot"} 0.03)"))
        << text;
    EXPECT_TRUE(contains(text, R"(tokenmeter_slo_target_seconds{model="slow",slo="ttft"} 2)"))
        << text;
}

TEST(Slo, TargetsAreBucketBoundaries) {
    registry r(registry_options{}, two_models());
    r.record(streamed(r, "slow", 1900ms, 50ms, 3, 10));
    const std::string text = r.expose();
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_time_to_first_token_seconds_bucket{api="openai_chat",model="slow",prompt_class="0-512",le="2"} 1)"))
        << text;
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_time_per_output_token_seconds_bucket{api="openai_chat",model="slow",le="0.03"} 0)"))
        << text;
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_inter_token_latency_seconds_bucket{api="openai_chat",model="slow",le="0.03"} 0)"))
        << text;
}

TEST(Slo, ModelsWithoutAnEntryAreNotCountedUnlessADefaultExists) {
    registry none(registry_options{}, two_models());
    none.record(streamed(none, "other-model", 100ms, 10ms, 3, 10));
    EXPECT_FALSE(contains(none.expose(), R"(tokenmeter_slo_requests_total{model="other-model")"));

    slo_options slo;
    slo.default_target = *slo_preset("server");
    registry with_default(registry_options{}, slo);
    with_default.record(streamed(with_default, "m", 100ms, 10ms, 3, 10));
    const std::string text = with_default.expose();
    EXPECT_TRUE(
        contains(text, R"(tokenmeter_slo_requests_total{model="m",result="good",slo="ttft"} 1)"))
        << text;
    EXPECT_TRUE(contains(text, R"(tokenmeter_slo_target_seconds{model="m",slo="ttft"} 2)")) << text;
}

TEST(Slo, ClientWhoGaveUpAfterTheTargetIsBad) {
    registry r(registry_options{}, two_models());
    meter::stream_meter m(protocol::api_kind::openai_chat_completions, "fast", true,
                          core::time_point{}, &r.inter_token_latency_bounds());
    m.on_request_sent();  // served: the server got it
    m.on_response_head(200, core::time_point{} + 1ms);
    r.record(m.finish(meter::end_reason::client_cancel, core::time_point{} + 900ms));
    meter::stream_meter quick(protocol::api_kind::openai_chat_completions, "fast", true,
                              core::time_point{}, &r.inter_token_latency_bounds());
    quick.on_request_sent();  // served: the server got it
    r.record(quick.finish(meter::end_reason::client_cancel, core::time_point{} + 100ms));
    const std::string text = r.expose();
    EXPECT_TRUE(
        contains(text, R"(tokenmeter_slo_requests_total{model="fast",result="bad",slo="ttft"} 1)"))
        << text;
    EXPECT_FALSE(contains(text, R"(result="good",slo="ttft")")) << text;
    EXPECT_FALSE(contains(text, R"(result="bad",slo="tpot")")) << text;
    EXPECT_FALSE(contains(text, R"(result="good",slo="tpot")")) << text;
}

TEST(Slo, ModelsInTheSloTakeLabelSlotsFirst) {
    registry_options m;
    m.max_models = 1;
    slo_options slo;
    slo.models["llama"] = *slo_preset("server");
    registry r(m, slo);
    r.record(streamed(r, "first-seen", 100ms, 10ms, 3, 10));
    r.record(streamed(r, "llama", 100ms, 10ms, 3, 10));
    const std::string text = r.expose();
    EXPECT_TRUE(contains(
        text, R"(tokenmeter_slo_requests_total{model="llama",result="good",slo="ttft"} 1)"))
        << text;
    EXPECT_TRUE(contains(text, R"(model="other")")) << text;
}

TEST(Availability, RuleByOutcomeAndStatus) {
    using meter::outcome;
    EXPECT_EQ(availability_of(outcome::complete, 200), availability::good);
    EXPECT_EQ(availability_of(outcome::complete, 304), availability::good);
    // Local answers to an unreachable, slow or saturated upstream, and the upstream's own 5xx.
    EXPECT_EQ(availability_of(outcome::upstream_error, 502), availability::bad);
    EXPECT_EQ(availability_of(outcome::upstream_error, 503), availability::bad);
    EXPECT_EQ(availability_of(outcome::upstream_error, 504), availability::bad);
    EXPECT_EQ(availability_of(outcome::upstream_error, 500), availability::bad);
    // An error object inside a 200 stream, or a stream cut by an idle timeout.
    EXPECT_EQ(availability_of(outcome::upstream_error, 200), availability::bad);
    EXPECT_EQ(availability_of(outcome::upstream_truncated, 200), availability::bad);
    // The client's doing.
    EXPECT_EQ(availability_of(outcome::upstream_error, 400), availability::excluded);
    EXPECT_EQ(availability_of(outcome::upstream_error, 429), availability::excluded);
    EXPECT_EQ(availability_of(outcome::rejected, 429), availability::excluded);
    EXPECT_EQ(availability_of(outcome::rejected, 413), availability::excluded);
    EXPECT_EQ(availability_of(outcome::client_cancel, 200), availability::excluded);
}

TEST(Availability, PresetsCarryAnObjective) {
    EXPECT_EQ(slo_preset("server")->availability, 0.999);
    EXPECT_EQ(slo_preset("interactive")->availability, 0.999);
}

// A request that ended for `reason` after a response head with `status` (0: none).
meter::request_summary ended(const registry& r, const std::string& model, int status,
                             meter::end_reason reason) {
    meter::stream_meter m(protocol::api_kind::openai_chat_completions, model, true,
                          core::time_point{}, &r.inter_token_latency_bounds());
    if (status != 0) {
        m.on_response_head(status, core::time_point{} + 1ms);
    }
    return m.finish(reason, core::time_point{} + 50ms);
}

TEST(Availability, FailedRequestsAreBadAndTheClientsAreLeftOut) {
    slo_options slo;
    slo.default_target = *slo_preset("server");
    registry r(registry_options{}, slo);
    r.record(streamed(r, "m", 100ms, 10ms, 3, 10));                       // good
    r.record(ended(r, "m", 502, meter::end_reason::upstream_failed));     // unreachable
    r.record(ended(r, "m", 503, meter::end_reason::upstream_complete));   // the server's 503
    r.record(ended(r, "m", 200, meter::end_reason::upstream_truncated));  // cut
    r.record(ended(r, "m", 200, meter::end_reason::upstream_failed));     // idle timeout
    r.record(ended(r, "m", 404, meter::end_reason::upstream_complete));   // left out
    r.record(ended(r, "m", 429, meter::end_reason::rejected));            // tenant 429
    r.record(ended(r, "m", 200, meter::end_reason::client_cancel));       // left out
    // Answered by the proxy before it was metered.
    r.record_unforwarded(protocol::api_kind::openai_chat_completions, "m",
                         meter::outcome::upstream_error, 500, 0.01);
    r.record_unforwarded(protocol::api_kind::openai_chat_completions, "m", meter::outcome::rejected,
                         400, 0.01);
    const std::string text = r.expose();
    EXPECT_TRUE(contains(
        text, R"(tokenmeter_slo_requests_total{model="m",result="good",slo="availability"} 1)"))
        << text;
    EXPECT_TRUE(contains(
        text, R"(tokenmeter_slo_requests_total{model="m",result="bad",slo="availability"} 5)"))
        << text;
    EXPECT_TRUE(
        contains(text, R"(tokenmeter_slo_objective_ratio{model="m",slo="availability"} 0.999)"))
        << text;
    EXPECT_FALSE(contains(text, R"(tokenmeter_slo_target_seconds{model="m",slo="availability"})"))
        << text;
    // Failed requests are left out of the latency SLOs: only the one served request counts.
    EXPECT_TRUE(
        contains(text, R"(tokenmeter_slo_requests_total{model="m",result="good",slo="ttft"} 1)"))
        << text;
    EXPECT_FALSE(contains(text, R"(result="bad",slo="ttft")")) << text;
}

TEST(Availability, OnlyEntriesWithAnObjectiveCountIt) {
    slo_options slo;
    slo.models["latency-only"].ttft = 500ms;
    slo.models["availability-only"].availability = 0.995;
    registry r(registry_options{}, slo);
    r.record(ended(r, "latency-only", 502, meter::end_reason::upstream_failed));
    r.record(ended(r, "availability-only", 502, meter::end_reason::upstream_failed));
    const std::string text = r.expose();
    EXPECT_FALSE(contains(text, R"(model="latency-only",result="bad",slo="availability")")) << text;
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_slo_requests_total{model="availability-only",result="bad",slo="availability"} 1)"))
        << text;
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_slo_objective_ratio{model="availability-only",slo="availability"} 0.995)"))
        << text;
}

TEST(PromptClass, BoundsAreInclusiveAndUnknownWithoutACount) {
    registry r(registry_options{}, {});
    EXPECT_EQ(r.prompt_class(0), "0-512");
    EXPECT_EQ(r.prompt_class(512), "0-512");
    EXPECT_EQ(r.prompt_class(513), "512-2k");
    EXPECT_EQ(r.prompt_class(2048), "512-2k");
    EXPECT_EQ(r.prompt_class(8000), "2k-8k");
    EXPECT_EQ(r.prompt_class(32768), "8k-32k");
    EXPECT_EQ(r.prompt_class(32769), "32k+");
    EXPECT_EQ(r.prompt_class(std::nullopt), "unknown");

    registry_options custom;
    custom.prompt_classes = {1000, 4096};
    registry c(custom, {});
    EXPECT_EQ(c.prompt_class(999), "0-1000");
    EXPECT_EQ(c.prompt_class(1001), "1000-4k");
    EXPECT_EQ(c.prompt_class(5000), "4k+");
}

TEST(PromptClass, LabelsTheTtftHistogram) {
    registry r(registry_options{}, {});
    r.record(streamed(r, "m", 100ms, 10ms, 3, 3000));
    r.record(streamed(r, "m", 100ms, 10ms, 3, std::nullopt));
    auto tokenized = streamed(r, "m", 100ms, 10ms, 3, std::nullopt);
    tokenized.normalized_input_tokens = 40'000;  // what the tokenizer work fills in
    r.record(tokenized);
    const std::string text = r.expose();
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_time_to_first_token_seconds_count{api="openai_chat",model="m",prompt_class="2k-8k"} 1)"))
        << text;
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_time_to_first_token_seconds_count{api="openai_chat",model="m",prompt_class="unknown"} 1)"))
        << text;
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_time_to_first_token_seconds_count{api="openai_chat",model="m",prompt_class="32k+"} 1)"))
        << text;
}

}  // namespace
}  // namespace tokenmeter::metrics
