// tokenizer/tokenizer: exact BPE encoders (tiktoken rank files, Hugging Face tokenizer.json) and
// the streaming re-tokenizer that stamps each token with the time of the read that completed it.
//
// This header is the contract between the engine (tokenizer/*.cpp), the loaders, the parity
// tests and the meter. The core never does I/O: `load_*` functions that read files live in the
// loader translation units (load*.cpp); everything else works on memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/time.hpp"

namespace tokenmeter::tokenizer {

using token_id = std::uint32_t;

// An immutable encoder. Thread-safe: one instance is shared by every worker thread; any caches
// are per call, per stream or per thread (a small piece -> ids memo), never shared mutable state.
//
// Text in, ids out, the way the reference implementations count model output:
//  - tiktoken encoders (o200k_base, cl100k_base) behave like tiktoken's encode_ordinary, or with
//    special_tokens match like encode(text, allowed_special="all").
//  - Hugging Face tokenizer.json encoders behave like `tokenizer.encode(text,
//    add_special_tokens=false)`: with special_tokens match (the default, Hugging Face's own)
//    every added token (<|endoftext|>, <|begin_of_text|>, <start_of_turn>, Qwen3's <think>...) is
//    matched in the text as one token, honouring its lstrip, rstrip, single_word and normalized
//    flags; with special_tokens text (`encode_special_tokens = true`) the ones marked "special"
//    are tokenized as ordinary text and only the others are matched.
//    No post-processor (no BOS/EOS ids) and no truncation or padding: the count is of the text.
//  - Invalid UTF-8 is first repaired the WHATWG way (each maximal invalid subsequence becomes
//    U+FFFD), which is the string a JavaScript reference receives from Buffer.toString("utf8").
class encoder {
  public:
    virtual ~encoder() = default;

    // A short name for logs and metric docs: "o200k_base", "cl100k_base", or the file's stem.
    [[nodiscard]] virtual const std::string& name() const noexcept = 0;

    // Encodes `text`, appending ids to `out`; added-token text is matched or not as the encoder
    // was loaded (special_tokens, below). Invalid UTF-8 is repaired as described above. Never
    // throws.
    virtual void encode(std::string_view text, std::vector<token_id>& out) const;

    // Number of tokens `encode` would produce.
    [[nodiscard]] virtual std::size_t count(std::string_view text) const;

    // A count whose work is bounded by bytes, whatever the text's shape (a prompt is client
    // input): the first `budget_bytes` of `text` are counted, with no merge on more than
    // count_piece_cap bytes at once (a longer pre-token is merged in chunks of that size); the
    // rest, if any, is estimated at the rate of the part counted. `exact` is false when either
    // bound changed anything: the tokens are then an estimate (close, not the reference's ids).
    struct bounded_count {
        std::uint64_t tokens = 0;
        bool exact = true;
    };
    static constexpr std::size_t count_piece_cap = 4096;
    [[nodiscard]] bounded_count count_bounded(std::string_view text,
                                              std::size_t budget_bytes) const;

    // Streaming support. Given buffered text that has not yet been emitted, returns how many
    // leading bytes are final: encoding text[0, n) now gives exactly the tokens that encoding
    // text + anything-that-follows would give for that prefix. Always on a pre-tokenizer
    // boundary, never inside a UTF-8 sequence; 0 when nothing is final. Analyses only the
    // leading valid UTF-8 of `pending` (the stream repairs invalid bytes before they get here).
    [[nodiscard]] virtual std::size_t stable_prefix(std::string_view pending) const;

    // The streaming primitive behind stable_prefix and `stream`: appends the ids of the final
    // prefix of `pending` to `out` and returns its length in bytes. `pending` must be valid
    // UTF-8. `at_start` is false when `pending` continues text already consumed by an earlier
    // call (it matters for normalizers that prepend, e.g. SentencePiece's leading "▁").
    // The ids are those of the whole text's encoding, which can differ from encode(prefix):
    // a piece may be final only because of the character after it.
    virtual std::size_t encode_final(std::string_view pending, bool at_start,
                                     std::vector<token_id>& out) const = 0;

