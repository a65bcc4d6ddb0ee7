#include "meter/token_counter.hpp"

#include <algorithm>
#include <cmath>

namespace tokenmeter::meter {

token_counter::token_counter(encoders which, bool hold_reads) : which_(which) {
    if (which_.native != nullptr) {
        native_.emplace(*which_.native);
    }
    if (which_.reference != nullptr && which_.reference != which_.native) {
        reference_.emplace(*which_.reference);
    }
    // A lane that only counts (the reference one, when the native one is timed) analyses its
    // text in batches instead of after every read; so does the timed lane when its encoder
    // says where each piece ends, since every piece is then stamped by the read of its last
    // byte whenever it is analysed.
    for (lane* l : {native_ ? &*native_ : nullptr, reference_ ? &*reference_ : nullptr}) {
        if (l != nullptr && (l != &timing_lane() || l->encoder->reports_piece_ends())) {
            l->batch(count_batch_bytes);
        }
    }
    // Every lane but the timing one batches; the timing one does when it reports piece ends.
    hold_reads_ =
        hold_reads && (native_ || reference_) && timing_lane().encoder->reports_piece_ends();
}

namespace {

// How much of `text` one feed takes: at most max_pending_bytes, ending on a character boundary so
// that a cut never splits a UTF-8 sequence.
std::size_t slice_length(std::string_view text) {
    std::size_t slice = std::min(text.size(), token_counter::max_pending_bytes);
    while (slice < text.size() && slice > 1 &&
           (static_cast<unsigned char>(text[slice]) & 0xC0) == 0x80) {
        --slice;
    }
    return slice;
}

// Length of the first UTF-8 character of s (1 for a stray byte).
std::size_t first_char_length(std::string_view s) {
    const auto lead = static_cast<unsigned char>(s.front());
    std::size_t n = lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    return std::min(n, s.size());
}

// Drops held text once given to the lanes (keeping a batch's worth of capacity).
void release(std::string& held) {
    held.clear();
    if (held.capacity() > 4 * token_counter::count_batch_bytes) {
        std::string().swap(held);
    }
}

}  // namespace

bool token_counter::can_hold(text_kind kind) const noexcept {
    const auto clean = [kind](const std::optional<lane>& l) {
        const tokenizer::stream* s = l ? l->made(kind) : nullptr;
        return s == nullptr || !s->holds_partial_utf8();
    };
    return clean(native_) && clean(reference_);
}

const std::vector<token_counter::token_group>& token_counter::feed_kind(text_kind kind,
                                                                        std::string_view text,
                                                                        core::time_point at,
                                                                        bool known_ascii) {
    thread_local std::vector<token_group> groups;
    groups.clear();
    // Every lane takes the same text: checked once here (unless the decoder already knows it
    // is ASCII), not repaired by each stream.
    const tokenizer::utf8_checked checked = known_ascii || tokenizer::valid_utf8(text)
                                                ? tokenizer::utf8_checked::valid
                                                : tokenizer::utf8_checked::no;
    if (hold_reads_) {
        kind_text& pending = text_of(kind);
        std::string& held = pending.held;
        if (checked == tokenizer::utf8_checked::valid && can_hold(kind)) {
            if (held.empty() && text.size() >= count_batch_bytes) {
                feed_lanes(kind, text, at, checked, groups);  // a batch on its own: no copy
                return groups;
            }
            // The read's arrival, where its bytes will end in the timing stream's text: they
            // are valid and follow no incomplete sequence, so they are appended as they are.
            held.append(text);
            pending.arrivals.push_back({appended_bytes(timing_lane(), kind) + held.size(), at});
            if (held.size() < count_batch_bytes) {
                return groups;
            }
            feed_lanes(kind, held, at, checked, groups);
            release(held);
            return groups;
        }
        if (!held.empty()) {
            // Text the lanes must repair: what is held goes first.
            feed_lanes(kind, held, pending.arrivals.back().at, tokenizer::utf8_checked::valid,
                       groups);
            release(held);
        }
    }
    feed_lanes(kind, text, at, checked, groups);
    return groups;
}

void token_counter::feed_lanes(text_kind kind, std::string_view text, core::time_point at,
                               tokenizer::utf8_checked checked, std::vector<token_group>& groups) {
    // The lane that is not timed only counts: it takes the whole read at once.
    lane& timing = timing_lane();
    for (lane* l : {native_ ? &*native_ : nullptr, reference_ ? &*reference_ : nullptr}) {
        if (l != nullptr && l != &timing) {
            l->tokens[kind] += feed_bounded(*l, kind, text, at, checked);
        }
    }
    if (timing.encoder->reports_piece_ends()) {
        feed_pieces(timing, kind, text, at, checked, groups);
        return;
    }
    // The encoder says only how far its text is final. The first character of a read usually
    // shows that the text before it is final (a new pre-token starts). Feeding it alone first
    // separates the tokens that earlier reads completed from those this read completes, so each
    // group gets its own read's time.
    const std::size_t head = first_char_length(text);
    core::time_point earlier_at = at;
    if (head < text.size()) {
        if (const std::uint64_t n =
                feed_timed(kind, text.substr(0, head), at, checked, earlier_at)) {
            groups.push_back({earlier_at, n});
        }
        text.remove_prefix(head);
    }
    core::time_point completed_at = at;
    if (const std::uint64_t n = feed_timed(kind, text, at, checked, completed_at)) {
        groups.push_back({completed_at, n});
    }
}

void token_counter::feed_pieces(lane& l, text_kind kind, std::string_view text, core::time_point at,
                                tokenizer::utf8_checked checked, std::vector<token_group>& groups) {
    tokenizer::stream& stream = l.stream(kind);
    auto& arrivals = text_of(kind).arrivals;
    std::uint64_t total = 0;
    auto add = [&](core::time_point done, std::uint64_t n) {
        total += n;
        if (!groups.empty() && groups.back().at == done) {
            groups.back().count += n;
        } else {
            groups.push_back({done, n});
        }
    };
    while (!text.empty()) {
        const std::size_t slice = slice_length(text);
        stream.append(text.substr(0, slice), checked);  // slices end on character boundaries
        text.remove_prefix(slice);
        // Arrivals here are offsets in the stream's own (repaired) text, where pieces end.
        if (arrivals.empty() || arrivals.back().end < stream.appended_bytes()) {
            arrivals.push_back({stream.appended_bytes(), at});
        }
        std::size_t from = 0;  // the runs' ends only grow: each read is looked at once
        stream.analyse([&](std::uint64_t end, std::size_t n) {
            add(completion_time(arrivals, end, from), n);
        });
        if (stream.pending_bytes() >= max_pending_bytes) {
            // As feed_bounded: the first cut part exactly, later ones estimated.
            const std::size_t cut = stream.pending_bytes();
            if (l.bytes_per_cut_token == 0) {
                std::uint64_t n = 0;
                stream.finish(at, [&n](tokenizer::token_id, core::time_point) { ++n; });
                l.bytes_per_cut_token =
                    static_cast<double>(cut) / static_cast<double>(std::max<std::uint64_t>(1, n));
                add(at, n);
            } else {
                add(at, static_cast<std::uint64_t>(
                            std::ceil(static_cast<double>(cut) / l.bytes_per_cut_token)));
                stream.restart();
            }
            ++cut_pieces_;
        }
    }
    l.tokens[kind] += total;
    // Arrivals wholly before the pending text are no longer needed; keep the one that holds the
    // first pending byte.
    while (arrivals.size() > 1 && arrivals.front().end <= stream.consumed_bytes()) {
        arrivals.pop_front();
    }
}

std::uint64_t token_counter::feed_timed(text_kind kind, std::string_view text, core::time_point at,
                                        tokenizer::utf8_checked checked,
                                        core::time_point& completed_at) {
    fed_[kind] += text.size();
    auto& arrivals = text_of(kind).arrivals;
    arrivals.push_back({fed_[kind], at});
    lane& timing = timing_lane();
    const std::uint64_t n = feed_bounded(timing, kind, text, at, checked);
    timing.tokens[kind] += n;
    const std::uint64_t pending_from = fed_[kind] - timing.stream(kind).pending_bytes();
    if (n > 0) {
        completed_at = completion_time(arrivals, pending_from);
    }
    // Arrivals wholly before the pending text are no longer needed; keep the one that holds the
    // first pending byte.
    while (arrivals.size() > 1 && arrivals.front().end <= pending_from) {
        arrivals.pop_front();
    }
    return n;
}

std::uint64_t token_counter::feed_bounded(lane& l, text_kind kind, std::string_view text,
                                          core::time_point at, tokenizer::utf8_checked checked) {
    std::uint64_t n = 0;
    auto count = [&n](tokenizer::token_id, core::time_point) { ++n; };
    tokenizer::stream& stream = l.stream(kind);
    while (!text.empty()) {
        const std::size_t slice = slice_length(text);
        stream.feed(text.substr(0, slice), at, count, checked);
        text.remove_prefix(slice);
        if (stream.pending_bytes() >= max_pending_bytes) {
            const std::size_t cut = stream.pending_bytes();
            if (l.bytes_per_cut_token == 0) {
                const std::uint64_t before = n;
                stream.finish(at, count);
                l.bytes_per_cut_token = static_cast<double>(cut) /
                                        static_cast<double>(std::max<std::uint64_t>(1, n - before));
            } else {
                n += static_cast<std::uint64_t>(
                    std::ceil(static_cast<double>(cut) / l.bytes_per_cut_token));
                stream.restart();
            }
            ++cut_pieces_;
        }
    }
    return n;
}

const std::vector<token_counter::token_group>& token_counter::finish_kind(text_kind kind) {
    thread_local std::vector<token_group> groups;
    groups.clear();
    if (kind_text* text = made_text(kind); text != nullptr && !text->held.empty()) {
        feed_lanes(kind, text->held, text->arrivals.back().at, tokenizer::utf8_checked::valid,
                   groups);
        release(text->held);
    }
    lane& timing = timing_lane();
    for (lane* l : {native_ ? &*native_ : nullptr, reference_ ? &*reference_ : nullptr}) {
        if (l == nullptr || l->made(kind) == nullptr) {
            continue;  // no lane, or nothing of this kind was fed
        }
        std::uint64_t n = 0;
        if (l == &timing && l->encoder->reports_piece_ends()) {
            // Each piece of the tail keeps the time of the read of its last byte.
            std::size_t from = 0;
            const arrival_queue& arrivals = text_of(kind).arrivals;
            l->stream(kind).finish_pieces([&](std::uint64_t end, std::size_t count) {
                n += count;
                const core::time_point done = completion_time(arrivals, end, from);
                if (!groups.empty() && groups.back().at == done) {
                    groups.back().count += count;
                } else {
                    groups.push_back({done, count});
                }
            });
        } else {
            l->stream(kind).finish(core::time_point{},
                                   [&n](tokenizer::token_id, core::time_point) { ++n; });
            if (l == &timing && n > 0) {
                // The tail was complete when its last byte arrived, not when the stream ended.
                const auto& arrivals = text_of(kind).arrivals;
                groups.push_back({arrivals.empty() ? core::time_point{} : arrivals.back().at, n});
            }
        }
        l->tokens[kind] += n;
    }
    return groups;
}

core::time_point token_counter::completion_time(const arrival_queue& arrivals,
                                                std::uint64_t consumed_end,
                                                std::size_t& from) noexcept {
    for (auto it = arrivals.begin() + static_cast<std::ptrdiff_t>(from); it != arrivals.end();
         ++it, ++from) {
        if (it->end >= consumed_end) {
            return it->at;
        }
    }
    return arrivals.empty() ? core::time_point{} : arrivals.back().at;
}

namespace {

std::optional<std::uint64_t> all_text(const std::array<std::uint64_t, 3>& tokens) {
    return tokens[0] + tokens[1] + tokens[2];
}

}  // namespace

std::optional<std::uint64_t> token_counter::native_output() const {
    if (!native_) {
        return std::nullopt;
    }
    return all_text(native_->tokens);
}

std::optional<std::uint64_t> token_counter::native_reasoning() const {
    if (!native_) {
        return std::nullopt;
    }
    return native_->tokens[reasoning];
}

std::optional<std::uint64_t> token_counter::normalized_output() const {
    if (reference_) {
        return all_text(reference_->tokens);
    }
    if (which_.reference != nullptr && native_) {
        return all_text(native_->tokens);  // the reference tokenizer is the native one
    }
    return std::nullopt;
}

std::optional<std::uint64_t> token_counter::normalized_reasoning() const {
    if (reference_) {
        return reference_->tokens[reasoning];
    }
    if (which_.reference != nullptr && native_) {
        return native_->tokens[reasoning];
    }
    return std::nullopt;
}

std::size_t token_counter::pending_bytes() const noexcept {
    std::size_t total = held_bytes();
    for (const auto* l : {native_ ? &*native_ : nullptr, reference_ ? &*reference_ : nullptr}) {
        if (l != nullptr) {
            for (const text_kind kind : {content, reasoning, tool_arguments}) {
                if (const tokenizer::stream* s = l->made(kind)) {
                    total += s->pending_bytes();
                }
            }
        }
    }
    return total;
}

}  // namespace tokenmeter::meter
