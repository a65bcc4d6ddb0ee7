// tokenizer/tokenizer: the encoder defaults shared by every encoder type.
#include "tokenizer/tokenizer.hpp"

#include <algorithm>
#include <cmath>

#include "tokenizer/bpe.hpp"
#include "tokenizer/utf8.hpp"

namespace tokenmeter::tokenizer {

std::size_t repair_utf8(std::string_view in, bool final, std::string& out) {
    return detail::utf8_repair(in, final, out);
}

void encoder::encode(std::string_view text, std::vector<token_id>& out) const {
    if (detail::utf8_valid(text)) {
        encode_rest(text, true, out);
        return;
    }
    std::string repaired;
    repaired.reserve(text.size() + 8);
    detail::utf8_repair(text, true, repaired);
    encode_rest(repaired, true, out);
}

std::size_t encoder::count(std::string_view text) const {
    std::vector<token_id> ids;
    encode(text, ids);
    return ids.size();
}

encoder::bounded_count encoder::count_bounded(std::string_view text,
                                              std::size_t budget_bytes) const {
    detail::count_bounds& bounds = detail::count_bounds_for_thread();
    // Set for this call only: the same thread encodes output streams exactly, uncapped.
    struct scope {
        detail::count_bounds& b;
        explicit scope(detail::count_bounds& bounds) : b(bounds) {
            b.piece_cap = count_piece_cap;
            b.capped = false;
            b.chunk_merges = 0;
            b.longest_chunk = 0;
        }
        ~scope() { b.piece_cap = 0; }
        scope(const scope&) = delete;
        scope& operator=(const scope&) = delete;
    } const guard(bounds);
    budget_bytes = std::max<std::size_t>(budget_bytes, 1);
    if (text.size() <= budget_bytes) {
        const std::size_t n = count(text);
        return {n, !bounds.capped};
    }
    // Cut before a UTF-8 continuation byte, so the part counted ends on a character.
    std::size_t cut = budget_bytes;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0U) == 0x80U) {
        --cut;
    }
    if (cut == 0) {
        cut = budget_bytes;
    }
    const std::size_t counted = count(text.substr(0, cut));
    const long double rate = static_cast<long double>(counted) / static_cast<long double>(cut);
    return {static_cast<std::uint64_t>(std::ceil(rate * static_cast<long double>(text.size()))),
            false};
}

namespace detail {

count_bounds& count_bounds_for_thread() noexcept {
    thread_local count_bounds bounds;
    return bounds;
}

}  // namespace detail

std::size_t encoder::stable_prefix(std::string_view pending) const {
    // Only the leading valid UTF-8 can be analysed; an invalid or incomplete sequence ends it.
    std::size_t valid = 0;
    while (valid < pending.size()) {
        bool incomplete = false;
        std::size_t len = 0;
        if (detail::utf8_sequence(pending, valid, incomplete, len) == 0) {
            break;
        }
        valid += len;
    }
    std::vector<token_id> ignored;
    return encode_final(pending.substr(0, valid), true, ignored);
}

bool valid_utf8(std::string_view text) noexcept {
    return detail::utf8_valid(text);
}

void stream::append(std::string_view delta, utf8_checked checked) {
    if (partial_utf8_.empty() && checked == utf8_checked::valid) {
        pending_.append(delta);  // nothing to repair, nothing left incomplete
        return;
    }
    if (partial_utf8_.empty()) {
        partial_utf8_.assign(delta.substr(repair_utf8(delta, false, pending_)));
    } else {
        std::string joined = partial_utf8_ + std::string(delta);
        partial_utf8_.assign(std::string_view(joined).substr(repair_utf8(joined, false, pending_)));
    }
}

void stream::advance(std::size_t n) {
    if (n > 0) {
        pending_.erase(0, n);
        consumed_ += n;
        started_ = true;
    }
    recheck_at_ = pending_.size() >= backoff_floor ? pending_.size() + pending_.size() / 4 : 0;
}

void stream::restart() noexcept {
    consumed_ += pending_.size();
    pending_.clear();
    partial_utf8_.clear();
    emitted_ = 0;
    analysed_ = 0;
    recheck_at_ = 0;
    started_ = false;
}

}  // namespace tokenmeter::tokenizer
