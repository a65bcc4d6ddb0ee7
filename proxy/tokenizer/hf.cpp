// tokenizer/hf: Hugging Face BPE (tokenizer.json) encoding, id-for-id with the `tokenizers`
// library: added tokens split first (added.hpp), then per segment the
// normalizer, the pre-tokenizer and the BPE model. Two shapes:
//  - byte-level (Llama 3, Qwen3, DeepSeek-V3, GPT-4o-style): regex splits, bytes as symbols;
//  - SentencePiece-style (Llama 2, Mistral, Gemma): "▁" for spaces, no pre-tokenizer, characters
//    as symbols with <0xAB> byte fallback. The whole text is one word, so pieces are cut at
//    character pairs no merge ever joins (see joined_chars), which is exact and keeps merges
//    short.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/bpe.hpp"
#include "tokenizer/encoders.hpp"
#include "tokenizer/piece_cache.hpp"
#include "tokenizer/utf8.hpp"

namespace tokenmeter::tokenizer::detail {

namespace {

merge_scratch& scratch() {
    thread_local merge_scratch s;
    return s;
}

std::size_t prev_char_start(std::string_view text, std::size_t p) {
    do {
        --p;
    } while (p > 0 && (static_cast<unsigned char>(text[p]) & 0xC0U) == 0x80U);
    return p;
}

char32_t char_at(std::string_view text, std::size_t p) {
    return utf8_next(text, p);
}

// Whether the text at `begin` (before `end`) already starts with what Metaspace would prepend,
// as it is or once its first byte is replaced.
bool starts_with_prepend(const hf_model& m, std::string_view text, std::size_t begin,
                         std::size_t end) {
    const auto lead = static_cast<unsigned char>(text[begin]);
    return text.substr(begin, end - begin).starts_with(m.prepend) ||
           (lead < 0x80 && std::string_view(m.replace_with[lead]).starts_with(m.prepend));
}

void bpe_ids(const hf_model& m, merge_scratch& s, std::vector<token_id>& out) {
    merge_symbols(
        s,
        [&](const symbol& a, const symbol& b, token_id& merged) -> std::uint32_t {
            const pair_map::merge* mm = m.merges.find(a.id, b.id);
            if (mm == nullptr) {
                return no_rank;
            }
            merged = mm->id;
            return mm->rank;
        },
        out);
}

}  // namespace

void byte_level_bpe(const hf_model& m, std::string_view piece, merge_scratch& s,
                    std::vector<token_id>& out) {
    piece_cache& cache = piece_cache::for_thread();
    const std::uint64_t hash = hash_bytes(piece);
    if (cache.lookup(m.cache_owner, piece, hash, out)) {
        return;
    }
    token_id id = 0;
    if (m.vocab.find(piece, id) &&
        (m.ignore_merges || (id < m.whole_ok.size() && m.whole_ok[id]))) {
        out.push_back(id);
        cache.store(m.cache_owner, piece, hash, &id, 1);
        return;
    }
    const auto merge = [&](std::string_view bytes) {
        s.symbols.clear();
        for (std::size_t i = 0; i < bytes.size(); ++i) {
            const auto b = static_cast<unsigned char>(bytes[i]);
            s.symbols.push_back(
                {static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i + 1), m.byte_ids[b]});
        }
        bpe_ids(m, s, out);
    };
    if (merge_capped(m.cache_owner, piece, out, merge)) {
        return;
    }
    const std::size_t first = out.size();
    merge(piece);
    cache.store(m.cache_owner, piece, hash, out.data() + first, out.size() - first);
}

void hf_encoder::compute_whole_ok(hf_model& model) {
    std::size_t max_id = 0;
    model.vocab.for_each(
        [&](std::string_view, token_id id) { max_id = std::max<std::size_t>(max_id, id); });
    model.whole_ok.assign(max_id + 1, false);
    model.cache_owner = piece_cache::new_owner();
    if (model.mode != hf_model::kind::byte_level || model.ignore_merges) {
        return;
    }
    merge_scratch s;
    std::vector<token_id> ids;
    model.vocab.for_each([&](std::string_view key, token_id id) {
        ids.clear();
        byte_level_bpe(model, key, s, ids);  // whole_ok is still all false: a real merge
        if (ids.size() == 1 && ids[0] == id) {
            model.whole_ok[id] = true;
        }
    });
}

