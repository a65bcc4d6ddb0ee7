// observe/shared_limit: one tenant limit for the whole fleet. Each admission is one call of an
// atomic bucket script on a shared store (Redis, through outbound/redis_store); the end of a
// request settles the real tokens with one more call; nothing is sent per token. While the store
// fails, this replica's local bucket decides per on_error, and the tokens the store has not seen
// are kept and sent with the tenant's next successful call. Asio-free: the store is an interface,
// replies are data, so every decision is unit-tested with a fake store.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.hpp"
#include "usage/throughput.hpp"

namespace tokenmeter::metrics {
class shared_limit_metrics;
}  // namespace tokenmeter::metrics

namespace tokenmeter::observe {

// One call of the bucket script: KEYS[1] = key, ARGV = script_arguments(call).
struct shared_call {
    std::string key;
    double rate = 0;      // tokens per second
    double capacity = 0;  // bucket size, tokens
    double cost = 0;      // tokens charged now; negative gives back an estimate charged too high
    bool admit = false;   // an admission: refused, and nothing charged, while in debt
};

enum class store_failure : std::uint8_t { none, timeout, connection, script, reply };
std::string_view to_string(store_failure failure) noexcept;

struct store_reply {
    store_failure failure = store_failure::none;
    bool admitted = false;
    double level = 0;    // the bucket after the call (tokens; negative: in debt)
    double seconds = 0;  // round trip, answered or not
};

// The shared store. Thread-safe; `done` runs exactly once, on any thread, within the store's
// timeout (a failure when no answer came in time).
class shared_store {
  public:
    virtual ~shared_store() = default;
    virtual void call(const shared_call& call, std::function<void(const store_reply&)> done) = 0;
};

// The Lua text of the bucket (a token bucket that may go into debt, refilled from the store's
// own clock, so replicas need no synchronized clocks). Reply: {admitted 0|1, level as a string}.
std::string_view shared_limit_script() noexcept;
// ARGV for a call: rate, capacity, cost, "1"/"0" (admission), key expiry in milliseconds.
std::vector<std::string> script_arguments(const shared_call& call);
// The reply as the script sends it (an integer and a bulk string); failure `reply` when not.
store_reply read_script_reply(long long admitted, std::string_view level) noexcept;
// "<prefix>{<tenant>}:tokens": the braces make Redis Cluster keep one tenant's key on one slot.
std::string bucket_key(std::string_view prefix, std::string_view tenant);

enum class on_store_error : std::uint8_t { allow, deny };

struct shared_limit_options {
    std::string key_prefix = "tokenmeter:";
    on_store_error on_error = on_store_error::allow;
};

// A tenant admission under the shared limit.
struct shared_decision {
    usage::admission admission;
    bool shared = true;  // false: the store failed; the local bucket or on_error: deny decided
};

class shared_limiter {
  public:
    // `local` is this replica's own bucket: the fallback, and the source of rates and bursts.
    shared_limiter(shared_limit_options options, shared_store& store,
                   usage::provisioned_throughput& local, metrics::shared_limit_metrics* metrics);

    // Whether `tenant`'s admissions go through the store (enforcement on, a rate provisioned).
    [[nodiscard]] bool covers(const std::string& tenant) const;
    // Charges `estimate` tokens (the prompt) when admitted. `done` runs once, on any thread.
    void admit(const std::string& tenant, std::uint64_t estimate, core::time_point now,
               std::function<void(const shared_decision&)> done);
    // The request is over: `delta` = tokens used - the estimate charged at admission.
    void settle(const std::string& tenant, double delta, core::time_point now);
    // Tokens charged here that the store has not seen yet, over all tenants.
    [[nodiscard]] double unsynced_tokens() const;

  private:
    shared_call make_call(const std::string& tenant, double cost, bool admit) const;
    // Takes the tenant's unsynced tokens (sent with this call) / puts them back on failure.
    double take_unsynced(const std::string& tenant);
    void add_unsynced(const std::string& tenant, double tokens);
    void note_failure(const store_reply& reply);
    void note_success(const store_reply& reply);

    shared_limit_options options_;
    shared_store& store_;
    usage::provisioned_throughput& local_;
    metrics::shared_limit_metrics* metrics_;
    mutable std::mutex mutex_;
    std::map<std::string, double> unsynced_;
    double unsynced_total_ = 0;
};

}  // namespace tokenmeter::observe
