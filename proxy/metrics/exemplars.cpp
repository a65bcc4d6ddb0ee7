#include "metrics/exemplars.hpp"

#include <algorithm>

namespace tokenmeter::metrics {

void exemplar_buckets::offer(std::size_t bucket, const exemplar_source& from, double value) {
    if (bucket >= slots_.size()) {
        return;
    }
    std::lock_guard lock(mutex_);
    exemplar& slot = slots_[bucket];
    slot.trace = from.trace;
    slot.span = from.span;
    slot.value = value;
    slot.unix_ms = from.unix_ms;
}

std::vector<exemplar> exemplar_buckets::snapshot() const {
    std::lock_guard lock(mutex_);
    return slots_;
}

std::size_t bucket_of(const std::vector<double>& bounds, double value) noexcept {
    return static_cast<std::size_t>(std::lower_bound(bounds.begin(), bounds.end(), value) -
                                    bounds.begin());
}

std::string exemplar_store::key(std::string_view family, label_pairs& labels) {
    // By name, as the collected series lists them; each part behind its length, so that no two
    // label sets share a key whatever bytes a value holds.
    std::sort(labels.begin(), labels.end());
    std::string out;
    const auto put = [&out](std::string_view part) {
        out += std::to_string(part.size());
        out.push_back(':');
        out += part;
    };
    put(family);
    for (const auto& [name, value] : labels) {
        put(name);
        put(value);
    }
    return out;
}

exemplar_buckets& exemplar_store::series(std::string_view family, label_pairs labels,
                                         std::size_t buckets) {
    std::string k = key(family, labels);
    std::lock_guard lock(mutex_);
    auto found = series_.find(k);
    if (found == series_.end()) {
        found = series_.emplace(std::move(k), std::make_unique<exemplar_buckets>(buckets)).first;
    }
    return *found->second;
}

const exemplar_buckets* exemplar_store::find(std::string_view family, label_pairs labels) const {
    const std::string k = key(family, labels);
    std::lock_guard lock(mutex_);
    const auto found = series_.find(k);
    return found == series_.end() ? nullptr : found->second.get();
}

}  // namespace tokenmeter::metrics
