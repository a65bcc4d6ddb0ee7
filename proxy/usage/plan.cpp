#include "usage/plan.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "usage/timeline.hpp"

namespace tokenmeter::usage {
namespace {

constexpr std::int64_t minute_ms = 60'000;

std::int64_t minute_of(std::int64_t unix_ms) {
    return bucket_of(unix_ms, minute_ms);
}

// Nearest rank: the smallest value with at least q of the values at or below it.
template <typename T>
T nearest_rank(std::vector<T> values, double q) {
    if (values.empty()) {
        return T{};
    }
    std::sort(values.begin(), values.end());
    const auto n = static_cast<double>(values.size());
    auto rank = static_cast<std::size_t>(std::ceil(q * n));
    rank = std::clamp<std::size_t>(rank, 1, values.size());
    return values[rank - 1];
}

token_distribution distribution_of(const std::vector<std::uint64_t>& values) {
    token_distribution d;
    d.requests = values.size();
    if (values.empty()) {
        return d;
    }
    double sum = 0;
    for (const auto v : values) {
        sum += static_cast<double>(v);
    }
    d.mean = sum / static_cast<double>(values.size());
    d.p50 = nearest_rank(values, 0.50);
    d.p95 = nearest_rank(values, 0.95);
    return d;
}

// One per-minute series of a model as runs of equal minutes (usage/timeline), divided by
// `divisor`: its nearest-rank p50 and p99 over every minute from the first to the last, and its
// peak (the earliest of equals).
window_distribution per_second(bucket_timeline& series, std::int64_t first_minute,
                               std::int64_t last_minute, double divisor) {
    window_distribution d;
    std::vector<std::pair<double, std::uint64_t>> runs;  // value, minutes
    std::uint64_t minutes = 0;
    series.for_each_run(minute_ms, first_minute, last_minute,
                        [&](std::int64_t minute, std::uint64_t count, double amount) {
                            const double v = amount / divisor;
                            runs.emplace_back(v, count);
                            minutes += count;
                            if (v > d.peak) {
                                d.peak = v;
                                d.peak_minute_unix_ms = minute * minute_ms;
                            }
                        });
    if (d.peak == 0) {
        d.peak_minute_unix_ms = first_minute * minute_ms;
    }
    std::sort(runs.begin(), runs.end());
    const auto rank_value = [&](double q) {
        // Nearest rank: the smallest value with at least q of the minutes at or below it.
        auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(minutes)));
        rank = std::clamp<std::uint64_t>(rank, 1, std::max<std::uint64_t>(minutes, 1));
        std::uint64_t seen = 0;
        for (const auto& [value, count] : runs) {
            seen += count;
            if (seen >= rank) {
                return value;
            }
        }
        return 0.0;
    };
    d.p50 = rank_value(0.50);
    d.p99 = rank_value(0.99);
    return d;
}

double band_for(double tokens_per_second, double band_size) {
    return std::ceil(tokens_per_second / band_size - 1e-9) * band_size;
}

// When the first token came: start + ttft, else the end (no stream: all at once).
std::int64_t first_token_ms(const usage_record& r) {
    if (!r.ttft_seconds) {
        return r.end_unix_ms;
    }
    const auto at =
        r.start_unix_ms + static_cast<std::int64_t>(std::llround(*r.ttft_seconds * 1000));
    return std::clamp(at, r.start_unix_ms, std::max(r.start_unix_ms, r.end_unix_ms));
}

