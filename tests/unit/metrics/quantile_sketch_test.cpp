// The status page's sketch: every quantile within the stated relative error of the exact one (same
// rank), merging equals adding, and the edges (empty, zero, huge, NaN).
#include "metrics/quantile_sketch.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace tokenmeter::metrics {
namespace {

// The bound itself, plus rounding in the last bits of exp2/log2 (a value on a bin boundary is
// answered exactly at the bound).
double bound_for(double exact) {
    return quantile_sketch::relative_error() * (1 + 1e-9) * exact;
}

// The exact value of the rank the sketch answers: floor(q * (n - 1)), ascending.
double exact_quantile(const std::vector<double>& sorted, double q) {
    const auto rank =
        static_cast<std::size_t>(std::floor(q * static_cast<double>(sorted.size() - 1)));
    return sorted[rank];
}

void expect_within_bound(const quantile_sketch& sketch, std::vector<double> values) {
    std::sort(values.begin(), values.end());
    // The bound itself, plus rounding in the last bits of exp2/log2.
    const double bound = quantile_sketch::relative_error() * (1 + 1e-9);
    for (double q : {0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0}) {
        const double exact = exact_quantile(values, q);
        const auto estimate = sketch.quantile(q);
        ASSERT_TRUE(estimate.has_value());
        EXPECT_LE(std::abs(*estimate - exact), bound * exact)
            << "q=" << q << " exact=" << exact << " sketch=" << *estimate;
    }
}

TEST(QuantileSketch, StatedBound) {
    // (2^(1/16) - 1) / (2^(1/16) + 1): the number the docs give.
    EXPECT_NEAR(quantile_sketch::relative_error(), 0.02166, 0.00001);
}

TEST(QuantileSketch, RandomDataWithinTheBound) {
    std::mt19937_64 rng(16);
    // Log-normal latencies around 30 ms, uniform over six decades, and a narrow cluster.
    std::lognormal_distribution<double> lognormal(std::log(0.03), 1.0);
    std::uniform_real_distribution<double> exponent(-6.0, 0.0);
    std::normal_distribution<double> cluster(0.020, 0.0005);
    for (int kind = 0; kind < 3; ++kind) {
        std::vector<double> values;
        quantile_sketch sketch;
        for (int i = 0; i < 20000; ++i) {
            double v = kind == 0   ? lognormal(rng)
                       : kind == 1 ? std::pow(10.0, exponent(rng))
                                   : std::max(1e-6, cluster(rng));
            values.push_back(v);
            sketch.add(v);
        }
        EXPECT_EQ(sketch.count(), values.size());
        expect_within_bound(sketch, values);
        std::sort(values.begin(), values.end());
        double worst = 0;
        for (int i = 0; i <= 1000; ++i) {
            const double q = i / 1000.0;
            const double exact = exact_quantile(values, q);
            worst = std::max(worst, std::abs(*sketch.quantile(q) - exact) / exact);
        }
        EXPECT_LE(worst, quantile_sketch::relative_error() * (1 + 1e-9));
        RecordProperty("worst_relative_error_kind_" + std::to_string(kind), std::to_string(worst));
    }
}

TEST(QuantileSketch, MergeEqualsAddingEverything) {
    std::mt19937_64 rng(7);
    std::exponential_distribution<double> gaps(50.0);
    quantile_sketch whole;
    quantile_sketch parts[4];
    std::vector<double> values;
    for (int i = 0; i < 8000; ++i) {
        const double v = gaps(rng);
        values.push_back(v);
        whole.add(v);
        parts[i % 4].add(v);
    }
    quantile_sketch merged;
    for (const auto& part : parts) {
        merged.merge(part);
    }
    merged.merge(quantile_sketch{});
    EXPECT_EQ(merged.count(), whole.count());
    EXPECT_EQ(merged.occupied_bins(), whole.occupied_bins());
    for (double q : {0.0, 0.5, 0.9, 0.99, 1.0}) {
        EXPECT_EQ(merged.quantile(q), whole.quantile(q)) << q;
    }
    expect_within_bound(merged, values);
}

TEST(QuantileSketch, EmptyHasNoQuantile) {
    quantile_sketch sketch;
    EXPECT_TRUE(sketch.empty());
    EXPECT_FALSE(sketch.quantile(0.5).has_value());
    EXPECT_FALSE(sketch.quantile(0.99).has_value());
}

TEST(QuantileSketch, ZeroAndTinyValuesAreZero) {
    quantile_sketch sketch;
    sketch.add(0.0, 3);
    sketch.add(1e-12);
    sketch.add(-5.0);
    sketch.add(std::numeric_limits<double>::quiet_NaN());
    sketch.add(1.0);
    EXPECT_EQ(sketch.count(), 7u);
    EXPECT_EQ(sketch.quantile(0.5), 0.0);
    EXPECT_NEAR(*sketch.quantile(1.0), 1.0, bound_for(1.0));
}

TEST(QuantileSketch, ExtremesAreClampedNotLost) {
    quantile_sketch sketch;
    sketch.add(1e300);
    sketch.add(std::numeric_limits<double>::infinity());
    sketch.add(1e-8);  // about 10 ns: still a bin of its own
    EXPECT_EQ(sketch.count(), 3u);
    EXPECT_EQ(sketch.occupied_bins(), 2u);
    EXPECT_NEAR(*sketch.quantile(0.0), 1e-8, bound_for(1e-8));
    EXPECT_EQ(*sketch.quantile(1.0), quantile_sketch::value_of(quantile_sketch::max_bin));
    // Out-of-range q is clamped.
    EXPECT_EQ(sketch.quantile(-1.0), sketch.quantile(0.0));
    EXPECT_EQ(sketch.quantile(2.0), sketch.quantile(1.0));
    EXPECT_EQ(sketch.quantile(std::numeric_limits<double>::quiet_NaN()), sketch.quantile(0.0));
}

TEST(QuantileSketch, SingleValueAndRepeats) {
    quantile_sketch sketch;
    sketch.add(0.25, 1000);
    for (double q : {0.0, 0.5, 1.0}) {
        EXPECT_NEAR(*sketch.quantile(q), 0.25, bound_for(0.25));
    }
    EXPECT_EQ(sketch.occupied_bins(), 1u);
}

TEST(QuantileSketch, BinsAreNativeHistogramBuckets) {
    // 2^(k/16) is the upper end of bin k (a Prometheus native histogram of schema 4).
    EXPECT_EQ(quantile_sketch::bin_of(1.0), 0);
    EXPECT_EQ(quantile_sketch::bin_of(1.0001), 1);
    EXPECT_EQ(quantile_sketch::bin_of(0.5), -16);
    EXPECT_EQ(quantile_sketch::bin_of(2.0), 16);
    EXPECT_FALSE(quantile_sketch::bin_of(0.0).has_value());
    EXPECT_LE(quantile_sketch::max_bins(), 1200u);
}

}  // namespace
}  // namespace tokenmeter::metrics
