#include "otlp/genai.hpp"

#include <algorithm>
#include <chrono>

namespace tokenmeter::otlp {

namespace {

struct api_names {
    const char* operation;
    const char* provider;
};

// gen_ai.operation.name and gen_ai.provider.name of a dialect. The provider is the API's
// maker where the conventions name one (openai, anthropic, gcp.gemini); a server that only
// speaks its own API is named by it.
api_names names_of(protocol::api_kind api) {
    using protocol::api_kind;
    switch (api) {
        case api_kind::openai_chat_completions:
        case api_kind::openai_responses:
            return {"chat", "openai"};
        case api_kind::openai_completions:
            return {"text_completion", "openai"};
        case api_kind::anthropic_messages:
            return {"chat", "anthropic"};
        case api_kind::tgi_generate:
            return {"text_completion", "huggingface.tgi"};
        case api_kind::llamacpp_completion:
            return {"text_completion", "llama.cpp"};
        case api_kind::ollama_chat:
            return {"chat", "ollama"};
        case api_kind::ollama_generate:
            return {"text_completion", "ollama"};
        case api_kind::gemini_generate:
            return {"generate_content", "gcp.gemini"};
        // No predefined operation but "embeddings" fits the rest: each is named by its API.
        // Rerank is Cohere's API; score, classify and pooling are vLLM's own.
        case api_kind::openai_embeddings:
            return {"embeddings", "openai"};
        case api_kind::rerank:
            return {"rerank", "cohere"};
        case api_kind::score:
            return {"score", "vllm"};
        case api_kind::classify:
            return {"classify", "vllm"};
        case api_kind::pooling:
            return {"pooling", "vllm"};
        case api_kind::openai_moderations:
            return {"moderation", "openai"};
        case api_kind::openai_transcriptions:
            return {"transcription", "openai"};
        case api_kind::openai_translations:
            return {"translation", "openai"};
        case api_kind::openai_speech:
            return {"speech", "openai"};
        case api_kind::openai_realtime:
            return {"realtime", "openai"};
        case api_kind::openai_realtime_transcription:
            return {"transcription", "openai"};
        case api_kind::none:
            break;
    }
    return {"unknown", "unknown"};
}

std::int64_t nanoseconds(core::duration d) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

void add_count(attributes& attrs, const char* key, const meter::token_count& count) {
    if (count.value) {
        attrs.push_back({key, static_cast<std::int64_t>(*count.value)});
    }
}

}  // namespace

std::string error_type(const meter::request_summary& summary) {
    if (summary.status >= 400) {
        return std::to_string(summary.status);
    }
    if (summary.result == meter::outcome::complete) {
        return {};
    }
    if (!summary.local_answer.empty()) {
        return summary.local_answer;
    }
    return std::string(meter::to_string(summary.result));
}

finished_request describe(const meter::request_summary& summary, const meter::billed_counts& counts,
                          const core::trace_context& trace, const server_endpoint& server,
                          std::int64_t end_unix_ns) {
    const api_names names = names_of(summary.api);
    finished_request out;
    out.operation = names.operation;
    out.provider = names.provider;
    out.model = summary.model;
    out.error_type = error_type(summary);
    if (out.error_type.empty()) {
        out.time_to_first_token = summary.time_to_first_token;
        out.time_per_output_token = summary.time_per_output_token;
    }
    out.duration_seconds = summary.duration_seconds;
    out.input_tokens = counts.input.value;
    out.output_tokens = counts.output.value;
    if (!trace.valid() || !trace.sampled()) {
        return out;
    }
    span s;
    s.trace = trace.trace;
    s.id = trace.span;
    s.parent = trace.parent;
    s.name = out.operation;
    if (!summary.model.empty()) {
        s.name += " " + summary.model;
    }
    s.kind = span_kind::client;
    s.end_unix_ns = end_unix_ns;
    s.start_unix_ns = end_unix_ns - nanoseconds(summary.end - summary.request_received);
    attributes& a = s.attrs;
    a.push_back({"gen_ai.operation.name", out.operation});
    a.push_back({"gen_ai.provider.name", out.provider});
    if (!summary.model.empty()) {
        a.push_back({"gen_ai.request.model", summary.model});
    }
    if (!summary.response_model.empty()) {
        a.push_back({"gen_ai.response.model", summary.response_model});
    }
    add_count(a, "gen_ai.usage.input_tokens", counts.input);
    add_count(a, "gen_ai.usage.output_tokens", counts.output);
    add_count(a, "gen_ai.usage.cache_read.input_tokens", counts.cached_input);
    add_count(a, "gen_ai.usage.cache_creation.input_tokens", counts.cache_write);
    add_count(a, "gen_ai.usage.reasoning.output_tokens", counts.reasoning);
    if (!summary.finish_reason.empty()) {
        a.push_back({"gen_ai.response.finish_reason", summary.finish_reason});
    }
    if (!server.address.empty()) {
        a.push_back({"server.address", server.address});
        a.push_back({"server.port", static_cast<std::int64_t>(server.port)});
    }
    if (summary.status > 0) {
        a.push_back({"http.response.status_code", static_cast<std::int64_t>(summary.status)});
    }
    a.push_back({"tokenmeter.outcome", std::string(meter::to_string(summary.result))});
    if (!out.error_type.empty()) {
        a.push_back({"error.type", out.error_type});
        s.status = status_code::error;
        s.status_message = out.error_type;
    }
    if (summary.first_token) {
        span_event first;
        first.name = "gen_ai.first_token";
        first.time_unix_ns = end_unix_ns - nanoseconds(summary.end - *summary.first_token);
        if (summary.time_to_first_token) {
            first.attrs.push_back(
                {"gen_ai.server.time_to_first_token", *summary.time_to_first_token});
        }
        s.events.push_back(std::move(first));
    }
    out.traced = std::move(s);
    return out;
}

const std::vector<double>& time_to_first_token_bounds() {
    static const std::vector<double> b{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                       0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0};
    return b;
}

const std::vector<double>& time_per_output_token_bounds() {
    static const std::vector<double> b{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                       0.3,  0.4,   0.5,  0.75,  1.0, 2.5};
    return b;
}

const std::vector<double>& request_duration_bounds() {
    static const std::vector<double> b{0.01, 0.02, 0.04, 0.08,  0.16,  0.32,  0.64,
                                       1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92};
    return b;
}

const std::vector<double>& token_usage_bounds() {
    static const std::vector<double> b{1,     4,     16,     64,      256,     1024,     4096,
                                       16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864};
    return b;
}

void genai_metrics::observe(family& f, key k, double value, std::size_t max_series) {
    auto it = f.by_key.find(k);
    if (it == f.by_key.end()) {
        if (f.by_key.size() >= max_series) {
            std::get<2>(k) = "other";
            it = f.by_key.find(k);
        }
        if (it == f.by_key.end()) {
            series fresh;
            fresh.buckets.assign(f.bounds->size() + 1, 0);
            fresh.min = value;
            fresh.max = value;
            it = f.by_key.emplace(std::move(k), std::move(fresh)).first;
        }
    }
    series& s = it->second;
    // A bucket holds the values up to and including its bound (OTLP's explicit buckets).
    const auto at = std::lower_bound(f.bounds->begin(), f.bounds->end(), value);
    s.buckets[static_cast<std::size_t>(at - f.bounds->begin())] += 1;
    s.count += 1;
    s.sum += value;
    s.min = std::min(s.min, value);
    s.max = std::max(s.max, value);
}

void genai_metrics::record(const finished_request& r) {
    if (r.time_to_first_token) {
        observe(ttft_, {r.operation, r.provider, r.model, ""}, *r.time_to_first_token, max_series_);
    }
    if (r.time_per_output_token) {
        observe(tpot_, {r.operation, r.provider, r.model, ""}, *r.time_per_output_token,
                max_series_);
    }
    observe(duration_, {r.operation, r.provider, r.model, r.error_type}, r.duration_seconds,
            max_series_);
    if (r.input_tokens) {
        observe(tokens_, {r.operation, r.provider, r.model, "input"},
                static_cast<double>(*r.input_tokens), max_series_);
    }
    if (r.output_tokens) {
        observe(tokens_, {r.operation, r.provider, r.model, "output"},
                static_cast<double>(*r.output_tokens), max_series_);
    }
}

histogram genai_metrics::export_family(const family& f, const char* name, const char* description,
                                       const char* unit, const char* fourth_attribute) const {
    histogram h{name, description, unit, *f.bounds, {}};
    for (const auto& [k, s] : f.by_key) {
        histogram_point p;
        p.attrs.push_back({"gen_ai.operation.name", std::get<0>(k)});
        p.attrs.push_back({"gen_ai.provider.name", std::get<1>(k)});
        if (!std::get<2>(k).empty()) {
            p.attrs.push_back({"gen_ai.request.model", std::get<2>(k)});
        }
        if (!std::get<3>(k).empty()) {
            p.attrs.push_back({fourth_attribute, std::get<3>(k)});
        }
        p.count = s.count;
        p.sum = s.sum;
        p.min = s.min;
        p.max = s.max;
        p.bucket_counts = s.buckets;
        h.points.push_back(std::move(p));
    }
    return h;
}

std::vector<histogram> genai_metrics::snapshot() const {
    std::vector<histogram> out;
    out.push_back(export_family(ttft_, "gen_ai.server.time_to_first_token",
                                "Time to generate the first token for successful responses", "s",
                                "error.type"));
    out.push_back(export_family(tpot_, "gen_ai.server.time_per_output_token",
                                "Time per output token after the first, for successful responses",
                                "s", "error.type"));
    out.push_back(export_family(duration_, "gen_ai.server.request.duration",
                                "Time from the request to the end of the response", "s",
                                "error.type"));
    out.push_back(export_family(tokens_, "gen_ai.client.token.usage",
                                "Input and output tokens per request", "{token}",
                                "gen_ai.token.type"));
    return out;
}

}  // namespace tokenmeter::otlp
