// metrics/slo: histogram bucket boundaries and service-level objectives as the registry uses
// them: the default boundaries, the MLPerf presets, SLO targets added to default bucket lists so
// that good/bad counts and histogram quantiles agree at each target, and the availability rule.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meter/summary.hpp"

namespace tokenmeter::metrics {

// Boundaries in seconds (or tokens per second), strictly increasing; +Inf is implied.
struct histogram_buckets {
    std::vector<double> time_to_first_token;
    std::vector<double> inter_token_latency;
    std::vector<double> time_per_output_token;
    std::vector<double> output_tokens_per_second;
    std::vector<double> decode_tokens_per_second;
    std::vector<double> request_duration;
    bool operator==(const histogram_buckets&) const = default;
};

// OpenTelemetry GenAI semantic-convention boundaries, extended as config/README.md documents.
histogram_buckets default_buckets();

// One model's objectives. A target left unset is not counted.
struct slo_target {
    std::optional<std::chrono::milliseconds> ttft;  // good when TTFT is at most this
    std::optional<std::chrono::milliseconds> tpot;  // ... and when TPOT is at most this
    std::optional<double> objective;  // fraction of good requests (0.99); unset: the default
    // The availability objective (0.999): the share of requests that must be served without a
    // failure of the server or the proxy (availability_of). Unset: availability is not counted.
    std::optional<double> availability;
    bool operator==(const slo_target&) const = default;
};

// The availability objective every preset carries, so that a config naming only a preset is
// alerted on an outage.
inline constexpr double preset_availability = 0.999;

// MLPerf Inference LLM scenarios ("server", "interactive"): their targets, with the preset
// availability objective; nullopt otherwise.
std::optional<slo_target> slo_preset(std::string_view name);

// How one request counts for availability.
enum class availability : std::uint8_t {
    good,      // answered: a 1xx-3xx response the upstream finished
    bad,       // a 5xx (the proxy's own or the upstream's), an error in the stream, a cut stream
    excluded,  // the client's doing: a cancel, a 4xx answer (429 included), a local refusal
};
// The rule, from how a request ended and the status code the client got.
availability availability_of(meter::outcome result, int status) noexcept;

struct slo_options {
    double objective = 0.99;                   // for entries that do not name their own
    std::optional<slo_target> default_target;  // for every model without its own entry
    std::map<std::string, slo_target> models;  // keyed by the model name clients send
    bool operator==(const slo_options&) const = default;
};

// The objective that applies to one entry (its own, else slo.objective).
double slo_objective(const slo_options& slo, const slo_target& target);

// The bucket lists the registry uses: a list equal to its default gains every SLO target as a
// boundary (TTFT targets in time_to_first_token, TPOT targets in time_per_output_token and
// inter_token_latency).
histogram_buckets buckets_with_slo_targets(const histogram_buckets& configured,
                                           const slo_options& slo);

// A target that is not a boundary of a list that was changed from its default: quantiles and
// SLO counts would disagree at the target.
struct slo_target_off_buckets {
    std::optional<std::string> model;  // nullopt: the default entry
    std::string_view target;           // "ttft" or "tpot"
    std::string_view list;             // e.g. "time_to_first_token"
    double seconds = 0;
};
std::vector<slo_target_off_buckets> slo_targets_off_buckets(const histogram_buckets& configured,
                                                            const slo_options& slo);

}  // namespace tokenmeter::metrics
