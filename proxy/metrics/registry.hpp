// metrics/registry: the Prometheus families tokenmeter exports, label bounding, and exposition.
// Observations arrive once per request (a summary), never once per token.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/shared_snapshot.hpp"
#include "meter/billing.hpp"
#include "meter/summary.hpp"
#include "metrics/exemplars.hpp"
#include "metrics/slo.hpp"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
struct MetricFamily;
}  // namespace prometheus

namespace tokenmeter::metrics {

// Keeps the `model` label bounded: an allowlist, or the first N distinct names that were
// served, then "other". A name takes one of the N slots only when `served` says the upstream
// answered it with 2xx (or it is configured): a client can send any number of invented names
// the upstream refuses, and they must not crowd out the real ones. Until then it is "other".
class model_labels {
  public:
    model_labels(std::vector<std::string> allowlist, std::uint32_t max_models);
    std::string label_for(std::string_view model, bool served = false);

  private:
    std::mutex mutex_;
    std::unordered_set<std::string> allowed_;
    bool fixed_;
    std::uint32_t max_models_;
};

class native_histograms;

// The labels of one series, in the order a call site gives them: views, no allocation.
class label_list {
  public:
    label_list(std::initializer_list<std::pair<std::string_view, std::string_view>> pairs) {
        for (const auto& [name, value] : pairs) {
            add(name, value);
        }
    }
    void add(std::string_view name, std::string_view value) {
        pairs_[size_++] = {name, value};  // at most `capacity`: every call site is fixed
    }
    [[nodiscard]] const std::pair<std::string_view, std::string_view>* begin() const noexcept {
        return pairs_.data();
    }
    [[nodiscard]] const std::pair<std::string_view, std::string_view>* end() const noexcept {
        return pairs_.data() + size_;
    }
    [[nodiscard]] std::map<std::string, std::string> to_map() const;

  private:
    static constexpr std::size_t capacity = 6;
    std::array<std::pair<std::string_view, std::string_view>, capacity> pairs_{};
    std::size_t size_ = 0;
};

// What the registry exports and how its labels are bounded (app translates config into it).
struct registry_options {
    std::vector<std::string> model_allowlist;  // when non-empty: only these, others "other"
    std::uint32_t max_models = 32;             // without allowlist: first N names, then "other"
    histogram_buckets buckets = default_buckets();
    // Upper bounds (input tokens, inclusive) of the TTFT histogram's prompt_class label.
    std::vector<std::uint64_t> prompt_classes = {512, 2048, 8192, 32768};
    bool native_histograms = false;  // also native histograms, in the protobuf exposition
    // Batch inter-token latencies at every native-histogram boundary (2^(k/16) s) even without
    // native histograms: the status page's sketch (metrics/status_board) reads the batch at that
    // resolution. Costs 16 bytes per request in flight for each bucket its gaps fall in (a few
    // dozen at most for a steady stream).
    bool fine_inter_token_latency = false;
};

// One request judged against its model's SLOs: set for each one it was counted for.
struct slo_verdict {
    std::optional<bool> ttft_good;
    std::optional<bool> tpot_good;
    double objective = 0;  // the entry's latency objective (when either is set)
    std::optional<double> ttft_target_seconds;
    std::optional<double> tpot_target_seconds;
    std::optional<bool> availability_good;         // unset: excluded, or no availability SLO
    std::optional<double> availability_objective;  // set when the entry has one
};

// The bucket boundaries of the per-request token histograms (OpenTelemetry's
// gen_ai.client.token.usage).
const std::vector<double>& token_usage_bounds();

class registry {
  public:
    // slo: the per-model latency objectives counted in tokenmeter_slo_requests_total; their
    // targets are added to the default bucket lists (buckets_with_slo_targets).
    explicit registry(const registry_options& options, const slo_options& slo = {});
    ~registry();
    registry(const registry&) = delete;
    registry& operator=(const registry&) = delete;

    // One finished request with the counts meter::billed chose for it (the same counts its
    // usage record and tenant counters get). Without counts: billed under the default policy.
    // `trace`: a sampled request's trace, kept as the exemplar of each bucket of the TTFT, ITL,
    // TPOT and request-duration histograms it lands in (null: none).
    void record(const meter::request_summary& summary, const meter::billed_counts& counts,
                const exemplar_source* trace = nullptr);
    void record(const meter::request_summary& summary) { record(summary, meter::billed(summary)); }
    // A request the proxy answered itself before it was metered (400, 413, 500 ...); counted for
    // availability like a metered one.
    void record_unforwarded(protocol::api_kind api, std::string_view model, meter::outcome result,
                            int code, double duration_seconds);

    // Replaces the SLO targets (SIGHUP). Bucket boundaries stay as they were at start.
    void set_slo(const slo_options& slo);

