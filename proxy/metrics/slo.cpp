// metrics/slo: default boundaries, presets and how SLO targets meet the bucket lists.
#include "metrics/slo.hpp"

#include <algorithm>
#include <cmath>

namespace tokenmeter::metrics {

using std::chrono::milliseconds;

namespace {

// 2^(k/4) seconds for k in [from, to], rounded to 4 significant digits: each bucket is about
// 19 % wider than the one below, so histogram_quantile's linear interpolation inside one bucket
// puts a median within 9.5 % of the truth however the values fall. These are the boundaries of a
// native histogram of schema 2, and exact powers of two (0.25, 0.5, 1, 2 s) are among them.
std::vector<double> quarter_octaves(int from, int to) {
    std::vector<double> out;
    for (int k = from; k <= to; ++k) {
        const double v = std::exp2(static_cast<double>(k) / 4.0);
        const double scale = std::pow(10.0, 3.0 - std::floor(std::log10(v)));
        out.push_back(std::round(v * scale) / scale);
    }
    return out;
}

double seconds_of(milliseconds d) {
    return static_cast<double>(d.count()) / 1000.0;
}

void add_boundary(std::vector<double>& bounds, double v) {
    const auto at = std::lower_bound(bounds.begin(), bounds.end(), v);
    if (at == bounds.end() || *at != v) {
        bounds.insert(at, v);
    }
}

// Every configured entry, the default one first (without a model name).
std::vector<std::pair<std::optional<std::string>, const slo_target*>> slo_entries(
    const slo_options& slo) {
    std::vector<std::pair<std::optional<std::string>, const slo_target*>> out;
    if (slo.default_target) {
        out.emplace_back(std::nullopt, &*slo.default_target);
    }
    for (const auto& [name, target] : slo.models) {
        out.emplace_back(name, &target);
    }
    return out;
}

}  // namespace

histogram_buckets default_buckets() {
    histogram_buckets b;
    // 3.9 ms to 64 s (57 boundaries): the 5 ms to 60 s range with a bucket to spare at each end.
    b.time_to_first_token = quarter_octaves(-32, 24);
    // 0.82 ms to 2.83 s (48 boundaries): batched decoding emits tokens under 10 ms apart, a
    // stalled stream seconds apart.
    b.inter_token_latency = quarter_octaves(-41, 6);
    b.time_per_output_token = b.inter_token_latency;
    // Not latencies: a 1-2-5 ladder spanning CPU inference to speculative decoding.
    b.output_tokens_per_second = {1,   2,   5,   10,  20,  30,   40,   50,  75,
                                  100, 150, 200, 300, 500, 1000, 2000, 5000};
    b.decode_tokens_per_second = b.output_tokens_per_second;
    // 3.9 ms to 256 s (65 boundaries): as TTFT, extended because long generations and reasoning
    // runs last minutes.
    b.request_duration = quarter_octaves(-32, 32);
    return b;
}

std::optional<slo_target> slo_preset(std::string_view name) {
    // MLPerf Inference v5 LLM scenarios (Llama 2 70B): "server" is the classic online scenario,
    // "interactive" the tighter one for chat-like use.
    if (name == "server") {
        return slo_target{milliseconds{2'000}, milliseconds{100}, std::nullopt,
                          preset_availability};
    }
    if (name == "interactive") {
        return slo_target{milliseconds{500}, milliseconds{30}, std::nullopt, preset_availability};
    }
    return std::nullopt;
}

availability availability_of(meter::outcome result, int status) noexcept {
    switch (result) {
        case meter::outcome::complete:
            return availability::good;
        case meter::outcome::client_cancel:
        case meter::outcome::rejected:
            // The client went away, or sent what the proxy must refuse: nothing the server or
            // the proxy could have served better.
            return availability::excluded;
        case meter::outcome::upstream_truncated:
            // Cut by the upstream or by the idle timeout: the client got half an answer.
            return availability::bad;
        case meter::outcome::upstream_error:
            // A 4xx is the request's fault (a bad body, an unknown model, the server's own rate
            // limit); everything else here is a 5xx, an error object inside a 2xx stream, or a
            // stream the proxy had to cut.
            if (status >= 400 && status < 500) {
                return availability::excluded;
            }
            return availability::bad;
    }
    return availability::excluded;
}

double slo_objective(const slo_options& slo, const slo_target& target) {
    return target.objective.value_or(slo.objective);
}

histogram_buckets buckets_with_slo_targets(const histogram_buckets& configured,
                                           const slo_options& slo) {
    histogram_buckets out = configured;
    const histogram_buckets defaults = default_buckets();
    // Compared with the lists as configured, not as extended, so every target gets in.
    for (const auto& [model, target] : slo_entries(slo)) {
        if (target->ttft && configured.time_to_first_token == defaults.time_to_first_token) {
            add_boundary(out.time_to_first_token, seconds_of(*target->ttft));
        }
        if (target->tpot && configured.time_per_output_token == defaults.time_per_output_token) {
            add_boundary(out.time_per_output_token, seconds_of(*target->tpot));
        }
        if (target->tpot && configured.inter_token_latency == defaults.inter_token_latency) {
            add_boundary(out.inter_token_latency, seconds_of(*target->tpot));
        }
    }
    return out;
}

std::vector<slo_target_off_buckets> slo_targets_off_buckets(const histogram_buckets& configured,
                                                            const slo_options& slo) {
    std::vector<slo_target_off_buckets> out;
    const histogram_buckets defaults = default_buckets();
    const auto must_be_boundary =
        [&](const std::optional<std::string>& model, std::string_view target, milliseconds value,
            const std::vector<double>& bounds, const std::vector<double>& default_bounds,
            std::string_view list) {
            const double v = seconds_of(value);
            if (bounds != default_bounds &&
                std::find(bounds.begin(), bounds.end(), v) == bounds.end()) {
                out.push_back({model, target, list, v});
            }
        };
    for (const auto& [model, target] : slo_entries(slo)) {
        if (target->ttft) {
            must_be_boundary(model, "ttft", *target->ttft, configured.time_to_first_token,
                             defaults.time_to_first_token, "time_to_first_token");
        }
        if (target->tpot) {
            must_be_boundary(model, "tpot", *target->tpot, configured.time_per_output_token,
                             defaults.time_per_output_token, "time_per_output_token");
            must_be_boundary(model, "tpot", *target->tpot, configured.inter_token_latency,
                             defaults.inter_token_latency, "inter_token_latency");
        }
    }
    return out;
}

}  // namespace tokenmeter::metrics
