// metrics/status_board: what the admin status page shows (/status.json), kept in process: per
// model TTFT, ITL and TPOT quantiles over the last 1, 5 and 15 minutes (metrics/quantile_sketch,
// not the Prometheus buckets), output tokens per second by source, SLO (latency and availability)
// good ratio and burn rate over 5 minutes and 1 hour, the same per model as a series of points
// over the last 15 minutes for the page's charts, top tenants by tokens and by 429s, recent
// upstream errors, and a build and config summary. Fed once per request at its end; windows and
// series points are rings of time slots merged when the page asks. Asio-free; time comes from the
// summaries and an injected clock.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/time.hpp"
#include "meter/billing.hpp"
#include "meter/summary.hpp"
#include "metrics/quantile_sketch.hpp"

namespace tokenmeter::metrics {

class registry;
class billing_metrics;

struct status_options {
    // One slot of the windows: the 1-minute window is the current slot and the 5 before it.
    core::duration slot = std::chrono::seconds(10);
    // One point of the 15-minute series: a whole number of slots (rounded down, at least one).
    core::duration series_step = std::chrono::seconds(30);
    std::size_t recent_errors = 20;  // upstream errors listed
    std::size_t top_tenants = 10;    // tenants in each top list
    // Shown as they are under "config": app puts only what is safe to show there (no key,
    // token or password).
    std::vector<std::pair<std::string, std::string>> summary;
};

class status_board {
  public:
    // registry bounds the model label (and judges SLOs) and gives the bounds of the requests'
    // inter-token latency batches: with registry_options::fine_inter_token_latency (as app/ sets
    // it) ITL quantiles are within the sketch's bound, without it within the classic buckets.
    // billing, when set, bounds the tenant label as the tenant series do. wall_clock_ms: Unix
    // time for display.
    status_board(registry& metrics, billing_metrics* billing, const core::clock& clock,
                 std::function<std::int64_t()> wall_clock_ms, status_options options);

    // At the end of a request, with the counts meter::billed chose for it; tenant "" when the
    // request is not metered per tenant. Without counts: billed under the default policy.
    void record(const meter::request_summary& summary, const meter::billed_counts& counts,
                std::string_view tenant);
    void record(const meter::request_summary& summary, std::string_view tenant) {
        record(summary, meter::billed(summary), tenant);
    }
    // A request refused with 429 (the tenant over its provisioned throughput).
    void rate_limited(std::string_view tenant);
    void upstream_error(std::string_view reason);

    // The /status.json document (docs/status.md); each call gets the next sequence number.
    [[nodiscard]] nlohmann::json snapshot();
    [[nodiscard]] std::string snapshot_text();

  private:
    // One model in one slot: latencies (kept 15 minutes) and counts (kept 1 hour).
    struct latency_slot {
        quantile_sketch ttft, itl, tpot;
    };
    struct count_slot {
        std::uint64_t requests = 0;
        std::uint64_t output_reported = 0, output_native = 0, output_normalized = 0;
        std::uint64_t ttft_good = 0, ttft_bad = 0, tpot_good = 0, tpot_bad = 0;
        std::uint64_t availability_good = 0, availability_bad = 0;
        count_slot& operator+=(const count_slot& other) noexcept;
    };
    struct tenant_counts {
        std::uint64_t tokens = 0;
        std::uint64_t rate_limited = 0;
    };
    template <typename T>
    struct ring {
        std::vector<std::pair<std::int64_t, T>> slots;  // slot number, value
        explicit ring(std::size_t n) : slots(n, {-1, T{}}) {}
        T* at(std::int64_t number);
        template <typename F>
        void each_since(std::int64_t first, std::int64_t last, F&& f) const;
    };
    struct model_series {
        ring<latency_slot> latency;
        ring<count_slot> counts;
        double objective = 0;
        std::optional<double> ttft_target, tpot_target;
        std::optional<double> availability_objective;
        model_series(std::size_t latency_slots, std::size_t count_slots)
            : latency(latency_slots), counts(count_slots) {}
    };
    struct upstream_error_entry {
        std::int64_t at_unix_ms;
        std::string reason;
    };

    [[nodiscard]] std::int64_t slot_number(core::time_point t) const noexcept;
    [[nodiscard]] std::string tenant_label(std::string_view tenant, bool served = false);
    // The seconds the slots first..last cover up to now, not before the board started: a window
    // or point that ends with the current slot covers it so far.
    [[nodiscard]] double covered_seconds(std::int64_t first, std::int64_t last,
                                         core::time_point now) const;
    // What a window or a series point shows: the slots first..last merged.
    [[nodiscard]] static latency_slot merged_latency(const model_series& series, std::int64_t first,
                                                     std::int64_t last);
    [[nodiscard]] static count_slot summed_counts(const model_series& series, std::int64_t first,
                                                  std::int64_t last);
    [[nodiscard]] nlohmann::json model_json(const model_series& series, std::int64_t now_slot,
                                            core::time_point now) const;
    [[nodiscard]] nlohmann::json series_json(const model_series& series, std::int64_t now_slot,
                                             core::time_point now) const;
    void add_inter_token_latency(quantile_sketch& sketch,
                                 const meter::histogram_batch& batch) const;

    registry& metrics_;
    billing_metrics* billing_;
    const core::clock& clock_;
    std::function<std::int64_t()> wall_clock_ms_;
    status_options options_;
    core::time_point started_;
    std::int64_t started_unix_ms_;
    std::size_t slots_15m_;
    std::size_t slots_1h_;
    std::size_t series_step_slots_;  // slots per series point
    std::size_t series_points_;      // points in 15 minutes
    // Per inter-token latency batch bucket: the sketch bin it falls in (nullopt: counted as 0).
    std::vector<std::optional<int>> itl_bins_;
    std::atomic<std::uint64_t> sequence_{0};

    // One short lock per request end (and per 429 or upstream error), never per chunk: a request
    // end already takes several prometheus-cpp family locks, and the page reads rarely.
    std::mutex mutex_;
    std::map<std::string, model_series> models_;          // bounded by the model label
    ring<std::map<std::string, tenant_counts>> tenants_;  // bounded by the tenant label
    std::deque<upstream_error_entry> recent_errors_;
    std::map<std::string, std::uint64_t> error_totals_;  // reasons are a fixed set
};

}  // namespace tokenmeter::metrics
