// tokenizer/tables: the compact byte-string map the encoders look tokens up in. Keys that share
// their first 8 bytes, keys with NUL bytes ("a" vs "a\0"), keys of 255 bytes and more (length
// kept in the arena), growth past the 80% fill, and the id limit.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "tokenizer/tables.hpp"

namespace {

using tokenmeter::tokenizer::detail::bytes_map;

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

}  // namespace
