// tokenizer/regex_ascii: the pre-tokenizer patterns of cl100k_base and o200k_base (and Qwen's
// one-digit cl100k_base) matched by hand on ASCII text. Each matcher tries the pattern's
// alternatives in PCRE2's order and reads the bytes PCRE2's backtracking reads; a read past the
// end of the subject is what hard partial matching reports (PCRE2 returns PCRE2_ERROR_PARTIAL at
// the first such read), so the matchers record it and the attempt is partial.
//
// On ASCII, \p{L} is [A-Za-z] (\p{Lu} upper case, \p{Ll} lower case, no Lt, Lm, Lo or M),
// \p{N} is [0-9] and \s (Unicode White_Space, see regex.cpp) is [\t\n\v\f\r ]. Every ASCII byte
// starts a match of these patterns, so a match attempt at `from` never fails and PCRE2 never
// moves on to a later start.
#include "tokenizer/regex_ascii.hpp"

#include <array>
#include <cstring>

namespace tokenmeter::tokenizer::detail::ascii_regex {

namespace {

enum byte_class : std::uint16_t {
    upper = 1U << 0U,  // \p{Lu}
    lower = 1U << 1U,  // \p{Ll}
    letter = upper | lower,
    digit = 1U << 2U,      // \p{N}
    space = 1U << 3U,      // \s
    not_space = 1U << 4U,  // \S
    newline = 1U << 5U,    // [\r\n]
    slash = 1U << 6U,      // o200k_base's [\r\n/] tail
    other = 1U << 7U,      // [^\r\n\p{L}\p{N}]
    symbol = 1U << 8U,     // [^\s\p{L}\p{N}]
};

constexpr std::array<std::uint16_t, 128> make_classes() {
    std::array<std::uint16_t, 128> t{};
    for (unsigned b = 0; b < 128; ++b) {
        std::uint16_t c = 0;
        if (b >= 'A' && b <= 'Z') {
            c |= upper;
        } else if (b >= 'a' && b <= 'z') {
            c |= lower;
        } else if (b >= '0' && b <= '9') {
            c |= digit;
        }
        const bool is_space = (b >= '\t' && b <= '\r') || b == ' ';
        c |= is_space ? space : not_space;
        if (b == '\r' || b == '\n') {
            c |= newline;
        }
        if (b == '/') {
            c |= slash;
        }
        if ((c & (letter | digit | newline)) == 0) {
            c |= other;
        }
        if ((c & (letter | digit | space)) == 0) {
            c |= symbol;
        }
        t[b] = c;
    }
    return t;
}

constexpr std::array<std::uint16_t, 128> classes = make_classes();

// The subject as a match attempt reads it. A read past the end finds nothing (class 0, byte -1);
// with partial matching it also marks the attempt partial.
struct reader {
    const char* bytes = nullptr;
    std::size_t size = 0;
    bool partial = false;
    bool hit_end = false;