hf_encoder::hf_encoder(std::string name, std::unique_ptr<hf_model> model)
    : name_(std::move(name)), m_(std::move(model)) {}

std::size_t hf_encoder::encode_final(std::string_view pending, bool at_start,
                                     std::vector<token_id>& out) const {
    return run(pending, at_start, true, out);
}

void hf_encoder::encode_rest(std::string_view text, bool at_start,
                             std::vector<token_id>& out) const {
    run(text, at_start, false, out);
}

// Text between added tokens: each segment is normalized and pre-tokenized on its own, so one
// that follows an added token gets the prepended "▁" again when the encoder prepends to every
// segment (Prepend normalizer, Metaspace "always"); Metaspace "first" only at the very start.
class hf_encoder::segments final : public segment_encoder {
  public:
    segments(const hf_encoder& enc, bool at_start) : enc_(enc), at_start_(at_start) {}
    std::size_t encode_segment(std::string_view text, std::size_t begin, std::size_t end, bool open,
                               std::vector<token_id>& out) const override {
        const bool prepend = begin == 0 ? at_start_ : enc_.m_->prepend_each_segment;
        return enc_.segment(text, begin, end, prepend, open, out);
    }

  private:
    const hf_encoder& enc_;
    bool at_start_;
};

std::size_t hf_encoder::run(std::string_view text, bool at_start, bool open,
                            std::vector<token_id>& out) const {
    if (m_->added.empty()) {
        return segment(text, 0, text.size(), at_start, open, out);
    }
    return m_->added.encode(text, open, segments(*this, at_start), out);
}

std::size_t hf_encoder::segment(std::string_view text, std::size_t begin, std::size_t end,
                                bool at_start, bool open, std::vector<token_id>& out) const {
    if (begin == end) {
        return end;
    }
    if (m_->mode == hf_model::kind::sentencepiece) {
        return sentencepiece_segment(text, begin, end, at_start, open, out);
    }
    if (m_->nfc) {
        if (!nfc_is_trivially_normalized(text.substr(begin, end - begin))) {
            return nfc_segment(text, begin, end, open, out);
        }
        if (open) {
            // The next character may be a combining mark that NFC composes with the last one
            // ("s" + U+0307 is "ṡ"), so the last character is not final yet. Every other
            // character here is below U+0300 and never combines with what precedes it.
            return byte_level_segment(text, begin, prev_char_start(text, end), true, out);
        }
    }
    return byte_level_segment(text, begin, end, open, out);
}

std::size_t hf_encoder::byte_level_segment(std::string_view text, std::size_t begin,
                                           std::size_t end, bool open,
                                           std::vector<token_id>& out) const {
    merge_scratch& s = scratch();
    auto emit = [&](std::size_t b, std::size_t e) {
        byte_level_bpe(*m_, text.substr(b, e - b), s, out);
    };
    if (m_->levels.empty()) {
        if (open) {
            return begin;
        }
        emit(begin, end);
        return end;
    }
    return split_pieces(m_->levels, 0, text, begin, end, open, emit);
}

