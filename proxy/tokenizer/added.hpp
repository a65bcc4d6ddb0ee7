// tokenizer/added: added tokens matched in the text as one token each, the way the reference
// libraries do it: Hugging Face tokenizers' AddedVocabulary (leftmost-longest, with the lstrip,
// rstrip, single_word and normalized flags) and tiktoken's allowed special tokens. The encoders
// hand it their ordinary-text encoding as a callback; this file only decides where the added
// tokens are and which cuts of a stream are still exact.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tables.hpp"
#include "tokenizer/tokenizer.hpp"

namespace tokenmeter::tokenizer::detail {

struct added_token {
    std::string content;
    token_id id = 0;
    bool lstrip = false;       // also takes the whitespace before it
    bool rstrip = false;       // also takes the whitespace after it
    bool single_word = false;  // only where no word character touches it on either side
};

// A token found in the text: [start, stop) with lstrip/rstrip whitespace included.
struct added_match {
    std::size_t start;
    std::size_t stop;
    token_id id;
};

// One set of added tokens searched together (one of Hugging Face's two tries).
class added_set {
  public:
    // The first token with a given content wins; empty contents are ignored.
    void add(added_token token);
    // Call once after the last add, before matching.
    void finish();

    [[nodiscard]] bool empty() const noexcept { return tokens_.empty(); }
    [[nodiscard]] bool any_lstrip() const noexcept { return any_lstrip_; }
    [[nodiscard]] bool any_single_word() const noexcept { return any_single_word_; }
    [[nodiscard]] bool may_start_with(unsigned char byte) const noexcept { return first_[byte]; }
    [[nodiscard]] const added_token& token(std::uint32_t index) const { return tokens_[index]; }

    // The longest token starting at text[pos] (its index, length 0 if none). `could_grow` when
    // text ends inside a longer token's content, so more text could change the answer.
    std::size_t longest_at(std::string_view text, std::size_t pos, std::uint32_t& index,
                           bool& could_grow) const noexcept;

    // Flag bits of prefixes: some token with that flag could start with `s` (or `s` starts with
    // such a token). An empty `s` could start anything.
    enum : std::uint32_t { proper_prefix = 1, single_word_prefix = 2, lstrip_prefix = 4 };
    [[nodiscard]] bool could_start(std::string_view s, std::uint32_t flag) const noexcept;

  private:
    std::vector<added_token> tokens_;
    bytes_map by_content_;  // content -> index in tokens_
    bytes_map prefixes_;    // every prefix of every content -> flag bits
    std::array<bool, 256> first_{};
    bool any_lstrip_ = false;
    bool any_single_word_ = false;
};

// Where a text's ordinary (not added-token) parts are encoded: ids for text[begin, end) are
// appended to `out`; with `open` the text may continue after `end`, and the return value is how
// far the ids are final (as encoder::encode_final); otherwise `end`.
struct segment_encoder {
    virtual ~segment_encoder() = default;
    virtual std::size_t encode_segment(std::string_view text, std::size_t begin, std::size_t end,
                                       bool open, std::vector<token_id>& out) const = 0;
};

// The added tokens of one encoder. Hugging Face first matches the tokens with normalized =
// false in the text as given, then normalizes each remaining segment and matches the tokens with
// normalized = true in it (the loader accepts those only when the normalizer leaves the text as
// it is). tiktoken's special tokens are a `raw` set without flags.
class added_vocabulary {
  public:
    added_set raw;
    added_set normalized;
    // The encoder prepends to every segment (a Prepend normalizer, Metaspace "always"): a stream
    // must not stop right after an added token, or the next call would not know a new segment
    // starts there.
    bool prepend_each_segment = false;

    [[nodiscard]] bool empty() const noexcept { return raw.empty() && normalized.empty(); }

    // Encodes `text` (valid UTF-8) with the added tokens matched; `open` and the return value
    // as encoder::encode_final. An open call stops where the rest could still change what came
    // before: inside a possible token, before whitespace a later lstrip token could take, after a
    // word character a single_word token would have to see.
    std::size_t encode(std::string_view text, bool open, const segment_encoder& segments,
                       std::vector<token_id>& out) const;

  private:
    struct pass_result {
        std::size_t end = 0;            // how far the ids are final
        bool at_token_end = false;      // `end` is where an added token ends
        bool at_raw_token_end = false;  // ... a token of the raw set
        bool inside_dropped = false;    // `end` is inside a single_word match that was dropped
    };
    pass_result pass(std::string_view text, bool open, const segment_encoder& segments,
                     std::vector<token_id>& out) const;
    std::size_t normalized_pass(std::string_view text, std::size_t begin, std::size_t end,
                                bool open, const segment_encoder& segments,
                                std::vector<token_id>& out, std::size_t& last_stop,
                                std::vector<added_match>& dropped) const;
    [[nodiscard]] bool safe_cut(std::string_view text, const pass_result& r) const noexcept;
};

}  // namespace tokenmeter::tokenizer::detail
