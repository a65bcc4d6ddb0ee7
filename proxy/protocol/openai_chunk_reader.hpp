// protocol/openai_chunk_reader: the one-pass reader of streamed Chat Completions chunks of the
// common shape, used by the OpenAI adapter (protocol/openai.cpp) before its general walk.
// Internal to the OpenAI dialect: header-only so that the adapter inlines the per-chunk calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "protocol/chunk_builder.hpp"
#include "protocol/json_number.hpp"

namespace tokenmeter::protocol::openai_detail {

// A key against a literal: the length first, then byte by byte over a size known at compile
// time (unrolled inline; memcmp of an odd constant size is a call for every key of every chunk).
template <std::size_t N>
// NOLINTNEXTLINE(modernize-avoid-c-arrays): a string literal's own type, its length a constant
bool key_is(std::string_view key, const char (&literal)[N]) noexcept {
    if (key.size() != N - 1) {
        return false;
    }
    for (std::size_t i = 0; i + 1 < N; ++i) {
        if (key[i] != literal[i]) {
            return false;
        }
    }
    return true;
}

// Where reading a later text can start when its first bytes are the same: the same bytes read
// the same way, so only the reader's position and what they meant need keeping.
enum class chunk_text_field : std::uint8_t { none, content, reasoning };
struct chunk_resume_point {
    std::size_t at = 0;  // the offset to start at; 0: from the beginning
    // none: at the first "choices" array's '['. content or reasoning: at the opening quote of a
    // delta's text value, with nothing read before it that had an effect (no text, no role, no
    // finish reason).
    chunk_text_field field = chunk_text_field::none;
    // With a text field: the bytes an earlier accepted chunk with the same bytes before `at` had
    // after that text value's closing quote, where reading them had no effect (they close the
    // delta, the choice, "choices" and the root, with nulls and the like between). A text that
    // ends with the same bytes after its value is accepted without reading them. Empty: none.
    std::string_view quiet_suffix;
};

// A streamed Chat Completions chunk of the shape servers send token after token, read in one
// pass without the general walk and its visitor calls: no whitespace, keys and strings of plain
// printable ASCII without escapes, scalars that are such strings, null, true, false or unsigned
// integers of up to 19 digits, "choices" an array of objects whose "delta" is an object of
// scalars. It fills the builder as openai_adapter's walk would, and says no (the caller then
// walks the text) at the first byte outside that shape: an escape, a non-ASCII byte, a nested
// object or array elsewhere (tool calls, logprobs, usage), an "error", anything invalid. A
// "yes" is therefore only given for texts the walk accepts with the same result
// (tests/unit/protocol/openai_test.cpp compares the two on recorded and mutated chunks).
class chat_chunk_reader {
  public:
    chat_chunk_reader(std::string_view text, chunk_builder& out) noexcept
        : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()), out_(out) {}

    using text_field = chunk_text_field;
    using resume_point = chunk_resume_point;

    // On true: `choices` says whether the root held a "choices" array, `role` whether a delta
    // had a "role" string. `from`: a resume point an earlier accepted text gave (choices_at(),
    // value_at()) whose bytes before it this text repeats.
    bool read(bool& choices, bool& role, resume_point from = {}) {
        if (from.at != 0) {
            p_ += from.at;
            choices = true;
            if (from.field == text_field::none) {
                if (!peek('[') || !read_choices(role)) {
                    return false;
                }
            } else {
                if (!delta_text(from.field)) {
                    return false;
                }
                value_end_ = offset();
                effects_at_value_end_ = effect_count_;
                // The same bytes as an earlier chunk's quiet end, read the same way: accepted
                // with nothing more to add.
                if (const auto known = from.quiet_suffix;
                    !known.empty() && static_cast<std::size_t>(end_ - p_) == known.size() &&
                    std::memcmp(p_, known.data(), known.size()) == 0) {
                    p_ = end_;
                    matched_quiet_suffix_ = true;
                    return true;
                }
                if (!rest_of_choices(role)) {
                    return false;
                }
            }
        } else if (!eat('{') || peek('}') || !member(choices, role)) {
            return false;
        }
        while (eat(',')) {
            if (!member(choices, role)) {
                return false;
            }
        }
        return eat('}') && p_ == end_;
    }

    // After an accepted read from the beginning: the first "choices" array's '[' (at 0: none).
    [[nodiscard]] resume_point choices_at() const noexcept {
        return {choices_at_, text_field::none, {}};
    }
    // After an accepted read that did not start at a text value: the first delta text value
    // with nothing of effect before it (at 0: none).
    [[nodiscard]] resume_point value_at() const noexcept { return value_at_; }
    // After an accepted read that started at a text value: where the bytes after that value
    // begin if reading them had no effect (0: they had one).
    [[nodiscard]] std::size_t quiet_suffix_at() const noexcept {
        return effect_count_ == effects_at_value_end_ ? value_end_ : 0;
    }
    // Whether the read ended by matching the quiet suffix it was given.
    [[nodiscard]] bool matched_quiet_suffix() const noexcept { return matched_quiet_suffix_; }

  private:
    [[nodiscard]] std::size_t offset() const noexcept {
        return static_cast<std::size_t>(p_ - begin_);
    }

