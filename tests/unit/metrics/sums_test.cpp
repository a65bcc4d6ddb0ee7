// "Summing any family over any one label means something" (docs/metrics.md): every request,
// token or event lands in exactly one series of a family, so the sum over all series of every
// family equals a total known independently of the registry. Also: every family served is
// documented, and a feature that is off serves nothing.
#include <gtest/gtest.h>
#include <prometheus/metric_family.h>

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "meter/stream_meter.hpp"
#include "metrics/billing.hpp"
#include "metrics/otel.hpp"
#include "metrics/process.hpp"
#include "metrics/registry.hpp"
#include "metrics/tasks.hpp"
#include "usage/record.hpp"

namespace tokenmeter::metrics {
namespace {

using namespace std::chrono_literals;

// A streamed request: `tokens` chunks of one token, the first at ttft, then `gap` apart.
meter::request_summary streamed(const registry& r, protocol::api_kind api, const std::string& model,
                                std::chrono::milliseconds ttft, std::chrono::milliseconds gap,
                                int tokens, std::optional<protocol::token_usage> usage) {
    meter::stream_meter m(api, model, true, core::time_point{}, &r.inter_token_latency_bounds());
    m.on_request_sent();  // served: the server got it
    m.on_response_head(200, core::time_point{} + 1ms);
    protocol::response_chunk chunk;
    chunk.content = "ab";
    auto at = core::time_point{} + ttft;
    for (int i = 0; i < tokens; ++i) {
        m.on_chunk(chunk, at);
        at += gap;
    }
    if (usage) {
        protocol::response_chunk report;
        report.usage = *usage;
        m.on_chunk(report, at);
    }
    return m.finish(meter::end_reason::upstream_complete, at + 5ms);
}

// One complete request of a tenant on model llama with n tokens of every kind.
tenant_usage tenant_request(std::string_view tenant, std::uint64_t n) {
    tenant_usage u;
    u.tenant = tenant;
    u.model_label = "llama";
    u.outcome = "complete";
    u.input_tokens = n;
    u.output_tokens = n;
    u.reasoning_tokens = n;
    u.cached_input_tokens = n;
    return u;
}

struct family_totals {
    std::map<std::string, double> value;  // counters and gauges: sum of the values
    std::map<std::string, double> count;  // histograms: sum of _count
    std::map<std::string, double> sum;    // histograms: sum of _sum
};

family_totals totals_of(const std::vector<prometheus::MetricFamily>& families) {
    family_totals t;
    for (const auto& f : families) {
        for (const auto& m : f.metric) {
            switch (f.type) {
                case prometheus::MetricType::Counter:
                    t.value[f.name] += m.counter.value;
                    break;
                case prometheus::MetricType::Gauge:
                    t.value[f.name] += m.gauge.value;
                    break;
                case prometheus::MetricType::Histogram:
                    t.count[f.name] += static_cast<double>(m.histogram.sample_count);
                    t.sum[f.name] += m.histogram.sample_sum;
                    break;
                default:
                    ADD_FAILURE() << f.name << ": unexpected type";
            }
        }
    }
    return t;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

TEST(Sums, EveryFamilySumsToAKnownTotal) {
    registry_options settings;
    slo_options slo;
    slo.models["llama"] = *slo_preset("interactive");  // 500 ms TTFT, 30 ms TPOT
    registry r(settings, slo);
    billing_options tenant_settings;  // tenants from a header, one provisioned
    tenant_settings.tenants_on = true;
    tenant_settings.provisioned_rates["team-a"] = 100;
    billing_metrics billing(r, tenant_settings);

    using protocol::api_kind;
    std::vector<meter::request_summary> forwarded;
    // Reported usage, and both tokenizers too (they disagree with the report: a mismatch).
    auto a =
        streamed(r, api_kind::openai_chat_completions, "llama", 100ms, 20ms, 5,
                 protocol::token_usage{7, 5, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                                       std::nullopt, std::nullopt, std::nullopt});
    a.native_output_tokens = 9;
    a.normalized_output_tokens = 6;
    a.normalized_input_tokens = 8;
    forwarded.push_back(a);
    // Reasoning, cache reads and cache writes, reported; slow first token (a bad TTFT verdict).
    auto b = streamed(
        r, api_kind::anthropic_messages, "claude", 900ms, 40ms, 4,
        protocol::token_usage{120, 40, 30, 100, 15, 5, std::nullopt, std::nullopt, std::nullopt});
    b.parse_errors_by_reason[static_cast<std::size_t>(protocol::parse_error::invalid_json)] = 2;
    forwarded.push_back(b);
    // No usage report: the model's tokenizer counts.
    auto c = streamed(r, api_kind::openai_chat_completions, "llama", 700ms, 10ms, 3, std::nullopt);
    c.native_output_tokens = 12;
    c.native_input_tokens = 4;
    c.native_reasoning_tokens = 0;
    forwarded.push_back(c);
    // Nothing but the stream: one token per chunk, reasoning from the reference tokenizer.
    auto d = streamed(r, api_kind::ollama_chat, "qwen", 50ms, 5ms, 6, std::nullopt);
    d.normalized_reasoning_tokens = 8;
    forwarded.push_back(d);
    // A pass-through request.
    meter::request_summary e;
    e.api = api_kind::none;
    e.status = 204;
    e.duration_seconds = 0.25;
    forwarded.push_back(e);
    for (const auto& s : forwarded) {
        r.record(s);
    }
    r.record_unforwarded(api_kind::openai_chat_completions, "llama", meter::outcome::rejected, 413,
                         0.001);
    r.upstream_error("connect_refused");
    r.upstream_error("timeout");
    r.metering_failure("body");
    r.stream_opened();
    r.stream_opened();
    r.stream_closed();

    // Tenants, with the counts the usage records bill.
    double tenant_billed = 0;
    for (const auto& [tenant, s] : {std::pair{"team-a", &a}, std::pair{"team-b", &b}}) {
        const usage::usage_record rec = usage::make_record({}, *s, meter::billed(*s), 0);
        tenant_usage u;
        u.tenant = tenant;
        const std::string model = r.model_label(s->model);
        u.model_label = model;
        u.outcome = meter::to_string(s->result);
        u.input_tokens = rec.input.value.value_or(0);
        u.output_tokens = rec.output.value.value_or(0);
        u.reasoning_tokens = rec.reasoning.value.value_or(0);
        u.cached_input_tokens = rec.cached_input.value.value_or(0);
        u.cache_write_tokens = rec.cache_write.value.value_or(0);
        billing.record(u);
        tenant_billed += static_cast<double>(u.input_tokens + u.output_tokens);
    }
    billing.rate_limited("team-a");
    billing.set_spool(3, 1.5);
    billing.add_ship_errors("status", 2);
    billing.add_spool_errors(1);

    // Task time: two requests with a task (one complete), one ended session of two requests.
    task_metrics tasks(*r.prometheus_registry());
    tasks.request("llama", "fix", "complete");
    tasks.request("llama", "other", "client_cancel");
    tasks.task_done("llama", "fix", 1.5, 10, 20);
    tasks.session_done("llama", "fix", 3.0, 2, 30, 40);
    tasks.sessions_dropped("evicted", 2);
    tasks.sessions_dropped("invalid_id", 1);
    tasks.sessions_active(4);

    // The independent totals.
    double billed = 0;
    double durations = 0.001;
    double ttft_count = 0;
    double ttft_sum = 0;
    double ttfct_count = 0;
    double itl_count = 0;
    double itl_sum = 0;
    double tpot_count = 0;
    double out_tps = 0;
    double decode_tps = 0;
    double chars = 0;
    double input_count = 0;
    double input_sum = 0;
    double output_count = 0;
    double output_sum = 0;
    for (const auto& s : forwarded) {
        durations += s.duration_seconds;
        if (s.api == api_kind::none) {
            continue;
        }
        const usage::usage_record rec = usage::make_record({}, s, meter::billed(s), 0);
        billed += static_cast<double>(rec.input.value.value_or(0) + rec.output.value.value_or(0));
        if (s.result != meter::outcome::rejected) {
            input_count += rec.input.value ? 1 : 0;
            input_sum += static_cast<double>(rec.input.value.value_or(0));
            output_count += rec.output.value ? 1 : 0;
            output_sum += static_cast<double>(rec.output.value.value_or(0));
        }
        ttft_count += s.time_to_first_token ? 1 : 0;
        ttft_sum += s.time_to_first_token.value_or(0);
        ttfct_count += s.time_to_first_content_token ? 1 : 0;
        itl_count += static_cast<double>(s.inter_token_latency.count());
        itl_sum += s.inter_token_latency.sum();
        tpot_count += s.time_per_output_token ? 1 : 0;
        out_tps += s.output_tokens_per_second ? 1 : 0;
        decode_tps += s.decode_tokens_per_second ? 1 : 0;
        chars += static_cast<double>(s.output_chars);
    }
    // Hand-checked against the inputs above: 7+5 and 120+40 reported, 4+12 native, 6 counted.
    EXPECT_EQ(billed, 12 + 160 + 16 + 6);

    const family_totals t = totals_of(r.collect());
    const std::map<std::string, double> expected_values{
        {"tokenmeter_requests_total", 6},                // requests, by how they ended
        {"tokenmeter_tokens_total", billed},             // billed tokens, input + output
        {"tokenmeter_reasoning_tokens_total", 30 + 8},   // reported, else re-tokenized
        {"tokenmeter_cached_input_tokens_total", 100},   // reported
        {"tokenmeter_cache_write_tokens_total", 15},     // reported
        {"tokenmeter_reported_tokens_total", 12 + 160},  // the servers' reports
        {"tokenmeter_native_tokens_total", 9 + 16},      // the models' tokenizers
        {"tokenmeter_normalized_tokens_total", 6 + 8},   // the reference tokenizer
        {"tokenmeter_output_chars_total", chars},        // bytes of output text
        {"tokenmeter_token_count_mismatch_total", 1},    // request a: 9 counted, 5 reported
        {"tokenmeter_parse_errors_total", 2},            // events not understood
        {"tokenmeter_upstream_errors_total", 2},         // failures
        {"tokenmeter_streams_active", 1},                // open streams
        {"tokenmeter_build_info", 1},                    // processes
        {"tokenmeter_slo_requests_total",
         2 + 2 + 2},                                // verdicts: a and c, TTFT, TPOT, availability
        {"tokenmeter_metering_failures_total", 1},  // failures inside metering
        {"tokenmeter_finishing_thread_ends_total", 0},      // no finishing thread here
        {"tokenmeter_tenant_tokens_total", tenant_billed},  // billed tokens of tenants
        {"tokenmeter_tenant_requests_total", 2},
        {"tokenmeter_tenant_reasoning_tokens_total", 30},
        {"tokenmeter_tenant_cached_input_tokens_total", 100},
        {"tokenmeter_tenant_cache_write_tokens_total", 15},
        {"tokenmeter_tenant_rate_limited_total", 1},
        {"tokenmeter_usage_spool_records", 3},
        {"tokenmeter_usage_spool_oldest_age_seconds", 1.5},  // one series: the oldest record
        {"tokenmeter_usage_ship_errors_total", 2},
        {"tokenmeter_usage_spool_errors_total", 1},
        {"tokenmeter_task_requests_total", 2},          // requests with a task
        {"tokenmeter_task_tokens_total", 10 + 20},      // tokens of complete task requests
        {"tokenmeter_task_session_requests_total", 2},  // requests of ended sessions
        {"tokenmeter_task_session_tokens_total", 30 + 40},
        {"tokenmeter_task_sessions_dropped_total", 2 + 1},
        {"tokenmeter_task_sessions_active", 4},
    };
    const std::map<std::string, std::pair<double, double>> expected_histograms{
        {"tokenmeter_time_to_first_token_seconds", {ttft_count, ttft_sum}},
        {"tokenmeter_time_to_first_content_token_seconds", {ttfct_count, ttft_sum}},
        {"tokenmeter_inter_token_latency_seconds", {itl_count, itl_sum}},
        {"tokenmeter_time_per_output_token_seconds", {tpot_count, -1}},
        {"tokenmeter_output_tokens_per_second", {out_tps, -1}},
        {"tokenmeter_decode_tokens_per_second", {decode_tps, -1}},
        {"tokenmeter_request_duration_seconds", {6, durations}},
        {"tokenmeter_request_input_tokens", {input_count, input_sum}},
        {"tokenmeter_request_output_tokens", {output_count, output_sum}},
        {"tokenmeter_task_duration_seconds", {1, 1.5}},
        {"tokenmeter_task_session_duration_seconds", {1, 3.0}},
    };
    // Settings, not amounts: one series per configured target or limit; aggregate with max.
    const std::set<std::string> settings_gauges{"tokenmeter_slo_objective_ratio",
                                                "tokenmeter_slo_target_seconds",
                                                "tokenmeter_tenant_provisioned_tokens_per_second"};

    EXPECT_EQ(ttft_count, 4);
    EXPECT_EQ(itl_count, 4 + 3 + 2 + 5);
    for (const auto& f : r.collect()) {
        const bool known = expected_values.contains(f.name) ||
                           expected_histograms.contains(f.name) || settings_gauges.contains(f.name);
        EXPECT_TRUE(known) << f.name << " has no expected total: add one to this test";
    }
    for (const auto& [name, want] : expected_values) {
        ASSERT_TRUE(t.value.contains(name)) << name << " not served";
        EXPECT_NEAR(t.value.at(name), want, 1e-9) << name;
    }
    for (const auto& [name, want] : expected_histograms) {
        ASSERT_TRUE(t.count.contains(name)) << name << " not served";
        EXPECT_EQ(t.count.at(name), want.first) << name;
        if (want.second >= 0) {
            EXPECT_NEAR(t.sum.at(name), want.second, 1e-9) << name;
        }
    }
}

TEST(Sums, FeaturesThatAreOffServeNothing) {
    registry r(registry_options{});
    billing_metrics billing(r, billing_options{});  // no tenant source, no limits, no spool
    billing.record(tenant_request("anonymous", 3));
    const std::string text = r.expose();
    for (const char* name : {"tokenmeter_tenant_", "tokenmeter_usage_", "tokenmeter_slo_",
                             "tokenmeter_parse_errors_total"}) {
        EXPECT_EQ(text.find(name), std::string::npos) << name << " in:\n" << text;
    }
    EXPECT_NE(text.find("tokenmeter_build_info"), std::string::npos);
}

TEST(Sums, EveryServedFamilyAndLabelIsDocumented) {
    registry_options settings;
    slo_options slo;
    slo.models["llama"] = *slo_preset("server");
    registry r(settings, slo);
    billing_options tenant_settings;  // tenants from a header, one provisioned
    tenant_settings.tenants_on = true;
    tenant_settings.provisioned_rates["t"] = 5;
    billing_metrics billing(r, tenant_settings);
    auto s = streamed(r, protocol::api_kind::openai_chat_completions, "llama", 100ms, 20ms, 3,
                      protocol::token_usage{7, 3, 1, 2, std::nullopt, std::nullopt, std::nullopt,
                                            std::nullopt, std::nullopt});
    s.native_output_tokens = 30;
    s.native_input_tokens = 3;
    s.normalized_output_tokens = 3;
    s.normalized_output_tokens_per_second = 3;
    s.parse_errors_by_reason[0] = 1;
    r.record(s);
    r.upstream_error("timeout");
    r.metering_failure("body");
    billing.record(tenant_request("t", 1));
    billing.rate_limited("t");
    billing.set_spool(0, 0);
    billing.add_ship_errors("tls", 0);
    billing.add_spool_errors(0);
    process_metrics process(*r.prometheus_registry());
    edge_metrics edge(*r.prometheus_registry());
    edge.accept_error("other");
    edge.connection_refused();
    edge.internal_error();
    edge.config_reload(true);
    task_metrics tasks(*r.prometheus_registry());
    tasks.request("llama", "fix", "complete");
    tasks.task_done("llama", "fix", 1, 1, 1);
    tasks.session_done("llama", "fix", 1, 1, 1, 1);
    tasks.sessions_dropped("evicted", 1);
    tasks.sessions_active(1);
    otel_metrics otel(*r.prometheus_registry());
    const std::string doc =
        read_file(std::string(TOKENMETER_FIXTURES_DIR) + "/../../docs/metrics.md");
    ASSERT_FALSE(doc.empty());
    std::size_t families = 0;
    for (const auto& f : r.collect()) {
        ++families;
        EXPECT_NE(doc.find("`" + f.name + "`"), std::string::npos) << f.name << " undocumented";
        for (const auto& m : f.metric) {
            for (const auto& label : m.label) {
                EXPECT_NE(doc.find("`" + label.name + "`"), std::string::npos)
                    << f.name << ": label " << label.name << " undocumented";
                EXPECT_NE(label.name, "count") << "shadows the PromQL operator";
            }
        }
    }
    EXPECT_GE(families, 39U);
}

}  // namespace
}  // namespace tokenmeter::metrics