    std::uint16_t at(std::size_t i) noexcept {
        if (i < size) {
            return classes[static_cast<unsigned char>(bytes[i])];
        }
        hit_end = hit_end || partial;
        return 0;
    }
    int byte(std::size_t i) noexcept {
        if (i < size) {
            return static_cast<unsigned char>(bytes[i]);
        }
        hit_end = hit_end || partial;
        return -1;
    }
    // The end of the run of `cls` bytes starting at i (a greedy quantifier reads one byte more).
    std::size_t run(std::size_t i, std::uint16_t cls) noexcept {
        while ((at(i) & cls) != 0) {
            ++i;
        }
        return i;
    }
    // The same for a run of letters (cls: letter, upper or lower), eight bytes at a time
    // (range_run); a run that reaches the end has read past it, as run() would.
    template <std::uint16_t cls>
    std::size_t letter_run(std::size_t i) noexcept {
        static_assert(cls == letter || cls == upper || cls == lower);
        const std::size_t e = cls == letter  ? range_run<'a', 'z', true>(bytes, size, i)
                              : cls == upper ? range_run<'A', 'Z', false>(bytes, size, i)
                                             : range_run<'a', 'z', false>(bytes, size, i);
        if (e == size) {
            hit_end = hit_end || partial;
        }
        return e;
    }
};

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at i: its length, or 0. Every alternative reads the quote and the
// next byte; only 're, 've and 'll read a third.
[[gnu::always_inline]] inline std::size_t contraction(reader& r, std::size_t i) noexcept {
    if (r.byte(i) != '\'') {
        return 0;
    }
    switch (r.byte(i + 1) | 0x20) {
        case 's':
        case 't':
        case 'm':
        case 'd':
            return 2;
        case 'r':
        case 'v':
            return (r.byte(i + 2) | 0x20) == 'e' ? 3 : 0;
        case 'l':
            return (r.byte(i + 2) | 0x20) == 'l' ? 3 : 0;
        default:
            return 0;
    }
}

// The alternatives both patterns end with, tried in order at p; p when none matches.
//   \p{N}{1,max_digits} | ?[^\s\p{L}\p{N}]+[tail]* | \s*[\r\n]+ | \s+(?!\S) | \s+
std::size_t common_tail(reader& r, std::size_t p, std::uint16_t c, std::size_t max_digits,
                        std::uint16_t tail) noexcept {
    if ((c & digit) != 0) {
        std::size_t e = p + 1;
        while (e - p < max_digits && (r.at(e) & digit) != 0) {
            ++e;
        }
        return e;
    }
    // ` ?` takes the space first; without it the space cannot start the symbol run.
    const std::size_t s = r.bytes[p] == ' ' ? p + 1 : p;
    if ((r.at(s) & symbol) != 0) {
        return r.run(r.run(s, symbol), tail);
    }
    if ((c & space) == 0) {
        return p;
    }
    const std::size_t e = r.run(p, space);
    // \s*[\r\n]+ gives back spaces until [\r\n]+ can match: it ends after the run's last newline.
    for (std::size_t k = e; k > p; --k) {
        if ((r.at(k - 1) & newline) != 0) {
            return k;
        }
    }
    // \s+(?!\S): the run, if nothing follows it; else all of it but the last space.
    if ((r.at(e) & not_space) == 0 || e - p < 2) {
        return e;  // the run, by (?!\S) at the end or by \s+
    }
    return e - 1;
}

[[gnu::always_inline]] inline std::size_t cl100k_at(reader& r, std::size_t p,
                                                  std::size_t max_digits) noexcept {
    const std::uint16_t c = r.at(p);
    if (const std::size_t n = contraction(r, p); n != 0) {
        return p + n;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    const std::size_t i = (c & other) != 0 ? p + 1 : p;
    if (const std::size_t e = r.letter_run<letter>(i); e > i) {
        return e;
    }
    return common_tail(r, p, c, max_digits, newline);
}

[[gnu::always_inline]] inline std::size_t o200k_at(reader& r, std::size_t p) noexcept {
    const std::uint16_t c = r.at(p);
    if ((c & (letter | other)) != 0) {
        // [^\r\n\p{L}\p{N}]? then upper* lower+ or else upper+ lower* (lower* matching nothing,
        // since the first failed), each with an optional contraction.
        const std::size_t i = (c & other) != 0 ? p + 1 : p;
        const std::size_t j = r.letter_run<upper>(i);
        const std::size_t k = r.letter_run<lower>(j);
        if (k > j) {
            return k + contraction(r, k);
        }
        if (j > i) {
            return j + contraction(r, j);
        }
    }
    return common_tail(r, p, c, 3, newline | slash);
}

}  // namespace

shape recognize(std::string_view pattern) noexcept {
    if (pattern == cl100k_pattern) {
        return shape::cl100k;
    }
    if (pattern == o200k_pattern) {
        return shape::o200k;
    }
    if (pattern == cl100k_one_digit_pattern) {
        return shape::cl100k_one_digit;
    }
    return shape::none;
}

bool all_ascii(std::string_view bytes) noexcept {
    std::uint64_t seen = 0;
    std::size_t i = 0;
    for (; i + 8 <= bytes.size(); i += 8) {
        std::uint64_t word = 0;
        std::memcpy(&word, bytes.data() + i, sizeof word);
        seen |= word;
    }
    for (; i < bytes.size(); ++i) {
        seen |= static_cast<unsigned char>(bytes[i]);
    }
    return (seen & 0x8080808080808080ULL) == 0;
}

outcome find(shape s, std::string_view subject, std::size_t from, bool partial,
             std::size_t& end) noexcept {
    reader r{subject.data(), subject.size(), partial};
    std::size_t e = from;
    switch (s) {
        case shape::cl100k:
            e = cl100k_at(r, from, 3);
            break;
        case shape::cl100k_one_digit:
            e = cl100k_at(r, from, 1);
            break;
        case shape::o200k:
            e = o200k_at(r, from);
            break;
        case shape::none:
            return outcome::undecided;
    }
    if (r.hit_end) {
        return outcome::partial;
    }
    if (e == from) {
        return outcome::undecided;
    }
    end = e;
    return outcome::match;
}

}  // namespace tokenmeter::tokenizer::detail::ascii_regex
