// tokenizer/tiktoken: tiktoken-compatible encoding (encode_ordinary, or encode with every special
// token allowed when the encoder matches them): regex pieces, then
// byte-pair merges by rank; a piece that is itself a token is that token (tiktoken's own fast
// path, and always the merge result for tiktoken's vocabularies).
#include "tokenizer/bpe.hpp"
#include "tokenizer/encoders.hpp"
#include "tokenizer/piece_cache.hpp"

namespace tokenmeter::tokenizer {

void release_thread_caches() noexcept {
    detail::piece_cache::for_thread().release();
}

}  // namespace tokenmeter::tokenizer

namespace tokenmeter::tokenizer::detail {

namespace {

merge_scratch& scratch() {
    thread_local merge_scratch s;
    return s;
}

}  // namespace

std::unique_ptr<tiktoken_encoder> tiktoken_encoder::create(std::string name,
                                                           std::string_view pattern,
                                                           bytes_map ranks, std::string& error) {
    std::unique_ptr<tiktoken_encoder> enc(new tiktoken_encoder());
    enc->name_ = std::move(name);
    enc->cache_owner_ = piece_cache::new_owner();
    std::string regex_error;
    auto re = regex::compile(pattern, regex_error);
    if (!re) {
        error = "pat_str: " + regex_error;
        return nullptr;
    }
    enc->levels_.push_back(split_level{std::move(re), false});
    enc->ranks_ = std::move(ranks);
    for (int b = 0; b < 256; ++b) {
        const char c = static_cast<char>(b);
        if (!enc->ranks_.find(std::string_view(&c, 1),
                              enc->byte_rank_[static_cast<std::size_t>(b)])) {
            error = "no rank for the single byte " + std::to_string(b);
            return nullptr;
        }
    }
    return enc;
}

inline void tiktoken_encoder::encode_piece(std::string_view piece, merge_scratch& s,
                                           std::vector<token_id>& out) const {
    const std::uint64_t hash = hash_bytes(piece);
    if (!piece_cache::for_thread().lookup(cache_owner_, piece, hash, out)) {
        encode_uncached(piece, hash, s, out);
    }
}

[[gnu::noinline]] void tiktoken_encoder::encode_uncached(std::string_view piece, std::uint64_t hash,
                                                         merge_scratch& s,
                                                         std::vector<token_id>& out) const {
    piece_cache& cache = piece_cache::for_thread();
    token_id id = 0;
    if (ranks_.find(piece, id)) {
        out.push_back(id);
        cache.store(cache_owner_, piece, hash, &id, 1);
        return;
    }
    const auto merge = [&](std::string_view bytes) {
        s.symbols.clear();
        for (std::size_t i = 0; i < bytes.size(); ++i) {
            s.symbols.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i + 1),
                                 byte_rank_[static_cast<unsigned char>(bytes[i])]});
        }
        // tiktoken merges two adjacent parts when their concatenation has a rank, and the merged
        // part's id is that rank: one lookup of the concatenated bytes, as tiktoken does. (A
        // table of id pairs would save hashing a few bytes per lookup but cost 34 MiB for
        // o200k_base; most pieces are whole tokens or in the per-thread piece cache and never
        // get here.)
        merge_symbols(
            s,
            [&](const symbol& a, const symbol& b, token_id& merged) -> std::uint32_t {
                if (!ranks_.find(bytes.substr(a.start, b.end - a.start), merged)) {
                    return no_rank;
                }
                return merged;
            },
            out);
    };
    if (merge_capped(cache_owner_, piece, out, merge)) {
        return;
    }
    const std::size_t first = out.size();
    merge(piece);
    cache.store(cache_owner_, piece, hash, out.data() + first, out.size() - first);
}

class tiktoken_encoder::ordinary final : public segment_encoder {
  public:
    explicit ordinary(const tiktoken_encoder& enc) : enc_(enc) {}
    std::size_t encode_segment(std::string_view text, std::size_t begin, std::size_t end, bool open,
                               std::vector<token_id>& out) const override {
        return enc_.run_ordinary(text, begin, end, open, out);
    }

  private:
    const tiktoken_encoder& enc_;
};

void tiktoken_encoder::match_special_tokens(
    const std::vector<std::pair<std::string, token_id>>& tokens) {
    for (const auto& [content, id] : tokens) {
        specials_.raw.add(added_token{content, id});
    }
    specials_.raw.finish();
}

std::size_t tiktoken_encoder::run_ordinary(std::string_view text, std::size_t begin,
                                           std::size_t end, bool open, std::vector<token_id>& out,
                                           std::vector<piece_end>* ends) const {
    merge_scratch& s = scratch();
    const std::size_t first = out.size();
    auto emit = [&](std::size_t b, std::size_t e) {
        encode_piece(text.substr(b, e - b), s, out);
        if (ends != nullptr) {
            ends->push_back({e, out.size() - first});
        }
    };
    // The text between two special tokens is encoded on its own, as tiktoken does.
    return split_pieces(levels_, 0, text.substr(0, end), begin, end, open, emit);
}

std::size_t tiktoken_encoder::run(std::string_view text, bool open,
                                  std::vector<token_id>& out) const {
    if (specials_.empty()) {
        return run_ordinary(text, 0, text.size(), open, out);
    }
    return specials_.encode(text, open, ordinary(*this), out);
}

std::size_t tiktoken_encoder::encode_final(std::string_view pending, bool /*at_start*/,
                                           std::vector<token_id>& out) const {
    return run(pending, true, out);
}

std::size_t tiktoken_encoder::encode_final_pieces(std::string_view pending, bool /*at_start*/,
                                                  std::vector<token_id>& out,
                                                  std::vector<piece_end>& ends) const {
    if (!specials_.empty()) {
        return run(pending, true, out);
    }
    return run_ordinary(pending, 0, pending.size(), true, out, &ends);
}

void tiktoken_encoder::encode_rest_pieces(std::string_view text, bool /*at_start*/,
                                          std::vector<token_id>& out,
                                          std::vector<piece_end>& ends) const {
    if (!specials_.empty()) {
        run(text, false, out);
        return;
    }
    run_ordinary(text, 0, text.size(), false, out, &ends);
}

void tiktoken_encoder::encode_rest(std::string_view text, bool /*at_start*/,
                                   std::vector<token_id>& out) const {
    run(text, false, out);
}

}  // namespace tokenmeter::tokenizer::detail
