// tokenizer::encoder::count_bounded: a prompt's count costs work bounded by its bytes, whatever
// its shape. The tests assert on the work done (bytes counted, chunks merged, the longest merge),
// never on time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "tokenizer/bpe.hpp"
#include "tokenizer/tokenizer.hpp"

namespace tokenmeter::tokenizer {
namespace {

// One token per byte; remembers the longest text it was asked to count.
class byte_counter final : public encoder {
  public:
    [[nodiscard]] const std::string& name() const noexcept override { return name_; }
    [[nodiscard]] std::size_t count(std::string_view text) const override {
        longest = std::max(longest, text.size());
        return text.size();
    }
    std::size_t encode_final(std::string_view, bool, std::vector<token_id>&) const override {
        return 0;
    }
    void encode_rest(std::string_view, bool, std::vector<token_id>&) const override {}
    mutable std::size_t longest = 0;

  private:
    std::string name_ = "bytes";
};

TEST(BoundedCount, OnlyTheBudgetIsCountedAndTheRestIsScaled) {
    const byte_counter enc;
    const std::string small(1000, 'x');
    auto n = enc.count_bounded(small, 1000);
    EXPECT_EQ(n.tokens, 1000U);
    EXPECT_TRUE(n.exact);

    const std::string big(std::size_t{10} << 20, 'x');
    n = enc.count_bounded(big, std::size_t{1} << 20);
    EXPECT_EQ(enc.longest, std::size_t{1} << 20);
    EXPECT_EQ(n.tokens, big.size());
    EXPECT_FALSE(n.exact);
}

// The cut falls before a UTF-8 character, never inside one.
TEST(BoundedCount, TheCountedPartEndsOnACharacter) {
    const byte_counter enc;
    std::string text;
    while (text.size() < 100) {
        text += "\xe4\xb8\xad";  // 中
    }
    EXPECT_FALSE(enc.count_bounded(text, 10).exact);
    EXPECT_EQ(enc.longest, 9U);
}

class BoundedBpe : public ::testing::TestWithParam<const char*> {
  protected:
    void SetUp() override {
        auto result = load(GetParam(), load_options{{}, true});
        ASSERT_NE(result.value, nullptr) << result.error;
        enc_ = result.value;
    }
    std::shared_ptr<const encoder> enc_;
};

// A run of one character is one pre-token of any length: it is merged in chunks of at most
// count_piece_cap bytes, and equal chunks are merged once.
TEST_P(BoundedBpe, ARunOfOneCharacterMergesTwoChunksWhateverItsLength) {
    const auto& bounds = detail::count_bounds_for_thread();
    for (const char* unit : {" ", "\n", "!", "a", "7", "\xe4\xb8\xad"}) {
        std::string text;
        const std::string u(unit);
        while (text.size() < (std::size_t{1} << 20)) {
            text += u;
        }
        const auto n = enc_->count_bounded(text, std::size_t{2} << 20);
        EXPECT_GT(n.tokens, 0U) << unit;
        EXPECT_LE(bounds.longest_chunk, encoder::count_piece_cap) << unit;
        // Digits are split in threes by the pre-tokenizer: nothing to cap.
        EXPECT_LE(bounds.chunk_merges, 2U) << unit;
        EXPECT_EQ(n.exact, u == "7") << unit;
    }
}

// The estimate of a capped piece stays close to the exact count.
TEST_P(BoundedBpe, CappedPiecesCountCloseToTheExactCount) {
    std::string spaces(std::size_t{64} * 1024, ' ');
    std::string cjk;
    for (std::uint32_t i = 0; cjk.size() < std::size_t{64} * 1024; ++i) {
        const std::uint32_t c = 0x4e00 + (i * 7919) % 3000;  // varied CJK, no spaces
        cjk += static_cast<char>(0xe0 | (c >> 12));
        cjk += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
        cjk += static_cast<char>(0x80 | (c & 0x3f));
    }
    for (const std::string* text : {&spaces, &cjk}) {
        const auto exact = static_cast<double>(enc_->count(*text));
        const auto n = enc_->count_bounded(*text, std::size_t{1} << 20);
        EXPECT_FALSE(n.exact);
        EXPECT_NEAR(static_cast<double>(n.tokens), exact, exact * 0.02 + 2);
        EXPECT_LE(detail::count_bounds_for_thread().longest_chunk, encoder::count_piece_cap);
    }
}

// Ordinary text is counted exactly, id for id the same count as count(), and only the bounded
// call caps: an exact encode on the same thread afterwards merges whole pieces.
TEST_P(BoundedBpe, OrdinaryTextIsExactAndOnlyTheBoundedCallCaps) {
    std::string words;
    while (words.size() < 200'000) {
        words += "The quick brown fox jumps over 13 lazy dogs, again and again.\n";
    }
    const auto n = enc_->count_bounded(words, std::size_t{1} << 20);
    EXPECT_TRUE(n.exact);
    EXPECT_EQ(n.tokens, enc_->count(words));
    EXPECT_EQ(detail::count_bounds_for_thread().piece_cap, 0U);
    const std::string spaces(10'000, ' ');
    EXPECT_FALSE(enc_->count_bounded(spaces, 1 << 20).exact);
    EXPECT_TRUE(enc_->count_bounded(std::string(4096, ' '), 1 << 20).exact);
}

INSTANTIATE_TEST_SUITE_P(Embedded, BoundedBpe, ::testing::Values("o200k_base", "cl100k_base"));

}  // namespace
}  // namespace tokenmeter::tokenizer
