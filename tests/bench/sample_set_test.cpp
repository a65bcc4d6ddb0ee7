#include "sample_set.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace tokenmeter::load {
namespace {

TEST(sample_set, quantiles_interpolate_between_ranks) {
    sample_set samples;
    for (int i = 1; i <= 101; ++i) {
        samples.add(i);
    }
    EXPECT_DOUBLE_EQ(samples.quantile(0.5), 51);
    EXPECT_DOUBLE_EQ(samples.quantile(0.99), 100);
    EXPECT_DOUBLE_EQ(samples.quantile(0), 1);
    EXPECT_DOUBLE_EQ(samples.mean(), 51);
    EXPECT_EQ(samples.count(), 101U);
}

TEST(sample_set, empty_is_nan) {
    sample_set samples;
    EXPECT_TRUE(std::isnan(samples.quantile(0.5)));
    EXPECT_TRUE(std::isnan(samples.mean()));
    EXPECT_TRUE(std::isnan(samples.max()));
}

TEST(sample_set, reservoir_keeps_exact_totals_and_a_fair_sample) {
    sample_set samples(1000);
    for (int i = 0; i < 100'000; ++i) {
        samples.add(i % 100);
    }
    EXPECT_EQ(samples.count(), 100'000U);
    EXPECT_DOUBLE_EQ(samples.max(), 99);
    EXPECT_NEAR(samples.quantile(0.5), 49.5, 6);
}

TEST(sample_set, median_ignores_nan) {
    EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
    EXPECT_DOUBLE_EQ(median({4, 1, NAN, 2, 3}), 2.5);
    EXPECT_TRUE(std::isnan(median({})));
}

}  // namespace
}  // namespace tokenmeter::load
