#include "observe/shared_limit.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <string>
#include <utility>

#include "metrics/shared_limit.hpp"

namespace tokenmeter::observe {
namespace {

// KEYS[1]: the tenant's bucket (a hash: level, at). ARGV: rate, capacity, cost, admit.
// The store's clock (TIME) refills it, so replicas' clocks never meet. An admission is refused
// while the level is negative and then charges nothing; otherwise the cost is charged even into
// debt (admission charges an estimate before the output is known). The key expires once it
// would be full again, so idle tenants cost no memory.
constexpr std::string_view script_text = R"lua(
if redis.replicate_commands then redis.replicate_commands() end
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local admit = ARGV[4] == '1'
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local stored = redis.call('HMGET', KEYS[1], 'level', 'at')
local level = tonumber(stored[1])
local at = tonumber(stored[2])
if level == nil or at == nil then
  level = capacity
  at = now
end
if now > at then
  level = math.min(capacity, level + (now - at) * rate)
  at = now
end
local admitted = 1
if admit and level < 0 then
  admitted = 0
else
  level = math.min(capacity, level - cost)
end
redis.call('HSET', KEYS[1], 'level', string.format('%.6f', level), 'at', string.format('%.6f', at))
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - level) / rate * 1000) + 1000)
return {admitted, string.format('%.6f', level), ARGV[5]}
)lua";

std::string number(double value) {
    std::array<char, 64> buffer{};
    auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value,
                                   std::chars_format::fixed, 6);
    return ec == std::errc{} ? std::string(buffer.data(), end) : std::string("0");
}

}  // namespace

std::string_view to_string(store_failure failure) noexcept {
    switch (failure) {
        case store_failure::none:
            return "none";
        case store_failure::timeout:
            return "timeout";
        case store_failure::connection:
            return "connection";
        case store_failure::script:
            return "script";
        case store_failure::reply:
            return "reply";
    }
    return "reply";
}

std::string_view shared_limit_script() noexcept {
    return script_text;
}

std::vector<std::string> script_arguments(const shared_call& call) {
    return {number(call.rate), number(call.capacity), number(call.cost), call.admit ? "1" : "0"};
}

store_reply read_script_reply(long long admitted, std::string_view level) noexcept {
    store_reply reply;
    double value = 0;
    auto [end, ec] = std::from_chars(level.data(), level.data() + level.size(), value);
    if (ec != std::errc{} || end != level.data() + level.size() || !std::isfinite(value) ||
        (admitted != 0 && admitted != 1)) {
        reply.failure = store_failure::reply;
        return reply;
    }
    reply.admitted = admitted == 1;
    reply.level = value;
    return reply;
}

std::string bucket_key(std::string_view prefix, std::string_view tenant) {
    std::string key;
    key.reserve(prefix.size() + tenant.size() + 10);
    key.append(prefix).append("{").append(tenant).append("}:tokens");
    return key;
}

shared_limiter::shared_limiter(shared_limit_options options, shared_store& store,
                               usage::provisioned_throughput& local,
                               metrics::shared_limit_metrics* metrics)
    : options_(std::move(options)), store_(store), local_(local), metrics_(metrics) {
    if (metrics_ != nullptr) {
        metrics_->set_in_use(true);
        metrics_->set_unsynced_tokens(0);
    }
}

bool shared_limiter::covers(const std::string& tenant) const {
    return local_.enforced() && local_.rates().contains(tenant);
}

shared_call shared_limiter::make_call(const std::string& tenant, double cost, bool admit) const {
    shared_call call;
    call.key = bucket_key(options_.key_prefix, tenant);
    call.rate = local_.rates().at(tenant);
    call.capacity = call.rate * local_.burst_seconds();
    call.cost = cost;
    call.admit = admit;
    return call;
}

void shared_limiter::admit(const std::string& tenant, std::uint64_t estimate, core::time_point now,
                           std::function<void(const shared_decision&)> done) {
    const double unsynced = take_unsynced(tenant);
    const auto cost = static_cast<double>(estimate);
    const double rate = local_.rates().at(tenant);
    store_.call(make_call(tenant, cost + unsynced, true), [this, tenant, cost, unsynced, rate, now,
                                                           done = std::move(done)](
                                                              const store_reply& reply) {
        shared_decision decision;
        if (reply.failure == store_failure::none) {
            note_success(reply);
            decision.admission.admitted = reply.admitted;
            if (!reply.admitted) {
                // Nothing was charged: the unsynced tokens go with the next call.
                add_unsynced(tenant, unsynced);
                decision.admission.retry_after_seconds = -reply.level / rate;
            } else {
                local_.adjust(tenant, cost, now);
            }
        } else {
            note_failure(reply);
            decision.shared = false;
            if (options_.on_error == on_store_error::deny) {
                decision.admission = {false, 1.0, 0};
                add_unsynced(tenant, unsynced);
            } else {
                decision.admission = local_.admit(tenant, 0, now);  // charged just below
                if (decision.admission.admitted) {
                    local_.adjust(tenant, cost, now);
                }
                add_unsynced(tenant, unsynced + (decision.admission.admitted ? cost : 0));
            }
        }
        if (metrics_ != nullptr) {
            metrics_->decision(decision.admission.admitted, decision.shared);
        }
        done(decision);
    });
}

void shared_limiter::settle(const std::string& tenant, double delta, core::time_point now) {
    local_.adjust(tenant, delta, now);
    const double cost = delta + take_unsynced(tenant);
    if (cost == 0) {
        return;
    }
    store_.call(make_call(tenant, cost, false), [this, tenant, cost](const store_reply& reply) {
        if (reply.failure == store_failure::none) {
            note_success(reply);
        } else {
            note_failure(reply);
            add_unsynced(tenant, cost);
        }
    });
}

double shared_limiter::unsynced_tokens() const {
    std::lock_guard lock(mutex_);
    return unsynced_total_;
}

double shared_limiter::take_unsynced(const std::string& tenant) {
    std::lock_guard lock(mutex_);
    auto it = unsynced_.find(tenant);
    if (it == unsynced_.end()) {
        return 0;
    }
    const double tokens = it->second;
    unsynced_total_ -= tokens;
    unsynced_.erase(it);
    if (metrics_ != nullptr) {
        metrics_->set_unsynced_tokens(unsynced_total_);
    }
    return tokens;
}

void shared_limiter::add_unsynced(const std::string& tenant, double tokens) {
    if (tokens == 0) {
        return;
    }
    std::lock_guard lock(mutex_);
    unsynced_[tenant] += tokens;
    unsynced_total_ += tokens;
    if (metrics_ != nullptr) {
        metrics_->set_unsynced_tokens(unsynced_total_);
    }
}

void shared_limiter::note_failure(const store_reply& reply) {
    if (metrics_ != nullptr) {
        metrics_->error(to_string(reply.failure));
        metrics_->set_in_use(false);
        if (reply.seconds > 0) {
            metrics_->round_trip(reply.seconds);
        }
    }
}

void shared_limiter::note_success(const store_reply& reply) {
    if (metrics_ != nullptr) {
        metrics_->set_in_use(true);
        metrics_->round_trip(reply.seconds);
    }
}

}  // namespace tokenmeter::observe
