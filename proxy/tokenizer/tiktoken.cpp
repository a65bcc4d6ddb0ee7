// tokenizer/tiktoken: tiktoken-compatible encoding (encode_ordinary): regex pieces, then
// byte-pair merges by rank; a piece that is itself a token is that token (tiktoken's own fast
// path, and always the merge result for tiktoken's vocabularies).
#include "tokenizer/bpe.hpp"
#include "tokenizer/encoders.hpp"
#include "tokenizer/piece_cache.hpp"

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
    // tiktoken merges two adjacent parts when their concatenation has a rank. Every part is a
    // token, so that is exactly "the pair (a, b) splits some token": precomputing those pairs
    // by id turns each merge test into one integer-keyed probe instead of hashing bytes.
    std::size_t splits = 0;
    enc->ranks_.for_each([&](std::string_view key, token_id) { splits += key.size(); });
    enc->pairs_.reserve(splits / 2);
    enc->ranks_.for_each([&](std::string_view key, token_id rank) {
        for (std::size_t k = 1; k < key.size(); ++k) {
            token_id left = 0;
            token_id right = 0;
            if (enc->ranks_.find(key.substr(0, k), left) &&
                enc->ranks_.find(key.substr(k), right)) {
                enc->pairs_.insert(left, right, {rank, rank});
            }
        }
    });
    return enc;
}

void tiktoken_encoder::encode_piece(std::string_view piece, merge_scratch& s,
                                    std::vector<token_id>& out) const {
    piece_cache& cache = piece_cache::for_thread();
    const std::uint64_t hash = hash_bytes(piece);
    if (cache.lookup(cache_owner_, piece, hash, out)) {
        return;
    }
    token_id id = 0;
    if (ranks_.find(piece, id)) {
        out.push_back(id);
        cache.store(cache_owner_, piece, hash, &id, 1);
        return;
    }
    const std::size_t first = out.size();
    s.symbols.clear();
    for (std::size_t i = 0; i < piece.size(); ++i) {
        s.symbols.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i + 1),
                             byte_rank_[static_cast<unsigned char>(piece[i])]});
    }
    merge_symbols(
        s,
        [&](const symbol& a, const symbol& b, token_id& merged) -> std::uint32_t {
            const pair_map::merge* m = pairs_.find(a.id, b.id);
            if (m == nullptr) {
                return no_rank;
            }
            merged = m->id;
            return m->rank;
        },
        out);
    cache.store(cache_owner_, piece, hash, out.data() + first, out.size() - first);
}

std::size_t tiktoken_encoder::run(std::string_view text, bool open,
                                  std::vector<token_id>& out) const {
    merge_scratch& s = scratch();
    auto emit = [&](std::size_t b, std::size_t e) { encode_piece(text.substr(b, e - b), s, out); };
    return split_pieces(levels_, 0, text, 0, text.size(), open, emit);
}

std::size_t tiktoken_encoder::encode_final(std::string_view pending, bool /*at_start*/,
                                           std::vector<token_id>& out) const {
    return run(pending, true, out);
}

void tiktoken_encoder::encode_rest(std::string_view text, bool /*at_start*/,
                                   std::vector<token_id>& out) const {
    run(text, false, out);
}

}  // namespace tokenmeter::tokenizer::detail
