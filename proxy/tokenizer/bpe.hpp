// tokenizer/bpe: the byte-pair merge loop shared by every encoder. Repeatedly merges the adjacent
// pair with the lowest rank (ties: the leftmost), which is what tiktoken's byte_pair_merge and
// Hugging Face's Word::merge_all both compute. Short pieces use a flat array scan (cache
// friendly, no allocation); long pieces use a linked list and a lazy min-heap so a 10,000-byte
// run of spaces costs O(n log n), not O(n^2).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace tokenmeter::tokenizer::detail {

struct symbol {
    std::uint32_t start;  // byte offset in the piece (tiktoken looks up the merged bytes)
    std::uint32_t end;
    token_id id;
};

constexpr std::uint32_t no_rank = 0xffffffffU;

// Per-call scratch so a merge allocates nothing in the steady state.
struct merge_scratch {
    std::vector<symbol> symbols;
    std::vector<std::uint32_t> ranks;
    std::vector<token_id> merged_ids;
    std::vector<std::int32_t> prev;
    std::vector<std::int32_t> next;
    struct heap_entry {
        std::uint32_t rank;
        std::uint32_t left;
        std::uint32_t right;
        std::uint32_t right_end;
    };
    std::vector<heap_entry> heap;
};

constexpr std::size_t small_piece_symbols = 48;

// Bounded counting (encoder::count_bounded) on this thread: a piece longer than piece_cap bytes
// is merged in chunks of at most piece_cap bytes (cut before a UTF-8 character), each as if it
// were a piece of its own, so no merge works on more than piece_cap bytes and a huge piece costs
// time linear in its length. A count made so is an estimate (`capped`). A chunk equal to the one
// before it (a run of one repeated character) takes that chunk's ids without a merge. Outside
// count_bounded piece_cap is 0: every piece is merged whole, exactly.
struct count_bounds {
    std::size_t piece_cap = 0;
    bool capped = false;
    std::size_t chunk_merges = 0;   // chunks of capped pieces merged (not taken from last_ids)
    std::size_t longest_chunk = 0;  // the most bytes of a capped piece merged at once
    std::uint64_t owner = 0;        // the encoder whose ids last_ids are
    std::string last_chunk;
    std::vector<token_id> last_ids;
};
count_bounds& count_bounds_for_thread() noexcept;

// The next chunk of a capped piece from `pos`: at most cap bytes, ending before a UTF-8
// continuation byte when the piece goes on (a lone byte sequence longer than cap is cut).
inline std::size_t capped_chunk_length(std::string_view piece, std::size_t pos,
                                       std::size_t cap) noexcept {
    std::size_t len = std::min(cap, piece.size() - pos);
    std::size_t cut = len;
    while (pos + cut < piece.size() && cut > 1 &&
           (static_cast<unsigned char>(piece[pos + cut]) & 0xC0U) == 0x80U) {
        --cut;
    }
    return cut > 1 ? cut : len;
}