    // Where a run of final ids ends: `end` is the byte offset in `pending` just past their text,
    // `ids` how many of the ids appended by the call end there or before.
    struct piece_end {
        std::size_t end = 0;
        std::size_t ids = 0;
    };
    // encode_final that also says where the final pieces end, in order (appended to `ends`), so
    // a caller can time each piece by the read that delivered its last byte. An encoder that
    // cannot tell (reports_piece_ends() false, the default) appends nothing to `ends`: then only
    // the whole final prefix is known.
    virtual std::size_t encode_final_pieces(std::string_view pending, bool at_start,
                                            std::vector<token_id>& out,
                                            std::vector<piece_end>& /*ends*/) const {
        return encode_final(pending, at_start, out);
    }
    // encode_rest with the piece ends, as encode_final_pieces.
    virtual void encode_rest_pieces(std::string_view text, bool at_start,
                                    std::vector<token_id>& out,
                                    std::vector<piece_end>& /*ends*/) const {
        encode_rest(text, at_start, out);
    }
    [[nodiscard]] virtual bool reports_piece_ends() const noexcept { return false; }

    // Encodes the rest of a text (valid UTF-8) at its end; `at_start` as for encode_final.
    virtual void encode_rest(std::string_view text, bool at_start,
                             std::vector<token_id>& out) const = 0;
};

// Loads an encoder by spec: "o200k_base" / "cl100k_base" (looked up as <name>.json in
// `search_dir`, the tiktoken npm package's encoders/ format, or <name>.tiktoken rank files, else
// built in), or a path to a Hugging Face tokenizer.json. The same as the overload below with one
// search directory. On failure returns nullptr and sets `error` to a
// message naming the file and what is wrong (missing, malformed, unsupported model type).
std::shared_ptr<const encoder> load(std::string_view spec, const std::string& search_dir,
                                    std::string& error);

// Where a spec may come from. A bare name ("o200k_base", "llama3") is looked for in each
// directory in order (<dir>/<name>.json, <dir>/<name>.tiktoken, <dir>/<name>/tokenizer.json); the
// first file found is loaded. If none exists and the name is built in (o200k_base, cl100k_base),
// the built-in table is used. A path is loaded as it is.
// Added tokens (special or not) whose text occurs in the input: matched as one token each, or
// counted as ordinary text. The default is what the file type's reference library does by
// default: Hugging Face tokenizers matches every added token (tokenizer.json: match), tiktoken's
// encode_ordinary matches none (tiktoken encodings: text; match is encode(text, "all")). In text
// mode a tokenizer.json's non-special added tokens are still matched (Hugging Face always does;
// they are vocabulary).
enum class special_tokens { file_default, match, text };

struct load_options {
    std::vector<std::string> search_dirs;
    bool embedded = true;  // false: only files (tests of the search path)
    tokenizer::special_tokens special = special_tokens::file_default;
};

struct load_result {
    std::shared_ptr<const encoder> value;  // null on failure
    std::string source;                    // "embedded", or the path of the file loaded
    std::string error;                     // on failure: names the file(s) and the problem
    std::vector<std::string> tried;        // the files looked for, in order
    std::string special_mode;              // "match" or "text": what the encoder does
    std::vector<std::string> warnings;     // e.g. a default that could not be honoured
    [[nodiscard]] bool embedded() const noexcept { return source == "embedded"; }
};

load_result load(std::string_view spec, const load_options& options);

// Gives back what encoding keeps per thread between calls (the piece memo, up to 1 MiB), for a
// thread that has gone idle; the next encode on it starts them again. Counts are unchanged.
void release_thread_caches() noexcept;

// Repairs `in` as UTF-8 into `out`, leaving an incomplete trailing sequence unconsumed unless
// `final`; returns the bytes consumed. (Declared here for the stream template; see utf8.hpp.)
std::size_t repair_utf8(std::string_view in, bool final, std::string& out);
// Whether `text` is valid UTF-8 whose last sequence is complete.
[[nodiscard]] bool valid_utf8(std::string_view text) noexcept;

// Whether a delta given to a stream is known to be valid UTF-8 (valid_utf8): then the stream
// need not check it, which a caller feeding the same delta to several streams does once.
enum class utf8_checked : bool { no, valid };

// Per-request streaming re-tokenizer. Fed text deltas in order with the time each arrived; emits
// each token once it can no longer change. Memory is bounded by the longest pre-token (plus an
// incomplete UTF-8 sequence; for SentencePiece-style encoders, which have no pre-tokenizer, by the
// longest run of characters without a pair that no merge joins), work is linear in the output.
// How each encoder type decides what is final: docs/architecture.md, "Tokenizer".
//
// Linear work: each feed re-analyses the pending (unfinished) text, which is normally one short
// pre-token. When a single pre-token grows long (a run of 10,000 spaces, a base64 blob), the
// stream re-analyses only after the pending text has grown by a quarter since the last attempt,
// so total work stays linear. Ids are exact either way; the cost is that tokens of a pre-token
// longer than `backoff_floor` bytes may be stamped with a somewhat later delta's time.
class stream {
  public:
    static constexpr std::size_t backoff_floor = 256;