model_plan plan_of(const std::string& model, const std::vector<const usage_record*>& records,
                   const plan_options& options) {
    model_plan p;
    p.model = model;
    p.requests = records.size();
    std::int64_t first = records.front()->start_unix_ms;
    std::int64_t last = records.front()->end_unix_ms;
    std::vector<std::uint64_t> inputs;
    std::vector<std::uint64_t> outputs;
    for (const usage_record* r : records) {
        first = std::min(first, r->start_unix_ms);
        last = std::max({last, r->end_unix_ms, r->start_unix_ms});
        if (r->input.value) {
            inputs.push_back(*r->input.value);
        }
        if (r->output.value) {
            outputs.push_back(*r->output.value);
        }
    }
    p.input = distribution_of(inputs);
    p.output = distribution_of(outputs);

    const std::int64_t first_minute = minute_of(first);
    const std::int64_t last_minute = minute_of(last);
    p.first_minute_unix_ms = first_minute * minute_ms;
    p.minutes = static_cast<std::uint64_t>(last_minute - first_minute + 1);
    bucket_timeline tokens;   // input + output tokens that fell in each minute
    bucket_timeline busy_ms;  // request-milliseconds in flight during each minute
    bucket_timeline starts;   // requests that started in each minute
    for (const usage_record* r : records) {
        const std::int64_t end = std::max(r->end_unix_ms, r->start_unix_ms);
        const std::int64_t ftok = first_token_ms(*r);
        // Prefill ends at the first token: input counts there; output is spread to the end.
        tokens.add_at(static_cast<double>(r->input.value.value_or(0)), ftok);
        tokens.add_spread(static_cast<double>(r->output.value.value_or(0)), ftok, end);
        busy_ms.add_spread(static_cast<double>(end - r->start_unix_ms), r->start_unix_ms, end);
        starts.add_at(1, r->start_unix_ms);
    }
    p.tokens_per_second = per_second(tokens, first_minute, last_minute, 60.0);
    p.concurrency = per_second(busy_ms, first_minute, last_minute, static_cast<double>(minute_ms));
    p.requests_per_second = per_second(starts, first_minute, last_minute, 60.0);
    p.band_tokens_per_second = band_for(p.tokens_per_second.peak, options.band_size);
    p.reference_tokens_per_second =
        p.requests_per_second.peak *
        static_cast<double>(options.reference_input + options.reference_output);
    p.reference_band_tokens_per_second = band_for(p.reference_tokens_per_second, options.band_size);

    if (options.ttft_target_seconds) {
        target_share t{*options.ttft_target_seconds, 0, 0};
        for (const usage_record* r : records) {
            if (r->ttft_seconds) {
                t.judged += 1;
                t.good += *r->ttft_seconds <= t.target_seconds ? 1 : 0;
            }
        }
        p.ttft = t;
    }
    if (options.tpot_target_seconds) {
        target_share t{*options.tpot_target_seconds, 0, 0};
        for (const usage_record* r : records) {
            if (r->ttft_seconds && r->output.value && *r->output.value >= 2) {
                const double tpot = (r->duration_seconds - *r->ttft_seconds) /
                                    static_cast<double>(*r->output.value - 1);
                t.judged += 1;
                t.good += tpot <= t.target_seconds ? 1 : 0;
            }
        }
        p.tpot = t;
    }
    return p;
}

std::string number(double v, int decimals) {
    std::array<char, 64> buf{};
    std::snprintf(buf.data(), buf.size(), "%.*f", decimals, v);
    return buf.data();
}

std::string share(const target_share& t) {
    if (t.judged == 0) {
        return "no request to judge";
    }
    return number(100.0 * static_cast<double>(t.good) / static_cast<double>(t.judged), 1) +
           "% of " + std::to_string(t.judged) + " met it";
}

nlohmann::ordered_json windows_json(const window_distribution& d) {
    nlohmann::ordered_json j;
    j["p50"] = d.p50;
    j["p99"] = d.p99;
    j["peak"] = d.peak;
    j["peak_minute"] = format_time(d.peak_minute_unix_ms);
    return j;
}

nlohmann::ordered_json mix_json(const token_distribution& d) {
    nlohmann::ordered_json j;
    j["requests"] = d.requests;
    j["mean"] = d.mean;
    j["p50"] = d.p50;
    j["p95"] = d.p95;
    return j;
}

}  // namespace

std::vector<model_plan> build_plan(const std::vector<usage_record>& records,
                                   const report_filter& filter, const plan_options& options) {
    std::uint64_t duplicates = 0;
    std::map<std::string, std::vector<const usage_record*>> by_model;
    for (const usage_record* r : unique_records(records, duplicates)) {
        // A rejected request was never served: it needs no capacity.
        if (passes(*r, filter) && r->outcome != "rejected") {
            by_model[r->model].push_back(r);
        }
    }
    std::vector<model_plan> plans;
    plans.reserve(by_model.size());
    for (const auto& [model, list] : by_model) {
        plans.push_back(plan_of(model, list, options));
    }
    return plans;
}

