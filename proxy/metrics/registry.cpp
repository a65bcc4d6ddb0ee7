#include "metrics/registry.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

#include "meter/billing.hpp"
#include "metrics/itl_batch.hpp"
#include "metrics/native_histogram.hpp"
#include "metrics/openmetrics.hpp"

namespace tokenmeter::metrics {
namespace {

constexpr std::size_t max_model_label_length = 128;

std::string code_label(int code) {
    return code <= 0 ? "0" : std::to_string(code);
}

// 2048 -> "2k", 512 -> "512": short, and still exact (only whole multiples of 1024 are shortened).
std::string token_count_label(std::uint64_t n) {
    if (n >= 1024 && n % 1024 == 0) {
        return std::to_string(n / 1024) + "k";
    }
    return std::to_string(n);
}

// "0-512", "512-2k", ..., "32k+": the range of input tokens a class holds (upper bound included).
std::vector<std::string> prompt_class_labels(const std::vector<std::uint64_t>& bounds) {
    std::vector<std::string> out;
    std::string lower = "0";
    for (const std::uint64_t b : bounds) {
        out.emplace_back(lower + "-" + token_count_label(b));
        lower = token_count_label(b);
    }
    out.emplace_back(lower + "+");
    out.emplace_back("unknown");
    return out;
}

double seconds_of(std::chrono::milliseconds d) {
    return static_cast<double>(d.count()) / 1000.0;
}

}  // namespace

std::map<std::string, std::string> label_list::to_map() const {
    std::map<std::string, std::string> labels;
    for (const auto& [name, value] : *this) {
        labels.emplace(name, value);
    }
    return labels;
}

namespace {

// Copies n bytes (sizeof(Word) <= n <= 2 * sizeof(Word)) as two words, which may overlap.
template <typename Word>
inline void copy_two_words(char* out, const char* from, std::size_t n) noexcept {
    Word head{};
    Word tail{};
    std::memcpy(&head, from, sizeof head);
    std::memcpy(&tail, from + n - sizeof tail, sizeof tail);
    std::memcpy(out, &head, sizeof head);
    std::memcpy(out + n - sizeof tail, &tail, sizeof tail);
}

// Copies n bytes with at most two loads and stores each when n <= 16 (label names and values
// mostly are), else memcpy: a call per piece cost more than the rest of a lookup.
inline char* put_bytes(char* out, const char* from, std::size_t n) noexcept {
    if (n >= 8 && n <= 16) {
        copy_two_words<std::uint64_t>(out, from, n);
    } else if (n >= 4 && n < 8) {
        copy_two_words<std::uint32_t>(out, from, n);
    } else if (n < 4) {
        for (std::size_t i = 0; i < n; ++i) {
            out[i] = from[i];
        }
    } else {
        std::memcpy(out, from, n);
    }
    return out + n;
}

}  // namespace

// A key is a family's address and a few short labels: a multiply and a shift per 8 bytes (the
// last word overlapping the one before it) cost a fraction of std::hash's call. Every key holds
// at least the address, so it has 8 bytes.
std::size_t registry::series_key_hash::operator()(std::string_view key) const noexcept {
    constexpr std::uint64_t multiplier = 0x9E3779B97F4A7C15ULL;
    std::uint64_t h = key.size() * multiplier;
    const auto mix = [&h](const char* at) {
        std::uint64_t word = 0;
        std::memcpy(&word, at, sizeof word);
        h = (h ^ word) * multiplier;
        h ^= h >> 29U;
    };
    std::size_t i = 0;
    for (; i + 8 <= key.size(); i += 8) {
        mix(key.data() + i);
    }
    if (i < key.size() && key.size() >= 8) {
        mix(key.data() + key.size() - 8);
    }
    return static_cast<std::size_t>(h);
}

template <typename T, typename... Extra>
T& registry::series(prometheus::Family<T>* family, const label_list& labels,
                    const Extra&... extra) {
    // The key: the family's address, then each name and value behind its length, so that no two
    // label sets share a key whatever bytes a value holds. Built on the stack (a model label is
    // at most 128 bytes, so every set the registry makes fits), on the heap past that.
    std::size_t size = sizeof family;  // NOLINT(bugprone-sizeof-expression): the address is key
    for (const auto& [name, value] : labels) {
        size += 2 * sizeof(std::uint32_t) + name.size() + value.size();
    }
    std::array<char, 512> stack_buffer;  // NOLINT(cppcoreguidelines-pro-type-member-init)
    std::string heap_buffer;
    char* key_data = stack_buffer.data();
    if (size > stack_buffer.size()) {
        heap_buffer.resize(size);
        key_data = heap_buffer.data();
    }
    // NOLINTNEXTLINE(bugprone-sizeof-expression): the family's address is the key's first part
    char* out = put_bytes(key_data, reinterpret_cast<const char*>(&family), sizeof family);
    const auto put = [&out](std::string_view text) {
        const auto length = static_cast<std::uint32_t>(text.size());
        out = put_bytes(out, reinterpret_cast<const char*>(&length), sizeof length);
        out = put_bytes(out, text.data(), text.size());
    };
    for (const auto& [name, value] : labels) {
        put(name);
        put(value);
    }
    const std::string_view key(key_data, size);
    std::lock_guard lock(series_mutex_);
    if (const auto found = series_.find(key); found != series_.end()) {
        return *static_cast<T*>(found->second);
    }
    T& metric = family->Add(labels.to_map(), extra...);
    series_.emplace(std::string(key), &metric);
    return metric;
}

// Token sources (meter::token_source) and outcomes (meter::outcome), as slot indexes: one slot
// per enumerator, so a new enumerator must grow these.
constexpr std::size_t token_sources = 6;
constexpr std::size_t outcomes = 5;
static_assert(static_cast<std::size_t>(meter::token_source::unbilled) + 1 == token_sources);
static_assert(static_cast<std::size_t>(meter::outcome::rejected) + 1 == outcomes);

struct registry::model_series {
    using histogram_slot = std::atomic<prometheus::Histogram*>;
    using counter_slot = std::atomic<prometheus::Counter*>;
    explicit model_series(std::size_t prompt_classes)
        : ttft(prompt_classes), ttft_exemplars(prompt_classes) {}
    using exemplar_slot = std::atomic<exemplar_buckets*>;
    std::vector<histogram_slot> ttft;  // by prompt class
    histogram_slot ttfct{};
    histogram_slot itl{};
    histogram_slot tpot{};
    histogram_slot output_tps{};
    histogram_slot decode_tps{};
    histogram_slot normalized_tps{};
    histogram_slot input_tokens{};
    histogram_slot output_tokens{};
    std::array<histogram_slot, outcomes> duration{};
    // The exemplars of the TTFT, ITL, TPOT and duration series above, made on a sampled
    // request's first observation.
    std::vector<exemplar_slot> ttft_exemplars;  // by prompt class
    exemplar_slot itl_exemplars{};
    exemplar_slot tpot_exemplars{};
    std::array<exemplar_slot, outcomes> duration_exemplars{};
    // requests_total with code 200, by outcome: nearly every request (other codes are looked up).
    std::array<counter_slot, outcomes> requests_ok{};
    counter_slot output_chars{};
    counter_slot cached_input_tokens{};
    counter_slot cache_write_tokens{};
    std::array<std::array<counter_slot, token_sources>, 2> tokens{};  // [input, output][source]
    std::array<counter_slot, token_sources> reasoning_tokens{};       // by source
    // [reported, native, normalized][input, output]
    std::array<std::array<counter_slot, 2>, 3> counted_tokens{};
};

registry::model_series& registry::series_of(const std::string& model_label,
                                            protocol::api_kind api) {
    // The api as a whole word first, so that every key has the 8 bytes series_key_hash wants.
    const auto api_word = static_cast<std::uint64_t>(api);
    std::array<char, sizeof api_word + max_model_label_length> stack_buffer;  // NOLINT
    std::string heap_buffer;
    const std::size_t size = sizeof api_word + model_label.size();
    char* key_data = stack_buffer.data();
    if (size > stack_buffer.size()) {  // "unknown", "other" and bounded names never are
        heap_buffer.resize(size);
        key_data = heap_buffer.data();
    }
    put_bytes(put_bytes(key_data, reinterpret_cast<const char*>(&api_word), sizeof api_word),
              model_label.data(), model_label.size());
    const std::string_view key(key_data, size);
    std::lock_guard lock(series_mutex_);
    auto found = model_series_.find(key);
    if (found == model_series_.end()) {
        found =
            model_series_
                .emplace(std::string(key), std::make_unique<model_series>(prompt_labels_.size()))
                .first;
    }
    return *found->second;
}

template <typename T, typename... Extra>
T& registry::cached(std::atomic<T*>& slot, prometheus::Family<T>* family, const label_list& labels,
                    const Extra&... extra) {
    T* metric = slot.load(std::memory_order_acquire);
    if (metric == nullptr) {
        metric = &series(family, labels, extra...);
        slot.store(metric, std::memory_order_release);
    }
    return *metric;
}

model_labels::model_labels(std::vector<std::string> allowlist, std::uint32_t max_models)
    : allowed_(allowlist.begin(), allowlist.end()),
      fixed_(!allowlist.empty()),
      max_models_(max_models) {}

std::string model_labels::label_for(std::string_view model, bool served) {
    if (model.empty()) {
        return "unknown";
    }
    if (model.size() > max_model_label_length) {
        return "other";
    }
    std::string name(model);
    std::lock_guard lock(mutex_);
    if (allowed_.contains(name)) {
        return name;
    }
    if (fixed_ || !served || allowed_.size() >= max_models_) {
        return "other";
    }
    allowed_.insert(name);
    return name;
}

registry::registry(const registry_options& options, const slo_options& slo)
    : buckets_(buckets_with_slo_targets(options.buckets, slo)),
      models_(options.model_allowlist, options.max_models),
      natives_(options.native_histograms ? std::make_unique<native_histograms>() : nullptr),
      registry_(std::make_shared<prometheus::Registry>()),
      slo_(std::make_shared<const slo_options>(slo)),
      prompt_bounds_(options.prompt_classes),
      prompt_labels_(prompt_class_labels(options.prompt_classes)) {
    register_families();
    itl_batch layout = make_itl_batch(buckets_.inter_token_latency,
                                      natives_ != nullptr || options.fine_inter_token_latency,
                                      natives_ != nullptr);
    itl_batch_bounds_ = std::move(layout.bounds);
    itl_classic_index_ = std::move(layout.classic_index);
    itl_native_index_ = std::move(layout.native_index);
    // Models named in the SLO section take their label slots now, so that they never end up
    // as "other" behind a crowd of earlier names, and their targets are visible before traffic.
    for (const auto& [name, target] : slo.models) {
        slo_for(slo, models_.label_for(name, true));
    }
}

void registry::set_slo(const slo_options& slo) {
    auto next = std::make_shared<const slo_options>(slo);
    for (const auto& [name, target] : next->models) {
        slo_for(*next, models_.label_for(name, true));
    }
    slo_.store(std::move(next));
}

registry::~registry() = default;

std::string registry::bounded_model(protocol::api_kind api, std::string_view model, bool served) {
    return api == protocol::api_kind::none ? "none" : models_.label_for(model, served);
}

void registry::record(const meter::request_summary& s, const meter::billed_counts& counts,
                      const exemplar_source* trace) {
    const bool answered_2xx = counts.served && s.status >= 200 && s.status < 300;
    const std::string model = bounded_model(s.api, s.model, answered_2xx);
    model_series& m = series_of(model, s.api);
    record_details(model, m, s, counts, trace);
    // Counted last: a scrape that sees the request also sees every series it added to.
    count_request(s.api, model, m, s.result, s.status, s.duration_seconds, trace);
}

void registry::record_details(const std::string& model, model_series& m,
                              const meter::request_summary& s, const meter::billed_counts& counts,
                              const exemplar_source* trace) {
    std::string api(protocol::to_string(s.api));
    for (std::size_t i = 0; i < s.parse_errors_by_reason.size(); ++i) {
        if (s.parse_errors_by_reason[i] > 0) {
            parse_errors(s.api, static_cast<protocol::parse_error>(i), s.parse_errors_by_reason[i]);
        }
    }
    if (s.api == protocol::api_kind::none) {
        return;
    }
    const label_list labels{{"model", model}, {"api", api}};
    count_slo(model, s);
    if (s.time_to_first_token) {
        // Prefill dominates TTFT, so prompt size is its main driver: split by a bounded class.
        std::optional<std::uint64_t> input = s.reported.input_tokens;
        if (!input) {
            input = s.native_input_tokens ? s.native_input_tokens : s.normalized_input_tokens;
        }
        const std::size_t prompt = prompt_class_index(input);
        observe(m.ttft[prompt], ttft_,
                {{"model", model}, {"api", api}, {"prompt_class", prompt_labels_[prompt]}},
                buckets_.time_to_first_token, *s.time_to_first_token, &m.ttft_exemplars[prompt],
                trace);
    }
    if (s.time_to_first_content_token) {
        observe(m.ttfct, ttfct_, labels, buckets_.time_to_first_token,
                *s.time_to_first_content_token);
    }
    if (s.inter_token_latency.count() > 0) {
        observe_inter_token_latency(m, labels, s.inter_token_latency, trace);
    }
    if (s.time_per_output_token) {
        observe(m.tpot, tpot_, labels, buckets_.time_per_output_token, *s.time_per_output_token,
                &m.tpot_exemplars, trace);
    }
    if (s.output_tokens_per_second) {
        observe(m.output_tps, output_tps_, labels, buckets_.output_tokens_per_second,
                *s.output_tokens_per_second);
    }
    if (s.decode_tokens_per_second) {
        observe(m.decode_tps, decode_tps_, labels, buckets_.decode_tokens_per_second,
                *s.decode_tokens_per_second);
    }
    if (s.normalized_output_tokens_per_second) {
        observe(m.normalized_tps, normalized_tps_, labels, buckets_.output_tokens_per_second,
                *s.normalized_output_tokens_per_second);
    }
    if (s.output_chars > 0) {
        cached(m.output_chars, output_chars_, labels)
            .Increment(static_cast<double>(s.output_chars));
    }
    count_tokens(m, labels, s, counts);
    // A server whose usage report disagrees with its own tokenizer has a broken report (or
    // hides text, like unstreamed reasoning). One or two tokens of difference are normal: an
    // end-of-sequence token, a detokenizer's trailing bytes.
    auto check = [&](const char* type, const std::optional<std::uint64_t>& reported,
                     const std::optional<std::uint64_t>& native) {
        if (!reported || !native) {
            return;
        }
        const auto r = static_cast<double>(*reported);
        const double diff = std::abs(r - static_cast<double>(*native));
        if (diff > 2.0 && diff > 0.02 * r) {
            series(mismatch_, {{"model", model}, {"type", type}}).Increment();
        }
    };
    // Input is not compared: the prompt is counted without its chat template.
    if (s.result == meter::outcome::complete) {
        check("output", s.reported.output_tokens, s.native_output_tokens);
    }
}

// OpenTelemetry's advice for gen_ai.client.token.usage: powers of 4 from 1 to 4^13.
const std::vector<double>& token_usage_bounds() {
    static const std::vector<double> bounds{
        1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864};
    return bounds;
}

void registry::count_tokens(model_series& m, const label_list& labels,
                            const meter::request_summary& s, const meter::billed_counts& counts) {
    // type and source: "" leaves the label out.
    auto add = [&](std::atomic<prometheus::Counter*>& slot,
                   prometheus::Family<prometheus::Counter>* family, std::string_view type,
                   std::string_view source, const std::optional<std::uint64_t>& n) {
        if (!n) {
            return;
        }
        prometheus::Counter* counter = slot.load(std::memory_order_acquire);
        if (counter == nullptr) {
            label_list l = labels;
            if (!type.empty()) {
                l.add("type", type);
            }
            if (!source.empty()) {
                l.add("source", source);
            }
            counter = &cached(slot, family, l);
        }
        counter->Increment(static_cast<double>(*n));
    };
    const auto source_slot = [](meter::token_source source) {
        return static_cast<std::size_t>(source);
    };
    // The billed counts, as in the request's usage record. A request that was not served bills
    // nothing and adds no series; nor does a count billed as 0 by rule (source unbilled).
    if (!counts.served) {
        return;
    }
    const auto billed = [](const meter::token_count& c) {
        return c.source == meter::token_source::unbilled ? std::nullopt : c.value;
    };
    {
        const meter::token_count& input = counts.input;
        const meter::token_count& output = counts.output;
        add(m.tokens[0][source_slot(input.source)], tokens_, "input",
            meter::to_string(input.source), billed(input));
        add(m.tokens[1][source_slot(output.source)], tokens_, "output",
            meter::to_string(output.source), billed(output));
        add(m.reasoning_tokens[source_slot(counts.reasoning.source)], reasoning_tokens_, "",
            meter::to_string(counts.reasoning.source), counts.reasoning.value);
        add(m.cached_input_tokens, cached_input_tokens_, "", "", counts.cached_input.value);
        add(m.cache_write_tokens, cache_write_tokens_, "", "", counts.cache_write.value);
        // Verbosity per request: the same counts, as distributions (a model that answers in 80
        // tokens and one that answers in 800 have the same tokens/s and very different tasks).
        // Classic buckets only: a token count is not a latency.
        if (auto n = billed(input)) {
            cached(m.input_tokens, input_tokens_, labels, token_usage_bounds())
                .Observe(static_cast<double>(*n));
        }
        if (auto n = billed(output)) {
            cached(m.output_tokens, output_tokens_, labels, token_usage_bounds())
                .Observe(static_cast<double>(*n));
        }
    }
    // Each source's own count, for comparison (reported against re-tokenized): of served
    // requests only, like the billed counts.
    add(m.counted_tokens[0][0], reported_tokens_, "input", "", s.reported.input_tokens);
    add(m.counted_tokens[0][1], reported_tokens_, "output", "", s.reported.output_tokens);
    add(m.counted_tokens[1][0], native_tokens_, "input", "", s.native_input_tokens);
    add(m.counted_tokens[1][1], native_tokens_, "output", "", s.native_output_tokens);
    add(m.counted_tokens[2][0], normalized_tokens_, "input", "", s.normalized_input_tokens);
    add(m.counted_tokens[2][1], normalized_tokens_, "output", "", s.normalized_output_tokens);
}

std::size_t registry::prompt_class_index(std::optional<std::uint64_t> input_tokens) const {
    if (!input_tokens) {
        return prompt_labels_.size() - 1;  // "unknown"
    }
    const auto at = std::lower_bound(prompt_bounds_.begin(), prompt_bounds_.end(), *input_tokens);
    return static_cast<std::size_t>(at - prompt_bounds_.begin());
}

// The entry for a (bounded) model label: its own, else slo.default, else none. The gauges are
// set here, on first use, so a model covered by the default shows its targets once it is seen.
const slo_target* registry::slo_for(const slo_options& slo, const std::string& model_label) {
    const auto it = slo.models.find(model_label);
    const slo_target* target = nullptr;
    if (it != slo.models.end()) {
        target = &it->second;
    } else if (slo.default_target && model_label != "other" && model_label != "unknown") {
        target = &*slo.default_target;
    }
    if (target == nullptr) {
        return nullptr;
    }
    const double objective = slo_objective(slo, *target);
    if (target->ttft) {
        series(slo_objective_, {{"model", model_label}, {"slo", "ttft"}}).Set(objective);
        series(slo_target_, {{"model", model_label}, {"slo", "ttft"}})
            .Set(seconds_of(*target->ttft));
    }
    if (target->tpot) {
        series(slo_objective_, {{"model", model_label}, {"slo", "tpot"}}).Set(objective);
        series(slo_target_, {{"model", model_label}, {"slo", "tpot"}})
            .Set(seconds_of(*target->tpot));
    }
    if (target->availability) {
        series(slo_objective_, {{"model", model_label}, {"slo", "availability"}})
            .Set(*target->availability);
    }
    return target;
}

// Good or bad against each target. A request is counted for a latency SLO only when it has the
// measurement (a streamed request with a first token; with two or more tokens for TPOT), except
// that a client who hung up after waiting longer than the TTFT target without a token counts as
// bad: that wait is exactly what the SLO is about. A failed request is left out of the latency
// SLOs and counted bad for availability (availability_of), so an outage spends the availability
// budget and leaves the latency ratios to the requests that were served.
slo_verdict registry::judge_slo(const std::string& model_label, const meter::request_summary& s) {
    slo_verdict verdict;
    // One snapshot for the whole request: a reload in between cannot tear it.
    const auto settings = slo_.load();
    if (settings->models.empty() && !settings->default_target) {
        return verdict;
    }
    const slo_target* target = slo_for(*settings, model_label);
    if (target == nullptr) {
        return verdict;
    }
    verdict.objective = slo_objective(*settings, *target);
    if (target->ttft) {
        const double limit = seconds_of(*target->ttft);
        verdict.ttft_target_seconds = limit;
        if (s.time_to_first_token) {
            verdict.ttft_good = *s.time_to_first_token <= limit;
        } else if (s.streamed && s.result == meter::outcome::client_cancel &&
                   s.duration_seconds > limit) {
            verdict.ttft_good = false;
        }
    }
    if (target->tpot) {
        verdict.tpot_target_seconds = seconds_of(*target->tpot);
        if (s.time_per_output_token) {
            verdict.tpot_good = *s.time_per_output_token <= *verdict.tpot_target_seconds;
        }
    }
    if (target->availability) {
        verdict.availability_objective = *target->availability;
        const availability a = availability_of(s.result, s.status);
        if (a != availability::excluded) {
            verdict.availability_good = a == availability::good;
        }
    }
    return verdict;
}

void registry::count_slo_result(const std::string& model_label, std::string_view slo, bool good) {
    series(slo_requests_, {{"model", model_label}, {"slo", slo}, {"result", good ? "good" : "bad"}})
        .Increment();
}

void registry::count_slo(const std::string& model_label, const meter::request_summary& s) {
    const slo_verdict verdict = judge_slo(model_label, s);
    if (verdict.ttft_good) {
        count_slo_result(model_label, "ttft", *verdict.ttft_good);
    }
    if (verdict.tpot_good) {
        count_slo_result(model_label, "tpot", *verdict.tpot_good);
    }
    if (verdict.availability_good) {
        count_slo_result(model_label, "availability", *verdict.availability_good);
    }
}

void registry::record_unforwarded(protocol::api_kind api, std::string_view model,
                                  meter::outcome result, int code, double duration_seconds) {
    const std::string model_label = bounded_model(api, model, false);
    if (api != protocol::api_kind::none) {
        // No summary, so only availability can be judged (what judge_slo does for it).
        meter::request_summary failed;
        failed.api = api;
        failed.result = result;
        failed.status = code;
        const slo_verdict verdict = judge_slo(model_label, failed);
        if (verdict.availability_good) {
            count_slo_result(model_label, "availability", *verdict.availability_good);
        }
    }
    count_request(api, model_label, series_of(model_label, api), result, code, duration_seconds);
}

// The two families every request lands in, forwarded or not.
void registry::count_request(protocol::api_kind api, const std::string& model_label,
                             model_series& m, meter::outcome result, int code,
                             double duration_seconds, const exemplar_source* trace) {
    const std::string_view api_label = protocol::to_string(api);
    const std::string_view outcome = meter::to_string(result);
    const std::string code_text = code_label(code);
    const label_list labels{
        {"model", model_label}, {"api", api_label}, {"outcome", outcome}, {"code", code_text}};
    if (code == 200) {
        cached(m.requests_ok[static_cast<std::size_t>(result)], requests_, labels).Increment();
    } else {
        series(requests_, labels).Increment();
    }
    observe(m.duration[static_cast<std::size_t>(result)], duration_,
            {{"model", model_label}, {"api", api_label}, {"outcome", outcome}},
            buckets_.request_duration, duration_seconds,
            &m.duration_exemplars[static_cast<std::size_t>(result)], trace);
}

void registry::observe_inter_token_latency(model_series& m, const label_list& labels,
                                           const meter::histogram_batch& batch,
                                           const exemplar_source* trace) {
    const std::vector<double>& bounds = buckets_.inter_token_latency;
    if (trace != nullptr) {
        // One exemplar per classic bucket the gaps fell in: the last gap of the batch bucket
        // seen last. The batch keeps it as a float, so it is brought back inside its bucket.
        exemplar_buckets& kept = exemplars_of(m.itl_exemplars, itl_, labels, bounds.size() + 1);
        batch.for_each_last_value([&](std::size_t j, double value) {
            const std::size_t classic =
                itl_classic_index_.empty()
                    ? j
                    : (j < itl_classic_index_.size() ? itl_classic_index_[j] : bounds.size());
            if (classic < bounds.size()) {
                value = std::min(value, bounds[classic]);
            }
            if (classic > 0 && classic <= bounds.size() && value <= bounds[classic - 1]) {
                value = std::nextafter(bounds[classic - 1], bounds[classic - 1] + 1.0);
            }
            kept.offer(classic, *trace, value);
        });
    }
    if (itl_classic_index_.empty()) {
        cached(m.itl, itl_, labels, bounds).ObserveMultiple(batch.bucket_increments(), batch.sum());
        return;
    }
    std::vector<double> classic(buckets_.inter_token_latency.size() + 1, 0.0);
    native_batch native;
    native.zero_threshold = itl_batch_bounds_.front();
    native.count = batch.count();
    native.sum = batch.sum();
    batch.for_each_bucket([&](std::size_t j, std::uint64_t n) {
        if (j >= itl_classic_index_.size()) {
            return;
        }
        classic[itl_classic_index_[j]] += static_cast<double>(n);
        if (!natives_) {
            return;
        }
        if (j == 0) {
            native.zero_count += n;  // at most 2^-17 s: not told apart from 0
        } else {
            native.positive[itl_native_index_[j]] += n;
        }
    });
    cached(m.itl, itl_, labels, buckets_.inter_token_latency).ObserveMultiple(classic, batch.sum());
    if (natives_) {
        natives_->observe(itl_->GetName(), labels.to_map(), native);
    }
}

void registry::observe(prometheus::Family<prometheus::Histogram>* family, const label_list& labels,
                       const std::vector<double>& bounds, double value) {
    series(family, labels, bounds).Observe(value);
    if (natives_) {
        natives_->observe(family->GetName(), labels.to_map(), value);
    }
}

exemplar_buckets& registry::exemplars_of(std::atomic<exemplar_buckets*>& slot,
                                         prometheus::Family<prometheus::Histogram>* family,
                                         const label_list& labels, std::size_t buckets) {
    exemplar_buckets* kept = slot.load(std::memory_order_acquire);
    if (kept == nullptr) {
        kept = &exemplars_.series(
            family->GetName(), exemplar_store::label_pairs(labels.begin(), labels.end()), buckets);
        slot.store(kept, std::memory_order_release);
    }
    return *kept;
}

void registry::observe(std::atomic<prometheus::Histogram*>& slot,
                       prometheus::Family<prometheus::Histogram>* family, const label_list& labels,
                       const std::vector<double>& bounds, double value,
                       std::atomic<exemplar_buckets*>* exemplar_slot,
                       const exemplar_source* trace) {
    cached(slot, family, labels, bounds).Observe(value);
    if (trace != nullptr && exemplar_slot != nullptr) {
        exemplars_of(*exemplar_slot, family, labels, bounds.size() + 1)
            .offer(bucket_of(bounds, value), *trace, value);
    }
    if (natives_) {
        natives_->observe(family->GetName(), labels.to_map(), value);
    }
}

void registry::stream_opened() {
    streams_active_->Increment();
}
void registry::stream_closed() {
    streams_active_->Decrement();
}
double registry::streams_active() const {
    return streams_active_->Value();
}

void registry::upstream_error(std::string_view reason) {
    series(upstream_errors_, {{"reason", reason}}).Increment();
}

void registry::start_at_zero(fixed_labels family, std::span<const std::string_view> values) {
    const bool reasons = family == fixed_labels::upstream_error_reason;
    for (const std::string_view value : values) {
        (void)series(reasons ? upstream_errors_ : metering_failures_,
                     {{reasons ? "reason" : "phase", value}});
    }
}

void registry::finishing_thread_end(bool queued) {
    (queued ? finishing_queued_ : finishing_full_)->Increment();
}

void registry::metering_failure(std::string_view phase) {
    series(metering_failures_, {{"phase", phase}}).Increment();
}

void registry::parse_errors(protocol::api_kind api, protocol::parse_error reason,
                            std::uint64_t count) {
    series(parse_errors_,
           {{"api", protocol::to_string(api)}, {"reason", protocol::to_string(reason)}})
        .Increment(static_cast<double>(count));
}

void registry::start_parse_errors_at_zero(std::span<const protocol::api_kind> apis) {
    for (const protocol::api_kind api : apis) {
        for (std::size_t i = 0; i < protocol::parse_error_count; ++i) {
            parse_errors(api, static_cast<protocol::parse_error>(i), 0);
        }
    }
}

std::string registry::expose() const {
    return prometheus::TextSerializer().Serialize(collect());
}

std::string registry::expose_openmetrics() const {
    return serialize_openmetrics(collect(), &exemplars_);
}

std::string registry::expose_protobuf() const {
    if (!natives_) {
        return {};
    }
    return encode_protobuf(collect(), natives_.get(), &exemplars_);
}

// Families without a series are left out: a feature that is off shows nothing, not even its
// HELP and TYPE lines.
std::vector<prometheus::MetricFamily> registry::collect() const {
    auto families = registry_->Collect();
    std::erase_if(families, [](const prometheus::MetricFamily& f) { return f.metric.empty(); });
    return families;
}

}  // namespace tokenmeter::metrics
