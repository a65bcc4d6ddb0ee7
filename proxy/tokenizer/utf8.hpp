// tokenizer/utf8: UTF-8 validation and repair. Encoders only ever see valid UTF-8: every maximal
// invalid subsequence becomes U+FFFD, exactly what a WHATWG TextDecoder / Node's
// Buffer.toString("utf8") does, because that is the text the JavaScript reference tokenizers
// receive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tokenmeter::tokenizer::detail {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if invalid; sets `incomplete` when
// the bytes so far are a valid prefix cut off by the end of `s`. On invalid input `len` holds the
// length of the maximal subpart (>= 1) to replace by one U+FFFD.
std::size_t utf8_sequence(std::string_view s, std::size_t i, bool& incomplete, std::size_t& len);

// True if `s` is entirely valid UTF-8 (no incomplete tail).
bool utf8_valid(std::string_view s) noexcept;

// Appends the repaired form of `in` to `out`. If `final` is false an incomplete sequence at the
// very end is left unconsumed; returns the number of bytes of `in` consumed.
std::size_t utf8_repair(std::string_view in, bool final, std::string& out);

// Decodes the code point at s[i] (s valid UTF-8); advances i.
inline char32_t utf8_next(std::string_view s, std::size_t& i) noexcept {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
        ++i;
        return b0;
    }
    if (b0 < 0xE0) {
        const char32_t c = ((b0 & 0x1FU) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3FU);
        i += 2;
        return c;
    }
    if (b0 < 0xF0) {
        const char32_t c = ((b0 & 0x0FU) << 12) |
                           ((static_cast<unsigned char>(s[i + 1]) & 0x3FU) << 6) |
                           (static_cast<unsigned char>(s[i + 2]) & 0x3FU);
        i += 3;
        return c;
    }
    const char32_t c = ((b0 & 0x07U) << 18) |
                       ((static_cast<unsigned char>(s[i + 1]) & 0x3FU) << 12) |
                       ((static_cast<unsigned char>(s[i + 2]) & 0x3FU) << 6) |
                       (static_cast<unsigned char>(s[i + 3]) & 0x3FU);
    i += 4;
    return c;
}

inline std::size_t utf8_char_length(unsigned char lead) noexcept {
    return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

void utf8_append(char32_t c, std::string& out);

}  // namespace tokenmeter::tokenizer::detail
