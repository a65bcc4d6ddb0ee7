// tokenizer/tables: the two lookups BPE spends its time in, as flat open-addressing tables:
// byte string -> token id (tiktoken ranks, whole-piece vocabulary hits) and token pair -> merge.
// Built once at load, read-only afterwards, so sharing them between threads needs no locks.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tokenmeter::tokenizer::detail {

// The first min(n, 8) bytes at p as one word, zero padded, as memcpy into a zeroed word would
// give it, without a call for the variable length: two overlapping fixed-size loads (4 to 8
// bytes), or three single bytes (1 to 3).
inline std::uint64_t load_upto8(const char* p, std::size_t n) noexcept {
    std::uint64_t w = 0;
    if (n >= 8) {
        std::memcpy(&w, p, 8);
    } else if (n >= 4) {
        std::uint32_t lo = 0;
        std::uint32_t hi = 0;
        std::memcpy(&lo, p, 4);
        std::memcpy(&hi, p + n - 4, 4);
        w = lo | (std::uint64_t{hi} << ((n - 4) * 8));
    } else if (n > 0) {
        const auto byte = [p](std::size_t i) {
            return std::uint64_t{static_cast<unsigned char>(p[i])} << (i * 8);
        };
        w = byte(0) | byte(n / 2) | byte(n - 1);
    }
    return w;
}

// a[0..n) == b[0..n). Tokens and pieces are short, so up to 16 bytes are compared as one or two
// words (which may overlap) instead of by a call to memcmp.
inline bool same_bytes(const char* a, const char* b, std::size_t n) noexcept {
    if (n <= 8) {
        return load_upto8(a, n) == load_upto8(b, n);
    }
    if (n <= 16) {
        std::uint64_t a0 = 0;
        std::uint64_t a1 = 0;
        std::uint64_t b0 = 0;
        std::uint64_t b1 = 0;
        std::memcpy(&a0, a, 8);
        std::memcpy(&b0, b, 8);
        std::memcpy(&a1, a + n - 8, 8);
        std::memcpy(&b1, b + n - 8, 8);
        return a0 == b0 && a1 == b1;
    }
    return std::memcmp(a, b, n) == 0;
}

// A fast 64-bit hash for short byte strings (tokens are mostly < 16 bytes): 8 bytes per multiply.
inline std::uint64_t hash_bytes(std::string_view s) noexcept {
    std::uint64_t h = 0x9E3779B97F4A7C15ULL ^ (s.size() * 0xff51afd7ed558ccdULL);
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
        std::uint64_t w = 0;
        std::memcpy(&w, s.data() + i, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
    }
    const std::uint64_t w = load_upto8(s.data() + i, s.size() - i);
    h = (h ^ w) * 0x94d049bb133111ebULL;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 32);
}

