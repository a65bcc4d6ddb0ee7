#include "metrics/status_board.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "metrics/billing.hpp"
#include "metrics/registry.hpp"

namespace tokenmeter::metrics {
namespace {

using nlohmann::json;

struct window {
    const char* name;
    std::chrono::minutes length;
};
constexpr std::array<window, 3> latency_windows{{{"1m", std::chrono::minutes(1)},
                                                 {"5m", std::chrono::minutes(5)},
                                                 {"15m", std::chrono::minutes(15)}}};
constexpr std::array<window, 2> slo_windows{
    {{"5m", std::chrono::minutes(5)}, {"1h", std::chrono::minutes(60)}}};
// Each point of the series shows the burn rate of the 5 minutes that end with it.
constexpr window series_burn_window = slo_windows[0];
constexpr window series_window = latency_windows[2];

struct shown_quantile {
    const char* name;
    double q;
};
constexpr std::array<shown_quantile, 2> shown_quantiles{{{"p50", 0.5}, {"p99", 0.99}}};

std::size_t slots_in(core::duration length, core::duration slot) {
    return static_cast<std::size_t>(std::max<std::int64_t>(1, length / slot));
}

json optional_number(const std::optional<double>& v) {
    return v ? json(*v) : json(nullptr);
}

json quantile_value(const quantile_sketch& sketch, const shown_quantile& q) {
    return optional_number(sketch.quantile(q.q));
}

json quantiles(const quantile_sketch& sketch) {
    json out{{"count", sketch.count()}};
    for (const shown_quantile& q : shown_quantiles) {
        out[q.name] = quantile_value(sketch, q);
    }
    return out;
}

json tokens_per_second(std::uint64_t tokens, double seconds) {
    return seconds > 0 ? json(static_cast<double>(tokens) / seconds) : json(nullptr);
}

// How fast the error budget burns: (bad share) / (1 - objective); null without a request.
json burn_rate(std::uint64_t good, std::uint64_t bad, double objective) {
    const std::uint64_t total = good + bad;
    if (total == 0 || objective >= 1.0) {
        return nullptr;
    }
    const double ratio = static_cast<double>(good) / static_cast<double>(total);
    return (1.0 - ratio) / (1.0 - objective);
}

// good / (good + bad) and the burn rate.
json slo_window(std::uint64_t good, std::uint64_t bad, double objective) {
    const std::uint64_t total = good + bad;
    return {
        {"good", good},
        {"bad", bad},
        {"good_ratio",
         total == 0 ? json(nullptr) : json(static_cast<double>(good) / static_cast<double>(total))},
        {"burn_rate", burn_rate(good, bad, objective)}};
}

// The output token counts by source, as the page names them (count_slot is status_board's).
template <typename Counts>
constexpr std::array<std::pair<const char*, std::uint64_t Counts::*>, 3> output_sources{
    {{"reported", &Counts::output_reported},
     {"native", &Counts::output_native},
     {"normalized", &Counts::output_normalized}}};

}  // namespace

status_board::count_slot& status_board::count_slot::operator+=(const count_slot& other) noexcept {
    requests += other.requests;
    output_reported += other.output_reported;
    output_native += other.output_native;
    output_normalized += other.output_normalized;
    ttft_good += other.ttft_good;
    ttft_bad += other.ttft_bad;
    tpot_good += other.tpot_good;
    tpot_bad += other.tpot_bad;
    availability_good += other.availability_good;
    availability_bad += other.availability_bad;
    return *this;
}

template <typename T>
T* status_board::ring<T>::at(std::int64_t number) {
    auto& [held, value] = slots[static_cast<std::size_t>(number) % slots.size()];
    if (held == number) {
        return &value;
    }
    if (held > number) {
        return nullptr;  // older than the ring: already out of every window
    }
    held = number;
    value = T{};
    return &value;
}

template <typename T>
template <typename F>
void status_board::ring<T>::each_since(std::int64_t first, std::int64_t last, F&& f) const {
    // Only the numbers the ring can still hold, each looked up where it would be.
    const auto size = static_cast<std::int64_t>(slots.size());
    for (std::int64_t number = std::max({first, last - size + 1, std::int64_t{0}}); number <= last;
         ++number) {
        const auto& [held, value] = slots[static_cast<std::size_t>(number % size)];
        if (held == number) {
            f(value);
        }
    }
}

status_board::status_board(registry& metrics, billing_metrics* billing, const core::clock& clock,
                           std::function<std::int64_t()> wall_clock_ms, status_options options)
    : metrics_(metrics),
      billing_(billing),
      clock_(clock),
      wall_clock_ms_(std::move(wall_clock_ms)),
      options_(std::move(options)),
      started_(clock.now()),
      started_unix_ms_(wall_clock_ms_()),
      slots_15m_(slots_in(std::chrono::minutes(15), options_.slot)),
      slots_1h_(slots_in(std::chrono::minutes(60), options_.slot)),
      series_step_slots_(std::min(slots_in(options_.series_step, options_.slot), slots_15m_)),
      series_points_(slots_15m_ / series_step_slots_),
      tenants_(slots_15m_) {
    // Batch bucket j holds (bounds[j-1], bounds[j]]; with the fine bounds (every 2^(k/16) s) it
    // lies inside one sketch bin, the bin of its geometric middle. Bucket 0 (at most 2^-17 s,
    // mostly tokens that came in one chunk) counts as 0; the overflow bucket goes above the top.
    const std::vector<double>& bounds = metrics.inter_token_latency_bounds();
    itl_bins_.emplace_back(std::nullopt);
    for (std::size_t j = 1; j < bounds.size(); ++j) {
        itl_bins_.push_back(quantile_sketch::bin_of(std::sqrt(bounds[j - 1] * bounds[j])));
    }
    if (!bounds.empty()) {
        const auto top = quantile_sketch::bin_of(bounds.back());
        itl_bins_.push_back(top ? std::optional<int>(*top + 1) : std::nullopt);
    }
}

std::int64_t status_board::slot_number(core::time_point t) const noexcept {
    return std::max<std::int64_t>(0, t.time_since_epoch() / options_.slot);
}

std::string status_board::tenant_label(std::string_view tenant, bool served) {
    return billing_ != nullptr ? billing_->tenant_label(tenant, served) : std::string(tenant);
}

void status_board::add_inter_token_latency(quantile_sketch& sketch,
                                           const meter::histogram_batch& batch) const {
    batch.for_each_bucket([&](std::size_t j, std::uint64_t n) {
        if (j >= itl_bins_.size()) {
            return;
        }
        if (itl_bins_[j]) {
            sketch.add_bin(*itl_bins_[j], n);
        } else {
            sketch.add_zero(n);
        }
    });
}

void status_board::record(const meter::request_summary& s, const meter::billed_counts& counts,
                          std::string_view tenant) {
    if (s.api == protocol::api_kind::none) {
        return;
    }
    // Labels, the verdict and the token counts are worked out before the lock.
    const bool answered_2xx = counts.served && s.status >= 200 && s.status < 300;
    const std::string model = metrics_.model_label(s.model, answered_2xx);
    const slo_verdict verdict = metrics_.judge_slo(model, s);
    const bool used = counts.served;
    const std::uint64_t tokens = counts.input.value.value_or(0) + counts.output.value.value_or(0);
    const std::string tenant_name =
        tenant.empty() ? std::string() : tenant_label(tenant, answered_2xx);
    const std::int64_t number = slot_number(s.end);

    std::lock_guard lock(mutex_);
    auto it = models_.find(model);
    if (it == models_.end()) {
        it = models_.try_emplace(model, slots_15m_, slots_1h_).first;
    }
    model_series& series = it->second;
    if (verdict.ttft_good || verdict.tpot_good) {
        series.objective = verdict.objective;
        series.ttft_target = verdict.ttft_target_seconds;
        series.tpot_target = verdict.tpot_target_seconds;
    }
    if (verdict.availability_objective) {
        series.availability_objective = verdict.availability_objective;
    }
    if (latency_slot* slot = series.latency.at(number)) {
        if (s.time_to_first_token) {
            slot->ttft.add(*s.time_to_first_token);
        }
        if (s.time_per_output_token) {
            slot->tpot.add(*s.time_per_output_token);
        }
        add_inter_token_latency(slot->itl, s.inter_token_latency);
    }
    if (count_slot* slot = series.counts.at(number)) {
        ++slot->requests;
        if (used) {
            slot->output_reported += s.reported.output_tokens.value_or(0);
            slot->output_native += s.native_output_tokens.value_or(0);
            slot->output_normalized += s.normalized_output_tokens.value_or(0);
        }
        if (verdict.ttft_good) {
            ++(*verdict.ttft_good ? slot->ttft_good : slot->ttft_bad);
        }
        if (verdict.tpot_good) {
            ++(*verdict.tpot_good ? slot->tpot_good : slot->tpot_bad);
        }
        if (verdict.availability_good) {
            ++(*verdict.availability_good ? slot->availability_good : slot->availability_bad);
        }
    }
    if (!tenant_name.empty() && tokens > 0) {
        if (auto* slot = tenants_.at(number)) {
            (*slot)[tenant_name].tokens += tokens;
        }
    }
}

void status_board::rate_limited(std::string_view tenant) {
    const std::string name = tenant_label(tenant);
    const std::int64_t number = slot_number(clock_.now());
    std::lock_guard lock(mutex_);
    if (auto* slot = tenants_.at(number)) {
        ++(*slot)[name].rate_limited;
    }
}

void status_board::upstream_error(std::string_view reason) {
    const std::int64_t at = wall_clock_ms_();
    std::lock_guard lock(mutex_);
    recent_errors_.push_front({at, std::string(reason)});
    while (recent_errors_.size() > options_.recent_errors) {
        recent_errors_.pop_back();
    }
    ++error_totals_[std::string(reason)];
}

double status_board::covered_seconds(std::int64_t first, std::int64_t last,
                                     core::time_point now) const {
    const core::time_point from = std::max(started_, core::time_point{options_.slot * first});
    const core::time_point to = std::min(now, core::time_point{options_.slot * (last + 1)});
    return std::max(0.0, core::to_seconds(to - from));
}

status_board::latency_slot status_board::merged_latency(const model_series& series,
                                                        std::int64_t first, std::int64_t last) {
    latency_slot merged;
    series.latency.each_since(first, last, [&](const latency_slot& slot) {
        merged.ttft.merge(slot.ttft);
        merged.itl.merge(slot.itl);
        merged.tpot.merge(slot.tpot);
    });
    return merged;
}

status_board::count_slot status_board::summed_counts(const model_series& series, std::int64_t first,
                                                     std::int64_t last) {
    count_slot sum;
    series.counts.each_since(first, last, [&](const count_slot& slot) { sum += slot; });
    return sum;
}

json status_board::model_json(const model_series& series, std::int64_t now_slot,
                              core::time_point now) const {
    json latency = json::object();
    json throughput = json::object();
    for (const window& w : latency_windows) {
        const std::int64_t first =
            now_slot - static_cast<std::int64_t>(slots_in(w.length, options_.slot)) + 1;
        const latency_slot merged = merged_latency(series, first, now_slot);
        const count_slot sum = summed_counts(series, first, now_slot);
        latency[w.name] = {{"requests", sum.requests},
                           {"ttft", quantiles(merged.ttft)},
                           {"itl", quantiles(merged.itl)},
                           {"tpot", quantiles(merged.tpot)}};
        const double seconds = covered_seconds(first, now_slot, now);
        json tokens = json::object();
        json rates = json::object();
        for (const auto& [source, field] : output_sources<count_slot>) {
            tokens[source] = sum.*field;
            rates[source] = tokens_per_second(sum.*field, seconds);
        }
        throughput[w.name] = {{"seconds", seconds},
                              {"output_tokens", std::move(tokens)},
                              {"tokens_per_second", std::move(rates)}};
    }
    json slo = json::object();
    const bool latency_slo = series.ttft_target || series.tpot_target;
    if (latency_slo) {
        slo["objective"] = series.objective;
        slo["ttft_target_seconds"] = optional_number(series.ttft_target);
        slo["tpot_target_seconds"] = optional_number(series.tpot_target);
    }
    if (series.availability_objective) {
        slo["availability_objective"] = *series.availability_objective;
    }
    for (const window& w : slo_windows) {
        const std::int64_t first =
            now_slot - static_cast<std::int64_t>(slots_in(w.length, options_.slot)) + 1;
        const count_slot sum = summed_counts(series, first, now_slot);
        if (latency_slo) {
            slo["ttft"][w.name] = slo_window(sum.ttft_good, sum.ttft_bad, series.objective);
            slo["tpot"][w.name] = slo_window(sum.tpot_good, sum.tpot_bad, series.objective);
        }
        if (series.availability_objective) {
            slo["availability"][w.name] = slo_window(sum.availability_good, sum.availability_bad,
                                                     *series.availability_objective);
        }
    }
    return {{"latency", std::move(latency)},
            {"throughput", std::move(throughput)},
            {"slo", std::move(slo)},
            {"series", series_json(series, now_slot, now)}};
}

json status_board::series_json(const model_series& series, std::int64_t now_slot,
                               core::time_point now) const {
    // Points are whole steps of the slot clock, oldest first; the newest holds the current slot
    // and shows it so far, as the windows do. A step before the board started shows null.
    const auto step = static_cast<std::int64_t>(series_step_slots_);
    const std::int64_t newest = now_slot / step;
    const auto burn_slots =
        static_cast<std::int64_t>(slots_in(series_burn_window.length, options_.slot));
    const bool latency_slo = series.ttft_target || series.tpot_target;

    json out{{"ttft", json::object()}, {"itl", json::object()}};
    json rates = json::object();
    json burn = json::object();
    for (std::int64_t point = newest - static_cast<std::int64_t>(series_points_) + 1;
         point <= newest; ++point) {
        const std::int64_t first = point * step;
        const std::int64_t last = std::min(first + step - 1, now_slot);
        const latency_slot merged = merged_latency(series, first, last);
        for (const shown_quantile& q : shown_quantiles) {
            out["ttft"][q.name].push_back(quantile_value(merged.ttft, q));
            out["itl"][q.name].push_back(quantile_value(merged.itl, q));
        }
        const count_slot sum = summed_counts(series, first, last);
        const double seconds = covered_seconds(first, last, now);
        for (const auto& [source, field] : output_sources<count_slot>) {
            rates[source].push_back(tokens_per_second(sum.*field, seconds));
        }
        const count_slot recent = summed_counts(series, last - burn_slots + 1, last);
        if (latency_slo) {
            burn["ttft"].push_back(burn_rate(recent.ttft_good, recent.ttft_bad, series.objective));
            burn["tpot"].push_back(burn_rate(recent.tpot_good, recent.tpot_bad, series.objective));
        }
        if (series.availability_objective) {
            burn["availability"].push_back(burn_rate(
                recent.availability_good, recent.availability_bad, *series.availability_objective));
        }
    }
    out["tokens_per_second"] = std::move(rates);
    out["burn_rate"] = std::move(burn);
    return out;
}

json status_board::snapshot() {
    const core::time_point now = clock_.now();
    const std::int64_t now_slot = slot_number(now);
    const double streams = metrics_.streams_active();
    json doc{{"version", 1},
             {"sequence", sequence_.fetch_add(1) + 1},
             {"generated_at_unix_ms", wall_clock_ms_()},
             {"started_at_unix_ms", started_unix_ms_},
             {"uptime_seconds", core::to_seconds(now - started_)},
             {"relative_error", quantile_sketch::relative_error()},
             {"slot_seconds", core::to_seconds(options_.slot)},
             {"streams_active", static_cast<std::int64_t>(streams)},
             {"series",
              {{"window", series_window.name},
               {"points", series_points_},
               {"step_seconds",
                core::to_seconds(options_.slot * static_cast<std::int64_t>(series_step_slots_))},
               {"burn_rate_window", series_burn_window.name}}},
             {"build", {{"version", TOKENMETER_VERSION}}}};
    json config = json::object();
    for (const auto& [key, value] : options_.summary) {
        config[key] = value;
    }
    doc["config"] = std::move(config);

    std::vector<std::string> names;
    std::map<std::string, tenant_counts> tenants;
    json recent = json::array();
    json totals = json::object();
    {
        std::lock_guard lock(mutex_);
        for (const auto& [name, series] : models_) {
            names.push_back(name);
        }
        tenants_.each_since(now_slot - static_cast<std::int64_t>(slots_15m_) + 1, now_slot,
                            [&](const std::map<std::string, tenant_counts>& slot) {
                                for (const auto& [name, counts] : slot) {
                                    tenants[name].tokens += counts.tokens;
                                    tenants[name].rate_limited += counts.rate_limited;
                                }
                            });
        for (const auto& e : recent_errors_) {
            recent.push_back({{"at_unix_ms", e.at_unix_ms}, {"reason", e.reason}});
        }
        for (const auto& [reason, n] : error_totals_) {
            totals[reason] = n;
        }
    }
    // Each model is copied under the lock and worked out after it: merging sketches and building
    // the series takes milliseconds across many models, and request ends on every worker wait
    // for this lock. Models are never removed, so each name is still there.
    json models = json::array();
    for (const std::string& name : names) {
        std::optional<model_series> copy;
        {
            std::lock_guard lock(mutex_);
            if (auto it = models_.find(name); it != models_.end()) {
                copy.emplace(it->second);
            }
        }
        if (copy) {
            json m = model_json(*copy, now_slot, now);
            m["model"] = name;
            models.push_back(std::move(m));
        }
    }
    doc["models"] = std::move(models);

    // Top lists: largest first, then by name, so equal counts keep a stable order.
    std::vector<std::pair<std::string, tenant_counts>> ranked(tenants.begin(), tenants.end());
    const auto top = [&](std::uint64_t tenant_counts::*field) {
        std::vector<std::pair<std::string, tenant_counts>> list;
        std::copy_if(ranked.begin(), ranked.end(), std::back_inserter(list),
                     [field](const auto& entry) { return entry.second.*field > 0; });
        std::stable_sort(list.begin(), list.end(), [field](const auto& a, const auto& b) {
            return a.second.*field > b.second.*field;
        });
        if (list.size() > options_.top_tenants) {
            list.resize(options_.top_tenants);
        }
        json out = json::array();
        for (const auto& [name, counts] : list) {
            out.push_back({{"tenant", name},
                           {"tokens", counts.tokens},
                           {"rate_limited", counts.rate_limited}});
        }
        return out;
    };
    doc["tenants"] = {{"window", "15m"},
                      {"by_tokens", top(&tenant_counts::tokens)},
                      {"by_rate_limited", top(&tenant_counts::rate_limited)}};
    doc["upstream_errors"] = {{"recent", std::move(recent)}, {"total", std::move(totals)}};
    return doc;
}

std::string status_board::snapshot_text() {
    // Model and tenant names come from clients: bytes that are not UTF-8 become U+FFFD.
    return snapshot().dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace tokenmeter::metrics