// NFC composes across characters, so a cut must also be a normalization boundary: the text is
// normalized up to the last character that never combines with what precedes it, and only
// pieces ending on such a boundary are final.
std::size_t hf_encoder::nfc_segment(std::string_view text, std::size_t begin, std::size_t end,
                                    bool open, std::vector<token_id>& out) const {
    const std::string_view raw_all = text.substr(begin, end - begin);
    if (!open) {
        if (nfc_is_normalized(raw_all)) {
            byte_level_segment(text, begin, end, false, out);
        } else {
            std::string normalized;
            nfc_normalize(raw_all, normalized);
            byte_level_segment(normalized, 0, normalized.size(), false, out);
        }
        return end;
    }
    std::size_t q = end;
    bool found = false;
    while (q > begin) {
        q = prev_char_start(text, q);
        if (q > begin && nfc_boundary_before(char_at(text, q))) {
            found = true;
            break;
        }
    }
    if (!found || m_->levels.empty()) {
        return begin;
    }
    const std::string_view raw = text.substr(begin, q - begin);
    const bool same = nfc_is_normalized(raw);
    std::string normalized;
    // (normalized offset, raw offset) at every normalization boundary, when they differ.
    std::vector<std::pair<std::size_t, std::size_t>> marks;
    if (!same) {
        std::size_t last = 0;
        std::size_t p = 0;
        while (p < raw.size()) {
            std::size_t next = p;
            const char32_t c = utf8_next(raw, next);
            if (p > last && nfc_boundary_before(c)) {
                nfc_normalize(raw.substr(last, p - last), normalized);
                marks.emplace_back(normalized.size(), p);
                last = p;
            }
            p = next;
        }
        nfc_normalize(raw.substr(last), normalized);
        marks.emplace_back(normalized.size(), raw.size());
    }
    const std::string_view base = same ? raw : std::string_view(normalized);
    std::vector<std::pair<std::size_t, std::size_t>> pieces;
    auto collect = [&](std::size_t b, std::size_t e) { pieces.emplace_back(b, e); };
    split_pieces(m_->levels, 0, base, 0, base.size(), true, collect);
    std::size_t take = 0;
    std::size_t raw_end = 0;
    for (std::size_t i = pieces.size(); i-- > 0;) {
        const std::size_t pe = pieces[i].second;
        if (same) {
            if (pe == raw.size() || nfc_boundary_before(char_at(raw, pe))) {
                take = i + 1;
                raw_end = pe;
                break;
            }
        } else {
            auto it =
                std::lower_bound(marks.begin(), marks.end(), std::make_pair(pe, std::size_t{0}));
            if (it != marks.end() && it->first == pe) {
                take = i + 1;
                raw_end = it->second;
                break;
            }
        }
    }
    merge_scratch& s = scratch();
    for (std::size_t i = 0; i < take; ++i) {
        byte_level_bpe(*m_, base.substr(pieces[i].first, pieces[i].second - pieces[i].first), s,
                       out);
    }
    return begin + raw_end;
}

