// tokenizer/encoders: the two encoder families behind tokenizer.hpp, built from already-parsed
// data (the loader does the file reading and JSON parsing): tiktoken rank tables and Hugging Face
// BPE models (byte-level and SentencePiece-style).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added.hpp"
#include "tokenizer/pretokenize.hpp"
#include "tokenizer/tables.hpp"
#include "tokenizer/tokenizer.hpp"

namespace tokenmeter::tokenizer::detail {

struct merge_scratch;

// tiktoken: ranks over byte strings; the id of a token is its rank.
class tiktoken_encoder final : public encoder {
  public:
    // `ranks`: token bytes -> rank. Returns nullptr and sets `error` if the pattern is unusable
    // or a single byte has no rank.
    static std::unique_ptr<tiktoken_encoder> create(std::string name, std::string_view pattern,
                                                    bytes_map ranks, std::string& error);

    // Special tokens matched in the text, as tiktoken's encode(text, allowed_special="all").
    // Call before the encoder is shared.
    void match_special_tokens(const std::vector<std::pair<std::string, token_id>>& tokens);

    [[nodiscard]] const std::string& name() const noexcept override { return name_; }
    std::size_t encode_final(std::string_view pending, bool at_start,
                             std::vector<token_id>& out) const override;
    void encode_rest(std::string_view text, bool at_start,
                     std::vector<token_id>& out) const override;
    // Piece ends are reported when no special tokens are matched (encode_ordinary, the default).
    std::size_t encode_final_pieces(std::string_view pending, bool at_start,
                                    std::vector<token_id>& out,
                                    std::vector<piece_end>& ends) const override;
    void encode_rest_pieces(std::string_view text, bool at_start, std::vector<token_id>& out,
                            std::vector<piece_end>& ends) const override;
    [[nodiscard]] bool reports_piece_ends() const noexcept override { return specials_.empty(); }

  private:
    class ordinary;  // the text between special tokens, for added_vocabulary
    std::size_t run(std::string_view text, bool open, std::vector<token_id>& out) const;
    // `ends`, when given, gets each piece's end (encode_final_pieces).
    std::size_t run_ordinary(std::string_view text, std::size_t begin, std::size_t end, bool open,
                             std::vector<token_id>& out,
                             std::vector<piece_end>* ends = nullptr) const;
    // A piece's ids: from the per-thread piece cache when it has them (small, inlined in the
    // split loop), else merged by encode_uncached (out of line) and cached.
    void encode_piece(std::string_view piece, merge_scratch& s, std::vector<token_id>& out) const;
    void encode_uncached(std::string_view piece, std::uint64_t hash, merge_scratch& s,
                         std::vector<token_id>& out) const;

    std::string name_;
    added_vocabulary specials_;
    std::vector<split_level> levels_;
    bytes_map ranks_;
    std::uint64_t cache_owner_ = 0;
    std::array<token_id, 256> byte_rank_{};
};

// Everything a Hugging Face BPE tokenizer.json says that matters for ids, already validated.
struct hf_model {
    enum class kind { byte_level, sentencepiece };
    kind mode = kind::byte_level;

    // normalizer
    bool identity_normalizer = true;    // none: added tokens with normalized = true are matchable
    bool nfc = false;
    std::string prepend;                // SentencePiece: prepended to the text ("▁"), or empty
    bool prepend_if_absent = false;     // Metaspace: only if the text does not start with it
    bool prepend_each_segment = false;  // Prepend normalizer / Metaspace "always"
    std::string split_before;           // Metaspace(split = true): a word starts at each of these
    std::array<std::string, 256> replace_with;  // SentencePiece: by ASCII byte, "" = keep
    // pre-tokenizer (byte-level): regex splits in order
    std::vector<split_level> levels;

    // model. Byte-level: vocab keys are raw bytes (the byte-to-unicode alphabet undone).
    // SentencePiece: vocab keys are the normalized UTF-8 strings.
    bytes_map vocab;
    pair_map merges;
    std::array<token_id, 256> byte_ids{};  // byte-level initial symbols / <0xAB> fallback ids
    std::array<bool, 256> byte_present{};
    bool byte_fallback = false;
    bool has_unk = false;
    token_id unk = 0;
    bool fuse_unk = false;
    bool ignore_merges = false;
    std::vector<bool> whole_ok;  // by id: BPE of the token's own bytes gives the token itself

    // SentencePiece streaming boundaries: (left char id, right char id) pairs that some merge
    // joins. A boundary between two characters not in this set is never crossed by a merge.
    pair_map joined_chars;

    // added tokens matched in the text (special ones only with special_tokens: match)
    added_vocabulary added;

    std::uint64_t cache_owner = 0;  // this model's key in the per-thread piece cache
};

class hf_encoder final : public encoder {
  public:
    hf_encoder(std::string name, std::unique_ptr<hf_model> model);

    [[nodiscard]] const std::string& name() const noexcept override { return name_; }
    std::size_t encode_final(std::string_view pending, bool at_start,
                             std::vector<token_id>& out) const override;
    void encode_rest(std::string_view text, bool at_start,
                     std::vector<token_id>& out) const override;

    // Fills model.whole_ok; called once by the loader after the model is complete.
    static void compute_whole_ok(hf_model& model);

  private:
    class segments;  // the text between added tokens, for added_vocabulary
    std::size_t run(std::string_view text, bool at_start, bool open,
                    std::vector<token_id>& out) const;
    std::size_t segment(std::string_view text, std::size_t begin, std::size_t end, bool at_start,
                        bool open, std::vector<token_id>& out) const;
    std::size_t byte_level_segment(std::string_view text, std::size_t begin, std::size_t end,
                                   bool open, std::vector<token_id>& out) const;
    std::size_t nfc_segment(std::string_view text, std::size_t begin, std::size_t end, bool open,
                            std::vector<token_id>& out) const;
    std::size_t sentencepiece_segment(std::string_view text, std::size_t begin, std::size_t end,
                                      bool at_start, bool open, std::vector<token_id>& out) const;

    std::string name_;
    std::unique_ptr<hf_model> m_;
};

// Byte-level BPE of one piece (raw bytes).
void byte_level_bpe(const hf_model& m, std::string_view piece, merge_scratch& s,
                    std::vector<token_id>& out);

// NFC (ICU). `text` valid UTF-8.
bool nfc_is_trivially_normalized(std::string_view text) noexcept;  // no code point >= U+0300
bool nfc_is_normalized(std::string_view text);
void nfc_normalize(std::string_view text, std::string& out);
bool nfc_boundary_before(char32_t c);

}  // namespace tokenmeter::tokenizer::detail
