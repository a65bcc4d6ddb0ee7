// tokenizer/piece_cache: a per-thread, direct-mapped memo of piece -> ids (up to 1 MiB per
// thread: its table is made on the first store, its pages resident as they are written, and
// given back by release() when the thread's worker is idle).
// Natural text repeats its pieces (" the", "ing", "\n\n"), and the vocabulary tables are tens of
// megabytes, so without it every piece costs one or more cache misses. Per thread, keyed by
// encoder: never shared between threads, never visible in results (a hit returns what the merge
// would).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "tokenizer/tables.hpp"
#include "tokenizer/tokenizer.hpp"

namespace tokenmeter::tokenizer::detail {

class piece_cache {
  public:
    static constexpr std::size_t max_piece = 22;
    static constexpr std::size_t max_ids = 6;

    // Appends the cached ids of `piece` to `out` and returns true on a hit.
    bool lookup(std::uint64_t owner, std::string_view piece, std::uint64_t hash,
                std::vector<token_id>& out) const noexcept {
        if (piece.size() > max_piece || entries_ == nullptr) {
            return false;
        }
        const entry& e = entries_[slot(owner, hash)];
        if (e.owner != owner || e.hash != hash || e.length != piece.size() ||
            !same_bytes(e.text.data(), piece.data(), piece.size())) {
            return false;
        }
        if (e.count == 1) {
            out.push_back(e.ids[0]);  // most pieces are one token
        } else {
            out.insert(out.end(), e.ids.begin(), e.ids.begin() + e.count);
        }
        return true;
    }

    void store(std::uint64_t owner, std::string_view piece, std::uint64_t hash, const token_id* ids,
               std::size_t count) noexcept {
        if (piece.size() > max_piece || count > max_ids || (entries_ == nullptr && !make())) {
            return;
        }
        entry& e = entries_[slot(owner, hash)];
        e.owner = owner;
        e.hash = hash;
        e.length = static_cast<std::uint8_t>(piece.size());
        e.count = static_cast<std::uint8_t>(count);
        std::memcpy(e.text.data(), piece.data(), piece.size());
        std::memcpy(e.ids.data(), ids, count * sizeof(token_id));
    }

    // A process-unique owner id for each encoder (an address could be reused by a later one).
    static std::uint64_t new_owner() noexcept {
        static std::atomic<std::uint64_t> next{1};
        return next.fetch_add(1, std::memory_order_relaxed);
    }

    static piece_cache& for_thread() {
        thread_local piece_cache cache;
        return cache;
    }

    piece_cache() = default;
    piece_cache(const piece_cache&) = delete;
    piece_cache& operator=(const piece_cache&) = delete;
    piece_cache(piece_cache&&) = delete;
    piece_cache& operator=(piece_cache&&) = delete;
    ~piece_cache() { release(); }

    // Gives the table back (the next store makes a new, empty one). Results are unchanged: a
    // miss merges as a hit would have answered.
    void release() noexcept {
        std::free(entries_);  // NOLINT(cppcoreguidelines-no-malloc,cppcoreguidelines-owning-memory):
                              // see make()
        entries_ = nullptr;
    }
    [[nodiscard]] bool holds_table() const noexcept { return entries_ != nullptr; }

  private:
    static constexpr std::size_t entries = 16384;
    // The owner is part of the slot: two encoders working on the same text (the native and the
    // reference tokenizer of one stream) hash each piece alike, and would otherwise take turns
    // evicting each other from one slot, missing on every piece.
    static std::size_t slot(std::uint64_t owner, std::uint64_t hash) noexcept {
        return static_cast<std::size_t>(hash ^ (owner * 0x9E3779B97F4A7C15ULL)) & (entries - 1);
    }
    struct entry {
        std::uint64_t owner = 0;
        std::uint64_t hash = 0;
        std::uint8_t length = 0;
        std::uint8_t count = 0;
        std::array<char, max_piece> text{};
        std::array<token_id, max_ids> ids{};
    };
    // calloc, not a vector: the zero pages the system hands over for a table this large are not
    // resident until written, so a thread that stores a few pieces holds a few pages, not 1 MiB.
    bool make() noexcept {
        // NOLINTNEXTLINE(cppcoreguidelines-no-malloc,cppcoreguidelines-owning-memory): see above
        entries_ = static_cast<entry*>(std::calloc(entries, sizeof(entry)));
        return entries_ != nullptr;
    }

    entry* entries_ = nullptr;  // `entries` of them, or none yet
};

}  // namespace tokenmeter::tokenizer::detail
