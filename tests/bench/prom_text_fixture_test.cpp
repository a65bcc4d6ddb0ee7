// prom_text against the exposition fixture shared with the JavaScript parser of the integration
// tests (tests/fixtures/prometheus/): both must read the same samples from the same text.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "prom_text.hpp"

namespace tokenmeter::load {
namespace {

std::string read_fixture(const std::string& name) {
    std::ifstream in(std::string(TOKENMETER_FIXTURES_DIR) + "/prometheus/" + name,
                     std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// The fixture writes +Inf, -Inf and NaN as strings (JSON has no such numbers).
double expected_value(const nlohmann::json& v) {
    if (v.is_number()) {
        return v.get<double>();
    }
    const std::string s = v.get<std::string>();
    if (s == "+Inf") {
        return std::numeric_limits<double>::infinity();
    }
    if (s == "-Inf") {
        return -std::numeric_limits<double>::infinity();
    }
    return std::numeric_limits<double>::quiet_NaN();
}

TEST(prom_text, reads_the_shared_exposition_fixture) {
    const std::string text = read_fixture("exposition.prom");
    ASSERT_FALSE(text.empty()) << "fixture missing";
    const nlohmann::json expected = nlohmann::json::parse(read_fixture("exposition.samples.json"));

    exposition_result result = parse_exposition(text);
    ASSERT_TRUE(result.value) << result.error;
    const exposition& parsed = *result.value;

    ASSERT_EQ(parsed.samples.size(), expected["samples"].size());
    for (std::size_t i = 0; i < parsed.samples.size(); ++i) {
        const prom_sample& sample = parsed.samples[i];
        const nlohmann::json& want = expected["samples"][i];
        SCOPED_TRACE("sample " + std::to_string(i) + ": " + want.dump());
        EXPECT_EQ(sample.name, want["name"].get<std::string>());
        label_set labels;  // nlohmann's object keeps its keys sorted, as label_set is
        for (const auto& [name, value] : want["labels"].items()) {
            labels.emplace_back(name, value.get<std::string>());
        }
        EXPECT_EQ(sample.labels, labels);
        const double value = expected_value(want["value"]);
        if (std::isnan(value)) {
            EXPECT_TRUE(std::isnan(sample.value));
        } else {
            EXPECT_DOUBLE_EQ(sample.value, value);
        }
    }

    ASSERT_EQ(parsed.types.size(), expected["types"].size());
    for (const auto& [family, type] : expected["types"].items()) {
        ASSERT_TRUE(parsed.types.contains(family)) << family;
        EXPECT_EQ(parsed.types.at(family), type.get<std::string>()) << family;
    }
}

}  // namespace
}  // namespace tokenmeter::load
