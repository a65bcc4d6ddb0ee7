// tokenizer/tokenizer: exact BPE encoders (tiktoken rank files, Hugging Face tokenizer.json) and
// the streaming re-tokenizer that stamps each token with the time of the read that completed it.
//
// This header is the contract between the engine (tokenizer/*.cpp), the loaders, the parity
// tests and the meter. The core never does I/O: `load_*` functions that read files live in the
// loader translation unit; everything else works on memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.hpp"

namespace tokenmeter::tokenizer {

using token_id = std::uint32_t;

// An immutable encoder. Thread-safe: one instance is shared by every worker thread; any caches
// are per call or per stream, never shared mutable state.
class encoder {
  public:
    virtual ~encoder() = default;

    // A short name for logs and metric docs: "o200k_base", "cl100k_base", or the file's stem.
    [[nodiscard]] virtual const std::string& name() const noexcept = 0;

    // Encodes `text` as ordinary text, appending ids to `out`. Special-token text such as
    // "<|endoftext|>" is encoded as ordinary text, never as a control token. Invalid UTF-8 is
    // encoded the way the reference implementation encodes its bytes. Never throws.
    virtual void encode(std::string_view text, std::vector<token_id>& out) const = 0;

    // Number of tokens `encode` would produce.
    [[nodiscard]] virtual std::size_t count(std::string_view text) const;

    // Streaming support. Given buffered text that has not yet been emitted, returns how many
    // leading bytes are final: encoding text[0, n) now gives exactly the tokens that encoding
    // text + anything-that-follows would give for that prefix. Must return a value on a
    // pre-tokenizer boundary and never cut a UTF-8 sequence. Returns 0 when nothing is final.
    [[nodiscard]] virtual std::size_t stable_prefix(std::string_view pending) const = 0;
};

// Loads an encoder by spec: "o200k_base" / "cl100k_base" (looked up as <name>.json in
// `search_dir`, the tiktoken npm package's encoders/ format, or <name>.tiktoken rank files),
// or a path to a Hugging Face tokenizer.json. On failure returns nullptr and sets `error` to a
// message naming the file and what is wrong (missing, malformed, unsupported model type).
std::shared_ptr<const encoder> load(std::string_view spec, const std::string& search_dir,
                                    std::string& error);

// Per-request streaming re-tokenizer. Fed text deltas in order with the time each arrived; emits
// each token once it can no longer change. Memory is bounded by the longest pre-token (plus an
// incomplete UTF-8 sequence), work is linear in the output.
class stream {
  public:
    explicit stream(const encoder& enc) : encoder_(&enc) {}

    // on_token(token_id id, core::time_point at): `at` is the time of the delta that completed
    // the token (the delta after which it became final, or the finish time for the tail).
    template <class OnToken>
    void feed(std::string_view delta, core::time_point at, OnToken&& on_token);

    // End of output: encodes whatever is pending, stamped `at`.
    template <class OnToken>
    void finish(core::time_point at, OnToken&& on_token);

    [[nodiscard]] std::size_t pending_bytes() const noexcept { return pending_.size(); }
    [[nodiscard]] std::uint64_t tokens_emitted() const noexcept { return emitted_; }

  private:
    const encoder* encoder_;
    std::string pending_;  // text not yet final: the unfinished pre-token(s)
    std::vector<token_id> scratch_;
    std::uint64_t emitted_ = 0;
};

template <class OnToken>
void stream::feed(std::string_view delta, core::time_point at, OnToken&& on_token) {
    pending_.append(delta);
    const std::size_t n = encoder_->stable_prefix(pending_);
    if (n == 0) {
        return;
    }
    scratch_.clear();
    encoder_->encode(std::string_view(pending_).substr(0, n), scratch_);
    for (token_id id : scratch_) {
        on_token(id, at);
    }
    emitted_ += scratch_.size();
    pending_.erase(0, n);
}

template <class OnToken>
void stream::finish(core::time_point at, OnToken&& on_token) {
    if (pending_.empty()) {
        return;
    }
    scratch_.clear();
    encoder_->encode(pending_, scratch_);
    for (token_id id : scratch_) {
        on_token(id, at);
    }
    emitted_ += scratch_.size();
    pending_.clear();
}

}  // namespace tokenmeter::tokenizer