// When bounded counting caps `piece`, merges it chunk by chunk with merge(chunk) (which appends
// the chunk's ids to `out`) and returns true; otherwise returns false and does nothing.
template <class Merge>
bool merge_capped(std::uint64_t owner, std::string_view piece, std::vector<token_id>& out,
                  Merge&& merge) {
    count_bounds& b = count_bounds_for_thread();
    if (b.piece_cap == 0 || piece.size() <= b.piece_cap) {
        return false;
    }
    b.capped = true;
    if (b.owner != owner) {
        b.owner = owner;
        b.last_chunk.clear();
        b.last_ids.clear();
    }
    for (std::size_t pos = 0; pos < piece.size();) {
        const std::string_view chunk =
            piece.substr(pos, capped_chunk_length(piece, pos, b.piece_cap));
        pos += chunk.size();
        if (chunk == b.last_chunk) {
            out.insert(out.end(), b.last_ids.begin(), b.last_ids.end());
            continue;
        }
        const std::size_t first = out.size();
        merge(chunk);
        b.chunk_merges += 1;
        b.longest_chunk = std::max(b.longest_chunk, chunk.size());
        b.last_chunk.assign(chunk);
        b.last_ids.assign(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
    }
    return true;
}

// `rank_of(const symbol& a, const symbol& b, token_id& merged) -> std::uint32_t` returns the
// rank of merging a and b (no_rank if they do not merge) and the id of the result.
// Consumes s.symbols; appends the final ids to `out`.
template <class RankOf>
void merge_symbols(merge_scratch& s, RankOf&& rank_of, std::vector<token_id>& out) {
    std::vector<symbol>& sym = s.symbols;
    const std::size_t n = sym.size();
    if (n <= 1) {
        if (n == 1) {
            out.push_back(sym[0].id);
        }
        return;
    }
    if (n <= small_piece_symbols) {
        // ranks[i] is the rank of merging sym[i] and sym[i+1].
        s.ranks.resize(n - 1);
        s.merged_ids.resize(n - 1);
        for (std::size_t i = 0; i + 1 < n; ++i) {
            s.ranks[i] = rank_of(sym[i], sym[i + 1], s.merged_ids[i]);
        }
        std::size_t count = n;
        while (count > 1) {
            std::uint32_t best = no_rank;
            std::size_t at = 0;
            for (std::size_t i = 0; i + 1 < count; ++i) {
                if (s.ranks[i] < best) {
                    best = s.ranks[i];
                    at = i;
                }
            }
            if (best == no_rank) {
                break;
            }
            sym[at].end = sym[at + 1].end;
            sym[at].id = s.merged_ids[at];
            sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(at) + 1);
            s.ranks.erase(s.ranks.begin() + static_cast<std::ptrdiff_t>(at));
            s.merged_ids.erase(s.merged_ids.begin() + static_cast<std::ptrdiff_t>(at));
            --count;
            if (at + 1 < count) {
                s.ranks[at] = rank_of(sym[at], sym[at + 1], s.merged_ids[at]);
            }
            if (at > 0) {
                s.ranks[at - 1] = rank_of(sym[at - 1], sym[at], s.merged_ids[at - 1]);
            }
        }
        for (std::size_t i = 0; i < count; ++i) {
            out.push_back(sym[i].id);
        }
        return;
    }

    // Long piece: doubly linked list over sym, min-heap of candidate merges ordered by (rank,
    // position). Entries are validated lazily when popped.
    s.prev.resize(n);
    s.next.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        s.prev[i] = static_cast<std::int32_t>(i) - 1;
        s.next[i] = i + 1 < n ? static_cast<std::int32_t>(i + 1) : -1;
    }
    auto later = [](const merge_scratch::heap_entry& a, const merge_scratch::heap_entry& b) {
        return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
    };
    s.heap.clear();
    auto push_pair = [&](std::int32_t left) {
        const std::int32_t right = s.next[static_cast<std::size_t>(left)];
        if (left < 0 || right < 0) {
            return;
        }
        token_id merged = 0;
        const std::uint32_t rank = rank_of(sym[static_cast<std::size_t>(left)],
                                           sym[static_cast<std::size_t>(right)], merged);
        if (rank == no_rank) {
            return;
        }
        s.heap.push_back({rank, static_cast<std::uint32_t>(left), static_cast<std::uint32_t>(right),
                          sym[static_cast<std::size_t>(right)].end});
        std::push_heap(s.heap.begin(), s.heap.end(), later);
    };
    for (std::size_t i = 0; i + 1 < n; ++i) {
        push_pair(static_cast<std::int32_t>(i));
    }
    std::vector<bool> dead(n, false);
    while (!s.heap.empty()) {
        std::pop_heap(s.heap.begin(), s.heap.end(), later);
        const merge_scratch::heap_entry e = s.heap.back();
        s.heap.pop_back();
        if (dead[e.left] || dead[e.right] || s.next[e.left] != static_cast<std::int32_t>(e.right) ||
            sym[e.right].end != e.right_end) {
            continue;  // stale: one side has merged since this entry was pushed
        }
        token_id merged = 0;
        (void)rank_of(sym[e.left], sym[e.right], merged);
        sym[e.left].end = sym[e.right].end;
        sym[e.left].id = merged;
        dead[e.right] = true;
        const std::int32_t after = s.next[e.right];
        s.next[e.left] = after;
        if (after >= 0) {
            s.prev[static_cast<std::size_t>(after)] = static_cast<std::int32_t>(e.left);
        }
        if (s.prev[e.left] >= 0) {
            push_pair(s.prev[e.left]);
        }
        push_pair(static_cast<std::int32_t>(e.left));
    }
    for (std::int32_t i = 0; i >= 0; i = s.next[static_cast<std::size_t>(i)]) {
        out.push_back(sym[static_cast<std::size_t>(i)].id);
    }
}

}  // namespace tokenmeter::tokenizer::detail
