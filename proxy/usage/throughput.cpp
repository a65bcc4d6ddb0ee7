#include "usage/throughput.hpp"

#include <algorithm>
#include <chrono>

namespace tokenmeter::usage {

provisioned_throughput::provisioned_throughput(const throughput_options& options)
    : enforce_(options.enforce),
      burst_seconds_(std::chrono::duration<double>(options.burst).count()) {
    for (const auto& [name, rate] : options.rates) {
        if (rate > 0) {
            rates_[name] = rate;
        }
    }
}

provisioned_throughput::bucket* provisioned_throughput::find(const std::string& tenant,
                                                             core::time_point now) {
    auto rate = rates_.find(tenant);
    if (rate == rates_.end()) {
        return nullptr;
    }
    bucket& b = buckets_[tenant];
    double capacity = rate->second * burst_seconds_;
    if (!b.started) {
        b.started = true;
        b.level = capacity;
        b.updated = now;
        return &b;
    }
    if (now > b.updated) {
        b.level = std::min(capacity, b.level + rate->second * core::to_seconds(now - b.updated));
        b.updated = now;
    }
    return &b;
}

admission provisioned_throughput::admit(const std::string& tenant, std::uint64_t reservation,
                                        core::time_point now) {
    if (!enforce_) {
        return {};
    }
    std::lock_guard lock(mutex_);
    bucket* b = find(tenant, now);
    if (b == nullptr) {
        return {};
    }
    if (b->level < 0) {
        return {false, -b->level / rates_.at(tenant), 0};
    }
    b->level -= static_cast<double>(reservation);
    return {true, 0, reservation};
}

void provisioned_throughput::charge(const std::string& tenant, std::uint64_t tokens,
                                    core::time_point now) {
    if (tokens == 0) {
        return;
    }
    std::lock_guard lock(mutex_);
    if (bucket* b = find(tenant, now)) {
        b->level -= static_cast<double>(tokens);
    }
}

void provisioned_throughput::adjust(const std::string& tenant, double tokens,
                                    core::time_point now) {
    std::lock_guard lock(mutex_);
    if (bucket* b = find(tenant, now)) {
        b->level = std::min(rates_.at(tenant) * burst_seconds_, b->level - tokens);
    }
}

double provisioned_throughput::level(const std::string& tenant, core::time_point now) {
    std::lock_guard lock(mutex_);
    bucket* b = find(tenant, now);
    return b == nullptr ? 0.0 : b->level;
}

}  // namespace tokenmeter::usage