    void stream_opened();
    void stream_closed();
    [[nodiscard]] double streams_active() const;
    // The SLO verdict for one request (what tokenmeter_slo_requests_total counts), by the
    // bounded model label.
    [[nodiscard]] slo_verdict judge_slo(const std::string& model_label,
                                        const meter::request_summary& s);
    void upstream_error(std::string_view reason);
    // Families whose label takes a fixed, small set of values: each series is made at 0 from
    // start-up, so rate() and increase() see the first event.
    enum class fixed_labels : std::uint8_t { upstream_error_reason, metering_failure_phase };
    void start_at_zero(fixed_labels family, std::span<const std::string_view> values);
    // A failure inside metering (observe/guarded_observer), by the phase that threw.
    void metering_failure(std::string_view phase);
    // A request end too large for an I/O thread: queued for the finishing thread, or not
    // (its queue was full) and run in place.
    void finishing_thread_end(bool queued);
    void parse_errors(protocol::api_kind api, protocol::parse_error reason, std::uint64_t count);
    // Every reason of tokenmeter_parse_errors_total at 0 for these APIs.
    void start_parse_errors_at_zero(std::span<const protocol::api_kind> apis);

    // The bounds a request batches its inter-token latencies into (meter::histogram_batch): the
    // classic buckets, and with native histograms also every native boundary from 2^-17 s to
    // 2^8 s, so that the batch splits exactly into both.
    [[nodiscard]] const std::vector<double>& inter_token_latency_bounds() const noexcept {
        return itl_batch_bounds_;
    }
    [[nodiscard]] std::string expose() const;
    // The same families as OpenMetrics text (metrics/openmetrics), for a scraper that asks, with
    // the exemplars of the latency histograms.
    [[nodiscard]] std::string expose_openmetrics() const;
    // The protobuf exposition (metrics.native_histograms): every family, histograms with their
    // native buckets. Empty when native histograms are off.
    [[nodiscard]] std::string expose_protobuf() const;
    [[nodiscard]] bool native_histograms_enabled() const noexcept { return natives_ != nullptr; }
    // Every family that has at least one series (what expose() serializes).
    [[nodiscard]] std::vector<prometheus::MetricFamily> collect() const;
    [[nodiscard]] std::shared_ptr<prometheus::Registry> prometheus_registry() const {
        return registry_;
    }
    // The bounded `model` label value for a model name (the same bounding as every family). A
    // new name takes a slot only when `served` (the upstream answered it 2xx), as in record().
    std::string model_label(std::string_view model, bool served = false) {
        return models_.label_for(model, served);
    }

    // The prompt_class label for a prompt of this many input tokens (nullopt: "unknown").
    [[nodiscard]] const std::string& prompt_class(std::optional<std::uint64_t> input_tokens) const {
        return prompt_labels_[prompt_class_index(input_tokens)];
    }

  private:
    [[nodiscard]] std::size_t prompt_class_index(std::optional<std::uint64_t> input_tokens) const;

    // The series one (model label, api) pair's requests land in, each found once (see series()):
    // a slot is filled on first use, so a family shows a series only once it was observed.
    struct model_series;
    model_series& series_of(const std::string& model_label, protocol::api_kind api);
    // The metric in `slot`, found with series() and kept there the first time. From any worker:
    // series() gives the same metric for the same labels, so two threads that fill a slot at once
    // store the same pointer.
    template <typename T, typename... Extra>
    T& cached(std::atomic<T*>& slot, prometheus::Family<T>* family, const label_list& labels,
              const Extra&... extra);
    // observe(), through a slot; with `trace`, also its exemplar (through `exemplar_slot`).
    void observe(std::atomic<prometheus::Histogram*>& slot,
                 prometheus::Family<prometheus::Histogram>* family, const label_list& labels,
                 const std::vector<double>& bounds, double value,
                 std::atomic<exemplar_buckets*>* exemplar_slot = nullptr,
                 const exemplar_source* trace = nullptr);
    // The exemplar slots of a series, found once and kept in `slot`.
    exemplar_buckets& exemplars_of(std::atomic<exemplar_buckets*>& slot,
                                   prometheus::Family<prometheus::Histogram>* family,
                                   const label_list& labels, std::size_t buckets);

    const slo_target* slo_for(const slo_options& slo, const std::string& model_label);
    void count_slo(const std::string& model_label, const meter::request_summary& s);
    void count_slo_result(const std::string& model_label, std::string_view slo, bool good);
    std::string bounded_model(protocol::api_kind api, std::string_view model, bool served);
    void record_details(const std::string& model, model_series& m, const meter::request_summary& s,
                        const meter::billed_counts& counts, const exemplar_source* trace);
    void count_tokens(model_series& m, const label_list& labels, const meter::request_summary& s,
                      const meter::billed_counts& counts);
    void count_request(protocol::api_kind api, const std::string& model_label, model_series& m,
                       meter::outcome result, int code, double duration_seconds,
                       const exemplar_source* trace = nullptr);

