// usage/price: the cost of a record's tokens, exact in pico-units, and how it is written and read.
#include "usage/price.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "usage/report.hpp"

namespace tokenmeter::usage {
namespace {

// $2.50 in, $1.25 cached in, $10 out, $12 reasoning per million tokens; cache writes at the
// input price.
price gpt_like() {
    price p;
    p.input = 2'500'000;
    p.cached_input = 1'250'000;
    p.cache_write = 2'500'000;
    p.cache_write_1h = 2'500'000;
    p.output = 10'000'000;
    p.reasoning = 12'000'000;
    p.currency = "USD";
    return p;
}

// Anthropic's list for a Sonnet-class model: $3 in, $0.30 cache reads, $3.75 5-minute cache
// writes (1.25x input), $6 1-hour cache writes (2x), $15 out.
price claude_like() {
    price p;
    p.input = 3'000'000;
    p.cached_input = 300'000;
    p.cache_write = 3'750'000;
    p.cache_write_1h = 6'000'000;
    p.output = 15'000'000;
    p.reasoning = 15'000'000;
    p.currency = "USD";
    return p;
}

usage_record counts(std::optional<std::uint64_t> in, std::optional<std::uint64_t> out) {
    usage_record r;
    r.id = "00112233445566778899aabbccddeeff";
    r.model = "gpt-like";
    r.outcome = "complete";
    r.input = {in, in ? token_source::reported : token_source::none};
    r.output = {out, out ? token_source::reported : token_source::none};
    return r;
}

TEST(Price, InputAndOutputPerMillionTokens) {
    // 1,000 x 2.5 + 200 x 10 = 4,500 per million tokens = 0.0045 USD.
    EXPECT_EQ(cost_picos(gpt_like(), counts(1000, 200)), 4'500'000'000);
    EXPECT_EQ(format_amount(4'500'000'000), "0.0045");
}

TEST(Price, CachedAndReasoningTokensHaveTheirOwnPrice) {
    auto r = counts(1000, 200);
    r.cached_input = {400, token_source::reported};
    r.reasoning = {150, token_source::reported};
    // 600 x 2.5 + 400 x 1.25 + 50 x 10 + 150 x 12 = 1500 + 500 + 500 + 1800 = 4300.
    EXPECT_EQ(cost_picos(gpt_like(), r), 4'300'000'000);
    // A server reporting more cached than input tokens does not make the cost negative.
    r.cached_input = {5000, token_source::reported};
    EXPECT_EQ(cost_picos(gpt_like(), r),
              1000 * 1'250'000LL + 50 * 10'000'000LL + 150 * 12'000'000LL);
}

TEST(Price, CacheWritesHaveTheirOwnPriceByTier) {
    // 23 uncached, 1,000 read from the cache and 500 written to it; 4 output tokens:
    // 23 x 3 + 1000 x 0.30 + 500 x 3.75 + 4 x 15 = 69 + 300 + 1875 + 60 = 2304 per million.
    auto r = counts(1523, 4);
    r.cached_input = {1000, token_source::reported};
    r.cache_write = {500, token_source::reported};
    EXPECT_EQ(cost_picos(claude_like(), r), 2'304'000'000);
    EXPECT_EQ(format_amount(2'304'000'000), "0.002304");
    // 200 of the writes kept for an hour: 300 x 3.75 + 200 x 6 = 1125 + 1200 (was 1875).
    r.cache_write_1h = {200, token_source::reported};
    EXPECT_EQ(cost_picos(claude_like(), r), 2'754'000'000);
    // Parts larger than their whole are held to it: the cost never goes negative.
    r.cache_write = {5000, token_source::reported};
    r.cache_write_1h = {9000, token_source::reported};
    EXPECT_EQ(cost_picos(claude_like(), r), 1000 * 300'000LL + 523 * 6'000'000LL + 4 * 15'000'000LL);
}

TEST(Price, AnUnservedRequestCostsNothing) {
    auto r = counts(0, 0);
    r.outcome = "upstream_error";
    r.served = false;
    r.input = {0, token_source::unbilled};
    r.output = {0, token_source::unbilled};
    EXPECT_EQ(cost_picos(gpt_like(), r), 0);
}

TEST(Price, UnknownCountsGiveNoCostNeverZero) {
    EXPECT_EQ(cost_picos(gpt_like(), counts(std::nullopt, 200)), std::nullopt);
    EXPECT_EQ(cost_picos(gpt_like(), counts(1000, std::nullopt)), std::nullopt);
    EXPECT_EQ(cost_picos(gpt_like(), counts(0, 0)), 0);  // known zeros cost nothing
}

TEST(Price, ARejectedRequestUsedNothing) {
    auto r = counts(std::nullopt, 0);
    r.outcome = "rejected";
    EXPECT_EQ(cost_picos(gpt_like(), r), 0);
}

TEST(Price, OverflowIsUnknownNotWrapped) {
    price dear;
    dear.input = 1'000'000'000'000;
    dear.output = 1'000'000'000'000;
    dear.currency = "USD";
    EXPECT_EQ(cost_picos(dear, counts(20'000'000, 0)), std::nullopt);
    EXPECT_EQ(cost_picos(dear, counts(std::numeric_limits<std::uint64_t>::max(), 0)), std::nullopt);
}

TEST(Price, ApplyPriceOnlyForPricedModels) {
    price_table table{{"gpt-like", gpt_like()}};
    auto r = counts(1000, 200);
    apply_price(r, table);
    EXPECT_EQ(r.currency, "USD");
    EXPECT_EQ(r.cost_picos, 4'500'000'000);
    r.model = "unpriced";
    apply_price(r, table);
    EXPECT_TRUE(r.currency.empty());
    EXPECT_FALSE(r.cost_picos);
}

TEST(Price, FormatsExactDecimals) {
    EXPECT_EQ(format_amount(0), "0");
    EXPECT_EQ(format_amount(1), "0.000000000001");
    EXPECT_EQ(format_amount(12'000'000'000'000), "12");
    EXPECT_EQ(format_amount(12'345'678'901'234), "12.345678901234");
    EXPECT_EQ(format_amount(-500'000'000'000), "-0.5");
}

TEST(Price, TheRecordCarriesCostAndCurrencyAndReadsThemBack) {
    auto r = counts(1000, 200);
    r.start_unix_ms = 1795266307123;
    r.end_unix_ms = 1795266309000;
    apply_price(r, {{"gpt-like", gpt_like()}});
    const std::string line = encode_close(r);
    EXPECT_NE(line.find("\"cost\":0.0045,"), std::string::npos) << line;
    EXPECT_NE(line.find("\"currency\":\"USD\""), std::string::npos) << line;
    auto back = decode_line(std::string_view(line).substr(0, line.size() - 1));
    ASSERT_TRUE(back);
    EXPECT_EQ(back->record.cost_picos, 4'500'000'000);
    EXPECT_EQ(back->record.currency, "USD");

    // Priced, but a count unknown: "cost": null with the currency.
    auto unknown = counts(std::nullopt, 200);
    apply_price(unknown, {{"gpt-like", gpt_like()}});
    const std::string null_line = encode_close(unknown);
    EXPECT_NE(null_line.find("\"cost\":null,\"currency\":\"USD\""), std::string::npos) << null_line;

    // Not priced: no cost fields at all (format v1).
    auto plain = counts(1000, 200);
    const std::string plain_line = encode_close(plain);
    EXPECT_EQ(plain_line.find("cost"), std::string::npos) << plain_line;
    auto plain_back = decode_line(std::string_view(plain_line).substr(0, plain_line.size() - 1));
    ASSERT_TRUE(plain_back);
    EXPECT_FALSE(plain_back->record.cost_picos);
    EXPECT_TRUE(plain_back->record.currency.empty());
}

TEST(Price, ReportSumsCostPerCurrencyAndCountsUnpriced) {
    std::vector<usage_record> records;
    for (int i = 0; i < 3; ++i) {
        auto r = counts(1000, 200);
        r.id = std::string(31, '0') + std::to_string(i);
        r.tenant = "team";
        apply_price(r, {{"gpt-like", gpt_like()}});
        records.push_back(r);
    }
    auto unpriced = counts(10, 10);
    unpriced.id = std::string(31, '0') + "9";
    unpriced.tenant = "team";
    unpriced.model = "other";
    records.push_back(unpriced);
    const usage_report report = build_report(records, {});
    const usage_totals& team = report.by_tenant.at("team");
    ASSERT_EQ(team.cost_picos.size(), 1U);
    EXPECT_EQ(team.cost_picos.at("USD"), 3 * 4'500'000'000LL);
    EXPECT_EQ(team.unpriced_requests, 1U);
    EXPECT_EQ(report.by_tenant_model.at({"team", "other"}).cost_picos.size(), 0U);
}

TEST(Price, SumsOfCostsAreWrittenExactlyPastSixtyFourBits) {
    EXPECT_EQ(format_amount_sum(0), "0");
    EXPECT_EQ(format_amount_sum(4'500'000'000), "0.0045");
    EXPECT_EQ(format_amount_sum(-500'000'000'000), "-0.5");
    // Ten million units: past what 64 bits of pico-units hold (about 9.2 million).
    const amount_sum ten_million = amount_sum{10'000'000} * 1'000'000'000'000;
    EXPECT_EQ(format_amount_sum(ten_million + 123), "10000000.000000000123");
    EXPECT_EQ(format_amount_sum(-ten_million), "-10000000");
}

}  // namespace
}  // namespace tokenmeter::usage
