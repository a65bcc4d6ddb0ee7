// metrics/quantile_sketch: a relative-error quantile sketch (DDSketch's logarithmic bins) for the
// status page. A positive value v lands in bin i = ceil(16 * log2(v)), the interval
// (2^((i-1)/16), 2^(i/16)]: the boundaries of a Prometheus native histogram of schema 4. A
// quantile is answered with the point of its bin whose relative distance to both ends is equal,
// so it is within relative_error() = (g - 1) / (g + 1), g = 2^(1/16), about 2.17 %, of the
// value of that rank. Memory is the occupied bins only, at most max_bins().
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace tokenmeter::metrics {

class quantile_sketch {
  public:
    static constexpr int bins_per_octave = 16;
    // Values at or below 2^-30 (about 1 ns) count as 0; values above 2^40 in the top bin.
    static constexpr int min_bin = -30 * bins_per_octave + 1;
    static constexpr int max_bin = 40 * bins_per_octave;

    [[nodiscard]] static double relative_error() noexcept;
    [[nodiscard]] static constexpr std::size_t max_bins() noexcept {
        return static_cast<std::size_t>(max_bin - min_bin) + 1;
    }
    // The bin of a positive value (clamped to [min_bin, max_bin]); nullopt for a value counted
    // as 0 (or not a number).
    [[nodiscard]] static std::optional<int> bin_of(double value) noexcept;
    // The value a bin answers with: 2 * g^i / (g + 1).
    [[nodiscard]] static double value_of(int bin) noexcept;

    void add(double value, std::uint64_t times = 1);
    void add_bin(int bin, std::uint64_t times);
    void add_zero(std::uint64_t times) noexcept {
        zero_count_ += times;
        count_ += times;
    }
    void merge(const quantile_sketch& other);

    // The value of rank floor(q * (count - 1)) (0-based, ascending), within relative_error();
    // nullopt when empty. q is clamped to [0, 1].
    [[nodiscard]] std::optional<double> quantile(double q) const;
    [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
    [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
    [[nodiscard]] std::size_t occupied_bins() const noexcept { return bins_.size(); }

  private:
    std::vector<std::pair<int, std::uint64_t>> bins_;  // ascending by bin, counts > 0
    std::uint64_t zero_count_ = 0;
    std::uint64_t count_ = 0;
};

}  // namespace tokenmeter::metrics
