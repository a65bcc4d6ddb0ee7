// tokenizer/regex_ascii: hand-written matchers for the well-known pre-tokenizer patterns, used by
// regex::find in place of PCRE2 when the text it may look at is ASCII. Each gives exactly what
// PCRE2 (UTF, UCP, the \s rewrite, hard partial matching) gives for its pattern on such text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace tokenmeter::tokenizer::detail {

// tiktoken's published patterns (also Llama 3's Split pattern, byte for byte, for cl100k_base).
inline constexpr std::string_view cl100k_pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view o200k_pattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen 2 / 3's Split pattern: cl100k_base's with one digit per piece.
inline constexpr std::string_view cl100k_one_digit_pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace ascii_regex {

enum class shape : std::uint8_t { none, cl100k, cl100k_one_digit, o200k };

// The matcher for `pattern` (compared byte for byte), or none.
shape recognize(std::string_view pattern) noexcept;

// True when every byte is below 0x80.
bool all_ascii(std::string_view bytes) noexcept;

enum class outcome : std::uint8_t { match, partial, undecided };
// The match starting at `from` (< subject.size(), subject[from..] ASCII) as PCRE2 would find it:
// `match` with its end, `partial` (hard partial matching: the match needs a byte past the end),
// or `undecided`, when PCRE2 must answer.
outcome find(shape s, std::string_view subject, std::size_t from, bool partial,
             std::size_t& end) noexcept;

// The end of the run of bytes in [first, last] (after OR 0x20 when `fold`: either case of a
// letter) from i, or n when the run reaches the end. Eight bytes at a time while eight are
// there: every byte is ASCII (below 0x80), so a byte-wise add never carries into the next byte.
template <unsigned first, unsigned last, bool fold>
[[gnu::always_inline]] inline std::size_t range_run(const char* bytes, std::size_t n,
                                                    std::size_t i) noexcept {
    constexpr std::uint64_t ones = 0x0101010101010101ULL;
    constexpr std::uint64_t high = ones * 0x80U;
    constexpr std::uint64_t folded = fold ? ones * 0x20U : 0;
    while (i + 8 <= n) {
        std::uint64_t word = 0;
        std::memcpy(&word, bytes + i, sizeof word);
        word |= folded;
        // Each add sets a byte's high bit when the byte is at least the bound.
        const std::uint64_t from_first = word + ones * (0x80U - first);
        const std::uint64_t past_last = word + ones * (0x80U - last - 1);
        const std::uint64_t outside = ~(from_first & ~past_last) & high;
        if (outside != 0) {
            return i + static_cast<std::size_t>(__builtin_ctzll(outside)) / 8;
        }
        i += 8;
    }
    while (i < n &&
           ((static_cast<unsigned char>(bytes[i]) | (fold ? 0x20U : 0U)) - first) <= last - first) {
        ++i;
    }
    return i;
}

// The commonest piece of model output, a word with at most one leading space (or other byte
// that is not a letter, digit, CR, LF or quote), matched inline: true with the end find() gives
// for it. False, leaving it to find(), for anything else, and for a word that reaches the end of
// the subject (whether it ends there is not known yet). subject[from..] is ASCII, from < size.
[[gnu::always_inline]] inline bool find_word(shape s, std::string_view subject, std::size_t from,
                                             std::size_t& end) noexcept {
    const char* const bytes = subject.data();
    const std::size_t n = subject.size();
    const unsigned c = static_cast<unsigned char>(bytes[from]);
    std::size_t i = from;
    if (((c | 0x20U) - 'a') >= 26U) {
        // Not a letter: the optional [^\r\n\p{L}\p{N}] of both patterns, if it is one. A quote
        // may start a contraction instead (cl100k_base tries those first).
        if (c - '0' < 10U || c == '\r' || c == '\n' || c == '\'') {
            return false;
        }
        i = from + 1;
    }
    switch (s) {
        case shape::cl100k:
        case shape::cl100k_one_digit: {
            // \p{L}+ ends the match; nothing after it is read.
            const std::size_t e = range_run<'a', 'z', true>(bytes, n, i);
            if (e == i || e == n) {
                return false;
            }
            end = e;
            return true;
        }
        case shape::o200k: {
            // Upper case, then lower case, then a contraction if a quote follows.
            const std::size_t j = range_run<'A', 'Z', false>(bytes, n, i);
            const std::size_t k = range_run<'a', 'z', false>(bytes, n, j);
            if (k == j || k == n || bytes[k] == '\'') {
                return false;
            }
            end = k;
            return true;
        }
        case shape::none:
            break;
    }
    return false;
}

}  // namespace ascii_regex

}  // namespace tokenmeter::tokenizer::detail
