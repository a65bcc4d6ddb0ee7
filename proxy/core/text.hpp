// core/text: the small text helpers every layer shares. ASCII only, no locale, no allocation.
#pragma once

#include <string_view>

namespace tokenmeter::core {

// HTTP's optional whitespace (RFC 9110, 5.6.3): spaces and horizontal tabs.
inline constexpr std::string_view http_whitespace = " \t";
// Spaces, tabs and line ends: what a config value, a mounted file or a header value may carry.
inline constexpr std::string_view ascii_whitespace = " \t\r\n";

// `text` without any of `chars` at either end; a view into `text`.
constexpr std::string_view trim(std::string_view text,
                                std::string_view chars = ascii_whitespace) noexcept {
    const auto first = text.find_first_not_of(chars);
    if (first == std::string_view::npos) {
        return {};
    }
    return text.substr(first, text.find_last_not_of(chars) - first + 1);
}

// The value of one hexadecimal digit (either case), or -1 for any other byte.
constexpr int hex_digit_value(char c) noexcept {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

}  // namespace tokenmeter::core
