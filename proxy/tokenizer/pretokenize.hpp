// tokenizer/pretokenize: regex pre-tokenization (PCRE2, JIT, UTF + UCP) with exact streaming
// finality. A piece is final when the regex found it without looking past the end of the
// pending text: PCRE2's hard partial matching reports exactly that ("the match needed, or might
// have used, a character that is not there yet"), so every complete match it returns is the match
// any continuation of the text would give, and the next match starts where it ended.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex_ascii.hpp"

namespace tokenmeter::tokenizer::detail {

class regex {
  public:
    // `pattern` in the syntax of tiktoken / Hugging Face (Rust regex, Oniguruma). `\s` and `\S`
    // are rewritten to Unicode White_Space (PCRE2's UCP \s also matches U+180E). Refuses patterns
    // that look behind or match the empty string, which would make streaming inexact.
    // With engine::fastest, find() answers from a hand-written matcher (regex_ascii.hpp) when the
    // pattern is one it knows and the text from `from` on is ASCII; engine::pcre2 always asks
    // PCRE2 (the tests compare the two).
    enum class engine : std::uint8_t { fastest, pcre2 };
    static std::unique_ptr<regex> compile(std::string_view pattern, std::string& error,
                                          engine use = engine::fastest);
    ~regex();
    regex(const regex&) = delete;
    regex& operator=(const regex&) = delete;

    enum class result { match, partial, none };
    // First match in subject at or after `from`. With `partial`, a match that touched the end of
    // the subject is reported as `partial` starting at `start`.
    result find(std::string_view subject, std::size_t from, bool partial, std::size_t& start,
                std::size_t& end) const noexcept {
        return find(subject, from, partial, start, end, ascii_tail(subject));
    }
    // The same, for a caller that searches one subject many times: `ascii_from` is
    // ascii_tail(subject), computed once.
    result find(std::string_view subject, std::size_t from, bool partial, std::size_t& start,
                std::size_t& end, std::size_t ascii_from) const noexcept {
        if (ascii_ != ascii_regex::shape::none && from < subject.size() && from >= ascii_from) {
            if (ascii_regex::find_word(ascii_, subject, from, end)) {
                start = from;
                return result::match;
            }
            switch (ascii_regex::find(ascii_, subject, from, partial, end)) {
                case ascii_regex::outcome::match:
                    start = from;
                    return result::match;
                case ascii_regex::outcome::partial:
                    start = from;
                    end = subject.size();
                    return result::partial;
                case ascii_regex::outcome::undecided:
                    break;
            }
        }
        return pcre2_find(subject, from, partial, start, end);
    }
    // Where the subject's ASCII tail starts (every byte from there on is ASCII): the hand-written
    // matcher may answer for a search from there on. Past the end when it never may.
    [[nodiscard]] std::size_t ascii_tail(std::string_view subject) const noexcept;

  private:
    regex() = default;
    result pcre2_find(std::string_view subject, std::size_t from, bool partial, std::size_t& start,
                      std::size_t& end) const noexcept;
    void* code_ = nullptr;  // pcre2_code_8*
    ascii_regex::shape ascii_ = ascii_regex::shape::none;
};

// One pre-tokenizer level: a regex whose matches are pieces; text between matches is dropped
// (tiktoken's find_iter) or kept as a piece (Hugging Face Split, behavior Isolated).
struct split_level {
    std::unique_ptr<regex> re;
    bool keep_gaps = false;
};

// Splits text by the levels in order (each level splits every piece of the previous one) and
// calls emit(begin, end) for each final piece, in order. With `open` the text may continue: only
// pieces that no continuation can change are emitted. Returns the end of the last final piece
// (text.size() when not open).
template <class Emit>
std::size_t split_pieces(const std::vector<split_level>& levels, std::size_t level,
                         std::string_view text, std::size_t begin, std::size_t end, bool open,
                         Emit& emit) {
    if (level == levels.size()) {
        if (open) {
            return begin;
        }
        if (end > begin) {
            emit(begin, end);
        }
        return end;
    }
    const split_level& lv = levels[level];
    const std::string_view subject = text.substr(begin, end - begin);
    const std::size_t ascii_from = lv.re->ascii_tail(subject);
    std::size_t pos = 0;  // end of the last final piece, relative to begin
    while (pos < subject.size()) {
        std::size_t s = 0;
        std::size_t e = 0;
        const regex::result r = lv.re->find(subject, pos, open, s, e, ascii_from);
        if (r == regex::result::match) {
            if (level + 1 == levels.size()) {
                // The last level: its pieces are final (what the recursion would do, inline).
                if (s > pos && lv.keep_gaps) {
                    emit(begin + pos, begin + s);
                }
                if (e > s) {
                    emit(begin + s, begin + e);
                }
            } else {
                if (s > pos && lv.keep_gaps) {
                    split_pieces(levels, level + 1, text, begin + pos, begin + s, false, emit);
                }
                split_pieces(levels, level + 1, text, begin + s, begin + e, false, emit);
            }
            pos = e;
            continue;
        }
        // No further final match. Future matches start at or after s (partial) or at the end
        // (none); the text before that is a gap whose end is not known yet.
        const std::size_t gap_end = r == regex::result::partial ? s : subject.size();
        if (!lv.keep_gaps) {
            if (!open) {
                return end;
            }
            // A dropped gap is final as soon as the next match cannot start inside it.
            return begin + gap_end;
        }
        if (!open) {
            split_pieces(levels, level + 1, text, begin + pos, end, false, emit);
            return end;
        }
        return split_pieces(levels, level + 1, text, begin + pos, begin + gap_end, true, emit);
    }
    return begin + pos;
}

}  // namespace tokenmeter::tokenizer::detail
