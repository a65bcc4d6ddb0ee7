#include "usage/timeline.hpp"

#include <algorithm>

namespace tokenmeter::usage {

std::int64_t bucket_of(std::int64_t t_ms, std::int64_t bucket_ms) {
    return (t_ms >= 0 ? t_ms : t_ms - (bucket_ms - 1)) / bucket_ms;
}

void bucket_timeline::add_at(double amount, std::int64_t at_ms) {
    if (amount <= 0) {
        return;
    }
    sorted_ = sorted_ && (changes_.empty() || changes_.back().at_ms <= at_ms);
    changes_.push_back({at_ms, 0, amount, 0});
}

void bucket_timeline::add_spread(double amount, std::int64_t from_ms, std::int64_t to_ms) {
    if (to_ms <= from_ms) {
        add_at(amount, from_ms);
        return;
    }
    if (amount <= 0) {
        return;
    }
    // In long double: the span of a hostile record can exceed a double's exact integers.
    const auto rate = static_cast<double>(static_cast<long double>(amount) /
                                          (static_cast<long double>(to_ms) - from_ms));
    changes_.push_back({from_ms, rate, 0, 1});
    changes_.push_back({to_ms, -rate, 0, -1});
    sorted_ = false;
}

void bucket_timeline::for_each_run(std::int64_t bucket_ms, std::int64_t first_bucket,
                                   std::int64_t last_bucket, const run_fn& fn) {
    if (!sorted_) {
        std::stable_sort(changes_.begin(), changes_.end(),
                         [](const change& a, const change& b) { return a.at_ms < b.at_ms; });
        sorted_ = true;
    }
    if (!changes_.empty()) {
        first_bucket = std::min(first_bucket, bucket_of(changes_.front().at_ms, bucket_ms));
        last_bucket = std::max(last_bucket, bucket_of(changes_.back().at_ms, bucket_ms));
    }
    long double rate = 0;  // amount per millisecond after the changes so far
    int spreads = 0;
    std::int64_t next = first_bucket;  // the first bucket not yet reported
    std::size_t i = 0;
    while (i < changes_.size()) {
        const std::int64_t bucket = bucket_of(changes_[i].at_ms, bucket_ms);
        if (bucket > next) {
            fn(next, static_cast<std::uint64_t>(bucket - next),
               static_cast<double>(rate * static_cast<long double>(bucket_ms)));
        }
        const std::int64_t bucket_start = bucket * bucket_ms;
        long double amount = 0;
        std::int64_t t = bucket_start;
        for (; i < changes_.size() && bucket_of(changes_[i].at_ms, bucket_ms) == bucket; ++i) {
            amount += rate * static_cast<long double>(changes_[i].at_ms - t);
            t = changes_[i].at_ms;
            amount += changes_[i].amount;
            rate += changes_[i].rate_delta;
            spreads += changes_[i].spreads_delta;
            if (spreads == 0) {
                rate = 0;  // nothing in flight: no rounding left over
            }
        }
        amount += rate * static_cast<long double>(bucket_start + bucket_ms - t);
        fn(bucket, 1, static_cast<double>(amount));
        next = bucket + 1;
    }
    if (next <= last_bucket) {
        fn(next, static_cast<std::uint64_t>(last_bucket - next) + 1, 0.0);
    }
}

}  // namespace tokenmeter::usage
