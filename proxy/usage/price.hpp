// usage/price: what a request's tokens cost, from per-model prices per million tokens. Amounts
// are exact integers: prices in micro-units of their currency (the config's decimal, read as
// text), costs in pico-units (tokens x micro-units per million tokens). No I/O, no clock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "usage/record.hpp"

namespace tokenmeter::usage {

// One model's prices per million tokens, in micro-units of `currency`. The cached-input,
// cache-write and reasoning prices are filled in by whoever builds the table (the input, input,
// cache-write and output price when the config gives none).
struct price {
    std::int64_t input = 0;
    std::int64_t cached_input = 0;    // cache reads
    std::int64_t cache_write = 0;     // cache writes (Anthropic's 5-minute tier)
    std::int64_t cache_write_1h = 0;  // cache writes kept for an hour
    std::int64_t output = 0;
    std::int64_t reasoning = 0;
    std::string currency;  // "USD", "EUR", ...
    bool operator==(const price&) const = default;
};

// By the model name clients send (the record's `model`).
using price_table = std::map<std::string, price, std::less<>>;

// The cost of a record's tokens in pico-units of the price's currency:
//   (input - cached - written) x input + cached x cached_input
//   + (written - written_1h) x cache_write + written_1h x cache_write_1h
//   + (output - reasoning) x output + reasoning x reasoning, each price per million tokens.
// Cached, written and reasoning tokens count only when known (otherwise they are priced with the
// whole they belong to), each at most what is left of that whole. nullopt when the input or
// output count is unknown (a cost is never guessed) or the amount does not fit 64 bits. A
// request that was not served used no tokens: 0.
std::optional<std::int64_t> cost_picos(const price& p, const usage_record& r);

// Sets r.cost_picos and r.currency from the table; a model without a price keeps no cost.
void apply_price(usage_record& r, const price_table& prices);

// An amount in pico-units as an exact decimal: "0.000123", "12", "-0.5" (no exponent, no
// trailing zeros).
std::string format_amount(std::int64_t picos);

// A sum of many records' costs, in pico-units: 128 bits, so no total of 64-bit costs wraps
// (one record's cost fits 64 bits; 2^127 pico-units is some 1.7e26 currency units).
__extension__ using amount_sum = __int128;
// format_amount for a sum.
std::string format_amount_sum(amount_sum picos);
// A JSON number read back from a record: exact for amounts below about 9,000 units.
std::optional<std::int64_t> amount_from_number(double value);

}  // namespace tokenmeter::usage
