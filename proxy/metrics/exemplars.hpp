// metrics/exemplars: the exemplars of the latency histograms (OpenMetrics: a trace id and span
// id beside a bucket's sample). Each bucket of each series keeps one, the latest from a sampled
// request, replaced in place: memory is one slot per bucket, whatever the traffic. Written once
// per request at its end, never per token; read by a scrape.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/trace_context.hpp"

namespace tokenmeter::metrics {

// What a sampled request brings to the histograms it is observed in.
struct exemplar_source {
    core::trace_id trace{};
    core::span_id span{};
    std::int64_t unix_ms = 0;  // when the request was observed (its end)
};

struct exemplar {
    core::trace_id trace{};
    core::span_id span{};
    double value = 0.0;
    std::int64_t unix_ms = 0;  // 0: the bucket has none
    [[nodiscard]] bool empty() const noexcept { return unix_ms == 0; }
};

// The exemplars of one histogram series: one slot per bucket (the bounds, then +Inf).
class exemplar_buckets {
  public:
    explicit exemplar_buckets(std::size_t buckets) : slots_(buckets) {}
    // Keeps `value` with its request's trace in bucket `bucket`, replacing what was there.
    void offer(std::size_t bucket, const exemplar_source& from, double value);
    // A copy of every slot, by bucket.
    [[nodiscard]] std::vector<exemplar> snapshot() const;

  private:
    mutable std::mutex mutex_;
    std::vector<exemplar> slots_;
};

// The bucket of `bounds` (ascending upper bounds, +Inf implied after them) that holds `value`:
// the first bound at or above it, as Prometheus counts "le".
[[nodiscard]] std::size_t bucket_of(const std::vector<double>& bounds, double value) noexcept;

// Every histogram series' exemplars, by family name and label set. Series are made on first use
// and never removed (the registry's series are bounded, and so are these).
class exemplar_store {
  public:
    using label_pairs = std::vector<std::pair<std::string_view, std::string_view>>;
    // The series' slots, made with `buckets` slots the first time. The reference stays valid.
    exemplar_buckets& series(std::string_view family, label_pairs labels, std::size_t buckets);
    // Null when the series never had an exemplar.
    [[nodiscard]] const exemplar_buckets* find(std::string_view family, label_pairs labels) const;

  private:
    static std::string key(std::string_view family, label_pairs& labels);
    mutable std::mutex mutex_;
    std::unordered_map<std::string, std::unique_ptr<exemplar_buckets>> series_;
};

}  // namespace tokenmeter::metrics
