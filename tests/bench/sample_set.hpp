// sample_set: latency samples with exact count/sum/min/max and quantiles from a bounded reservoir,
// so a 600-second run cannot grow memory without limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace tokenmeter::load {

class sample_set {
  public:
    // Every sample is kept up to capacity; beyond that, uniform reservoir sampling (Algorithm R).
    explicit sample_set(std::size_t capacity = 1'000'000);

    void add(double value);

    [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
    [[nodiscard]] double sum() const noexcept { return sum_; }
    [[nodiscard]] double mean() const noexcept;
    [[nodiscard]] double min() const noexcept;
    [[nodiscard]] double max() const noexcept;
    // Linear interpolation between the closest ranks; NaN when empty.
    [[nodiscard]] double quantile(double q) const;

  private:
    std::size_t capacity_;
    std::uint64_t count_ = 0;
    double sum_ = 0;
    double min_ = std::numeric_limits<double>::infinity();
    double max_ = -std::numeric_limits<double>::infinity();
    mutable std::vector<double> values_;
    mutable bool sorted_ = true;
    std::mt19937_64 random_{0x746f6b656eULL};  // fixed seed: the same run gives the same report
};

// Median of a few per-round values; NaN when empty.
double median(std::vector<double> values);

}  // namespace tokenmeter::load