    bool member(bool& choices, bool& role) {
        std::string_view key;
        if (!member_key(key) || key_is(key, "error")) {
            return false;
        }
        if (key_is(key, "choices") && peek('[')) {
            choices = true;
            if (choices_at_ == 0) {
                choices_at_ = offset();
            }
            return read_choices(role);
        }
        if (key_is(key, "model") && peek('"')) {
            // Before "choices" in the servers' chunks, so a resumed read (which starts there)
            // does not see it again: the first chunk names the model.
            std::string_view name;
            if (!string(name)) {
                return false;
            }
            out_.set_model(name);
            return true;
        }
        return skip_scalar();
    }

    bool read_choices(bool& role) {
        ++p_;  // '['
        if (eat(']')) {
            return true;
        }
        do {
            if (!read_choice(role)) {
                return false;
            }
        } while (eat(','));
        return eat(']');
    }

    // After a delta's text value to the end of the "choices" array: the rest of the delta, of
    // its choice, and the choices after it.
    bool rest_of_choices(bool& role) {
        while (eat(',')) {
            if (!delta_member(role)) {
                return false;
            }
        }
        if (!eat('}')) {
            return false;
        }
        while (eat(',')) {
            if (!choice_member(role)) {
                return false;
            }
        }
        if (!eat('}')) {
            return false;
        }
        while (eat(',')) {
            if (!read_choice(role)) {
                return false;
            }
        }
        return eat(']');
    }

    bool read_choice(bool& role) {
        if (!eat('{')) {
            return false;
        }
        if (eat('}')) {
            return true;
        }
        do {
            if (!choice_member(role)) {
                return false;
            }
        } while (eat(','));
        return eat('}');
    }

    bool choice_member(bool& role) {
        std::string_view key;
        if (!member_key(key)) {
            return false;
        }
        if (key_is(key, "delta") && peek('{')) {
            return read_delta(role);
        }
        if (key_is(key, "finish_reason") && peek('"')) {
            std::string_view value;
            if (!string(value)) {
                return false;
            }
            out_.set_finish(value);
            had_effect();
            return true;
        }
        return skip_scalar();
    }

    bool read_delta(bool& role) {
        ++p_;  // '{'
        if (eat('}')) {
            return true;
        }
        do {
            if (!delta_member(role)) {
                return false;
            }
        } while (eat(','));
        return eat('}');
    }

    bool delta_member(bool& role) {
        std::string_view key;
        if (!member_key(key)) {
            return false;
        }
        if (!peek('"')) {
            return skip_scalar();
        }
        text_field field = text_field::none;
        if (key_is(key, "content")) {
            field = text_field::content;
        } else if (key_is(key, "reasoning_content") || key_is(key, "reasoning")) {
            // vLLM and SGLang use reasoning_content; newer vLLM and OpenRouter reasoning.
            field = text_field::reasoning;
        }
        if (field != text_field::none) {
            if (effect_count_ == 0 && value_at_.at == 0) {
                value_at_ = {offset(), field, {}};
            }
            return delta_text(field);
        }
        std::string_view value;
        if (!string(value)) {
            return false;
        }
        if (key_is(key, "role")) {
            role = true;
            had_effect();
        }
        return true;
    }

    bool delta_text(text_field field) {
        std::string_view value;
        if (!string(value)) {
            return false;
        }
        (field == text_field::content ? out_.content : out_.reasoning).append(value);
        had_effect();
        return true;
    }

    void had_effect() noexcept { ++effect_count_; }

    [[nodiscard]] bool peek(char c) const noexcept { return p_ != end_ && *p_ == c; }
    bool eat(char c) noexcept {
        if (peek(c)) {
            ++p_;
            return true;
        }
        return false;
    }

    bool string(std::string_view& out) noexcept {
        if (!eat('"')) {
            return false;
        }
        const char* start = p_;
        p_ = detail::skip_plain_bytes(p_, end_);
        if (!peek('"')) {
            return false;
        }
        out = std::string_view(start, static_cast<std::size_t>(p_ - start));
        ++p_;
        return true;
    }

    bool member_key(std::string_view& key) noexcept { return string(key) && eat(':'); }

    bool literal(std::string_view word) noexcept {
        if (static_cast<std::size_t>(end_ - p_) < word.size() ||
            std::memcmp(p_, word.data(), word.size()) != 0) {
            return false;
        }
        p_ += word.size();
        return true;
    }

    // A value the adapter does not look at. What follows it is checked by the caller (a
    // fraction or exponent after the digits fails there).
    bool skip_scalar() noexcept {
        if (p_ == end_) {
            return false;
        }
        switch (*p_) {
            case '"': {
                std::string_view ignored;
                return string(ignored);
            }
            case 'n':
                return literal("null");
            case 't':
                return literal("true");
            case 'f':
                return literal("false");
            default:
                break;
        }
        if (*p_ == '0') {
            ++p_;
            return true;
        }
        const char* digits = p_;
        while (p_ != end_ && *p_ >= '0' && *p_ <= '9') {
            ++p_;
        }
        return p_ != digits && p_ - digits <= 19;
    }

    const char* begin_;
    const char* p_;
    const char* end_;
    chunk_builder& out_;
    std::size_t choices_at_ = 0;
    resume_point value_at_;
    // How many things read so far changed the builder or `role`.
    std::size_t effect_count_ = 0;
    // Where the text value a read resumed at ended, and how many effects there had been then.
    std::size_t value_end_ = 0;
    std::size_t effects_at_value_end_ = 0;
    bool matched_quiet_suffix_ = false;
};

}  // namespace tokenmeter::protocol::openai_detail
