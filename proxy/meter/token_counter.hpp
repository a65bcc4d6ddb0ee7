// meter/token_counter: re-tokenizes the text a response carries, as it streams, with the model's
// own tokenizer ("native", when configured) and the reference tokenizer shared by every model
// ("normalized"), and says when each token was complete. Content, reasoning and tool-call text
// are tokenized apart (a model emits them as separate sequences), so a pre-token never spans two
// kinds of text.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "core/time.hpp"
#include "protocol/types.hpp"
#include "tokenizer/tokenizer.hpp"

namespace tokenmeter::meter {

struct encoders {
    const tokenizer::encoder* native = nullptr;     // the model's own tokenizer, if configured
    const tokenizer::encoder* reference = nullptr;  // the normalizing tokenizer, if available
    [[nodiscard]] bool any() const noexcept { return native != nullptr || reference != nullptr; }
};

class token_counter {
  public:
    // With `hold_reads` (the default), when every lane analyses in batches, valid text is held
    // here until a batch is due and then given to the lanes in one feed (the same ids and times;
    // tests turn it off to compare).
    explicit token_counter(encoders which, bool hold_reads = true);

    // Which tokens the meter times: native when configured, otherwise normalized.
    [[nodiscard]] bool timing_is_native() const noexcept { return which_.native != nullptr; }

    // Feeds one chunk's text. For the timing tokenizer's tokens that became final, calls
    // on_tokens(core::time_point completed_at, std::uint64_t count) once per group of tokens
    // completed by the same read, in order.
    template <class OnTokens>
    void feed(const protocol::response_chunk& chunk, core::time_point at, OnTokens&& on_tokens);
    // The end of the response: whatever is pending is final now.
    template <class OnTokens>
    void finish(OnTokens&& on_tokens);

    [[nodiscard]] std::optional<std::uint64_t> native_output() const;
    [[nodiscard]] std::optional<std::uint64_t> native_reasoning() const;
    [[nodiscard]] std::optional<std::uint64_t> normalized_output() const;
    [[nodiscard]] std::optional<std::uint64_t> normalized_reasoning() const;
    // Bytes held back across reads (unfinished pre-tokens, held reads), for memory accounting.
    [[nodiscard]] std::size_t pending_bytes() const noexcept;
    // Of pending_bytes(), the reads held for a batch (not yet given to the lanes).
    [[nodiscard]] std::size_t held_bytes() const noexcept {
        std::size_t total = content_text_.held.size();
        for (const auto& other : other_text_) {
            total += other ? other->held.size() : 0;
        }
        return total;
    }
    // Pre-tokens cut at max_pending_bytes (see below); 0 for any text a model really writes.
    [[nodiscard]] std::uint64_t cut_pieces() const noexcept { return cut_pieces_; }

    // No pre-token grows past this many bytes. Real text has none near this long (words, digit
    // groups and whitespace runs are short), but a hostile stream can send a megabyte of letters
    // as one "token", and BPE on one piece costs about half a microsecond per byte: seconds of a
    // worker shared with other streams. So the first such run in a response is cut here and
    // tokenized exactly; every later cut part is counted at that part's bytes per token, without
    // BPE. The work per read stays linear and small; only such runs are estimated.
    static constexpr std::size_t max_pending_bytes = std::size_t{16} * 1024;
    // Lanes that need not analyse after every read (one that only counts, or a timed one whose
    // encoder reports piece ends) do once this much text is pending (a few dozen words): the
    // same count and times, for a fraction of the calls.
    static constexpr std::size_t count_batch_bytes = 128;

  private:
    enum text_kind : std::uint8_t { content = 0, reasoning = 1, tool_arguments = 2, kinds = 3 };

