// config::to_yaml: what it prints reads back as the same settings, for the defaults, the annotated
// example (nearly every key) and values each writer has to get exactly right.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "config/config.hpp"

namespace tokenmeter::config {
namespace {

const std::string config_dir = TOKENMETER_FIXTURES_DIR "/../../config";

// The settings to_yaml(s) reads back as; reference_explicit is not a key (naming the reference
// tokenizer sets it), so it is compared apart.
settings read_back(const settings& s) {
    const std::string text = to_yaml(s);
    load_result r = load_yaml(text);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : to_string(r.errors.front())) << "\n" << text;
    EXPECT_TRUE(r.value.reference_explicit);
    r.value.reference_explicit = s.reference_explicit;
    return r.value;
}

TEST(ToYaml, TheDefaultsReadBack) {
    const settings defaults = default_settings();
    EXPECT_EQ(read_back(defaults), defaults);
}

TEST(ToYaml, TheAnnotatedExampleReadsBack) {
    const load_result example = load_file(config_dir + "/tokenmeter.example.yaml");
    ASSERT_TRUE(example.ok()) << to_string(example.errors.front());
    EXPECT_EQ(read_back(example.value), example.value);
}

TEST(ToYaml, ValuesWithMoreThanOneSpelling) {
    const load_result r = load_yaml(R"(
listen: "[::1]:8080"
upstream: "https://model.internal:8443/v1/base"
timeouts:
  drain: 1500ms
  upstream_idle: 2h
prices:
  m:
    input: 0.15
    output: 2.000001
    currency: USD
slo:
  objective: 99.9%
  models:
    m:
      ttft: 250ms
      objective: 99.95%
      availability: 99.5%
metrics:
  buckets:
    time_to_first_token: [0.005, 0.1, 2.5, 60]
tenants:
  source: header
  limits:
    team-a:
      provisioned_tokens_per_second: 1250.5
routes:
  - path: /llm/*
    api: openai_chat
    usage_injection: false
)");
    ASSERT_TRUE(r.ok()) << to_string(r.errors.front());
    const settings back = read_back(r.value);
    EXPECT_EQ(back, r.value);
    const std::string text = to_yaml(r.value);
    EXPECT_NE(text.find("listen: \"[::1]:8080\""), std::string::npos) << text;
    EXPECT_NE(text.find("drain: 1500ms"), std::string::npos) << text;
    EXPECT_NE(text.find("upstream_idle: 2h"), std::string::npos) << text;
    EXPECT_NE(text.find("input: 0.15"), std::string::npos) << text;
    EXPECT_NE(text.find("objective: 99.9%"), std::string::npos) << text;
}

}  // namespace
}  // namespace tokenmeter::config