    // Each observation of a histogram family, also into its native copy (when enabled).
    void observe(prometheus::Family<prometheus::Histogram>* family, const label_list& labels,
                 const std::vector<double>& bounds, double value);

    void observe_inter_token_latency(model_series& m, const label_list& labels,
                                     const meter::histogram_batch& batch,
                                     const exemplar_source* trace);

    // The series of `family` with these labels, found once and then kept (series are never
    // removed, so the reference stays valid): Family::Add builds a label map, hashes it and
    // locks the family on every call, and a request updates some twenty series.
    // `extra` is passed to Add when the series is new (a histogram's bucket bounds).
    template <typename T, typename... Extra>
    T& series(prometheus::Family<T>* family, const label_list& labels, const Extra&... extra);

    std::mutex series_mutex_;
    // Found by a key series() builds in place: the hash and the comparison take a string_view.
    // The hash reads the key a word at a time (registry.cpp). The map holds only the bounded
    // label sets the registry makes, so no input can crowd one bucket.
    struct series_key_hash {
        using is_transparent = void;
        std::size_t operator()(std::string_view key) const noexcept;
    };
    // family address and labels -> metric
    std::unordered_map<std::string, void*, series_key_hash, std::equal_to<>> series_;
    // api and model label -> its series (bounded as the model label is); under series_mutex_
    std::unordered_map<std::string, std::unique_ptr<model_series>, series_key_hash, std::equal_to<>>
        model_series_;

    histogram_buckets buckets_;
    model_labels models_;
    void register_families();  // metrics/registry_families.cpp

    std::unique_ptr<native_histograms> natives_;
    exemplar_store exemplars_;
    std::vector<double> itl_batch_bounds_;
    std::vector<std::size_t> itl_classic_index_;  // per batch bucket: its classic bucket
    std::vector<int> itl_native_index_;           // per batch bucket: its native bucket
    std::shared_ptr<prometheus::Registry> registry_;
    prometheus::Family<prometheus::Histogram>* ttft_ = nullptr;
    prometheus::Family<prometheus::Histogram>* ttfct_ = nullptr;
    prometheus::Family<prometheus::Histogram>* itl_ = nullptr;
    prometheus::Family<prometheus::Histogram>* tpot_ = nullptr;
    prometheus::Family<prometheus::Histogram>* output_tps_ = nullptr;
    prometheus::Family<prometheus::Histogram>* decode_tps_ = nullptr;
    prometheus::Family<prometheus::Histogram>* duration_ = nullptr;
    prometheus::Family<prometheus::Histogram>* normalized_tps_ = nullptr;
    prometheus::Family<prometheus::Histogram>* input_tokens_ = nullptr;  // per request, verbosity
    prometheus::Family<prometheus::Histogram>* output_tokens_ = nullptr;
    prometheus::Family<prometheus::Counter>* output_chars_ = nullptr;
    prometheus::Family<prometheus::Counter>* mismatch_ = nullptr;
    prometheus::Family<prometheus::Counter>* requests_ = nullptr;
    prometheus::Family<prometheus::Counter>* tokens_ = nullptr;  // billed: best source, once
    prometheus::Family<prometheus::Counter>* reasoning_tokens_ = nullptr;     // part of output
    prometheus::Family<prometheus::Counter>* cached_input_tokens_ = nullptr;  // part of input
    prometheus::Family<prometheus::Counter>* cache_write_tokens_ = nullptr;   // part of input
    prometheus::Family<prometheus::Counter>* reported_tokens_ =
        nullptr;  // per source, for comparison
    prometheus::Family<prometheus::Counter>* native_tokens_ = nullptr;
    prometheus::Family<prometheus::Counter>* normalized_tokens_ = nullptr;
    prometheus::Family<prometheus::Counter>* parse_errors_ = nullptr;
    prometheus::Family<prometheus::Counter>* upstream_errors_ = nullptr;
    prometheus::Family<prometheus::Counter>* metering_failures_ = nullptr;
    prometheus::Gauge* streams_active_ = nullptr;
    prometheus::Counter* finishing_queued_ = nullptr;
    prometheus::Counter* finishing_full_ = nullptr;

    core::shared_snapshot<const slo_options> slo_;
    std::vector<std::uint64_t> prompt_bounds_;
    std::vector<std::string> prompt_labels_;  // one per bound, then the open class, then unknown
    prometheus::Family<prometheus::Counter>* slo_requests_ = nullptr;
    prometheus::Family<prometheus::Gauge>* slo_objective_ = nullptr;
    prometheus::Family<prometheus::Gauge>* slo_target_ = nullptr;
};

}  // namespace tokenmeter::metrics
