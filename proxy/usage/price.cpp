#include "usage/price.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tokenmeter::usage {

namespace {

constexpr std::int64_t picos_per_unit = 1'000'000'000'000;

}  // namespace

std::optional<std::int64_t> cost_picos(const price& p, const usage_record& r) {
    if (!r.served || r.outcome == "rejected") {
        return 0;
    }
    if (!r.input.value || !r.output.value) {
        return std::nullopt;
    }
    const std::uint64_t input = *r.input.value;
    const std::uint64_t output = *r.output.value;
    const std::uint64_t cached = std::min(r.cached_input.value.value_or(0), input);
    const std::uint64_t written = std::min(r.cache_write.value.value_or(0), input - cached);
    const std::uint64_t written_1h = std::min(r.cache_write_1h.value.value_or(0), written);
    const std::uint64_t reasoning = std::min(r.reasoning.value.value_or(0), output);
    // tokens x micro-units per million tokens = pico-units; any overflow makes the cost unknown.
    std::int64_t total = 0;
    const auto add = [&total](std::uint64_t tokens, std::int64_t micros) {
        std::int64_t part = 0;
        return tokens <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) &&
               !__builtin_mul_overflow(static_cast<std::int64_t>(tokens), micros, &part) &&
               !__builtin_add_overflow(total, part, &total);
    };
    if (!add(input - cached - written, p.input) || !add(cached, p.cached_input) ||
        !add(written - written_1h, p.cache_write) || !add(written_1h, p.cache_write_1h) ||
        !add(output - reasoning, p.output) || !add(reasoning, p.reasoning)) {
        return std::nullopt;
    }
    return total;
}

void apply_price(usage_record& r, const price_table& prices) {
    r.cost_picos.reset();
    r.currency.clear();
    const auto it = prices.find(r.model);
    if (it == prices.end()) {
        return;
    }
    r.cost_picos = cost_picos(it->second, r);
    r.currency = it->second.currency;
}

std::string format_amount(std::int64_t picos) {
    std::string out;
    std::uint64_t magnitude =
        picos < 0 ? 0 - static_cast<std::uint64_t>(picos) : static_cast<std::uint64_t>(picos);
    if (picos < 0) {
        out += '-';
    }
    const auto unit = static_cast<std::uint64_t>(picos_per_unit);
    out += std::to_string(magnitude / unit);
    std::uint64_t fraction = magnitude % unit;
    if (fraction != 0) {
        std::string digits = std::to_string(fraction);
        digits.insert(0, 12 - digits.size(), '0');
        while (digits.back() == '0') {
            digits.pop_back();
        }
        out += '.';
        out += digits;
    }
    return out;
}

std::string format_amount_sum(amount_sum picos) {
    __extension__ using wide = unsigned __int128;
    const wide magnitude = picos < 0 ? wide{0} - static_cast<wide>(picos) : static_cast<wide>(picos);
    const auto unit = static_cast<wide>(picos_per_unit);
    wide whole = magnitude / unit;
    std::string digits;
    do {
        digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(whole % 10)));
        whole /= 10;
    } while (whole != 0);
    std::string out = picos < 0 ? "-" + digits : digits;
    // The fraction is below 10^12: it fits 64 bits, and format_amount writes it.
    const auto fraction = static_cast<std::int64_t>(magnitude % unit);
    if (fraction != 0) {
        const std::string part = format_amount(fraction);  // "0.xxx"
        out += part.substr(1);
    }
    return out;
}

std::optional<std::int64_t> amount_from_number(double value) {
    const double scaled = value * static_cast<double>(picos_per_unit);
    if (!std::isfinite(scaled) ||
        std::fabs(scaled) >= static_cast<double>(std::numeric_limits<std::int64_t>::max())) {
        return std::nullopt;
    }
    return std::llround(scaled);
}

}  // namespace tokenmeter::usage
