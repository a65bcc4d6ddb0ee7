// tokenizer/tables: the compact byte-string map the encoders look tokens up in. Keys that share
// their first 8 bytes, keys with NUL bytes ("a" vs "a\0"), keys of 255 bytes and more (length
// kept in the arena), growth past the 80% fill, and the id limit.
#include "tokenizer/tables.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <map>
#include <random>
#include <string>

#include "tokenizer/piece_cache.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

using tokenmeter::tokenizer::detail::bytes_map;
using tokenmeter::tokenizer::detail::hash_bytes;
using tokenmeter::tokenizer::detail::load_upto8;
using tokenmeter::tokenizer::detail::piece_cache;

TEST(BytesMap, FindsEveryKeyItHoldsAndNothingElse) {
    std::mt19937 rng(7);
    std::map<std::string, std::uint32_t> want;
    const std::vector<std::size_t> lengths = {0, 1, 2, 7, 8, 9, 16, 254, 255, 256, 1000};
    for (std::uint32_t id = 0; id < 20000; ++id) {
        std::string key(lengths[id % lengths.size()], '\0');
        for (char& c : key) {
            c = static_cast<char>(rng() % 4);  // few letters: many shared prefixes
        }
        want.emplace(key, id);
    }
    want.emplace(std::string("a"), 900001);
    want.emplace(std::string("a\0", 2), 900002);
    want.emplace(std::string("a\0\0\0\0\0\0\0\0", 9), 900003);
    bytes_map map;  // no reserve: grows by rehashing
    for (const auto& [key, id] : want) {
        EXPECT_TRUE(map.insert(key, id));
    }
    EXPECT_EQ(map.size(), want.size());
    for (const auto& [key, id] : want) {
        std::uint32_t got = 0;
        ASSERT_TRUE(map.find(key, got)) << key.size();
        EXPECT_EQ(got, id);
        EXPECT_FALSE(map.insert(key, id + 1)) << "the first id wins";
        ASSERT_TRUE(map.find(key, got));
        EXPECT_EQ(got, id);
        std::string other = key + "x";
        if (want.count(other) == 0) {
            EXPECT_FALSE(map.find(other, got));
        }
    }
    std::size_t visited = 0;
    map.for_each([&](std::string_view key, std::uint32_t id) {
        ++visited;
        EXPECT_EQ(want.at(std::string(key)), id);
    });
    EXPECT_EQ(visited, want.size());
}

TEST(BytesMap, IdsAboveTheLimitAreRefused) {
    bytes_map map;
    EXPECT_TRUE(map.insert("max", bytes_map::max_id));
    EXPECT_FALSE(map.insert("over", bytes_map::max_id + 1));
    std::uint32_t got = 0;
    ASSERT_TRUE(map.find("max", got));
    EXPECT_EQ(got, bytes_map::max_id);
    EXPECT_FALSE(map.find("over", got));
}

TEST(BytesMap, ReserveFillsToEightyPercent) {
    bytes_map map;
    map.reserve(200000);  // o200k_base: 2^18 slots of 16 bytes and their tags
    EXPECT_LE(map.memory_bytes(), (std::size_t{1} << 18) * (16 + 1) + 64);  // slots + tags
}

TEST(HashBytes, TheShortLoadIsTheZeroPaddedWord) {
    // load_upto8 replaces a variable-length memcpy into a zeroed word: every length, bytes with
    // the high bit set and zero bytes included.
    std::mt19937 rng(3);
    for (int round = 0; round < 200; ++round) {
        std::array<char, 16> bytes{};
        for (char& c : bytes) {
            c = static_cast<char>(rng() % 3 == 0 ? 0 : rng());
        }
        for (std::size_t n = 0; n <= 16; ++n) {
            std::uint64_t want = 0;
            std::memcpy(&want, bytes.data(), n < 8 ? n : 8);
            EXPECT_EQ(load_upto8(bytes.data(), n), want) << n;
        }
    }
    // Strings that differ only in length or in a late byte hash apart.
    EXPECT_NE(hash_bytes(std::string_view("a")), hash_bytes(std::string_view("a\0", 2)));
    EXPECT_NE(hash_bytes("abcdefghi"), hash_bytes("abcdefghj"));
    EXPECT_NE(hash_bytes("abcdefg"), hash_bytes("abcdefh"));
}

