#include "metrics/status_board.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "metrics/billing.hpp"
#include "metrics/registry.hpp"

namespace tokenmeter::metrics {
namespace {

using nlohmann::json;

struct window {
    const char* name;
    std::chrono::minutes length;
};
constexpr window latency_windows[] = {{"1m", std::chrono::minutes(1)},
                                      {"5m", std::chrono::minutes(5)},
                                      {"15m", std::chrono::minutes(15)}};
constexpr window slo_windows[] = {{"5m", std::chrono::minutes(5)},
                                  {"1h", std::chrono::minutes(60)}};

std::size_t slots_in(core::duration length, core::duration slot) {
    return static_cast<std::size_t>(std::max<std::int64_t>(1, length / slot));
}

json optional_number(const std::optional<double>& v) {
    return v ? json(*v) : json(nullptr);
}

json quantiles(const quantile_sketch& sketch) {
    return {{"count", sketch.count()},
            {"p50", optional_number(sketch.quantile(0.5))},
            {"p99", optional_number(sketch.quantile(0.99))}};
}

// good / (good + bad), and how fast the error budget burns: (bad share) / (1 - objective).
json slo_window(std::uint64_t good, std::uint64_t bad, double objective) {
    json out{{"good", good}, {"bad", bad}, {"good_ratio", nullptr}, {"burn_rate", nullptr}};
    const std::uint64_t total = good + bad;
    if (total == 0) {
        return out;
    }
    const double ratio = static_cast<double>(good) / static_cast<double>(total);
    out["good_ratio"] = ratio;
    if (objective < 1.0) {
        out["burn_rate"] = (1.0 - ratio) / (1.0 - objective);
    }
    return out;
}

}  // namespace

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
    for (const auto& [held, value] : slots) {
        if (held >= first && held <= last) {
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
      tenants_(slots_15m_) {
    // Batch bucket j holds (bounds[j-1], bounds[j]]; with the fine bounds (every 2^(k/16) s) it
    // lies inside one sketch bin, the bin of its geometric middle. Bucket 0 (at most 2^-17 s,
    // mostly tokens that came in one chunk) counts as 0; the overflow bucket goes above the top.
    const std::vector<double>& bounds = metrics.inter_token_latency_bounds();
    itl_bins_.push_back(std::nullopt);
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
    const std::uint64_t tokens =
        counts.input.value.value_or(0) + counts.output.value.value_or(0);
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

double status_board::window_seconds(std::size_t n, core::time_point now) const {
    // n - 1 whole slots and the current one so far, but not before the board started.
    const core::time_point slot_start{options_.slot * slot_number(now)};
    const core::time_point from = std::max<core::time_point>(
        started_, slot_start - options_.slot * static_cast<std::int64_t>(n - 1));
    return std::max(0.0, core::to_seconds(now - from));
}

json status_board::model_json(const model_series& series, std::int64_t now_slot,
                              core::time_point now) const {
    json latency = json::object();
    json throughput = json::object();
    for (const window& w : latency_windows) {
        const std::size_t n = slots_in(w.length, options_.slot);
        const std::int64_t first = now_slot - static_cast<std::int64_t>(n) + 1;
        latency_slot merged;
        series.latency.each_since(first, now_slot, [&](const latency_slot& slot) {
            merged.ttft.merge(slot.ttft);
            merged.itl.merge(slot.itl);
            merged.tpot.merge(slot.tpot);
        });
        count_slot sum;
        series.counts.each_since(first, now_slot, [&](const count_slot& slot) {
            sum.requests += slot.requests;
            sum.output_reported += slot.output_reported;
            sum.output_native += slot.output_native;
            sum.output_normalized += slot.output_normalized;
        });
        latency[w.name] = {{"requests", sum.requests},
                           {"ttft", quantiles(merged.ttft)},
                           {"itl", quantiles(merged.itl)},
                           {"tpot", quantiles(merged.tpot)}};
        const double seconds = window_seconds(n, now);
        const auto rate = [seconds](std::uint64_t tokens) {
            return seconds > 0 ? json(static_cast<double>(tokens) / seconds) : json(nullptr);
        };
        throughput[w.name] = {{"seconds", seconds},
                              {"output_tokens",
                               {{"reported", sum.output_reported},
                                {"native", sum.output_native},
                                {"normalized", sum.output_normalized}}},
                              {"tokens_per_second",
                               {{"reported", rate(sum.output_reported)},
                                {"native", rate(sum.output_native)},
                                {"normalized", rate(sum.output_normalized)}}}};
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
    if (latency_slo || series.availability_objective) {
        for (const window& w : slo_windows) {
            const std::size_t n = slots_in(w.length, options_.slot);
            count_slot sum;
            series.counts.each_since(now_slot - static_cast<std::int64_t>(n) + 1, now_slot,
                                     [&](const count_slot& slot) {
                                         sum.ttft_good += slot.ttft_good;
                                         sum.ttft_bad += slot.ttft_bad;
                                         sum.tpot_good += slot.tpot_good;
                                         sum.tpot_bad += slot.tpot_bad;
                                         sum.availability_good += slot.availability_good;
                                         sum.availability_bad += slot.availability_bad;
                                     });
            if (latency_slo) {
                slo["ttft"][w.name] = slo_window(sum.ttft_good, sum.ttft_bad, series.objective);
                slo["tpot"][w.name] = slo_window(sum.tpot_good, sum.tpot_bad, series.objective);
            }
            if (series.availability_objective) {
                slo["availability"][w.name] = slo_window(
                    sum.availability_good, sum.availability_bad, *series.availability_objective);
            }
        }
    }
    return {{"latency", std::move(latency)},
            {"throughput", std::move(throughput)},
            {"slo", std::move(slo)}};
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
             {"build", {{"version", TOKENMETER_VERSION}}}};
    json config = json::object();
    for (const auto& [key, value] : options_.summary) {
        config[key] = value;
    }
    doc["config"] = std::move(config);

    json models = json::array();
    std::map<std::string, tenant_counts> tenants;
    json recent = json::array();
    json totals = json::object();
    {
        std::lock_guard lock(mutex_);
        for (const auto& [name, series] : models_) {
            json m = model_json(series, now_slot, now);
            m["model"] = name;
            models.push_back(std::move(m));
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
