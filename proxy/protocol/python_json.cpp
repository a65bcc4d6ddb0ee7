#include "protocol/python_json.hpp"

#include <cmath>
#include <cstdlib>

#include "core/text.hpp"

namespace tokenmeter::protocol {
namespace {

constexpr bool is_digit(char c) noexcept {
    return c >= '0' && c <= '9';
}

// The four hex digits after "\u" at `at`, or -1.
int hex4(std::string_view text, std::size_t at) noexcept {
    if (at + 4 > text.size()) {
        return -1;
    }
    int value = 0;
    for (std::size_t i = at; i < at + 4; ++i) {
        const int digit = core::hex_digit_value(text[i]);
        if (digit < 0) {
            return -1;
        }
        value = value * 16 + digit;
    }
    return value;
}

bool is_high_surrogate(int unit) noexcept {
    return unit >= 0xD800 && unit <= 0xDBFF;
}
bool is_low_surrogate(int unit) noexcept {
    return unit >= 0xDC00 && unit <= 0xDFFF;
}

// Length of the JSON number at `at` (RFC 8259 grammar, as Python's NUMBER_RE), or 0.
std::size_t number_length(std::string_view text, std::size_t at) noexcept {
    std::size_t i = at;
    if (i < text.size() && text[i] == '-') {
        ++i;
    }
    if (i == text.size() || !is_digit(text[i])) {
        return 0;
    }
    if (text[i] == '0') {
        ++i;
    } else {
        while (i < text.size() && is_digit(text[i])) {
            ++i;
        }
    }
    auto digits = [&](std::size_t from) {
        std::size_t j = from;
        while (j < text.size() && is_digit(text[j])) {
            ++j;
        }
        return j;
    };
    if (i + 1 < text.size() && text[i] == '.' && is_digit(text[i + 1])) {
        i = digits(i + 1);
    }
    if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
        std::size_t j = i + 1;
        if (j < text.size() && (text[j] == '+' || text[j] == '-')) {
            ++j;
        }
        if (j < text.size() && is_digit(text[j])) {
            i = digits(j);
        }
    }
    return i - at;
}

}  // namespace

std::optional<std::string> python_json_as_strict(std::string_view body) {
    std::string out;
    bool changed = false;
    bool in_string = false;
    std::size_t i = 0;
    auto replace = [&](std::size_t length, std::string_view with) {
        out.append(with);
        i += length;
        changed = true;
    };
    while (i < body.size()) {
        const char c = body[i];
        if (in_string) {
            if (c == '"') {
                in_string = false;
            } else if (c == '\\' && i + 1 < body.size() && body[i + 1] == 'u') {
                const int unit = hex4(body, i + 2);
                if (is_high_surrogate(unit)) {
                    const bool paired = i + 12 <= body.size() && body.substr(i + 6, 2) == "\\u" &&
                                        is_low_surrogate(hex4(body, i + 8));
                    if (paired) {
                        out.append(body.substr(i, 12));
                        i += 12;
                    } else {
                        replace(6, "\\ufffd");
                    }
                    continue;
                }
                if (is_low_surrogate(unit)) {
                    replace(6, "\\ufffd");
                    continue;
                }
            } else if (c == '\\' && i + 1 < body.size()) {
                out.append(body.substr(i, 2));  // "\"" must not end the string
                i += 2;
                continue;
            } else if (static_cast<unsigned char>(c) == 0xED && i + 2 < body.size() &&
                       static_cast<unsigned char>(body[i + 1]) >= 0xA0 &&
                       static_cast<unsigned char>(body[i + 1]) <= 0xBF &&
                       (static_cast<unsigned char>(body[i + 2]) & 0xC0U) == 0x80U) {
                // A surrogate encoded as UTF-8, which Python reads with "surrogatepass".
                replace(3, "\xEF\xBF\xBD");
                continue;
            }
            out.push_back(c);
            ++i;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (body.substr(i).starts_with("NaN")) {
            replace(3, "null");
            continue;
        } else if (body.substr(i).starts_with("Infinity")) {
            replace(8, "null");
            continue;
        } else if (body.substr(i).starts_with("-Infinity")) {
            replace(9, "null");
            continue;
        } else if (c == '-' || is_digit(c)) {
            const std::size_t length = number_length(body, i);
            if (length > 0) {
                const std::string number(body.substr(i, length));
                // strtod's locale is "C": nothing in the proxy calls setlocale.
                if (!std::isfinite(std::strtod(number.c_str(), nullptr))) {
                    replace(length, "null");  // Python reads it as inf (or as a big int)
                } else {
                    out.append(number);
                    i += length;
                }
                continue;
            }
        }
        out.push_back(c);
        ++i;
    }
    if (!changed) {
        return std::nullopt;
    }
    return out;
}

}  // namespace tokenmeter::protocol
