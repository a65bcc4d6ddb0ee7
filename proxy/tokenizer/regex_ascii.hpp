// tokenizer/regex_ascii: hand-written matchers for the well-known pre-tokenizer patterns, used by
// regex::find in place of PCRE2 when the text it may look at is ASCII. Each gives exactly what
// PCRE2 (UTF, UCP, the \s rewrite, hard partial matching) gives for its pattern on such text.
#pragma once

#include <cstddef>
#include <cstdint>
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

}  // namespace ascii_regex

}  // namespace tokenmeter::tokenizer::detail