    explicit stream(const encoder& enc) : encoder_(&enc) {}

    // on_token(token_id id, core::time_point at): `at` is the time of the delta that completed
    // the token (the delta after which it became final, or the finish time for the tail).
    template <class OnToken>
    void feed(std::string_view delta, core::time_point at, OnToken&& on_token,
              utf8_checked checked = utf8_checked::no);

    // End of output: encodes whatever is pending, stamped `at`.
    template <class OnToken>
    void finish(core::time_point at, OnToken&& on_token);

    // For a caller that times tokens itself (meter/token_counter): append() takes a delta as
    // feed() does, without analysing it; analyse() then emits what has become final, calling
    // on_ids(std::uint64_t end, std::size_t count) for each run of final ids in order, `end`
    // the offset just past their text in everything appended so far (appended_bytes()). One run
    // per piece when the encoder reports piece ends, else one for the whole final prefix.
    void append(std::string_view delta, utf8_checked checked = utf8_checked::no);
    template <class OnIds>
    void analyse(OnIds&& on_ids);
    // finish() for the same caller: whatever is pending is final, in runs as analyse() gives.
    template <class OnIds>
    void finish_pieces(OnIds&& on_ids);
    // Repaired text taken in so far: final, plus pending (an incomplete UTF-8 sequence at the
    // end is not counted until it completes).
    [[nodiscard]] std::uint64_t appended_bytes() const noexcept {
        return consumed_ + pending_.size();
    }
    // Repaired text made final so far: where the pending text starts.
    [[nodiscard]] std::uint64_t consumed_bytes() const noexcept { return consumed_; }
    // Analyse only once at least `bytes` are pending (and at finish): for a caller that only
    // counts, so many short deltas cost one analysis. The ids are the same; they come later.
    void batch(std::size_t bytes) noexcept { batch_ = bytes; }
    // Drops the pending text (counted as consumed) and starts over as a new stream would.
    void restart() noexcept;

    [[nodiscard]] std::size_t pending_bytes() const noexcept {
        return pending_.size() + partial_utf8_.size();
    }
    // An incomplete UTF-8 sequence ends the input so far: the next append's bytes will not all
    // be taken as they are.
    [[nodiscard]] bool holds_partial_utf8() const noexcept { return !partial_utf8_.empty(); }
    [[nodiscard]] std::uint64_t tokens_emitted() const noexcept { return emitted_; }
    // Bytes of pending text analysed so far: the stream's work, for tests that it is linear.
    [[nodiscard]] std::uint64_t analysed_bytes() const noexcept { return analysed_; }

  private:
    // The ids of one analysis: a per-thread vector, lent for the call (not one per stream, which
    // every open request would carry), so a callback that feeds another stream on the same
    // thread gets a vector of its own.
    class id_scratch {
      public:
        id_scratch() noexcept : ids_(std::move(spare())) { ids_.clear(); }
        ~id_scratch() { spare() = std::move(ids_); }
        id_scratch(const id_scratch&) = delete;
        id_scratch& operator=(const id_scratch&) = delete;
        std::vector<token_id>& ids() noexcept { return ids_; }

      private:
        static std::vector<token_id>& spare() noexcept {
            thread_local std::vector<token_id> ids;
            return ids;
        }
        std::vector<token_id> ids_;
    };

    template <class OnToken>
    void emit(const std::vector<token_id>& ids, core::time_point at, OnToken& on_token) {
        for (token_id id : ids) {
            on_token(id, at);
        }
        emitted_ += ids.size();
    }