    // One tokenizer's streams, one per kind of text. The content stream is always there; the
    // reasoning and tool-call ones are made when their first text arrives (most responses have
    // neither, and every open request would carry two unused streams per lane).
    class lane {
      public:
        explicit lane(const tokenizer::encoder& enc) : encoder(&enc), content_(enc) {}
        // The stream of `kind`, made now if it was not yet.
        tokenizer::stream& stream(text_kind kind) {
            if (kind == content) {
                return content_;
            }
            auto& other = others_[kind - 1];
            if (!other) {
                other = std::make_unique<tokenizer::stream>(*encoder);
                other->batch(batch_);
            }
            return *other;
        }
        // The stream of `kind` if it was made, else nullptr (nothing of that kind was fed).
        [[nodiscard]] const tokenizer::stream* made(text_kind kind) const noexcept {
            return kind == content ? &content_ : others_[kind - 1].get();
        }
        // Analyse in batches of `bytes` (tokenizer::stream::batch), in every stream.
        void batch(std::size_t bytes) {
            batch_ = bytes;
            content_.batch(bytes);
            for (auto& other : others_) {
                if (other) {
                    other->batch(bytes);
                }
            }
        }

        const tokenizer::encoder* encoder;
        std::array<std::uint64_t, kinds> tokens{};
        double bytes_per_cut_token = 0;  // measured on the first cut part; 0 until then

      private:
        tokenizer::stream content_;
        std::array<std::unique_ptr<tokenizer::stream>, kinds - 1> others_;
        std::size_t batch_ = 0;
    };
    // When the bytes of one kind arrived: (end offset in that kind's text, time of the read).
    struct arrival {
        std::uint64_t end = 0;
        core::time_point at;
    };
    // The reads whose bytes are still pending, oldest first: usually one or two. A vector with a
    // moving front instead of a std::deque, which allocates a map and a 512-byte block as soon
    // as it is made (three per counter, every open stream) and a block every 32 reads.
    class arrival_queue {
      public:
        void push_back(arrival a) {
            if (head_ > 0 && head_ * 2 >= items_.size()) {
                items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
                head_ = 0;
            }
            items_.push_back(a);
        }
        void pop_front() noexcept { ++head_; }
        [[nodiscard]] std::size_t size() const noexcept { return items_.size() - head_; }
        [[nodiscard]] bool empty() const noexcept { return size() == 0; }
        [[nodiscard]] const arrival& front() const noexcept { return items_[head_]; }
        [[nodiscard]] const arrival& back() const noexcept { return items_.back(); }
        [[nodiscard]] auto begin() const noexcept {
            return items_.begin() + static_cast<std::ptrdiff_t>(head_);
        }
        [[nodiscard]] auto end() const noexcept { return items_.end(); }

      private:
        std::vector<arrival> items_;
        std::size_t head_ = 0;
    };

