// The ASCII matchers of tokenizer/regex_ascii against PCRE2 itself: the same pattern compiled
// twice, once with the fast path (engine::fastest) and once without (engine::pcre2), must give
// the same result, start and end for every subject, every start offset and both partial flags.
// Exhaustively for short strings over an alphabet that reaches every branch of the patterns
// (letters of both cases, the contraction letters, digits, each kind of white space, the quote,
// o200k_base's '/', punctuation, and two non-ASCII characters, é and a no-break space, which
// send find() to PCRE2), then for seeded random text shaped like model output.
#include "tokenizer/regex_ascii.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "tokenizer/pretokenize.hpp"

namespace {

namespace detail = tokenmeter::tokenizer::detail;
using detail::regex;

// A Debug or sanitizer build runs fewer cases: the full alphabet to length 3 (not 4), a smaller
// alphabet at length 5, fewer random texts.
#if defined(__SANITIZE_ADDRESS__) || !defined(__OPTIMIZE__)
constexpr bool slow_build = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool slow_build = true;
#else
constexpr bool slow_build = false;
#endif
#else
constexpr bool slow_build = false;
#endif

struct engines {
    std::string name;
    detail::ascii_regex::shape shape;
    std::unique_ptr<regex> fast;
    std::unique_ptr<regex> pcre2;
};

std::vector<engines> all_engines() {
    std::vector<engines> out;
    using detail::ascii_regex::shape;
    const std::array<std::tuple<const char*, shape, std::string_view>, 3> patterns{{
        {"cl100k_base", shape::cl100k, detail::cl100k_pattern},
        {"o200k_base", shape::o200k, detail::o200k_pattern},
        {"qwen", shape::cl100k_one_digit, detail::cl100k_one_digit_pattern},
    }};
    for (const auto& [name, s, pattern] : patterns) {
        std::string error;
        engines e{name, s, regex::compile(pattern, error, regex::engine::fastest),
                  regex::compile(pattern, error, regex::engine::pcre2)};
        EXPECT_NE(e.fast, nullptr) << error;
        EXPECT_NE(e.pcre2, nullptr) << error;
        out.push_back(std::move(e));
    }
    return out;
}

std::string shown(std::string_view s) {
    std::string out;
    for (const char c : s) {
        const auto b = static_cast<unsigned char>(c);
        if (b >= 0x20 && b < 0x7f && c != '\\') {
            out.push_back(c);
        } else {
            constexpr std::string_view hex = "0123456789abcdef";
            out.append("\\x").push_back(hex[b >> 4U]);
            out.push_back(hex[b & 0xfU]);
        }
    }
    return out;
}

// Compares one call; returns false (after one test failure) when they differ. PCRE2's answer is
// left in pr and pe.
bool same(const engines& e, std::string_view subject, std::size_t from, bool partial,
          regex::result& pr, std::size_t& pe) {
    std::size_t fs = 0;
    std::size_t fe = 0;
    std::size_t ps = 0;
    pr = e.pcre2->find(subject, from, partial, ps, pe);
    const regex::result fr = e.fast->find(subject, from, partial, fs, fe);
    bool equal = fr == pr && (pr == regex::result::none || (fs == ps && fe == pe));
    // On ASCII the matcher itself must answer: PCRE2 behind an undecided one would hide its bugs.
    std::size_t ae = 0;
    const bool undecided = from < subject.size() &&
                           detail::ascii_regex::all_ascii(subject.substr(from)) &&
                           detail::ascii_regex::find(e.shape, subject, from, partial, ae) ==
                               detail::ascii_regex::outcome::undecided;
    equal = equal && !undecided;
    if (!equal) {
        ADD_FAILURE() << e.name << " \"" << shown(subject) << "\" from " << from
                      << (partial ? " partial" : "") << ": fast " << static_cast<int>(fr) << " ["
                      << fs << ", " << fe << "), pcre2 " << static_cast<int>(pr) << " [" << ps
                      << ", " << pe << ")" << (undecided ? ", the matcher left it to PCRE2" : "");
    }
    return equal;
}

// Every string of 1..max_length symbols (a symbol is one UTF-8 character), every start offset at
// a character boundary, both partial flags. Stops at the first difference.
void exhaustive(const std::vector<std::string>& alphabet, std::size_t max_length,
                std::size_t& compared) {
    const std::vector<engines> all = all_engines();
    std::vector<std::size_t> digits;
    std::string subject;
    std::vector<std::size_t> boundaries;
    for (std::size_t length = 1; length <= max_length; ++length) {
        digits.assign(length, 0);
        for (;;) {
            subject.clear();
            boundaries.clear();
            for (const std::size_t d : digits) {
                boundaries.push_back(subject.size());
                subject += alphabet[d];
            }
            boundaries.push_back(subject.size());
            for (const engines& e : all) {
                for (const std::size_t from : boundaries) {
                    for (const bool partial : {false, true}) {
                        ++compared;
                        regex::result r{};
                        std::size_t end = 0;
                        if (!same(e, subject, from, partial, r, end)) {
                            return;
                        }
                    }
                }
            }
            std::size_t i = 0;
            while (i < length && ++digits[i] == alphabet.size()) {
                digits[i++] = 0;
            }
            if (i == length) {
                break;
            }
        }
    }
}

TEST(RegexAscii, KnowsTheBundledPatterns) {
    using detail::ascii_regex::recognize;
    using detail::ascii_regex::shape;
    EXPECT_EQ(recognize(detail::cl100k_pattern), shape::cl100k);
    EXPECT_EQ(recognize(detail::o200k_pattern), shape::o200k);
    EXPECT_EQ(recognize(detail::cl100k_one_digit_pattern), shape::cl100k_one_digit);
    // GPT-2's pattern, and one byte changed: PCRE2 only.
    EXPECT_EQ(
        recognize(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"),
        shape::none);
    std::string changed(detail::cl100k_pattern);
    changed.back() = '*';
    EXPECT_EQ(recognize(changed), shape::none);
}

TEST(RegexAscii, AllAscii) {
    using detail::ascii_regex::all_ascii;
    EXPECT_TRUE(all_ascii(""));
    EXPECT_TRUE(all_ascii("hello, world! 0123456789\t\n\x7f"));
    for (std::size_t at = 0; at < 19; ++at) {
        std::string s(19, 'x');
        s[at] = '\x80';
        EXPECT_FALSE(all_ascii(s)) << at;
    }
}

TEST(RegexAscii, MatchesPcre2OnEveryShortString) {
    // Every class of byte the patterns tell apart, the letters of every contraction in both
    // cases, and é and a no-break space (U+00A0, white space), which send find() to PCRE2.
    const std::vector<std::string> full = {"a",  "A", "0", "1", " ", "\t", "\n",       "\r",
                                           "\v", "'", "s", "t", "l", "d",  "m",        "v",
                                           "e",  "R", "/", ".", ",", "!",  "\xc3\xa9", "\xc2\xa0"};
    // Enough for every branch at length 5: a contraction needs the quote and two letters, the
    // white-space alternatives a space and a newline, o200k_base's tail the slash.
    const std::vector<std::string> small =
        slow_build ? std::vector<std::string>{"a", "A", "1", " ", "\n", "'", "l", "/", "\xc3\xa9"}
                   : std::vector<std::string>{"a", "A", "1", " ", "\n",      "\r",
                                              "'", "l", "E", "/", "\xc3\xa9"};
    std::size_t compared = 0;
    exhaustive(full, slow_build ? 3 : 4, compared);
    exhaustive(small, 5, compared);
    RecordProperty("compared", static_cast<int>(compared));
}

// Model-output-shaped ASCII text: words in three cases (up to 24 letters), numbers of up to 12
// digits, runs of spaces, tabs and newlines (CRLF too), runs of punctuation, contractions and lone
// quotes.
std::string random_text(std::mt19937& rng) {
    static constexpr std::array<std::string_view, 14> contractions = {
        "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'Re", "'x", "'", "'r", "'l"};
    static constexpr std::string_view punctuation = ".,!?;:-/()[]{}\"'`*#@$%&_=+<>|\\~^";
    static constexpr std::array<std::string_view, 9> spaces = {
        " ", "  ", "\n", "\n\n", "\r\n", " \n ", "\t", "   \n", "\v\f"};
    auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    std::string out;
    const std::size_t parts = 1 + pick(12);
    for (std::size_t i = 0; i < parts; ++i) {
        switch (pick(8)) {
            case 0:
            case 1:
            case 2: {  // a word, sometimes longer than the matchers' 8-byte steps
                const std::size_t n = 1 + (pick(4) == 0 ? pick(24) : pick(9));
                const std::size_t shape = pick(4);  // lower, Capitalized, UPPER, mIxEd
                for (std::size_t k = 0; k < n; ++k) {
                    const bool up = shape == 2 || (shape == 1 && k == 0) || (shape == 3 && pick(2));
                    out.push_back(static_cast<char>((up ? 'A' : 'a') + pick(26)));
                }
                if (pick(4) == 0) {
                    out += contractions[pick(contractions.size())];
                }
                break;
            }
            case 3: {  // a number
                const std::size_t n = 1 + pick(12);
                for (std::size_t k = 0; k < n; ++k) {
                    out.push_back(static_cast<char>('0' + pick(10)));
                }
                break;
            }
            case 4: {  // punctuation
                const std::size_t n = 1 + pick(4);
                for (std::size_t k = 0; k < n; ++k) {
                    out.push_back(punctuation[pick(punctuation.size())]);
                }
                break;
            }
            case 5:
                out += contractions[pick(contractions.size())];
                break;
            default:
                out += spaces[pick(spaces.size())];
                break;
        }
        if (pick(2) == 0) {
            out.push_back(' ');
        }
    }
    return out;
}

TEST(RegexAscii, MatchesPcre2OnRandomText) {
    const std::vector<engines> all = all_engines();
    std::mt19937 rng(20240613);
    const int count = slow_build ? 30000 : 200000;
    for (int n = 0; n < count; ++n) {
        const std::string text = random_text(rng);
        for (const engines& e : all) {
            for (const bool partial : {false, true}) {
                // The walk split_pieces makes, then a start anywhere.
                regex::result r{};
                std::size_t end = 0;
                std::size_t from = 0;
                while (from < text.size()) {
                    if (!same(e, text, from, partial, r, end)) {
                        return;
                    }
                    if (r != regex::result::match) {
                        break;
                    }
                    from = end;
                }
                if (!same(e, text, rng() % (text.size() + 1), partial, r, end)) {
                    return;
                }
            }
        }
    }
}

}  // namespace
