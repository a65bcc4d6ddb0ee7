#include "metrics/quantile_sketch.hpp"

#include <algorithm>
#include <cmath>

namespace tokenmeter::metrics {
namespace {

const double growth = std::exp2(1.0 / quantile_sketch::bins_per_octave);

}  // namespace

double quantile_sketch::relative_error() noexcept {
    return (growth - 1.0) / (growth + 1.0);
}

std::optional<int> quantile_sketch::bin_of(double value) noexcept {
    // !(value > bound) also sends NaN to the zero count.
    if (!(value > std::exp2(static_cast<double>(min_bin - 1) / bins_per_octave))) {
        return std::nullopt;
    }
    const double exact = std::log2(value) * bins_per_octave;
    if (!(exact < static_cast<double>(max_bin))) {
        return max_bin;
    }
    return std::max(min_bin, static_cast<int>(std::ceil(exact)));
}

double quantile_sketch::value_of(int bin) noexcept {
    return 2.0 * std::exp2(static_cast<double>(bin) / bins_per_octave) / (growth + 1.0);
}

void quantile_sketch::add(double value, std::uint64_t times) {
    if (const auto bin = bin_of(value)) {
        add_bin(*bin, times);
    } else {
        add_zero(times);
    }
}

void quantile_sketch::add_bin(int bin, std::uint64_t times) {
    if (times == 0) {
        return;
    }
    bin = std::clamp(bin, min_bin, max_bin);
    const auto at = std::lower_bound(bins_.begin(), bins_.end(), bin,
                                     [](const auto& entry, int b) { return entry.first < b; });
    if (at != bins_.end() && at->first == bin) {
        at->second += times;
    } else {
        bins_.insert(at, {bin, times});
    }
    count_ += times;
}

void quantile_sketch::merge(const quantile_sketch& other) {
    if (other.empty()) {
        return;
    }
    std::vector<std::pair<int, std::uint64_t>> merged;
    merged.reserve(bins_.size() + other.bins_.size());
    auto a = bins_.begin();
    auto b = other.bins_.begin();
    while (a != bins_.end() || b != other.bins_.end()) {
        if (b == other.bins_.end() || (a != bins_.end() && a->first < b->first)) {
            merged.push_back(*a++);
        } else if (a == bins_.end() || b->first < a->first) {
            merged.push_back(*b++);
        } else {
            merged.emplace_back(a->first, a->second + b->second);
            ++a;
            ++b;
        }
    }
    bins_ = std::move(merged);
    zero_count_ += other.zero_count_;
    count_ += other.count_;
}

std::optional<double> quantile_sketch::quantile(double q) const {
    if (count_ == 0) {
        return std::nullopt;
    }
    q = std::isnan(q) ? 0.0 : std::clamp(q, 0.0, 1.0);
    const auto rank = static_cast<std::uint64_t>(std::floor(q * static_cast<double>(count_ - 1)));
    if (rank < zero_count_) {
        return 0.0;
    }
    std::uint64_t seen = zero_count_;
    for (const auto& [bin, n] : bins_) {
        seen += n;
        if (rank < seen) {
            return value_of(bin);
        }
    }
    return value_of(bins_.back().first);
}

}  // namespace tokenmeter::metrics