inline std::uint64_t hash_u64(std::uint64_t x) noexcept {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

// Byte string -> id. Keys live in one arena; an 8-byte slot keeps the key's arena offset, id and
// length. The table is filled up to 80%, with a byte of hash tag per slot beside the slots, so
// that probing past other keys reads tags, not slots: a miss, the common case in a merge loop,
// rarely leaves the tag line, and a tag match reads the slot and then the key in the arena
// (frequent tokens have low ids, so their keys sit together at the arena's start). o200k_base's
// 200k tokens take 2 MiB of slots, 256 KiB of tags and 1.4 MiB of arena. (The slots kept the
// key's first 8 bytes too until 2026-11-27, which saved the arena read for short keys and cost 2
// MiB more for o200k_base, 1 MiB for cl100k_base; instructions per proxied chunk did not move.)
// Ids must be below 2^24 (every published vocabulary is; insert refuses larger ones); a key of
// 255 bytes or more keeps its length in the arena, in the 4 bytes before the key.
class bytes_map {
  public:
    static constexpr std::uint32_t max_id = (1U << 24) - 1;

    void reserve(std::size_t n) {
        const std::size_t cap = capacity_for(n);
        if (cap > slots_.size()) {
            rehash(cap);
        }
    }

    // Returns false if the key was already present (the first id wins) or the id is too large.
    bool insert(std::string_view key, std::uint32_t id) {
        if (id > max_id || key.size() > 0xFFFFFFFFU ||
            arena_.size() + key.size() + 4 > 0xFFFFFFFFU) {
            return false;
        }
        if (slots_.empty() || (size_ + 1) * 5 > slots_.size() * 4) {
            rehash(slots_.empty() ? 16 : slots_.size() * 2);
        }
        const std::uint64_t h = hash_bytes(key);
        const std::uint8_t tag = tag_of(h);
        for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
            slot& s = slots_[i];
            if (s.is_empty()) {
                tags_[i] = tag;
                const std::uint32_t length =
                    key.size() < long_key ? static_cast<std::uint32_t>(key.size()) : long_key;
                if (length == long_key) {
                    const auto n = static_cast<std::uint32_t>(key.size());
                    arena_.append(reinterpret_cast<const char*>(&n), sizeof n);
                }
                s.offset = static_cast<std::uint32_t>(arena_.size());
                s.id_length = (id << 8) | length;
                arena_.append(key);
                ++size_;
                return true;
            }
            if (tags_[i] == tag && matches(s, key)) {
                return false;
            }
        }
    }

    [[nodiscard]] bool find(std::string_view key, std::uint32_t& id) const noexcept {
        if (size_ == 0) {
            return false;
        }
        const std::uint64_t h = hash_bytes(key);
        const std::uint8_t tag = tag_of(h);
        // The probe reads the one-byte tags (64 to a cache line) and touches a slot only when
        // its tag matches: a miss, the common case in a merge loop, rarely leaves the tag line.
        for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
            const std::uint8_t t = tags_[i];
            if (t == 0) {
                return false;
            }
            if (t == tag && matches(slots_[i], key)) {
                id = slots_[i].id_length >> 8;
                return true;
            }
        }
    }

    [[nodiscard]] std::size_t size() const noexcept { return size_; }

    // Bytes held (slots and arena), for memory reports.
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
        return slots_.capacity() * sizeof(slot) + tags_.capacity() + arena_.capacity();
    }

    // Visits every (key, id); order unspecified.
    template <class F>
    void for_each(F&& f) const {
        for (const slot& s : slots_) {
            if (!s.is_empty()) {
                f(key_of(s), s.id_length >> 8);
            }
        }
    }

  private:
    static constexpr std::uint32_t empty = 0xffffffffU;
    static constexpr std::uint32_t long_key = 255;  // length byte meaning "length in the arena"
    struct slot {
        std::uint32_t offset = 0;         // of the key in the arena
        std::uint32_t id_length = empty;  // id << 8 | min(length, 255); `empty` when free
        [[nodiscard]] bool is_empty() const noexcept { return id_length == empty; }
    };
    static_assert(sizeof(slot) == 8);

    // 0 = free; otherwise the top 7 bits of the hash with the high bit set (the low bits pick
    // the slot, so the tag adds information).
    static std::uint8_t tag_of(std::uint64_t h) noexcept {
        return static_cast<std::uint8_t>(0x80U | (h >> 57));
    }

    static std::size_t capacity_for(std::size_t n) {
        std::size_t cap = 16;
        while (cap * 4 < n * 5) {
            cap <<= 1;
        }
        return cap;
    }

    [[nodiscard]] std::size_t length_of(const slot& s) const noexcept {
        const std::uint32_t length = s.id_length & 0xFFU;
        if (length != long_key) {
            return length;
        }
        std::uint32_t n = 0;
        std::memcpy(&n, arena_.data() + s.offset - sizeof n, sizeof n);
        return n;
    }

    [[nodiscard]] bool matches(const slot& s, std::string_view key) const noexcept {
        return length_of(s) == key.size() &&
               same_bytes(arena_.data() + s.offset, key.data(), key.size());
    }

    [[nodiscard]] std::string_view key_of(const slot& s) const noexcept {
        return std::string_view(arena_).substr(s.offset, length_of(s));
    }

    void rehash(std::size_t cap) {
        std::vector<slot> old = std::move(slots_);
        slots_.assign(cap, slot{});
        tags_.assign(cap, 0);
        mask_ = cap - 1;
        for (const slot& s : old) {
            if (s.is_empty()) {
                continue;
            }
            const std::uint64_t h = hash_bytes(key_of(s));
            for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
                if (slots_[i].is_empty()) {
                    slots_[i] = s;
                    tags_[i] = tag_of(h);
                    break;
                }
            }
        }
    }

    std::vector<slot> slots_;
    std::vector<std::uint8_t> tags_;
    std::string arena_;
    std::size_t mask_ = 0;
    std::size_t size_ = 0;
};

// (left id, right id) -> (merge rank, merged id): the Hugging Face merges list.
class pair_map {
  public:
    struct merge {
        std::uint32_t rank;
        std::uint32_t id;
    };

    // Call before inserting (rehashes what is there). Filled up to 80%, as bytes_map.
    void reserve(std::size_t n) {
        std::size_t cap = 16;
        while (cap * 4 < n * 5) {
            cap <<= 1;
        }
        if (cap > slots_.size()) {
            rehash(cap);
        }
    }

    // Returns false if the pair was already present (the first inserted wins).
    bool insert(std::uint32_t left, std::uint32_t right, merge m) {
        if ((size_ + 1) * 5 > slots_.size() * 4) {
            rehash(slots_.size() * 2);
        }
        const std::uint64_t key = pack(left, right);
        for (std::size_t i = hash_u64(key) & mask_;; i = (i + 1) & mask_) {
            slot& s = slots_[i];
            if (s.key == empty) {
                s.key = key;
                s.value = m;
                ++size_;
                return true;
            }
            if (s.key == key) {
                return false;
            }
        }
    }

    [[nodiscard]] const merge* find(std::uint32_t left, std::uint32_t right) const noexcept {
        const std::uint64_t key = pack(left, right);
        for (std::size_t i = hash_u64(key) & mask_;; i = (i + 1) & mask_) {
            const slot& s = slots_[i];
            if (s.key == key) {
                return &s.value;
            }
            if (s.key == empty) {
                return nullptr;
            }
        }
    }

    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
        return slots_.capacity() * sizeof(slot);
    }

  private:
    static constexpr std::uint64_t empty = ~0ULL;
    struct slot {
        std::uint64_t key = empty;
        merge value{0, 0};
    };
    static std::uint64_t pack(std::uint32_t a, std::uint32_t b) noexcept {
        return (static_cast<std::uint64_t>(a) << 32) | b;
    }
    void rehash(std::size_t cap) {
        std::vector<slot> old = std::move(slots_);
        slots_.assign(cap, slot{});
        mask_ = cap - 1;
        for (const slot& item : old) {
            if (item.key == empty) {
                continue;
            }
            for (std::size_t i = hash_u64(item.key) & mask_;; i = (i + 1) & mask_) {
                if (slots_[i].key == empty) {
                    slots_[i] = item;
                    break;
                }
            }
        }
    }

    std::vector<slot> slots_{16};
    std::size_t mask_ = 15;
    std::size_t size_ = 0;
};

}  // namespace tokenmeter::tokenizer::detail