    // Timing tokens made final by one feed that share a time, in order.
    struct token_group {
        core::time_point at;
        std::uint64_t count = 0;
    };
    // Feeds one kind's delta into every lane; returns the timing lane's tokens made final, in
    // groups by the time of the read that completed them (a per-thread scratch vector, valid
    // until the next call).
    const std::vector<token_group>& feed_kind(text_kind kind, std::string_view text,
                                              core::time_point at, bool known_ascii);
    // Gives every lane `text` (one read, or the reads held for a batch) and adds the timing
    // lane's tokens made final to `groups`.
    void feed_lanes(text_kind kind, std::string_view text, core::time_point at,
                    tokenizer::utf8_checked checked, std::vector<token_group>& groups);
    // Whether a valid read of `kind` may be held: every lane batches and no stream of that kind
    // has an incomplete UTF-8 sequence pending (so held bytes are the streams' bytes).
    [[nodiscard]] bool can_hold(text_kind kind) const noexcept;
    // The timing lane when its encoder reports piece ends: one analysis per read, each piece
    // stamped with the read that delivered its last byte.
    void feed_pieces(lane& l, text_kind kind, std::string_view text, core::time_point at,
                     tokenizer::utf8_checked checked, std::vector<token_group>& groups);
    // Feeds the timing lane only, and says when its new tokens were complete.
    std::uint64_t feed_timed(text_kind kind, std::string_view text, core::time_point at,
                             tokenizer::utf8_checked checked, core::time_point& completed_at);
    // Flushes one kind's pending text in every lane; returns the timing lane's tokens in groups
    // by the time of the read that completed them (as feed_kind).
    const std::vector<token_group>& finish_kind(text_kind kind);
    // The time of the read in `arrivals` that delivered the byte just before `consumed_end`.
    static core::time_point completion_time(const arrival_queue& arrivals,
                                            std::uint64_t consumed_end) noexcept {
        std::size_t from = 0;
        return completion_time(arrivals, consumed_end, from);
    }
    // The same, looking from the `from`th pending read on, and leaving `from` at the read found:
    // for the runs of one analysis, whose ends only grow, so the reads are looked at once each.
    static core::time_point completion_time(const arrival_queue& arrivals,
                                            std::uint64_t consumed_end, std::size_t& from) noexcept;
    lane& timing_lane() noexcept { return native_ ? *native_ : *reference_; }
    // Bytes given to `kind`'s stream of `l` so far (0 if it was not made).
    static std::uint64_t appended_bytes(const lane& l, text_kind kind) noexcept {
        const tokenizer::stream* s = l.made(kind);
        return s != nullptr ? s->appended_bytes() : 0;
    }
    // Feeds `text` into one stream in slices, cutting its pending pre-token at
    // max_pending_bytes; returns the tokens it completed.
    std::uint64_t feed_bounded(lane& l, text_kind kind, std::string_view text, core::time_point at,
                               tokenizer::utf8_checked checked);

    encoders which_;
    std::optional<lane> native_;
    std::optional<lane> reference_;           // empty when it is the same tokenizer as native
    std::array<std::uint64_t, kinds> fed_{};  // input bytes per kind (the split-feed path)
    struct kind_text {
        arrival_queue arrivals;
        // Valid reads not yet given to the lanes, while every lane batches (hold_reads_): one
        // append per read here instead of one per lane, and each lane fed once per batch. Their
        // arrivals are already in `arrivals` (offsets in the timing stream's text, which they
        // extend as is).
        std::string held;
    };
    // Per kind of text. The content's is always there; reasoning's and tool calls' are made when
    // their first text arrives, as the lanes' streams are.
    kind_text content_text_;
    std::array<std::unique_ptr<kind_text>, kinds - 1> other_text_;
    kind_text& text_of(text_kind kind) {
        if (kind == content) {
            return content_text_;
        }
        auto& other = other_text_[kind - 1];
        if (!other) {
            other = std::make_unique<kind_text>();
        }
        return *other;
    }
    // nullptr when nothing of `kind` was fed.
    kind_text* made_text(text_kind kind) noexcept {
        return kind == content ? &content_text_ : other_text_[kind - 1].get();
    }
    bool hold_reads_ = false;
    std::uint64_t cut_pieces_ = 0;
};

template <class OnTokens>
void token_counter::feed(const protocol::response_chunk& chunk, core::time_point at,
                         OnTokens&& on_tokens) {
    const std::array<std::string_view, kinds> texts = {chunk.content, chunk.reasoning,
                                                       chunk.tool_arguments};
    for (int k = 0; k < kinds; ++k) {
        if (texts[k].empty()) {
            continue;
        }
        for (const token_group& g :
             feed_kind(static_cast<text_kind>(k), texts[k], at, chunk.ascii_text)) {
            on_tokens(g.at, g.count);
        }
    }
}

template <class OnTokens>
void token_counter::finish(OnTokens&& on_tokens) {
    for (int k = 0; k < kinds; ++k) {
        for (const token_group& g : finish_kind(static_cast<text_kind>(k))) {
            on_tokens(g.at, g.count);
        }
    }
}

}  // namespace tokenmeter::meter
