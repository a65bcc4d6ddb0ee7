#include "usage/report.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "usage/spool.hpp"

namespace tokenmeter::usage {
namespace {

usage_record rec(std::string id, std::string tenant, std::int64_t start, std::int64_t end,
                 std::optional<double> ttft, std::uint64_t in, std::uint64_t out,
                 std::string outcome = "complete") {
    usage_record r;
    r.id = std::move(id);
    r.tenant = std::move(tenant);
    r.model = "m";
    r.start_unix_ms = start;
    r.end_unix_ms = end;
    r.ttft_seconds = ttft;
    r.input = {in, token_source::reported};
    r.output = {out, token_source::reported};
    r.outcome = std::move(outcome);
    return r;
}

TEST(UsageReport, TotalsAndPeakPerSecond) {
    // a: input 10 at t=1.0 s, 100 output spread evenly over [1.0 s, 3.0 s): 50 per second.
    // b: input 5 at t=2.5 s, 20 output over [2.5 s, 3.0 s) -> all in second 2.
    std::vector<usage_record> records{rec("a", "t", 0, 3000, 1.0, 10, 100),
                                      rec("b", "t", 2000, 3000, 0.5, 5, 20)};
    auto report = build_report(records, {});
    const auto& t = report.by_tenant.at("t");
    EXPECT_EQ(t.requests, 2u);
    EXPECT_EQ(t.input_tokens, 15u);
    EXPECT_EQ(t.output_tokens, 120u);
    // Second 1: 10 + 50 = 60. Second 2: 50 + 5 + 20 = 75.
    EXPECT_NEAR(t.peak_tokens_per_second, 75.0, 1e-9);
    EXPECT_EQ(t.peak_second_unix_ms, 2000);
}

// The work follows the records, not the time they span: a record of 31,700 years is two
// changes on the time line, not 10^12 seconds.
TEST(UsageReport, PeakOfRecordsSpanningMillenniaIsExactAndCheap) {
    constexpr std::int64_t span_ms = 1'000'000'000'000'000;
    // a: 10 input at t=0, then one output token per millisecond for the whole span.
    // b: 3000 output over 2 s in the middle of it, starting half a second into a second.
    std::vector<usage_record> records{
        rec("a", "t", 0, span_ms, 0.0, 10, 1'000'000'000'000'000),
        rec("b", "t", span_ms / 2 + 500, span_ms / 2 + 2500, 0.0, 0, 3000)};
    auto report = build_report(records, {});
    const auto& t = report.by_tenant.at("t");
    // b's middle second: 1000 from a, 1500 from b.
    EXPECT_NEAR(t.peak_tokens_per_second, 2500.0, 1e-6);
    EXPECT_EQ(t.peak_second_unix_ms, span_ms / 2 + 1000);
    const auto alone_report = build_report({records[0]}, {});
    const auto& alone = alone_report.by_tenant.at("t");
    EXPECT_NEAR(alone.peak_tokens_per_second, 1010.0, 1e-6);
    EXPECT_EQ(alone.peak_second_unix_ms, 0);
}

// A run of whole seconds between two changes is one candidate, at its first second; a second
// that holds a change is counted exactly, whatever part of it a record covers.
TEST(UsageReport, PeakBetweenAndAcrossChanges) {
    // a: 6000 output over [0.25 s, 6.25 s): 1000/s. b: 100 input at 3.5 s.
    std::vector<usage_record> records{rec("a", "t", 0, 6250, 0.25, 0, 6000),
                                      rec("b", "t", 3000, 3600, 0.5, 100, 0)};
    const auto both = build_report(records, {});
    const auto& t = both.by_tenant.at("t");
    EXPECT_NEAR(t.peak_tokens_per_second, 1100.0, 1e-9);
    EXPECT_EQ(t.peak_second_unix_ms, 3000);
    const auto alone = build_report({records[0]}, {});
    const auto& a = alone.by_tenant.at("t");
    EXPECT_NEAR(a.peak_tokens_per_second, 1000.0, 1e-9);
    EXPECT_EQ(a.peak_second_unix_ms, 1000);  // second 0 has 750, seconds 1 to 5 have 1000
}

// Counts and costs come from upstream reports: sums never wrap. Two records of 6 million units
// each are 12 million (past 64 bits of pico-units); token sums stop at the largest count.
TEST(UsageReport, SumsNeitherWrapNorTurnNegative) {
    std::vector<usage_record> records;
    for (const char* id : {"a", "b"}) {
        usage_record r = rec(id, "t", 0, 1000, 0.1, std::numeric_limits<std::uint64_t>::max(), 5);
        r.currency = "USD";
        r.cost_picos = std::int64_t{6'000'000} * 1'000'000'000'000;
        records.push_back(r);
    }
    auto report = build_report(records, {});
    const auto& t = report.by_tenant.at("t");
    EXPECT_EQ(t.input_tokens, std::numeric_limits<std::uint64_t>::max());
    EXPECT_EQ(t.output_tokens, 10u);
    EXPECT_EQ(format_amount_sum(t.cost_picos.at("USD")), "12000000");
}

TEST(UsageReport, DuplicateIdsCountOnceAndTheRealOutcomeWins) {
    std::vector<usage_record> records{rec("a", "t", 0, 1000, 0.1, 1, 5, "crash_recovered"),
                                      rec("a", "t", 0, 2000, 0.1, 1, 9, "complete"),
                                      rec("a", "t", 0, 2000, 0.1, 1, 9, "complete")};
    auto report = build_report(records, {});
    EXPECT_EQ(report.records, 1u);
    EXPECT_EQ(report.duplicates, 2u);
    EXPECT_EQ(report.by_tenant.at("t").output_tokens, 9u);
    EXPECT_EQ(report.by_tenant.at("t").outcomes.at("complete"), 1u);
}

TEST(UsageReport, FiltersByStartTimeTenantAndModel) {
    std::vector<usage_record> records{rec("a", "x", 1000, 2000, 0.1, 1, 1),
                                      rec("b", "x", 5000, 6000, 0.1, 1, 2),
                                      rec("c", "y", 5000, 6000, 0.1, 1, 4)};
    report_filter f;
    f.from_unix_ms = 2000;
    f.to_unix_ms = 6000;
    auto r = build_report(records, f);
    EXPECT_EQ(r.records, 2u);
    f.tenant = "x";
    r = build_report(records, f);
    EXPECT_EQ(r.records, 1u);
    EXPECT_EQ(r.by_tenant.at("x").output_tokens, 2u);
    f.model = "other";
    EXPECT_EQ(build_report(records, f).records, 0u);
}

}  // namespace
}  // namespace tokenmeter::usage
