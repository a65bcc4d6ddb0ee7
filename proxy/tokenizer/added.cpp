// tokenizer/added: see added.hpp. The matching follows Hugging Face tokenizers 0.22
// (tokenizer/added_vocabulary.rs, find_matches): leftmost-longest over the set; a single_word
// match next to a word character is dropped (and the search goes on after it); lstrip moves the
// start back over whitespace, never before the end of the previous match; rstrip moves the end
// forward over whitespace, while the search goes on from the end of the content itself.
// Whitespace and word characters are those of Rust's regex \s and \w (Unicode).
#include "tokenizer/added.hpp"

#include <unicode/uchar.h>

#include <algorithm>

#include "tokenizer/utf8.hpp"

namespace tokenmeter::tokenizer::detail {

namespace {

bool is_space(char32_t c) noexcept {
    return u_isUWhiteSpace(static_cast<UChar32>(c)) != 0;
}

// Rust regex \w: Alphabetic, marks, decimal digits, connector punctuation, Join_Control.
bool is_word(char32_t c) noexcept {
    if (c < 0x80) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_';
    }
    const auto ch = static_cast<UChar32>(c);
    if (u_hasBinaryProperty(ch, UCHAR_ALPHABETIC) != 0 ||
        u_hasBinaryProperty(ch, UCHAR_JOIN_CONTROL) != 0) {
        return true;
    }
    const std::uint32_t mask = U_MASK(u_charType(ch));
    return (mask & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0;
}

std::size_t char_start_before(std::string_view text, std::size_t p) noexcept {
    do {
        --p;
    } while (p > 0 && (static_cast<unsigned char>(text[p]) & 0xC0U) == 0x80U);
    return p;
}

char32_t char_before(std::string_view text, std::size_t p) noexcept {
    std::size_t q = char_start_before(text, p);
    return utf8_next(text, q);
}

char32_t char_at(std::string_view text, std::size_t p) noexcept {
    return utf8_next(text, p);
}

// Start of the whitespace run that ends at `p` (not before `floor`).
std::size_t space_run_start(std::string_view text, std::size_t floor, std::size_t p) noexcept {
    while (p > floor && is_space(char_before(text, p))) {
        p = char_start_before(text, p);
    }
    return p;
}

// End of the whitespace run that starts at `p` (not after `end`).
std::size_t space_run_end(std::string_view text, std::size_t p, std::size_t end) noexcept {
    while (p < end) {
        std::size_t next = p;
        if (!is_space(utf8_next(text, next))) {
            break;
        }
        p = next;
    }
    return p;
}

// find_matches over text[begin, end) (Hugging Face's "sentence"): calls on_match for each
// accepted match in order; returns how far the search is resolved (`end`, or with `open` the
// position from which more text could still change the matches). Matches are reported only once
// the next one is known: a token that starts inside the whitespace an rstrip token took is
// matched too (Hugging Face keeps both), so the two are one chain that a stream must not cut;
// if the chain's last token is still open, the whole chain waits. The spans of single_word
// matches that were dropped are added to `dropped`: a stream must not stop inside one either,
// or the next call could find a token the dropped match hid.
template <class OnMatch>
std::size_t find_matches(const added_set& set, std::string_view text, std::size_t begin,
                         std::size_t end, bool open, std::vector<added_match>& dropped,
                         OnMatch&& on_match) {
    std::size_t start_offset = begin;
    std::size_t pos = begin;
    const std::string_view sentence = text.substr(0, end);
    bool has_chain = false;
    added_match chain_first{0, 0, 0};
    std::vector<added_match> chain_rest;  // empty unless tokens overlap (no allocation)
    auto flush = [&] {
        if (has_chain) {
            on_match(chain_first);
            for (const added_match& m : chain_rest) {
                on_match(m);
            }
        }
        has_chain = false;
        chain_rest.clear();
    };
    // Where a match that is still open would make the text before it final: its start, moved
    // back over whitespace when an lstrip token could take it; the start of the chain it would
    // join if it starts inside the last match.
    auto unresolved = [&](std::size_t at) {
        if (has_chain && at < start_offset) {
            return chain_first.start;
        }
        flush();
        return set.any_lstrip() ? std::max(space_run_start(text, begin, at), start_offset) : at;
    };
    while (pos < end) {
        if (!set.may_start_with(static_cast<unsigned char>(text[pos]))) {
            ++pos;
            continue;
        }
        std::uint32_t index = 0;
        bool could_grow = false;
        const std::size_t len = set.longest_at(sentence, pos, index, could_grow);
        if (open && could_grow) {
            return unresolved(pos);
        }
        if (len == 0) {
            ++pos;
            continue;
        }
        const added_token& t = set.token(index);
        std::size_t start = pos;
        std::size_t stop = pos + len;
        if (t.single_word) {
            if (open && stop == end) {
                return unresolved(pos);  // the next character decides
            }
            const bool space_before = start == begin || !is_word(char_before(text, start));
            const bool space_after = stop == end || !is_word(char_at(text, stop));
            if (!space_before || !space_after) {
                dropped.push_back(added_match{start, stop, t.id});
                pos = stop;  // the search resumes after it, as the automaton does
                continue;
            }
        }
        if (t.lstrip) {
            start = std::max(space_run_start(text, begin, start), start_offset);
        }
        if (t.rstrip) {
            stop = space_run_end(text, stop, end);
            if (open && stop == end) {
                return unresolved(pos);  // more whitespace may follow
            }
        }
        if (has_chain && pos < start_offset) {
            chain_rest.push_back(added_match{start, stop, t.id});
        } else {
            flush();
            chain_first = added_match{start, stop, t.id};
            has_chain = true;
        }
        start_offset = stop;
        pos += len;
    }
    flush();
    if (open && set.any_lstrip()) {
        return std::max(space_run_start(text, begin, end), start_offset);  // an lstrip token may follow
    }
    return end;
}

}  // namespace

void added_set::add(added_token token) {
    if (token.content.empty() || tokens_.size() >= bytes_map::max_id) {
        return;
    }
    std::uint32_t existing = 0;
    if (by_content_.find(token.content, existing)) {
        return;
    }
    const auto index = static_cast<std::uint32_t>(tokens_.size());
    by_content_.insert(token.content, index);
    first_[static_cast<unsigned char>(token.content[0])] = true;
    any_lstrip_ = any_lstrip_ || token.lstrip;
    any_single_word_ = any_single_word_ || token.single_word;
    tokens_.push_back(std::move(token));
}

std::size_t added_set::longest_at(std::string_view text, std::size_t pos, std::uint32_t& index,
                                  bool& could_grow) const noexcept {
    std::size_t best = 0;
    could_grow = false;
    for (std::size_t len = 1; pos + len <= text.size(); ++len) {
        const std::string_view candidate = text.substr(pos, len);
        std::uint32_t flags = 0;
        if (!prefixes_.find(candidate, flags)) {
            break;
        }
        std::uint32_t i = 0;
        if (by_content_.find(candidate, i)) {
            best = len;
            index = i;
        }
        if (pos + len == text.size() && (flags & proper_prefix) != 0) {
            could_grow = true;
        }
    }
    return best;
}

bool added_set::could_start(std::string_view s, std::uint32_t flag) const noexcept {
    for (std::size_t len = 1; len <= s.size(); ++len) {
        std::uint32_t flags = 0;
        if (!prefixes_.find(s.substr(0, len), flags) || (flags & flag) == 0) {
            return false;
        }
        std::uint32_t i = 0;
        if (by_content_.find(s.substr(0, len), i)) {
            const added_token& t = tokens_[i];
            if ((flag == single_word_prefix && t.single_word) || (flag == lstrip_prefix && t.lstrip)) {
                return true;
            }
        }
    }
    return true;  // `s` is (a prefix of) the start of such a token, or empty
}

void added_set::finish() {
    // flags by prefix; a prefix shared by several contents gets the union
    std::vector<std::pair<std::string_view, std::uint32_t>> entries;
    for (const added_token& t : tokens_) {
        const std::uint32_t bits = (t.single_word ? single_word_prefix : 0U) |
                                   (t.lstrip ? lstrip_prefix : 0U);
        for (std::size_t len = 1; len <= t.content.size(); ++len) {
            entries.emplace_back(std::string_view(t.content).substr(0, len),
                                 bits | (len < t.content.size() ? proper_prefix : 0U));
        }
    }
    std::sort(entries.begin(), entries.end());
    // Sized for the distinct prefixes: Gemma 3's runs of "▁" and newlines share most of theirs.
    std::size_t distinct = 0;
    for (std::size_t i = 0; i < entries.size(); ++i) {
        distinct += (i == 0 || entries[i].first != entries[i - 1].first) ? 1 : 0;
    }
    prefixes_ = bytes_map();
    prefixes_.reserve(distinct);
    for (std::size_t i = 0; i < entries.size();) {
        std::uint32_t bits = 0;
        std::size_t j = i;
        for (; j < entries.size() && entries[j].first == entries[i].first; ++j) {
            bits |= entries[j].second;
        }
        prefixes_.insert(entries[i].first, bits);
        i = j;
    }
    tokens_.shrink_to_fit();
}

std::size_t added_vocabulary::normalized_pass(std::string_view text, std::size_t begin,
                                              std::size_t end, bool open,
                                              const segment_encoder& segments,
                                              std::vector<token_id>& out, std::size_t& last_stop,
                                              std::vector<added_match>& dropped) const {
    if (normalized.empty() || begin == end) {
        return segments.encode_segment(text, begin, end, open, out);
    }
    std::size_t seg = begin;
    const std::size_t resolved =
        find_matches(normalized, text, begin, end, open, dropped, [&](const added_match& m) {
            if (seg < m.start) {
                segments.encode_segment(text, seg, m.start, false, out);
            }
            out.push_back(m.id);
            seg = m.stop;
            last_stop = m.stop;
        });
    if (!open) {
        if (seg < end) {
            segments.encode_segment(text, seg, end, false, out);
        }
        return end;
    }
    return seg < resolved ? segments.encode_segment(text, seg, resolved, true, out) : seg;
}

added_vocabulary::pass_result added_vocabulary::pass(std::string_view text, bool open,
                                                     const segment_encoder& segments,
                                                     std::vector<token_id>& out) const {
    pass_result r;
    std::size_t seg = 0;
    std::vector<added_match> dropped;  // single_word matches not taken (rare: no allocation)
    std::size_t last_stop = std::string_view::npos;  // of any token, raw or normalized
    const std::size_t resolved =
        find_matches(raw, text, 0, text.size(), open, dropped, [&](const added_match& m) {
            if (seg < m.start) {
                normalized_pass(text, seg, m.start, false, segments, out, last_stop, dropped);
            }
            out.push_back(m.id);
            seg = m.stop;
            last_stop = m.stop;
        });
    if (!open) {
        if (seg < text.size()) {
            normalized_pass(text, seg, text.size(), false, segments, out, last_stop, dropped);
        }
        r.end = text.size();
        return r;
    }
    r.end = seg < resolved ? normalized_pass(text, seg, resolved, true, segments, out, last_stop,
                                           dropped)
                           : seg;
    r.at_raw_token_end = seg > 0 && r.end == seg && last_stop == seg;
    r.at_token_end = r.end == last_stop;
    r.inside_dropped = std::any_of(dropped.begin(), dropped.end(), [&](const added_match& d) {
        return d.start < r.end && r.end < d.stop;
    });
    return r;
}

bool added_vocabulary::safe_cut(std::string_view text, const pass_result& r) const noexcept {
    const std::size_t n = r.end;
    if (n == 0) {
        return true;
    }
    if ((r.at_token_end && prepend_each_segment) || r.inside_dropped) {
        return false;
    }
    const std::string_view after = text.substr(n);
    const char32_t before = char_before(text, n);
    const bool single_word = raw.any_single_word() || normalized.any_single_word();
    if (single_word && is_word(before) &&
        (raw.could_start(after, added_set::single_word_prefix) ||
         normalized.could_start(after, added_set::single_word_prefix))) {
        return false;
    }
    const bool lstrip = raw.any_lstrip() || normalized.any_lstrip();
    if (lstrip && !r.at_raw_token_end && is_space(before)) {
        const std::size_t word = space_run_end(text, n, text.size());
        const std::string_view rest = text.substr(word);
        if (raw.could_start(rest, added_set::lstrip_prefix) ||
            normalized.could_start(rest, added_set::lstrip_prefix)) {
            return false;
        }
    }
    return true;
}

std::size_t added_vocabulary::encode(std::string_view text, bool open,
                                     const segment_encoder& segments,
                                     std::vector<token_id>& out) const {
    const bool flags = raw.any_lstrip() || raw.any_single_word() || normalized.any_lstrip() ||
                       normalized.any_single_word();
    if (!open || (!flags && !prepend_each_segment)) {
        return pass(text, open, segments, out).end;
    }
    // An open call's cut must leave the next call (which starts there, knowing nothing before)
    // the same decisions: if it does not, try again on a shorter text, which only cuts earlier.
    const std::size_t mark = out.size();
    std::size_t limit = text.size();
    for (;;) {
        const pass_result r = pass(text.substr(0, limit), true, segments, out);
        if (safe_cut(text, r)) {
            return r.end;
        }
        out.resize(mark);
        std::size_t p = char_start_before(text, r.end);
        while (p > 0) {
            const char32_t c = char_before(text, p);
            if (!is_word(c) && !is_space(c)) {
                break;
            }
            p = char_start_before(text, p);
        }
        limit = p;
    }
}

}  // namespace tokenmeter::tokenizer::detail
