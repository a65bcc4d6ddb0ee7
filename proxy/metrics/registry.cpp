#include "metrics/registry.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <string>

namespace tokenmeter::metrics {
namespace {

constexpr std::size_t max_model_label_length = 128;

std::string code_label(int code) {
    return code <= 0 ? "0" : std::to_string(code);
}

}  // namespace

model_labels::model_labels(std::vector<std::string> allowlist, std::uint32_t max_models)
    : allowed_(allowlist.begin(), allowlist.end()),
      fixed_(!allowlist.empty()),
      max_models_(max_models) {}

std::string model_labels::label_for(std::string_view model) {
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
    if (fixed_ || allowed_.size() >= max_models_) {
        return "other";
    }
    allowed_.insert(name);
    return name;
}

registry::registry(const config::metrics& settings)
    : buckets_(settings.buckets),
      models_(settings.model_allowlist, settings.max_models),
      registry_(std::make_shared<prometheus::Registry>()) {
    using prometheus::BuildCounter;
    using prometheus::BuildGauge;
    using prometheus::BuildHistogram;
    ttft_ = &BuildHistogram()
                 .Name("tokenmeter_time_to_first_token_seconds")
                 .Help(
                     "Time from the request head received to the first streamed token (content, "
                     "reasoning or tool-call text)")
                 .Register(*registry_);
    ttfct_ = &BuildHistogram()
                  .Name("tokenmeter_time_to_first_content_token_seconds")
                  .Help(
                      "Time from the request head received to the first streamed answer text, "
                      "after any reasoning or tool-call text")
                  .Register(*registry_);
    itl_ = &BuildHistogram()
                .Name("tokenmeter_inter_token_latency_seconds")
                .Help(
                    "Gap between consecutive output tokens; a chunk of k tokens after a gap g "
                    "gives k observations of g/k")
                .Register(*registry_);
    tpot_ = &BuildHistogram()
                 .Name("tokenmeter_time_per_output_token_seconds")
                 .Help("Per request: (last token time - first token time) / (output tokens - 1)")
                 .Register(*registry_);
    output_tps_ = &BuildHistogram()
                       .Name("tokenmeter_output_tokens_per_second")
                       .Help("Per request: output tokens / (end - request received)")
                       .Register(*registry_);
    decode_tps_ = &BuildHistogram()
                       .Name("tokenmeter_decode_tokens_per_second")
                       .Help("Per request: (output tokens - 1) / (last token - first token)")
                       .Register(*registry_);
    duration_ = &BuildHistogram()
                     .Name("tokenmeter_request_duration_seconds")
                     .Help("Time from the request head received to the end of the response")
                     .Register(*registry_);
    requests_ = &BuildCounter()
                     .Name("tokenmeter_requests_total")
                     .Help("Requests by model, API, outcome and the status code the client got")
                     .Register(*registry_);
    tokens_ = &BuildCounter()
                   .Name("tokenmeter_tokens_total")
                   .Help(
                       "Tokens by type (input, output, reasoning, cached_input) as reported by the "
                       "model server; reasoning is part of output, cached_input part of input")
                   .Register(*registry_);
    parse_errors_ =
        &BuildCounter()
             .Name("tokenmeter_parse_errors_total")
             .Help(
                 "Response bodies, events or lines that could not be understood, by API "
                 "and reason; each was forwarded unchanged")
             .Register(*registry_);
    upstream_errors_ = &BuildCounter()
                            .Name("tokenmeter_upstream_errors_total")
                            .Help("Failures talking to the upstream, by reason")
                            .Register(*registry_);
    streams_active_ = &BuildGauge()
                           .Name("tokenmeter_streams_active")
                           .Help("Responses currently being relayed")
                           .Register(*registry_)
                           .Add({});
    BuildGauge()
        .Name("tokenmeter_build_info")
        .Help("Always 1; labels carry the version")
        .Register(*registry_)
        .Add({{"version", TOKENMETER_VERSION}})
        .Set(1);
}

registry::~registry() = default;

void registry::record(const meter::request_summary& s) {
    std::string model = count_request(s.api, s.model, s.result, s.status, s.duration_seconds);
    std::string api(protocol::to_string(s.api));
    for (std::size_t i = 0; i < s.parse_errors_by_reason.size(); ++i) {
        if (s.parse_errors_by_reason[i] > 0) {
            parse_errors(s.api, static_cast<protocol::parse_error>(i), s.parse_errors_by_reason[i]);
        }
    }
    if (s.api == protocol::api_kind::none) {
        return;
    }
    prometheus::Labels labels{{"model", model}, {"api", api}};
    if (s.time_to_first_token) {
        ttft_->Add(labels, buckets_.time_to_first_token).Observe(*s.time_to_first_token);
    }
    if (s.time_to_first_content_token) {
        ttfct_->Add(labels, buckets_.time_to_first_token).Observe(*s.time_to_first_content_token);
    }
    if (s.inter_token_latency.count() > 0) {
        itl_->Add(labels, buckets_.inter_token_latency)
            .ObserveMultiple(s.inter_token_latency.bucket_increments(),
                             s.inter_token_latency.sum());
    }
    if (s.time_per_output_token) {
        tpot_->Add(labels, buckets_.time_per_output_token).Observe(*s.time_per_output_token);
    }
    if (s.output_tokens_per_second) {
        output_tps_->Add(labels, buckets_.output_tokens_per_second)
            .Observe(*s.output_tokens_per_second);
    }
    if (s.decode_tokens_per_second) {
        decode_tps_->Add(labels, buckets_.decode_tokens_per_second)
            .Observe(*s.decode_tokens_per_second);
    }
    if (s.reported.input_tokens) {
        tokens_->Add({{"model", model}, {"api", api}, {"type", "input"}})
            .Increment(static_cast<double>(*s.reported.input_tokens));
    }
    if (s.reported.output_tokens) {
        tokens_->Add({{"model", model}, {"api", api}, {"type", "output"}})
            .Increment(static_cast<double>(*s.reported.output_tokens));
    }
    if (s.reported.reasoning_tokens) {
        tokens_->Add({{"model", model}, {"api", api}, {"type", "reasoning"}})
            .Increment(static_cast<double>(*s.reported.reasoning_tokens));
    }
    if (s.reported.cached_input_tokens) {
        tokens_->Add({{"model", model}, {"api", api}, {"type", "cached_input"}})
            .Increment(static_cast<double>(*s.reported.cached_input_tokens));
    }
}

void registry::record_unforwarded(protocol::api_kind api, std::string_view model,
                                  meter::outcome result, int code, double duration_seconds) {
    count_request(api, model, result, code, duration_seconds);
}

// The two families every request lands in, forwarded or not. Returns the bounded model label.
std::string registry::count_request(protocol::api_kind api, std::string_view model,
                                    meter::outcome result, int code, double duration_seconds) {
    std::string model_label = api == protocol::api_kind::none ? "none" : models_.label_for(model);
    std::string api_label(protocol::to_string(api));
    std::string outcome(meter::to_string(result));
    requests_
        ->Add({{"model", model_label},
               {"api", api_label},
               {"outcome", outcome},
               {"code", code_label(code)}})
        .Increment();
    duration_
        ->Add({{"model", model_label}, {"api", api_label}, {"outcome", outcome}},
              buckets_.request_duration)
        .Observe(duration_seconds);
    return model_label;
}

void registry::stream_opened() {
    streams_active_->Increment();
}
void registry::stream_closed() {
    streams_active_->Decrement();
}

void registry::upstream_error(std::string_view reason) {
    upstream_errors_->Add({{"reason", std::string(reason)}}).Increment();
}

void registry::parse_errors(protocol::api_kind api, protocol::parse_error reason,
                            std::uint64_t count) {
    parse_errors_
        ->Add({{"api", std::string(protocol::to_string(api))},
               {"reason", std::string(protocol::to_string(reason))}})
        .Increment(static_cast<double>(count));
}

std::string registry::expose() const {
    return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace tokenmeter::metrics
