// prices: per-model token prices, read exactly as decimals, with errors that name the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace tokenmeter::config {
namespace {

std::vector<std::string> error_keys(const load_result& r) {
    std::vector<std::string> keys;
    for (const auto& e : r.errors) {
        keys.push_back(e.key);
    }
    return keys;
}

TEST(PricesConfig, LoadsExactMicroUnits) {
    auto r = load_yaml(R"(
prices:
  gpt-4o: { input: 2.5, cached_input: 1.25, output: 10, reasoning: 0.000001, currency: USD }
  llama: { input: 0.15, output: 0.6, currency: EUR }
)");
    ASSERT_TRUE(r.errors.empty()) << r.errors.front().key << ": " << r.errors.front().message;
    const price_settings& gpt = r.value.prices.at("gpt-4o");
    EXPECT_EQ(gpt.input, 2'500'000);
    EXPECT_EQ(gpt.cached_input, 1'250'000);
    EXPECT_EQ(gpt.output, 10'000'000);
    EXPECT_EQ(gpt.reasoning, 1);
    EXPECT_EQ(gpt.currency, "USD");
    const price_settings& llama = r.value.prices.at("llama");
    EXPECT_EQ(llama.input, 150'000);  // not 149999.99... as a double would give
    EXPECT_EQ(llama.output, 600'000);
    EXPECT_FALSE(llama.cached_input);
    EXPECT_FALSE(llama.reasoning);
}

TEST(PricesConfig, ErrorsNameTheKey) {
    auto r = load_yaml(R"(
prices:
  a: { output: 1, currency: USD }
  b: { input: -1, output: 1, currency: USD }
  c: { input: 0.1234567, output: 1e3, currency: usd }
  d: { input: 1, output: 1, currency: USD, cached: 0.5 }
)");
    const auto keys = error_keys(r);
    const std::vector<std::string> want{"prices.a.input",  "prices.b.input",    "prices.c.input",
                                        "prices.c.output", "prices.c.currency", "prices.d.cached"};
    for (const auto& k : want) {
        EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << "no error at " << k;
    }
    for (const auto& e : r.errors) {
        if (e.key == "prices.c.input") {
            EXPECT_NE(e.message.find("6 decimal places"), std::string::npos) << e.message;
        }
        if (e.key == "prices.a.input") {
            EXPECT_NE(e.message.find("required"), std::string::npos) << e.message;
        }
    }
}

}  // namespace
}  // namespace tokenmeter::config