    // Whether pending text is due for analysis (backoff on a long pre-token, below).
    [[nodiscard]] bool due() const noexcept {
        return !pending_.empty() && pending_.size() >= recheck_at_ && pending_.size() >= batch_;
    }
    // The first n bytes of pending text became final.
    void advance(std::size_t n);
    // A per-thread list for encode_*_pieces, cleared.
    static std::vector<encoder::piece_end>& piece_ends() {
        thread_local std::vector<encoder::piece_end> ends;
        ends.clear();
        return ends;
    }
    // Calls on_ids for each run of `ids` by `ends` (offsets in pending_); ids after the last
    // reported end run to `final_bytes`.
    template <class OnIds>
    void report_runs(const std::vector<token_id>& ids, const std::vector<encoder::piece_end>& ends,
                     std::size_t final_bytes, OnIds& on_ids);

    const encoder* encoder_;
    std::string pending_;       // valid UTF-8 not yet final: the unfinished pre-token(s)
    std::string partial_utf8_;  // an incomplete UTF-8 sequence at the end of the input so far
    std::uint64_t emitted_ = 0;
    std::uint64_t analysed_ = 0;
    std::uint64_t consumed_ = 0;  // bytes of repaired text made final (or dropped)
    std::size_t recheck_at_ = 0;
    std::size_t batch_ = 0;  // analyse again once pending_ is at least this long
    bool started_ = false;   // some text has been consumed (pending_ continues it)
};

template <class OnToken>
void stream::feed(std::string_view delta, core::time_point at, OnToken&& on_token,
                  utf8_checked checked) {
    append(delta, checked);
    if (!due()) {
        return;
    }
    analysed_ += pending_.size();
    id_scratch scratch;
    const std::size_t n = encoder_->encode_final(pending_, !started_, scratch.ids());
    emit(scratch.ids(), at, on_token);
    advance(n);
}

template <class OnIds>
void stream::analyse(OnIds&& on_ids) {
    if (!due()) {
        return;
    }
    std::vector<encoder::piece_end>& ends = piece_ends();
    analysed_ += pending_.size();
    id_scratch scratch;
    const std::size_t n = encoder_->encode_final_pieces(pending_, !started_, scratch.ids(), ends);
    report_runs(scratch.ids(), ends, n, on_ids);
    advance(n);
}

template <class OnIds>
void stream::finish_pieces(OnIds&& on_ids) {
    if (!partial_utf8_.empty()) {
        repair_utf8(partial_utf8_, true, pending_);
        partial_utf8_.clear();
    }
    if (pending_.empty()) {
        return;
    }
    std::vector<encoder::piece_end>& ends = piece_ends();
    analysed_ += pending_.size();
    id_scratch scratch;
    encoder_->encode_rest_pieces(pending_, !started_, scratch.ids(), ends);
    report_runs(scratch.ids(), ends, pending_.size(), on_ids);
    consumed_ += pending_.size();
    pending_.clear();
    started_ = true;
    recheck_at_ = 0;
}

template <class OnIds>
void stream::report_runs(const std::vector<token_id>& ids,
                         const std::vector<encoder::piece_end>& ends, std::size_t final_bytes,
                         OnIds& on_ids) {
    std::size_t done = 0;
    for (const encoder::piece_end& piece : ends) {
        if (piece.ids > done) {
            on_ids(consumed_ + piece.end, piece.ids - done);
            done = piece.ids;
        }
    }
    if (ids.size() > done) {
        on_ids(consumed_ + final_bytes, ids.size() - done);
    }
    emitted_ += ids.size();
}

template <class OnToken>
void stream::finish(core::time_point at, OnToken&& on_token) {
    if (!partial_utf8_.empty()) {
        repair_utf8(partial_utf8_, true, pending_);
        partial_utf8_.clear();
    }
    if (pending_.empty()) {
        return;
    }
    analysed_ += pending_.size();
    id_scratch scratch;
    encoder_->encode_rest(pending_, !started_, scratch.ids());
    emit(scratch.ids(), at, on_token);
    consumed_ += pending_.size();
    pending_.clear();
    started_ = true;
    recheck_at_ = 0;
}

}  // namespace tokenmeter::tokenizer