std::size_t hf_encoder::sentencepiece_segment(std::string_view text, std::size_t begin,
                                              std::size_t end, bool at_start, bool open,
                                              std::vector<token_id>& out) const {
    const hf_model& m = *m_;
    merge_scratch& s = scratch();
    s.symbols.clear();
    // What the last normalized character became, for the boundary test and unk fusing.
    enum class kind { none, known, bytes, unk };
    kind last_kind = kind::none;
    token_id last_id = 0;

    auto classify = [&](std::string_view ch, token_id& id) -> kind {
        if (m.vocab.find(ch, id)) {
            return kind::known;
        }
        return m.byte_fallback ? kind::bytes : kind::unk;
    };
    // start/end number the symbols: the long-piece merge uses them to detect stale pairs.
    auto add = [&](token_id id) {
        const auto at = static_cast<std::uint32_t>(s.symbols.size());
        s.symbols.push_back({at, at + 1, id});
    };
    auto push_classified = [&](std::string_view ch, kind k, token_id id) {
        if (k == kind::known) {
            add(id);
            last_id = id;
        } else if (k == kind::bytes) {
            for (char b : ch) {
                add(m.byte_ids[static_cast<unsigned char>(b)]);
            }
        } else if (!(m.fuse_unk && last_kind == kind::unk)) {
            add(m.unk);
        }
        last_kind = k;
    };
    auto push = [&](std::string_view ch) {
        token_id id = 0;
        const kind k = classify(ch, id);
        push_classified(ch, k, id);
    };
    auto push_all = [&](std::string_view normalized) {
        std::size_t i = 0;
        while (i < normalized.size()) {
            const std::size_t len = utf8_char_length(static_cast<unsigned char>(normalized[i]));
            push(normalized.substr(i, len));
            i += len;
        }
    };
    // A chunk's ids depend only on its raw bytes (unless it holds the prepended "▁"), so
    // recurring words come from the per-thread cache instead of the merge tables.
    piece_cache& cache = piece_cache::for_thread();
    bool chunk_has_prepend = false;
    count_bounds& bounds = count_bounds_for_thread();
    auto flush = [&](std::size_t chunk_begin, std::size_t chunk_end) {
        const std::string_view raw = text.substr(chunk_begin, chunk_end - chunk_begin);
        if (bounds.piece_cap != 0 && raw.size() >= bounds.piece_cap && !chunk_has_prepend) {
            // A word cut at the cap (bounded counting): equal chunks in a row merge once.
            if (bounds.owner == m.cache_owner && raw == bounds.last_chunk) {
                out.insert(out.end(), bounds.last_ids.begin(), bounds.last_ids.end());
            } else {
                const std::size_t first = out.size();
                bpe_ids(m, s, out);
                bounds.chunk_merges += 1;
                bounds.longest_chunk = std::max(bounds.longest_chunk, raw.size());
                bounds.owner = m.cache_owner;
                bounds.last_chunk.assign(raw);
                bounds.last_ids.assign(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
            }
            s.symbols.clear();
            return;
        }
        const std::uint64_t hash = hash_bytes(raw);
        if (chunk_has_prepend || !cache.lookup(m.cache_owner, raw, hash, out)) {
            const std::size_t first = out.size();
            bpe_ids(m, s, out);
            if (!chunk_has_prepend) {
                cache.store(m.cache_owner, raw, hash, out.data() + first, out.size() - first);
            }
        }
        s.symbols.clear();
        chunk_has_prepend = false;
    };

    if (at_start && !m.prepend.empty()) {
        // Metaspace prepends only when the text does not already start with the replacement.
        if (!(m.prepend_if_absent && starts_with_prepend(m, text, begin, end))) {
            push_all(m.prepend);
            chunk_has_prepend = true;
        }
    }
    std::size_t chunk_start = begin;
    std::size_t p = begin;
    while (p < end) {
        const auto lead = static_cast<unsigned char>(text[p]);
        const std::size_t len = utf8_char_length(lead);
        std::string_view normalized = text.substr(p, len);
        if (lead < 0x80 && !m.replace_with[lead].empty()) {
            normalized = m.replace_with[lead];
        }
        const std::string_view first =
            normalized.substr(0, utf8_char_length(static_cast<unsigned char>(normalized[0])));
        token_id first_id = 0;
        const kind first_kind = classify(first, first_id);
        if (p > begin && last_kind != kind::none) {
            // Cut before this character if no merge can join it to the previous one:
            // byte-fallback and unk symbols never merge (checked at load).
            bool safe = true;
            if (!m.split_before.empty() && first == m.split_before) {
                // still safe: with Metaspace(split = true) every "▁" starts a new word
            } else if (first_kind == kind::known && last_kind == kind::known) {
                safe = m.joined_chars.find(last_id, first_id) == nullptr;
            } else if (first_kind == kind::unk && last_kind == kind::unk) {
                safe = !m.fuse_unk;
            }
            if (!safe && bounds.piece_cap != 0 && p - chunk_start >= bounds.piece_cap) {
                bounds.capped = true;  // bounded counting: no merge spans more than the cap
                safe = true;
            }
            if (safe) {
                flush(chunk_start, p);
                chunk_start = p;
            }
        }
        push_classified(first, first_kind, first_id);
        if (first.size() < normalized.size()) {
            push_all(normalized.substr(first.size()));
        }
        p += len;
    }
    if (open) {
        s.symbols.clear();
        return chunk_start;
    }
    flush(chunk_start, end);
    return end;
}

}  // namespace tokenmeter::tokenizer::detail
