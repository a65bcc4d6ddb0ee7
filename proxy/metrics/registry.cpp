#include "metrics/registry.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <cmath>
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
    normalized_tps_ =
        &BuildHistogram()
             .Name("tokenmeter_normalized_output_tokens_per_second")
             .Help(
                 "Per request: output tokens counted with the reference tokenizer / (end - request "
                 "received); comparable across models whatever their tokenizers")
             .Register(*registry_);
    output_chars_ = &BuildCounter()
                         .Name("tokenmeter_output_chars_total")
                         .Help("Bytes of output text (content, reasoning, tool-call arguments)")
                         .Register(*registry_);
    mismatch_ = &BuildCounter()
                     .Name("tokenmeter_token_count_mismatch_total")
                     .Help(
                         "Requests whose reported token count differs from the native tokenizer's "
                         "count by more than the tolerance (2 tokens and 2%)")
                     .Register(*registry_);
    requests_ = &BuildCounter()
                     .Name("tokenmeter_requests_total")
                     .Help("Requests by model, API, outcome and the status code the client got")
                     .Register(*registry_);
    tokens_ = &BuildCounter()
                   .Name("tokenmeter_tokens_total")
                   .Help(
                       "Tokens by type (input, output) and count: reported by the model server, "
                       "native (the model's tokenizer), normalized (the reference tokenizer)")
                   .Register(*registry_);
    parse_errors_ = &BuildCounter()
                         .Name("tokenmeter_parse_errors_total")
                         .Help(
                             "Response bodies or events that could not be understood; each was "
                             "forwarded unchanged")
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
    parse_errors_total_ = &parse_errors_->Add({});
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
    if (s.parse_errors > 0) {
        parse_errors_total_->Increment(static_cast<double>(s.parse_errors));
    }
    if (s.api == protocol::api_kind::none) {
        return;
    }
    prometheus::Labels labels{{"model", model}, {"api", api}};
    if (s.time_to_first_token) {
        ttft_->Add(labels, buckets_.time_to_first_token).Observe(*s.time_to_first_token);
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
    if (s.normalized_output_tokens_per_second) {
        normalized_tps_->Add(labels, buckets_.output_tokens_per_second)
            .Observe(*s.normalized_output_tokens_per_second);
    }
    if (s.output_chars > 0) {
        output_chars_->Add(labels).Increment(static_cast<double>(s.output_chars));
    }
    auto count_tokens = [&](const char* type, const char* source,
                            const std::optional<std::uint64_t>& n) {
        if (n) {
            tokens_->Add({{"model", model}, {"api", api}, {"type", type}, {"count", source}})
                .Increment(static_cast<double>(*n));
        }
    };
    count_tokens("input", "reported", s.reported.input_tokens);
    count_tokens("output", "reported", s.reported.output_tokens);
    count_tokens("input", "native", s.native_input_tokens);
    count_tokens("output", "native", s.native_output_tokens);
    count_tokens("input", "normalized", s.normalized_input_tokens);
    count_tokens("output", "normalized", s.normalized_output_tokens);

    // A server whose usage report disagrees with its own tokenizer has a broken report (or
    // hides text, like unstreamed reasoning). One or two tokens of difference are normal: an
    // end-of-sequence token, a detokenizer's trailing bytes.
    auto check = [&](const char* type, const std::optional<std::uint64_t>& reported,
                     const std::optional<std::uint64_t>& native) {
        if (!reported || !native) {
            return;
        }
        const double r = static_cast<double>(*reported);
        const double diff = std::abs(r - static_cast<double>(*native));
        if (diff > 2.0 && diff > 0.02 * r) {
            mismatch_->Add({{"model", model}, {"type", type}}).Increment();
        }
    };
    // Input is not compared: the prompt is counted without its chat template.
    if (s.result == meter::outcome::complete) {
        check("output", s.reported.output_tokens, s.native_output_tokens);
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

void registry::parse_errors(std::uint64_t count) {
    parse_errors_total_->Increment(static_cast<double>(count));
}

std::string registry::expose() const {
    return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace tokenmeter::metrics
