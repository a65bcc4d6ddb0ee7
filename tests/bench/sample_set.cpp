#include "sample_set.hpp"

#include <algorithm>
#include <cmath>

namespace tokenmeter::load {

sample_set::sample_set(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

void sample_set::add(double value) {
    ++count_;
    sum_ += value;
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
    if (values_.size() < capacity_) {
        values_.push_back(value);
        sorted_ = false;
        return;
    }
    std::uniform_int_distribution<std::uint64_t> pick(0, count_ - 1);
    std::uint64_t slot = pick(random_);
    if (slot < capacity_) {
        values_[static_cast<std::size_t>(slot)] = value;
        sorted_ = false;
    }
}

double sample_set::mean() const noexcept {
    return count_ == 0 ? std::nan("") : sum_ / static_cast<double>(count_);
}

double sample_set::min() const noexcept {
    return count_ == 0 ? std::nan("") : min_;
}

double sample_set::max() const noexcept {
    return count_ == 0 ? std::nan("") : max_;
}

double sample_set::quantile(double q) const {
    if (values_.empty()) {
        return std::nan("");
    }
    if (!sorted_) {
        std::sort(values_.begin(), values_.end());
        sorted_ = true;
    }
    q = std::clamp(q, 0.0, 1.0);
    double position = q * static_cast<double>(values_.size() - 1);
    auto lower = static_cast<std::size_t>(std::floor(position));
    std::size_t upper = std::min(lower + 1, values_.size() - 1);
    double fraction = position - static_cast<double>(lower);
    return values_[lower] + (values_[upper] - values_[lower]) * fraction;
}

double median(std::vector<double> values) {
    std::erase_if(values, [](double v) { return std::isnan(v); });
    if (values.empty()) {
        return std::nan("");
    }
    std::sort(values.begin(), values.end());
    std::size_t mid = values.size() / 2;
    return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

}  // namespace tokenmeter::load
