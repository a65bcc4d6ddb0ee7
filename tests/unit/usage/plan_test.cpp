// usage/plan: the capacity plan from hand-made records whose every figure is worked out below.
#include "usage/plan.hpp"

#include <gtest/gtest.h>

namespace tokenmeter::usage {
namespace {

constexpr std::int64_t m0 = 1795266000000;  // 2026-11-21T13:00:00.000Z

usage_record rec(const std::string& id, std::int64_t start_s, std::optional<double> ttft_s,
                 std::int64_t end_s, std::uint64_t in, std::uint64_t out) {
    usage_record r;
    r.id = id;
    r.tenant = "team";
    r.model = "m";
    r.outcome = "complete";
    r.start_unix_ms = m0 + start_s * 1000;
    r.end_unix_ms = m0 + end_s * 1000;
    r.ttft_seconds = ttft_s;
    r.duration_seconds = static_cast<double>(end_s - start_s);
    r.input = {in, token_source::reported};
    r.output = {out, token_source::reported};
    return r;
}

std::vector<usage_record> load() {
    std::vector<usage_record> rs{
        // First token at 0:01, output spread to 0:11: all in minute 0.
        rec("1", 0, 1.0, 11, 100, 100),
        // Starts in minute 0, first token at 1:00: its tokens are all in minute 1.
        rec("2", 50, 10.0, 70, 200, 60),
        // Not streamed: input and output at its end, in minute 2.
        rec("3", 125, std::nullopt, 127, 30, 30),
    };
    auto dup = rs[0];
    dup.outcome = "crash_recovered";  // the same request again: counted once
    rs.push_back(dup);
    auto rejected = rec("4", 126, std::nullopt, 126, 999, 0);
    rejected.outcome = "rejected";  // never served: needs no capacity
    rs.push_back(rejected);
    auto other = rec("5", 10, 0.5, 12, 7, 8);
    other.model = "n";
    rs.push_back(other);
    return rs;
}

TEST(Plan, MixWindowsAndBandsAreExact) {
    plan_options o;
    o.band_size = 10;
    o.ttft_target_seconds = 5.0;
    o.tpot_target_seconds = 0.11;
    const auto plans = build_plan(load(), {}, o);
    ASSERT_EQ(plans.size(), 2U);
    const model_plan& p = plans[0];
    EXPECT_EQ(p.model, "m");
    EXPECT_EQ(p.requests, 3U);
    EXPECT_EQ(p.minutes, 3U);
    EXPECT_EQ(p.first_minute_unix_ms, m0);
    // Input 100, 200, 30; output 100, 60, 30 (nearest rank).
    EXPECT_DOUBLE_EQ(p.input.mean, 110.0);
    EXPECT_EQ(p.input.p50, 100U);
    EXPECT_EQ(p.input.p95, 200U);
    EXPECT_DOUBLE_EQ(p.output.mean, 190.0 / 3);
    EXPECT_EQ(p.output.p50, 60U);
    EXPECT_EQ(p.output.p95, 100U);
    // Tokens per minute 200, 260, 60 -> per second 3.33, 4.33, 1.
    EXPECT_DOUBLE_EQ(p.tokens_per_second.p50, 200.0 / 60);
    EXPECT_DOUBLE_EQ(p.tokens_per_second.p99, 260.0 / 60);
    EXPECT_DOUBLE_EQ(p.tokens_per_second.peak, 260.0 / 60);
    EXPECT_EQ(p.tokens_per_second.peak_minute_unix_ms, m0 + 60'000);
    // In flight: 11 s + 10 s in minute 0, 10 s in minute 1, 2 s in minute 2.
    EXPECT_DOUBLE_EQ(p.concurrency.peak, 21.0 / 60);
    EXPECT_EQ(p.concurrency.peak_minute_unix_ms, m0);
    EXPECT_DOUBLE_EQ(p.concurrency.p50, 10.0 / 60);
    // Starts: 2, 0, 1 per minute.
    EXPECT_DOUBLE_EQ(p.requests_per_second.peak, 2.0 / 60);
    EXPECT_DOUBLE_EQ(p.requests_per_second.p50, 1.0 / 60);
    // Bands of 10 tokens/s: the peak 4.33 needs 10; the reference mix at the peak request rate,
    // 2/60 x 2,304 = 76.8 tokens/s, needs 80.
    EXPECT_DOUBLE_EQ(p.band_tokens_per_second, 10.0);
    EXPECT_DOUBLE_EQ(p.reference_tokens_per_second, 2.0 / 60 * 2304);
    EXPECT_DOUBLE_EQ(p.reference_band_tokens_per_second, 80.0);
    // TTFT 1 s and 10 s against 5 s; TPOT 10/99 and 10/59 s against 0.11 s.
    ASSERT_TRUE(p.ttft);
    EXPECT_EQ(p.ttft->judged, 2U);
    EXPECT_EQ(p.ttft->good, 1U);
    ASSERT_TRUE(p.tpot);
    EXPECT_EQ(p.tpot->judged, 2U);
    EXPECT_EQ(p.tpot->good, 1U);
    EXPECT_EQ(plans[1].model, "n");
    EXPECT_EQ(plans[1].requests, 1U);
}

TEST(Plan, FiltersAndTheReferenceMixCanBeChanged) {
    plan_options o;
    o.reference_input = 1000;
    o.reference_output = 1000;
    report_filter f;
    f.model = "m";
    const auto plans = build_plan(load(), f, o);
    ASSERT_EQ(plans.size(), 1U);
    EXPECT_DOUBLE_EQ(plans[0].reference_tokens_per_second, 2.0 / 60 * 2000);
    EXPECT_DOUBLE_EQ(plans[0].reference_band_tokens_per_second, 100.0);  // 66.7 -> 100
    EXPECT_DOUBLE_EQ(plans[0].band_tokens_per_second, 100.0);
    const std::string text = format_plan(plans, o);
    EXPECT_NE(text.find("model m: 3 requests in 3 one-minute window(s)"), std::string::npos)
        << text;
    EXPECT_NE(text.find("1000 in + 1000 out"), std::string::npos) << text;
    const std::string json = plan_json(plans, o);
    EXPECT_NE(json.find("\"band_tokens_per_second\": 100.0"), std::string::npos) << json;
    EXPECT_TRUE(build_plan({}, {}, o).empty());
}

// The windows follow the records, not the time they span: one record of 31,700 years is 1.7e10
// one-minute windows, reported as a few runs of equal minutes.
TEST(Plan, ARecordSpanningMillenniaIsCheapAndExact) {
    constexpr std::int64_t span_ms = 1'000'000'000'000'000;
    usage_record r = rec("long", 0, 0.0, 0, 0, span_ms);  // one output token per millisecond
    r.start_unix_ms = 0;
    r.end_unix_ms = span_ms;
    const auto plans = build_plan({r}, {}, {});
    ASSERT_EQ(plans.size(), 1U);
    const model_plan& p = plans[0];
    EXPECT_EQ(p.minutes, 16'666'666'667U);  // the last minute holds the final 40 s
    EXPECT_NEAR(p.tokens_per_second.p50, 1000.0, 1e-6);
    EXPECT_NEAR(p.tokens_per_second.p99, 1000.0, 1e-6);
    EXPECT_NEAR(p.tokens_per_second.peak, 1000.0, 1e-6);
    EXPECT_EQ(p.tokens_per_second.peak_minute_unix_ms, 0);
    EXPECT_NEAR(p.concurrency.peak, 1.0, 1e-9);
    EXPECT_NEAR(p.requests_per_second.peak, 1.0 / 60, 1e-12);
    EXPECT_NEAR(p.requests_per_second.p50, 0.0, 1e-12);
}

}  // namespace
}  // namespace tokenmeter::usage
