// The slo: section and metrics.prompt_classes: presets, overrides, objectives, and the checks
// that keep SLO counts and histogram buckets in agreement.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "config/config.hpp"

namespace tokenmeter::config {
namespace {

using namespace std::chrono_literals;

bool has_error(const load_result& r, const std::string& key, const std::string& fragment) {
    return std::any_of(r.errors.begin(), r.errors.end(), [&](const config_error& e) {
        return e.key == key && e.message.find(fragment) != std::string::npos;
    });
}

std::string all_errors(const load_result& r) {
    std::string out;
    for (const auto& e : r.errors) {
        out += to_string(e) + "\n";
    }
    return out;
}

TEST(Slo, DefaultsHaveNoSloAndFivePromptClasses) {
    const settings s = default_settings();
    EXPECT_TRUE(s.slo.models.empty());
    EXPECT_FALSE(s.slo.default_target);
    EXPECT_DOUBLE_EQ(s.slo.objective, 0.99);
    EXPECT_EQ(s.metric.prompt_classes, (std::vector<std::uint64_t>{512, 2048, 8192, 32768}));
}

TEST(Slo, PresetsAreTheMlperfScenarios) {
    const auto server = slo_preset("server");
    ASSERT_TRUE(server);
    EXPECT_EQ(server->ttft, 2000ms);
    EXPECT_EQ(server->tpot, 100ms);
    const auto interactive = slo_preset("interactive");
    ASSERT_TRUE(interactive);
    EXPECT_EQ(interactive->ttft, 500ms);
    EXPECT_EQ(interactive->tpot, 30ms);
    EXPECT_FALSE(slo_preset("offline"));
}

TEST(Slo, LoadsPresetsOverridesAndObjectives) {
    const auto r = load_yaml(R"(
slo:
  objective: 99.5%
  default:
    preset: server
  models:
    llama:
      ttft: 1s          # written before the preset on purpose: explicit targets still win
      preset: interactive
    qwen:
      tpot: 50ms
      objective: 99.9
)");
    ASSERT_TRUE(r.ok()) << all_errors(r);
    const slo_settings& slo = r.value.slo;
    EXPECT_DOUBLE_EQ(slo.objective, 0.995);
    ASSERT_TRUE(slo.default_target);
    EXPECT_EQ(slo.default_target->ttft, 2000ms);
    const slo_target& llama = slo.models.at("llama");
    EXPECT_EQ(llama.preset, "interactive");
    EXPECT_EQ(llama.ttft, 1000ms);
    EXPECT_EQ(llama.tpot, 30ms);
    EXPECT_DOUBLE_EQ(slo_objective(slo, llama), 0.995);
    const slo_target& qwen = slo.models.at("qwen");
    EXPECT_FALSE(qwen.ttft);
    EXPECT_EQ(qwen.tpot, 50ms);
    EXPECT_EQ(slo_objective(slo, qwen), 0.999);  // exact: it is exported as a gauge
}

TEST(Slo, ErrorsNameTheirKeys) {
    const auto r = load_yaml(R"(
slo:
  objective: 0.99
  models:
    a:
      preset: serve
    b:
      ttfft: 1s
    c:
      objective: 100%
      ttft: 1s
    d: {}
  defualt:
    preset: server
)");
    EXPECT_TRUE(has_error(r, "slo.objective", "looks like a ratio")) << all_errors(r);
    EXPECT_TRUE(has_error(r, "slo.models.a.preset", "must be one of server, interactive"))
        << all_errors(r);
    EXPECT_TRUE(has_error(r, "slo.models.b.ttfft", "did you mean \"ttft\"")) << all_errors(r);
    EXPECT_TRUE(has_error(r, "slo.models.b", "set a preset")) << all_errors(r);
    EXPECT_TRUE(has_error(r, "slo.models.c.objective", "below 100%")) << all_errors(r);
    EXPECT_TRUE(has_error(r, "slo.models.d", "set a preset")) << all_errors(r);
    EXPECT_TRUE(has_error(r, "slo.defualt", "did you mean \"default\"")) << all_errors(r);
}

TEST(Slo, ModelsMustBeAllowedLabels) {
    const auto r = load_yaml(R"(
metrics:
  models:
    allowlist: [llama]
slo:
  models:
    llama: {preset: server}
    qwen: {preset: server}
)");
    EXPECT_TRUE(has_error(r, "slo.models.qwen", "not in metrics.models.allowlist"))
        << all_errors(r);
    EXPECT_FALSE(has_error(r, "slo.models.llama", "")) << all_errors(r);

    const auto crowded = load_yaml(R"(
metrics:
  models: {max_models: 1}
slo:
  models:
    llama: {preset: server}
    qwen: {preset: server}
)");
    EXPECT_TRUE(has_error(crowded, "slo.models", "more than metrics.models.max_models"))
        << all_errors(crowded);
}

TEST(Slo, DefaultBucketsGainTheTargets) {
    const auto r = load_yaml(R"(
slo:
  models:
    a: {preset: server}       # TTFT 2 s is a default boundary (2^1); 0.1 s TPOT is not
    b: {preset: interactive}  # 0.5 s is one too; 30 ms is not
)");
    ASSERT_TRUE(r.ok()) << all_errors(r);
    const histogram_buckets b = buckets_with_slo_targets(r.value.metric, r.value.slo);
    const auto contains = [](const std::vector<double>& v, double x) {
        return std::find(v.begin(), v.end(), x) != v.end();
    };
    EXPECT_TRUE(contains(b.time_to_first_token, 2.0));
    EXPECT_TRUE(contains(b.time_to_first_token, 0.5));
    EXPECT_TRUE(contains(b.time_per_output_token, 0.03));
    EXPECT_TRUE(contains(b.inter_token_latency, 0.03));
    EXPECT_TRUE(contains(b.time_per_output_token, 0.1));
    EXPECT_TRUE(std::is_sorted(b.time_to_first_token.begin(), b.time_to_first_token.end()));
    EXPECT_EQ(b.time_to_first_token.size(), default_buckets().time_to_first_token.size());
    EXPECT_EQ(b.time_per_output_token.size(), default_buckets().time_per_output_token.size() + 2);
    EXPECT_TRUE(std::is_sorted(b.time_per_output_token.begin(), b.time_per_output_token.end()));
    // Lists nobody has a target for are untouched.
    EXPECT_EQ(b.request_duration, default_buckets().request_duration);
}

TEST(Slo, ExplicitBucketsMustHoldTheTargets) {
    const auto r = load_yaml(R"(
metrics:
  buckets:
    time_to_first_token: [0.5, 1, 5]
slo:
  models:
    a: {ttft: 2s}
    b: {ttft: 1s}
)");
    EXPECT_TRUE(
        has_error(r, "slo.models.a.ttft", "not a boundary of metrics.buckets.time_to_first_token"))
        << all_errors(r);
    EXPECT_FALSE(has_error(r, "slo.models.b.ttft", "")) << all_errors(r);
}

TEST(PromptClasses, LoadAndValidate) {
    const auto ok = load_yaml("metrics:\n  prompt_classes: [1024, 4096]\n");
    ASSERT_TRUE(ok.ok()) << all_errors(ok);
    EXPECT_EQ(ok.value.metric.prompt_classes, (std::vector<std::uint64_t>{1024, 4096}));

    const auto bad = load_yaml("metrics:\n  prompt_classes: [1024, 512, 0]\n");
    EXPECT_TRUE(has_error(bad, "metrics.prompt_classes[1]", "greater than the boundary before"))
        << all_errors(bad);
    EXPECT_TRUE(has_error(bad, "metrics.prompt_classes[2]", "greater than 0")) << all_errors(bad);

    const auto not_number = load_yaml("metrics:\n  prompt_classes: [1k]\n");
    EXPECT_TRUE(has_error(not_number, "metrics.prompt_classes[0]", "whole number"))
        << all_errors(not_number);
    const auto empty = load_yaml("metrics:\n  prompt_classes: []\n");
    EXPECT_TRUE(has_error(empty, "metrics.prompt_classes", "at least one")) << all_errors(empty);
}

}  // namespace
}  // namespace tokenmeter::config
