// app/module_options: config translated into each module's options, and the config errors only
// a module can find (SLO targets against bucket lists, route API names).
#include "app/module_options.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "config/config.hpp"

namespace tokenmeter::app {
namespace {

using namespace std::chrono_literals;

const std::string config_dir = TOKENMETER_FIXTURES_DIR "/../../config";

std::string all_errors(const std::vector<config::config_error>& errors) {
    std::string out;
    for (const auto& e : errors) {
        out += config::to_string(e) + "\n";
    }
    return out;
}

bool has_error(const std::vector<config::config_error>& errors, const std::string& key,
               const std::string& fragment) {
    return std::any_of(errors.begin(), errors.end(), [&](const config::config_error& e) {
        return e.key == key && e.message.find(fragment) != std::string::npos;
    });
}

// The annotated example writes the default bucket lists out: they must be metrics/' defaults.
TEST(ModuleOptions, ExampleBucketsAreTheDefaults) {
    const auto r = config::load_file(config_dir + "/tokenmeter.example.yaml");
    ASSERT_TRUE(r.ok()) << all_errors(r.errors);
    EXPECT_EQ(registry_options(r.value).buckets, metrics::default_buckets());
    EXPECT_EQ(registry_options(config::default_settings()).buckets, metrics::default_buckets());
}

TEST(ModuleOptions, PresetsResolveAndExplicitTargetsWin) {
    // The same entries as tests/unit/config's Slo.LoadsPresetsOverridesAndObjectives, in flow
    // style; the explicit ttft is written before the preset, and still wins.
    const auto r = config::load_yaml(
        "slo: {objective: 99.5%, default: {preset: server}, models: {"
        "llama: {ttft: 1s, preset: interactive}, qwen: {tpot: 50ms, objective: 99.9}}}\n");
    ASSERT_TRUE(r.ok()) << all_errors(r.errors);
    const metrics::slo_options slo = slo_options(r.value);
    EXPECT_DOUBLE_EQ(slo.objective, 0.995);
    ASSERT_TRUE(slo.default_target);
    EXPECT_EQ(slo.default_target->ttft, 2000ms);
    const metrics::slo_target& llama = slo.models.at("llama");
    EXPECT_EQ(llama.ttft, 1000ms);
    EXPECT_EQ(llama.tpot, 30ms);
    EXPECT_DOUBLE_EQ(metrics::slo_objective(slo, llama), 0.995);
    const metrics::slo_target& qwen = slo.models.at("qwen");
    EXPECT_FALSE(qwen.ttft);
    EXPECT_EQ(qwen.tpot, 50ms);
    EXPECT_EQ(metrics::slo_objective(slo, qwen), 0.999);  // exact: it is exported as a gauge
}

TEST(ModuleOptions, PresetsCarryAvailabilityAndAnExplicitObjectiveWins) {
    const auto r = config::load_yaml(
        "slo: {default: {preset: interactive}, models: {"
        "llama: {preset: server, availability: 99.5%}, qwen: {ttft: 1s}, "
        "phi: {availability: 99%}}}\n");
    ASSERT_TRUE(r.ok()) << all_errors(r.errors);
    const metrics::slo_options slo = slo_options(r.value);
    EXPECT_EQ(slo.default_target->availability, 0.999);
    EXPECT_EQ(slo.models.at("llama").availability, 0.995);
    EXPECT_FALSE(slo.models.at("qwen").availability) << "no preset, no availability key";
    EXPECT_EQ(slo.models.at("phi").availability, 0.99);
    EXPECT_FALSE(slo.models.at("phi").ttft);
}

TEST(ModuleOptions, DefaultBucketsGainTheTargets) {
    const auto r = config::load_yaml(R"(
slo:
  models:
    a: {preset: server}       # TTFT 2 s is a default boundary (2^1); 0.1 s TPOT is not
    b: {preset: interactive}  # 0.5 s is one too; 30 ms is not
)");
    ASSERT_TRUE(r.ok()) << all_errors(r.errors);
    EXPECT_TRUE(module_errors(r.value).empty()) << all_errors(module_errors(r.value));
    const metrics::histogram_buckets b =
        metrics::buckets_with_slo_targets(registry_options(r.value).buckets, slo_options(r.value));
    const metrics::histogram_buckets defaults = metrics::default_buckets();
    const auto contains = [](const std::vector<double>& v, double x) {
        return std::find(v.begin(), v.end(), x) != v.end();
    };
    EXPECT_TRUE(contains(b.time_to_first_token, 2.0));
    EXPECT_TRUE(contains(b.time_to_first_token, 0.5));
    EXPECT_TRUE(contains(b.time_per_output_token, 0.03));
    EXPECT_TRUE(contains(b.inter_token_latency, 0.03));
    EXPECT_TRUE(contains(b.time_per_output_token, 0.1));
    EXPECT_TRUE(std::is_sorted(b.time_to_first_token.begin(), b.time_to_first_token.end()));
    EXPECT_EQ(b.time_to_first_token.size(), defaults.time_to_first_token.size());
    EXPECT_EQ(b.time_per_output_token.size(), defaults.time_per_output_token.size() + 2);
    EXPECT_TRUE(std::is_sorted(b.time_per_output_token.begin(), b.time_per_output_token.end()));
    // Lists nobody has a target for are untouched.
    EXPECT_EQ(b.request_duration, defaults.request_duration);
}

TEST(ModuleOptions, ExplicitBucketsMustHoldTheTargets) {
    const auto r = config::load_yaml(R"(
metrics:
  buckets:
    time_to_first_token: [0.5, 1, 5]
slo:
  models:
    a: {ttft: 2s}
    b: {ttft: 1s}
)");
    const auto errors = module_errors(r.value);
    EXPECT_TRUE(has_error(errors, "slo.models.a.ttft",
                          "not a boundary of metrics.buckets.time_to_first_token"))
        << all_errors(errors);
    EXPECT_FALSE(has_error(errors, "slo.models.b.ttft", "")) << all_errors(errors);
    ASSERT_EQ(errors.size(), 1u) << all_errors(errors);
    EXPECT_EQ(config::to_string(errors[0]),
              "slo.models.a.ttft: the target 2 s is not a boundary of "
              "metrics.buckets.time_to_first_token; add it, so that quantiles and the SLO counts "
              "agree at the target");
}

TEST(ModuleOptions, UnknownRouteApiNamesTheEntry) {
    const auto r = config::load_yaml("routes:\n  - path: /x\n    api: grpc\n");
    ASSERT_TRUE(r.ok()) << "config/ does not know API names";
    const auto errors = module_errors(r.value);
    ASSERT_EQ(errors.size(), 1u) << all_errors(errors);
    EXPECT_EQ(errors[0].key, "routes[0].api");
    EXPECT_NE(errors[0].message.find("unknown api \"grpc\""), std::string::npos);
}

TEST(ModuleOptions, TenantsAndThroughput) {
    const auto r = config::load_yaml(R"(
tenants:
  source: header
  header: x-team
  metrics_allowlist: [a]
  max_tenants: 3
  limits:
    a: {provisioned_tokens_per_second: 10}
  enforce_provisioned: true
  provisioned_burst: 2s
count_input_tokens: always
)");
    ASSERT_TRUE(r.ok()) << all_errors(r.errors);
    const usage::tenant_options t = tenant_options(r.value);
    EXPECT_EQ(t.source, usage::tenant_source::header);
    EXPECT_EQ(t.header, "x-team");
    const usage::throughput_options p = throughput_options(r.value);
    EXPECT_TRUE(p.enforce);
    EXPECT_EQ(p.burst, 2000ms);
    EXPECT_DOUBLE_EQ(p.rates.at("a"), 10);
    const metrics::billing_options b = billing_options(r.value);
    EXPECT_TRUE(b.tenants_on);
    EXPECT_EQ(b.max_tenants, 3u);
    EXPECT_EQ(b.tenant_allowlist, (std::vector<std::string>{"a"}));
    EXPECT_EQ(input_counting(r.value), meter::input_counting::always);
    EXPECT_FALSE(billing_options(config::default_settings()).tenants_on);
    EXPECT_EQ(input_counting(config::default_settings()), meter::input_counting::when_unreported);
}

// Task time is on only with allowed names; the header names arrive lower-case.
TEST(ModuleOptions, Tasks) {
    EXPECT_FALSE(task_options(config::default_settings()));
    const auto r = config::load_yaml(
        "tasks:\n  allowed: [fix, sql]\n  header: X-Task\n  session_idle_expiry: 90s\n"
        "  max_sessions: 7\n");
    ASSERT_TRUE(r.ok()) << all_errors(r.errors);
    const auto o = task_options(r.value);
    ASSERT_TRUE(o);
    EXPECT_EQ(o->header, "x-task");
    EXPECT_EQ(o->allowed, (std::vector<std::string>{"fix", "sql"}));
    EXPECT_EQ(o->session_header, "x-tokenmeter-session");
    EXPECT_EQ(o->sessions.idle_expiry, 90s);
    EXPECT_EQ(o->sessions.max_sessions, 7u);
}

}  // namespace
}  // namespace tokenmeter::app
