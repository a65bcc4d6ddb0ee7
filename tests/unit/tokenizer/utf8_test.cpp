// tokenizer/utf8: utf8_repair against a byte-at-a-time statement of the same rule (every maximal
// invalid subsequence becomes one U+FFFD; without `final`, an incomplete sequence at the end is
// left unconsumed), on texts where ASCII runs of every length meet invalid and multi-byte
// sequences at every offset.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>

#include "tokenizer/utf8.hpp"

namespace {

using tokenmeter::tokenizer::detail::utf8_repair;
using tokenmeter::tokenizer::detail::utf8_sequence;

// The rule, one byte or sequence at a time.
std::size_t repair_bytewise(std::string_view in, bool final, std::string& out) {
    std::size_t i = 0;
    while (i < in.size()) {
        bool incomplete = false;
        std::size_t len = 0;
        if (utf8_sequence(in, i, incomplete, len) != 0) {
            out.append(in.substr(i, len));
            i += len;
            continue;
        }
        if (incomplete && !final) {
            return i;
        }
        out.append("\xEF\xBF\xBD");
        i += len;
    }
    return i;
}

TEST(Utf8Repair, SameAsByteAtATimeAtEveryAlignment) {
    const std::string pieces[] = {"\xff", "\xe2\x82", "\xe2\x82\xac", "\xed\xa0\x80", "\xc0\xaf",
                                  "\xf0\x9f\x98\x80", "\xf0\x9f\x98", "\xc3\xa9", "\x80"};
    std::mt19937 random(5);
    int compared = 0;
    for (std::size_t before = 0; before <= 17; ++before) {
        for (const std::string& piece : pieces) {
            for (std::size_t after = 0; after <= 17; after += 3) {
                std::string text(before, 'a');
                text += piece;
                text.append(after, 'b');
                for (const bool final : {true, false}) {
                    std::string want;
                    std::string got;
                    const std::size_t want_used = repair_bytewise(text, final, want);
                    const std::size_t got_used = utf8_repair(text, final, got);
                    ASSERT_EQ(got, want) << before << " " << after << " " << final;
                    ASSERT_EQ(got_used, want_used) << before << " " << after << " " << final;
                    ++compared;
                }
            }
        }
    }
    // Random mixes: mostly ASCII with a few high bytes anywhere.
    for (int round = 0; round < 3000; ++round) {
        std::string text;
        const std::size_t size = random() % 64;
        for (std::size_t i = 0; i < size; ++i) {
            text.push_back(random() % 8 == 0 ? static_cast<char>(0x80 + random() % 0x80)
                                             : static_cast<char>('a' + random() % 26));
        }
        for (const bool final : {true, false}) {
            std::string want;
            std::string got;
            const std::size_t want_used = repair_bytewise(text, final, want);
            ASSERT_EQ(utf8_repair(text, final, got), want_used) << round;
            ASSERT_EQ(got, want) << round;
            ++compared;
        }
    }
    EXPECT_GT(compared, 6000);
}

TEST(Utf8Repair, AsciiIsCopiedWhole) {
    const std::string text = "The quick brown fox jumps over the lazy dog, 0123456789 times.";
    std::string out;
    EXPECT_EQ(utf8_repair(text, false, out), text.size());
    EXPECT_EQ(out, text);
}

}  // namespace
