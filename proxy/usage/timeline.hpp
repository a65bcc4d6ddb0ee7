// usage/timeline: amounts placed on the time line (at an instant, or spread evenly over an
// interval) and summed per fixed-size bucket (a UTC second, a minute). Work and memory follow
// the number of amounts, never the time they span: between two changes every whole bucket holds
// the same amount, so such buckets come out as one run.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace tokenmeter::usage {

class bucket_timeline {
  public:
    // `amount` at the instant at_ms.
    void add_at(double amount, std::int64_t at_ms);
    // `amount` spread evenly over [from_ms, to_ms); all of it at from_ms when to_ms <= from_ms.
    void add_spread(double amount, std::int64_t from_ms, std::int64_t to_ms);
    [[nodiscard]] bool empty() const noexcept { return changes_.empty(); }

    // first_bucket, how many buckets in a row, the amount in each of them.
    using run_fn = std::function<void(std::int64_t first_bucket, std::uint64_t buckets, double)>;
    // Every bucket (of bucket_ms, numbered from the epoch: the bucket of t is floor(t /
    // bucket_ms)) from first_bucket to last_bucket, and those of every change outside them, in
    // order, as runs of equal amounts; buckets between two changes form one run.
    void for_each_run(std::int64_t bucket_ms, std::int64_t first_bucket, std::int64_t last_bucket,
                      const run_fn& fn);
    // From the bucket of the first change to that of the last.
    void for_each_run(std::int64_t bucket_ms, const run_fn& fn) {
        for_each_run(bucket_ms, std::numeric_limits<std::int64_t>::max(),
                     std::numeric_limits<std::int64_t>::min(), fn);
    }

  private:
    struct change {
        std::int64_t at_ms = 0;
        double rate_delta = 0;  // amount per millisecond from at_ms on
        double amount = 0;      // amount at the instant at_ms
        int spreads_delta = 0;  // spreads starting (+1) or ending (-1) at at_ms
    };
    std::vector<change> changes_;
    bool sorted_ = true;
};

// The bucket of t, rounding down for times before the epoch.
std::int64_t bucket_of(std::int64_t t_ms, std::int64_t bucket_ms);

}  // namespace tokenmeter::usage
