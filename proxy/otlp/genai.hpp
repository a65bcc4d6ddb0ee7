// otlp/genai: one finished request in the OpenTelemetry GenAI semantic conventions. Its span
// (gen_ai.* attributes, an event at the first token) and the values of the four GenAI metrics,
// taken from the request's summary and its billed counts (meter::billed, the rule every other
// count reads), and the metrics' cumulative state, bounded in series.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/trace_context.hpp"
#include "meter/billing.hpp"
#include "meter/summary.hpp"
#include "otlp/encode.hpp"

namespace tokenmeter::otlp {

// What a request's end leaves for the exporter: the span when the trace is sampled, and the
// metric values always.
struct finished_request {
    std::optional<span> traced;  // only sampled requests are exported
    std::string operation;       // gen_ai.operation.name
    std::string provider;        // gen_ai.provider.name
    std::string model;           // gen_ai.request.model
    std::string error_type;      // error.type; "" when the request succeeded
    std::optional<double> time_to_first_token;
    std::optional<double> time_per_output_token;
    double duration_seconds = 0;
    std::optional<std::uint64_t> input_tokens;
    std::optional<std::uint64_t> output_tokens;
};

// Where the upstream is (server.address, server.port).
struct server_endpoint {
    std::string address;
    std::uint16_t port = 0;
};

// The request as the conventions name it. `end_unix_ns` is the wall time of the summary's end;
// the other times follow from the summary's steady time points.
[[nodiscard]] finished_request describe(const meter::request_summary& summary,
                                        const meter::billed_counts& counts,
                                        const core::trace_context& trace,
                                        const server_endpoint& server, std::int64_t end_unix_ns);

// The error.type of a request; "" when it succeeded.
[[nodiscard]] std::string error_type(const meter::request_summary& summary);

// The explicit bucket boundaries the conventions advise.
const std::vector<double>& time_to_first_token_bounds();
const std::vector<double>& time_per_output_token_bounds();
const std::vector<double>& request_duration_bounds();
const std::vector<double>& token_usage_bounds();

// gen_ai.server.time_to_first_token, gen_ai.server.time_per_output_token,
// gen_ai.server.request.duration and gen_ai.client.token.usage, cumulative since the exporter
// started. Not thread-safe: the exporter's thread owns it. Past `max_series` distinct
// attribute sets per metric, new models are recorded under the model "other".
class genai_metrics {
  public:
    explicit genai_metrics(std::size_t max_series = 500) : max_series_(max_series) {}
    void record(const finished_request& r);
    [[nodiscard]] std::vector<histogram> snapshot() const;
    [[nodiscard]] bool empty() const noexcept { return duration_.by_key.empty(); }

  private:
    // operation, provider, model, error.type (token usage: the token type in its place)
    using key = std::tuple<std::string, std::string, std::string, std::string>;
    struct series {
        std::uint64_t count = 0;
        double sum = 0;
        double min = 0;
        double max = 0;
        std::vector<std::uint64_t> buckets;
    };
    struct family {
        const std::vector<double>* bounds;
        std::map<key, series> by_key;
    };
    static void observe(family& f, key k, double value, std::size_t max_series);
    [[nodiscard]] histogram export_family(const family& f, const char* name,
                                          const char* description, const char* unit,
                                          const char* fourth_attribute) const;

    std::size_t max_series_;
    family ttft_{&time_to_first_token_bounds(), {}};
    family tpot_{&time_per_output_token_bounds(), {}};
    family duration_{&request_duration_bounds(), {}};
    family tokens_{&token_usage_bounds(), {}};
};

}  // namespace tokenmeter::otlp
