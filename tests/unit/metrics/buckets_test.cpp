// metrics/slo: the default bucket boundaries and the MLPerf presets.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "metrics/slo.hpp"

namespace tokenmeter::metrics {
namespace {

using namespace std::chrono_literals;

// Issue 15: a median read with histogram_quantile must be within 10 % of the truth from 5 ms to
// 60 s (TTFT, duration) and from 1 ms to 2.5 s (ITL, TPOT). Linear interpolation inside a bucket
// (a, r*a] is off by at most (r - 1) / 2 for a median, so every ratio must stay below 1.2, and
// the range must be covered by finite buckets on both sides.
void expect_fine(const std::vector<double>& bounds, double low, double high, std::size_t count) {
    ASSERT_EQ(bounds.size(), count) << "docs/metrics.md documents the series count";
    ASSERT_TRUE(std::is_sorted(bounds.begin(), bounds.end()));
    EXPECT_LE(bounds.front(), low / 1.19);
    EXPECT_GE(bounds.back(), high);
    for (std::size_t i = 1; i < bounds.size(); ++i) {
        const double ratio = bounds[i] / bounds[i - 1];
        EXPECT_LT((ratio - 1) / 2, 0.0952) << bounds[i - 1] << " to " << bounds[i];
        EXPECT_GT(ratio, 1.18) << bounds[i - 1] << " to " << bounds[i];
    }
}

TEST(Buckets, DefaultsAreFineEnoughForTenPercentMedians) {
    const histogram_buckets b = default_buckets();
    expect_fine(b.time_to_first_token, 0.005, 60, 57);
    expect_fine(b.request_duration, 0.005, 60, 65);
    expect_fine(b.inter_token_latency, 0.001, 2.5, 48);
    EXPECT_EQ(b.time_per_output_token, b.inter_token_latency);
    // Powers of two are exact boundaries (they are a native histogram's boundaries too).
    for (const double exact : {0.25, 0.5, 1.0, 2.0}) {
        EXPECT_TRUE(std::find(b.time_to_first_token.begin(), b.time_to_first_token.end(), exact) !=
                    b.time_to_first_token.end())
            << exact;
    }
    const std::vector<double> rates{1,   2,   5,   10,  20,  30,   40,   50,  75,
                                    100, 150, 200, 300, 500, 1000, 2000, 5000};
    EXPECT_EQ(b.output_tokens_per_second, rates);
    EXPECT_EQ(b.decode_tokens_per_second, rates);
}

TEST(Slo, PresetsAreTheMlperfScenarios) {
    const auto server = slo_preset("server");
    ASSERT_TRUE(server);
    EXPECT_EQ(server->ttft, 2000ms);
    EXPECT_EQ(server->tpot, 100ms);
    const auto interactive = slo_preset("interactive");
    ASSERT_TRUE(interactive);
    EXPECT_EQ(interactive->ttft, 500ms);
    EXPECT_EQ(interactive->tpot, 30ms);
    EXPECT_FALSE(slo_preset("offline"));
}

TEST(Slo, ObjectiveIsTheEntrysElseTheDefault) {
    slo_options slo;
    slo.objective = 0.995;
    EXPECT_DOUBLE_EQ(slo_objective(slo, slo_target{}), 0.995);
    EXPECT_DOUBLE_EQ(slo_objective(slo, slo_target{std::nullopt, std::nullopt, 0.9, std::nullopt}), 0.9);
}

// A list equal to its default counts as the default, however it was given.
TEST(Slo, TargetsJoinOnlyDefaultLists) {
    slo_options slo;
    slo.models["a"] = *slo_preset("server");
    histogram_buckets custom = default_buckets();
    const histogram_buckets same = buckets_with_slo_targets(custom, slo);
    EXPECT_EQ(same.time_per_output_token.size(), custom.time_per_output_token.size() + 1);
    custom.time_per_output_token = {0.05, 0.5};
    const histogram_buckets kept = buckets_with_slo_targets(custom, slo);
    EXPECT_EQ(kept.time_per_output_token, (std::vector<double>{0.05, 0.5}));
    const auto misses = slo_targets_off_buckets(custom, slo);
    ASSERT_EQ(misses.size(), 1u);
    EXPECT_EQ(misses[0].model, "a");
    EXPECT_EQ(misses[0].target, "tpot");
    EXPECT_EQ(misses[0].list, "time_per_output_token");
    EXPECT_DOUBLE_EQ(misses[0].seconds, 0.1);
}

}  // namespace
}  // namespace tokenmeter::metrics
