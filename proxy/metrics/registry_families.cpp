// metrics/registry_families: every Prometheus family of the registry, one row each (member,
// name, help), registered in one loop per type.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <string>

#include "metrics/build_revision.hpp"
#include "metrics/registry.hpp"

namespace tokenmeter::metrics {

namespace {

template <typename T>
struct family_row {
    prometheus::Family<T>* registry::*slot;
    const char* name;
    const char* help;
};

}  // namespace

void registry::register_families() {
    static constexpr std::array<family_row<prometheus::Histogram>, 10> histograms{{
        {&registry::ttft_, "tokenmeter_time_to_first_token_seconds",
         "Time from the request head received to the first streamed token (content, "
         "reasoning or tool-call text)"},
        {&registry::ttfct_, "tokenmeter_time_to_first_content_token_seconds",
         "Time from the request head received to the first streamed answer text, after "
         "any reasoning or tool-call text"},
        {&registry::itl_, "tokenmeter_inter_token_latency_seconds",
         "Gap between consecutive output tokens; a chunk of k tokens after a gap g gives "
         "k observations of g/k"},
        {&registry::tpot_, "tokenmeter_time_per_output_token_seconds",
         "Per request: (last token time - first token time) / (output tokens - 1)"},
        {&registry::output_tps_, "tokenmeter_output_tokens_per_second",
         "Per request: output tokens / (end - request received)"},
        {&registry::decode_tps_, "tokenmeter_decode_tokens_per_second",
         "Per request: (output tokens - 1) / (last token - first token)"},
        {&registry::duration_, "tokenmeter_request_duration_seconds",
         "Time from the request head received to the end of the response"},
        {&registry::normalized_tps_, "tokenmeter_normalized_output_tokens_per_second",
         "Per request: output tokens counted with the reference tokenizer / (end - "
         "request received); comparable across models whatever their tokenizers"},
        {&registry::input_tokens_, "tokenmeter_request_input_tokens",
         "Per request: input tokens, the best count as in the usage records "
         "(OpenTelemetry gen_ai.client.token.usage buckets)"},
        {&registry::output_tokens_, "tokenmeter_request_output_tokens",
         "Per request: output tokens (reasoning included), the best count as in the "
         "usage records (gen_ai.client.token.usage buckets)"},
    }};
    static constexpr std::array<family_row<prometheus::Counter>, 14> counters{{
        {&registry::output_chars_, "tokenmeter_output_chars_total",
         "Bytes of output text (content, reasoning, tool-call arguments)"},
        {&registry::mismatch_, "tokenmeter_token_count_mismatch_total",
         "Requests whose reported token count differs from the native tokenizer's count "
         "by more than the tolerance (2 tokens and 2%)"},
        {&registry::requests_, "tokenmeter_requests_total",
         "Requests by model, API, outcome and the status code the client got"},
        // Each token once, from the best source (as the usage records choose): the sum over
        // every label is the tokens billed. Reasoning and cached input are parts of output and
        // input, and the per-source counts are alternatives, so each has a family of its own.
        {&registry::tokens_, "tokenmeter_tokens_total",
         "Tokens billed, by type (input, output) and the source of the count (reported, "
         "native, normalized, counted), each token counted once as in the usage records"},
        {&registry::reasoning_tokens_, "tokenmeter_reasoning_tokens_total",
         "Output tokens that were reasoning (part of "
         "tokenmeter_tokens_total{type=\"output\"}), by source of the count"},
        {&registry::cached_input_tokens_, "tokenmeter_cached_input_tokens_total",
         "Input tokens the server served from its prompt cache, as it reported them "
         "(part of tokenmeter_tokens_total{type=\"input\"})"},
        {&registry::cache_write_tokens_, "tokenmeter_cache_write_tokens_total",
         "Input tokens the server wrote to its prompt cache, as it reported them (part "
         "of tokenmeter_tokens_total{type=\"input\"})"},
        {&registry::reported_tokens_, "tokenmeter_reported_tokens_total",
         "Tokens as the model server's usage report counts them"},
        {&registry::native_tokens_, "tokenmeter_native_tokens_total",
         "Tokens as the model's own tokenizer counts them (re-tokenized)"},
        {&registry::normalized_tokens_, "tokenmeter_normalized_tokens_total",
         "Tokens as the reference tokenizer counts them, the same tokenizer for every "
         "model"},
        {&registry::parse_errors_, "tokenmeter_parse_errors_total",
         "Response bodies, events or lines that could not be understood, by API and "
         "reason; each was forwarded unchanged"},
        {&registry::upstream_errors_, "tokenmeter_upstream_errors_total",
         "Failures talking to the upstream, by reason"},
        {&registry::metering_failures_, "tokenmeter_metering_failures_total",
         "Failures inside metering, by the phase of the request that failed; the "
         "response went on unchanged and its usage record is marked degraded"},
        {&registry::slo_requests_, "tokenmeter_slo_requests_total",
         "Requests counted against a model's SLOs: for ttft and tpot good when the "
         "measurement is at most the target, for availability good when served without a "
         "5xx, an error in the stream or a cut"},
    }};
    static constexpr std::array<family_row<prometheus::Gauge>, 2> gauges{{
        {&registry::slo_objective_, "tokenmeter_slo_objective_ratio",
         "The configured fraction of requests that must be good"},
        {&registry::slo_target_, "tokenmeter_slo_target_seconds",
         "The configured latency target of an SLO"},
    }};
    for (const auto& row : histograms) {
        this->*row.slot =
            &prometheus::BuildHistogram().Name(row.name).Help(row.help).Register(*registry_);
    }
    for (const auto& row : counters) {
        this->*row.slot =
            &prometheus::BuildCounter().Name(row.name).Help(row.help).Register(*registry_);
    }
    for (const auto& row : gauges) {
        this->*row.slot =
            &prometheus::BuildGauge().Name(row.name).Help(row.help).Register(*registry_);
    }
    auto& finishing = prometheus::BuildCounter()
                          .Name("tokenmeter_finishing_thread_ends_total")
                          .Help(
                              "Request ends too large for an I/O thread (a long prompt to count, a "
                              "large JSON body): queued for the finishing thread, or run in place "
                              "because its queue was full")
                          .Register(*registry_);
    finishing_queued_ = &finishing.Add({{"result", "queued"}});
    finishing_full_ = &finishing.Add({{"result", "queue_full"}});
    streams_active_ = &prometheus::BuildGauge()
                           .Name("tokenmeter_streams_active")
                           .Help("Responses currently being relayed")
                           .Register(*registry_)
                           .Add({});
    prometheus::BuildGauge()
        .Name("tokenmeter_build_info")
        .Help("Always 1; labels carry the version and the git revision it was built from")
        .Register(*registry_)
        .Add({{"version", TOKENMETER_VERSION}, {"revision", std::string(build_revision())}})
        .Set(1);
}

}  // namespace tokenmeter::metrics
