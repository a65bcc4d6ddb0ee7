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

// A fast 64-bit hash for short byte strings (tokens are mostly < 16 bytes): 8 bytes per multiply.
inline std::uint64_t hash_bytes(std::string_view s) noexcept {
    std::uint64_t h = 0x9E3779B97F4A7C15ULL ^ (s.size() * 0xff51afd7ed558ccdULL);
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
        std::uint64_t w;
        std::memcpy(&w, s.data() + i, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
    }
    std::uint64_t w = 0;
    if (i < s.size()) {
        std::memcpy(&w, s.data() + i, s.size() - i);
    }
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

// Byte string -> id. Keys live in one arena; a slot keeps the key's first 8 bytes, so a probe
// compares without touching the arena (most tokens are at most 8 bytes long: no second cache
// miss), and longer keys only memcmp the rest when the first 8 bytes already match.
class bytes_map {
  public:
    void reserve(std::size_t n) {
        std::size_t cap = 16;
        while (cap < n * 2) {
            cap <<= 1;
        }
        if (cap > slots_.size()) {
            rehash(cap);
        }
    }

    // Returns false if the key was already present (the first id wins).
    bool insert(std::string_view key, std::uint32_t id) {
        if ((size_ + 1) * 2 > slots_.size()) {
            rehash(slots_.empty() ? 16 : slots_.size() * 2);
        }
        const std::uint64_t head = head_of(key);
        for (std::size_t i = hash_bytes(key) & mask_;; i = (i + 1) & mask_) {
            slot& s = slots_[i];
            if (s.length == empty) {
                s.head = head;
                s.offset = static_cast<std::uint32_t>(arena_.size());
                s.length = static_cast<std::uint32_t>(key.size());
                s.id = id;
                arena_.append(key);
                ++size_;
                return true;
            }
            if (matches(s, key, head)) {
                return false;
            }
        }
    }

    [[nodiscard]] bool find(std::string_view key, std::uint32_t& id) const noexcept {
        if (size_ == 0) {
            return false;
        }
        const std::uint64_t head = head_of(key);
        for (std::size_t i = hash_bytes(key) & mask_;; i = (i + 1) & mask_) {
            const slot& s = slots_[i];
            if (s.length == empty) {
                return false;
            }
            if (matches(s, key, head)) {
                id = s.id;
                return true;
            }
        }
    }

    [[nodiscard]] std::size_t size() const noexcept { return size_; }

    // Visits every (key, id); order unspecified.
    template <class F>
    void for_each(F&& f) const {
        for (const slot& s : slots_) {
            if (s.length != empty) {
                f(key_of(s), s.id);
            }
        }
    }

  private:
    static constexpr std::uint32_t empty = 0xffffffffU;
    struct slot {
        std::uint64_t head = 0;  // the key's first 8 bytes, zero padded
        std::uint32_t offset = 0;
        std::uint32_t length = empty;
        std::uint32_t id = 0;
    };

    static std::uint64_t head_of(std::string_view key) noexcept {
        std::uint64_t h = 0;
        std::memcpy(&h, key.data(), key.size() < 8 ? key.size() : 8);
        return h;
    }

    [[nodiscard]] bool matches(const slot& s, std::string_view key,
                               std::uint64_t head) const noexcept {
        return s.head == head && s.length == key.size() &&
               (key.size() <= 8 ||
                std::memcmp(arena_.data() + s.offset + 8, key.data() + 8, key.size() - 8) == 0);
    }

    [[nodiscard]] std::string_view key_of(const slot& s) const noexcept {
        return std::string_view(arena_).substr(s.offset, s.length);
    }

    void rehash(std::size_t cap) {
        std::vector<slot> old = std::move(slots_);
        slots_.assign(cap, slot{});
        mask_ = cap - 1;
        for (const slot& s : old) {
            if (s.length == empty) {
                continue;
            }
            for (std::size_t i = hash_bytes(key_of(s)) & mask_;; i = (i + 1) & mask_) {
                if (slots_[i].length == empty) {
                    slots_[i] = s;
                    break;
                }
            }
        }
    }

    std::vector<slot> slots_;
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

    // Call before inserting (rehashes what is there).
    void reserve(std::size_t n) {
        std::size_t cap = 16;
        while (cap < n * 2) {
            cap <<= 1;
        }
        if (cap > slots_.size()) {
            rehash(cap);
        }
    }

    // Returns false if the pair was already present (the first inserted wins).
    bool insert(std::uint32_t left, std::uint32_t right, merge m) {
        if ((size_ + 1) * 2 > slots_.size()) {
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