TEST(PieceCache, TwoEncodersOnTheSameTextKeepTheirOwnEntries) {
    // The native and the reference tokenizer of one stream look up the same pieces; each must
    // find its own ids again (before, both mapped a piece to one slot and evicted each other).
    auto& cache = piece_cache::for_thread();
    const std::uint64_t a = piece_cache::new_owner();
    const std::uint64_t b = piece_cache::new_owner();
    const std::vector<std::string> pieces = {" the", " quick", " brown", " fox", "ing", "\n\n"};
    for (const auto& p : pieces) {
        const tokenmeter::tokenizer::token_id ida[] = {1, 2};
        const tokenmeter::tokenizer::token_id idb[] = {7};
        cache.store(a, p, hash_bytes(p), ida, 2);
        cache.store(b, p, hash_bytes(p), idb, 1);
    }
    int both = 0;
    for (const auto& p : pieces) {
        std::vector<tokenmeter::tokenizer::token_id> got_a;
        std::vector<tokenmeter::tokenizer::token_id> got_b;
        const bool hit_a = cache.lookup(a, p, hash_bytes(p), got_a);
        const bool hit_b = cache.lookup(b, p, hash_bytes(p), got_b);
        if (hit_a) {
            EXPECT_EQ(got_a, (std::vector<tokenmeter::tokenizer::token_id>{1, 2}));
        }
        if (hit_b) {
            EXPECT_EQ(got_b, (std::vector<tokenmeter::tokenizer::token_id>{7}));
        }
        both += hit_a && hit_b ? 1 : 0;
    }
    // Direct-mapped: another piece may share a slot by chance, but not every one of these.
    EXPECT_GE(both, 5);
}

TEST(PieceCache, APieceWithTheSameHashAndLengthButOneOtherByteMisses) {
    // lookup compares the bytes (as words up to 16 bytes, then memcmp): a piece that differs
    // from the stored one in any single byte must miss even when its hash is the same.
    auto& cache = piece_cache::for_thread();
    const std::uint64_t owner = piece_cache::new_owner();
    const std::string all = "abcdefghijklmnopqrstuvwxyz";
    for (std::size_t n = 1; n <= piece_cache::max_piece; ++n) {
        const std::string stored = all.substr(0, n);
        const std::uint64_t hash = 0x1234 + n;
        const tokenmeter::tokenizer::token_id ids[] = {
            static_cast<tokenmeter::tokenizer::token_id>(n)};
        cache.store(owner, stored, hash, ids, 1);
        std::vector<tokenmeter::tokenizer::token_id> got;
        ASSERT_TRUE(cache.lookup(owner, stored, hash, got)) << n;
        EXPECT_EQ(got, (std::vector<tokenmeter::tokenizer::token_id>{ids[0]}));
        for (std::size_t at = 0; at < n; ++at) {
            std::string other = stored;
            other[at] = 'Z';
            got.clear();
            EXPECT_FALSE(cache.lookup(owner, other, hash, got))
                << "length " << n << ", byte " << at;
            EXPECT_TRUE(got.empty());
        }
    }
}

TEST(PieceCache, AThreadGoneIdleGivesItsTableBackAndCountsTheSameAfter) {
    auto& cache = piece_cache::for_thread();
    const std::uint64_t owner = piece_cache::new_owner();
    const tokenmeter::tokenizer::token_id ids[] = {42};
    cache.store(owner, " the", hash_bytes(" the"), ids, 1);
    ASSERT_TRUE(cache.holds_table());
    tokenmeter::tokenizer::release_thread_caches();
    EXPECT_FALSE(cache.holds_table()) << "released";
    std::vector<tokenmeter::tokenizer::token_id> got;
    EXPECT_FALSE(cache.lookup(owner, " the", hash_bytes(" the"), got))
        << "empty: every piece misses";
    EXPECT_TRUE(got.empty());
    // An encoder over a released cache merges every piece again and gets the same ids.
    std::string error;
    const auto encoder =
        tokenmeter::tokenizer::load("o200k_base", "/nonexistent/tokenmeter-test", error);
    ASSERT_NE(encoder, nullptr) << error;
    const std::string text = "The quick brown fox jumps over the lazy dog, again and again.\n\n";
    std::vector<tokenmeter::tokenizer::token_id> warm;
    encoder->encode(text, warm);
    tokenmeter::tokenizer::release_thread_caches();
    std::vector<tokenmeter::tokenizer::token_id> cold;
    encoder->encode(text, cold);
    EXPECT_EQ(cold, warm);
    EXPECT_TRUE(cache.holds_table()) << "the next encode makes a new table";
}

}  // namespace
