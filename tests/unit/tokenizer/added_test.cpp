// Added tokens matched in text as Hugging Face tokenizers 0.22 matches them (AddedVocabulary):
// lstrip, rstrip, single_word and normalized on small hand-written files, one-shot and streamed
// at random chunkings; and Llama 2's Prepend normalizer applied to each segment between added
// tokens. Expected ids worked out from Hugging Face's rules (the parity suite compares the same
// flags against the library itself on the corpus: tests/parity/fixtures.mjs).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.hpp"
#include "tokenizer_files.hpp"

using namespace tokenizer_test;

namespace {

json added(token_id id, const std::string& content, bool special, bool normalized) {
    return json{{"id", id},          {"content", content},    {"special", special},
                {"lstrip", false},   {"rstrip", false},       {"single_word", false},
                {"normalized", normalized}};
}

void expect_ids(const encoder& enc, const std::vector<std::pair<std::string, std::vector<token_id>>>& cases) {
    for (const auto& [text, expected] : cases) {
        EXPECT_EQ(ids_of(enc, text), expected) << "\"" << text << "\"";
        for (unsigned seed = 0; seed < 12; ++seed) {
            EXPECT_EQ(streamed(enc, text, seed), expected) << "\"" << text << "\" seed " << seed;
        }
    }
}

// byte_level_tokenizer: ids 0..255 are the bytes (pieces " ?\p{L}+| ?\p{N}+|\s+|[^\s\p{L}\p{N}]+"),
// 256 "ab", 257 "abc", 258 " a", 260 <|eot|>, 261 <x>; plus the tokens below.
json flagged_byte_level() {
    json j = byte_level_tokenizer(false);
    json l = added(262, "<l>", true, false);
    l["lstrip"] = true;
    json r = added(263, "<r>", true, false);
    r["rstrip"] = true;
    json w = added(264, "<w>", true, false);
    w["single_word"] = true;
    j["added_tokens"].push_back(l);
    j["added_tokens"].push_back(r);
    j["added_tokens"].push_back(w);
    j["added_tokens"].push_back(added(265, "hi", false, true));  // matched in each segment
    return j;
}

TEST_F(TokenizerLoader, AddedTokenLstripTakesTheWhitespaceBefore) {
    auto enc = load_ok(write("l.json", flagged_byte_level().dump()));
    ASSERT_NE(enc, nullptr);
    expect_ids(*enc, {
                         {"a  <l>b", {'a', 262, 'b'}},
                         {"a\t\u3000<l>", {'a', 262}},
                         // never before the end of the previous match
                         {"<x>  <l>", {261, 262}},
                         {"  <l>", {262}},
                         {"<l><l> <l>", {262, 262, 262}},
                         {"a  ", {'a', ' ', ' '}},
                     });
}

TEST_F(TokenizerLoader, AddedTokenRstripTakesTheWhitespaceAfter) {
    auto enc = load_ok(write("r.json", flagged_byte_level().dump()));
    ASSERT_NE(enc, nullptr);
    expect_ids(*enc, {
                         {"<r> \n b", {263, 'b'}},
                         {"<r>   ", {263}},
                         {"<r><r>", {263, 263}},
                         {"a <r>  <l>", {'a', ' ', 263, 262}},
                     });
}

TEST_F(TokenizerLoader, AddedTokenSingleWordOnlyBetweenNonWordCharacters) {
    auto enc = load_ok(write("w.json", flagged_byte_level().dump()));
    ASSERT_NE(enc, nullptr);
    expect_ids(*enc, {
                         {"<w>", {264}},
                         {" <w> ", {' ', 264, ' '}},
                         {"<w>.", {264, '.'}},
                         {"a<w>", {'a', '<', 'w', '>'}},
                         {"<w>_", {'<', 'w', '>', '_'}},  // '_' is a word character
                         {"9<w>", {'9', '<', 'w', '>'}},
                     });
    // Unicode word characters: a letter with a combining mark, a CJK ideograph.
    for (const std::string text : {"\xc3\xa9<w>", "<w>\xe6\x97\xa5", "e\xcc\x81<w>"}) {
        const std::vector<token_id> ids = ids_of(*enc, text);
        EXPECT_EQ(std::count(ids.begin(), ids.end(), 264U), 0) << text;
        EXPECT_EQ(streamed(*enc, text, 1), ids) << text;
    }
}

TEST_F(TokenizerLoader, AddedTokenNormalizedIsMatchedInEachSegment) {
    auto enc = load_ok(write("n.json", flagged_byte_level().dump()));
    ASSERT_NE(enc, nullptr);
    expect_ids(*enc, {
                         {"hi<x>hi", {265, 261, 265}},
                         {"this", {'t', 265, 's'}},
                         {"h<x>i", {'h', 261, 'i'}},
                     });
}

// Two ways a later token can overlap an earlier match, both as Hugging Face resolves them: a
// token that starts inside the whitespace an rstrip token took is matched too; a dropped
// single_word match hides a token that starts inside it. A stream cut between them must not
// change either.
TEST_F(TokenizerLoader, AddedTokenOverlapsStreamAsWhole) {
    json j = flagged_byte_level();
    j["added_tokens"].push_back(added(266, "\nxyz", false, false));
    j["added_tokens"].push_back(added(267, "w>", false, false));
    json s = added(268, " <|s|>", true, false);  // the tokenizer_fuzz target found this one
    s["lstrip"] = true;
    s["rstrip"] = true;
    j["added_tokens"].push_back(s);
    auto enc = load_ok(write("o.json", j.dump()));
    ASSERT_NE(enc, nullptr);
    expect_ids(*enc, {
                         {"<r> \nxyz", {263, 266}},
                         {"<r> \nxy", {263, 'x', 'y'}},  // the rstrip took the newline
                         {"a<w>b", {'a', '<', 'w', '>', 'b'}},
                         {"a w>", {'a', ' ', 267}},
                         {"xy <|s|> <|s|> o", {'x', 'y', 268, 268, 'o'}},
                         {"xy <|s|> <|s|>", {'x', 'y', 268, 268}},
                         {" <|s|> <|s|> <", {268, 268, '<'}},
                     });
}

// A normalized token needs the segment as the normalizer leaves it, which the engine has only
// without a normalizer; with one it is refused, not miscounted (special_tokens: text avoids it
// for special tokens).
TEST_F(TokenizerLoader, AddedTokenNormalizedWithANormalizerIsRefused) {
    json j = flagged_byte_level();
    j["normalizer"] = {{"type", "NFC"}};
    const std::string error = load_error(write("nfc.json", j.dump()));
    EXPECT_NE(error.find("\"hi\" is matched after normalization"), std::string::npos) << error;
}

// Llama 2: Prepend("▁") + Replace(" ", "▁"). Hugging Face normalizes each segment between added
// tokens on its own, so every segment gets its "▁".
TEST_F(TokenizerLoader, PrependNormalizerAppliesToEachSegment) {
    json j = sentencepiece_tokenizer();  // ▁ 257, a 258, b 259, ▁a 260, ab 261, ▁ab 262
    j["added_tokens"].push_back(added(263, "<x>", true, false));
    const auto result = tokenmeter::tokenizer::load(
        write("sp.json", j.dump()), tokenmeter::tokenizer::load_options{{}, true});
    ASSERT_NE(result.value, nullptr) << result.error;
    EXPECT_EQ(result.special_mode, "match");
    EXPECT_TRUE(result.warnings.empty());
    expect_ids(*result.value, {
                                  {"ab<x>ab", {262, 263, 262}},
                                  {"<x> ab", {263, 257, 262}},
                                  {"<x>", {263}},
                                  {"ab<x>", {262, 263}},
                                  {"<x><x>ab", {263, 263, 262}},
                                  {"ab ab<x>", {262, 262, 263}},
                              });
}

// The stream must stop only where the rest of the text cannot change a decision already taken
// (whitespace an lstrip token may still take, a word character a single_word token must see, a
// segment start after a token that gets its own prepend): random text made of the pieces that
// matter, streamed at random chunkings, gives the one-shot ids.
TEST_F(TokenizerLoader, AddedTokensStreamAsTheyEncodeWhole) {
    json sp = sentencepiece_tokenizer();
    json l = added(263, "<l>", true, false);
    l["lstrip"] = true;
    json w = added(264, "<w>", false, false);
    w["single_word"] = true;
    w["rstrip"] = true;
    sp["added_tokens"].push_back(l);
    sp["added_tokens"].push_back(w);
    sp["added_tokens"].push_back(added(265, "<x>", true, false));
    const std::vector<std::shared_ptr<const encoder>> encoders = {
        load_ok(write("bl.json", flagged_byte_level().dump())), load_ok(write("sp.json", sp.dump()))};
    const std::vector<std::string> pieces = {"<l>", "<r>", "<w>", "<x>", "hi", "h", "i", " ",
                                             "  ",  "\n",  "\t",  "a",   "b",  "_", "\xc3\xa9",
                                             "<",   "w",   ">",   "9",   ".",  "\xe3\x80\x80"};
    std::mt19937 rng(7);
    for (int round = 0; round < 3000; ++round) {
        std::string text;
        const int n = 1 + static_cast<int>(rng() % 12);
        for (int i = 0; i < n; ++i) {
            text += pieces[rng() % pieces.size()];
        }
        for (const auto& enc : encoders) {
            ASSERT_NE(enc, nullptr);
            const std::vector<token_id> whole = ids_of(*enc, text);
            for (unsigned seed = 0; seed < 3; ++seed) {
                ASSERT_EQ(streamed(*enc, text, seed), whole) << "\"" << text << "\" seed " << seed;
            }
        }
    }
}

}  // namespace