std::string format_plan(const std::vector<model_plan>& plans, const plan_options& options) {
    std::string out;
    if (plans.empty()) {
        return "no served requests in the range\n";
    }
    for (const model_plan& p : plans) {
        out += "model " + (p.model.empty() ? std::string("(none)") : p.model) + ": " +
               std::to_string(p.requests) + " requests in " + std::to_string(p.minutes) +
               " one-minute window(s) from " + format_time(p.first_minute_unix_ms).substr(0, 16) +
               "Z\n";
        out += "  mix          input  mean " + number(p.input.mean, 1) + "  p50 " +
               std::to_string(p.input.p50) + "  p95 " + std::to_string(p.input.p95) +
               "   output  mean " + number(p.output.mean, 1) + "  p50 " +
               std::to_string(p.output.p50) + "  p95 " + std::to_string(p.output.p95) + "\n";
        const auto line = [&out](const char* what, const window_distribution& d, int decimals) {
            out += std::string("  ") + what + "p50 " + number(d.p50, decimals) + "  p99 " +
                   number(d.p99, decimals) + "  peak " + number(d.peak, decimals) + " (" +
                   format_time(d.peak_minute_unix_ms).substr(11, 5) + ")\n";
        };
        line("tokens/s     ", p.tokens_per_second, 1);
        line("concurrency  ", p.concurrency, 2);
        line("requests/s   ", p.requests_per_second, 3);
        out += "  band         " + number(p.band_tokens_per_second, 0) +
               " tokens/s for the peak of " + number(p.tokens_per_second.peak, 1) + " (band size " +
               number(options.band_size, 0) + ")\n";
        out += "  reference    " + number(p.reference_band_tokens_per_second, 0) +
               " tokens/s: the peak " + number(p.requests_per_second.peak, 3) + " requests/s at " +
               std::to_string(options.reference_input) + " in + " +
               std::to_string(options.reference_output) + " out (" +
               number(p.reference_tokens_per_second, 1) + " tokens/s)\n";
        if (p.ttft) {
            out += "  ttft <= " + number(p.ttft->target_seconds * 1000, 0) + " ms  " +
                   share(*p.ttft) + "\n";
        }
        if (p.tpot) {
            out += "  tpot <= " + number(p.tpot->target_seconds * 1000, 0) + " ms  " +
                   share(*p.tpot) + "\n";
        }
    }
    return out;
}

std::string plan_json(const std::vector<model_plan>& plans, const plan_options& options) {
    nlohmann::ordered_json out;
    out["band_size"] = options.band_size;
    out["reference_mix"] = {{"input", options.reference_input},
                            {"output", options.reference_output}};
    auto models = nlohmann::ordered_json::array();
    for (const model_plan& p : plans) {
        nlohmann::ordered_json m;
        m["model"] = p.model;
        m["requests"] = p.requests;
        m["first_minute"] = format_time(p.first_minute_unix_ms);
        m["minutes"] = p.minutes;
        m["input_tokens"] = mix_json(p.input);
        m["output_tokens"] = mix_json(p.output);
        m["tokens_per_second"] = windows_json(p.tokens_per_second);
        m["concurrency"] = windows_json(p.concurrency);
        m["requests_per_second"] = windows_json(p.requests_per_second);
        m["band_tokens_per_second"] = p.band_tokens_per_second;
        m["reference_tokens_per_second"] = p.reference_tokens_per_second;
        m["reference_band_tokens_per_second"] = p.reference_band_tokens_per_second;
        const auto target = [](const std::optional<target_share>& t) {
            if (!t) {
                return nlohmann::ordered_json(nullptr);
            }
            nlohmann::ordered_json j;
            j["target_s"] = t->target_seconds;
            j["judged"] = t->judged;
            j["good"] = t->good;
            return j;
        };
        m["ttft"] = target(p.ttft);
        m["tpot"] = target(p.tpot);
        models.push_back(std::move(m));
    }
    out["models"] = std::move(models);
    return out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace tokenmeter::usage
