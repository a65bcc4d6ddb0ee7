// Loaders on small hand-written tokenizer files: the encodings they define, and the errors for
// files that are missing, malformed or unsupported (each must name the file and the problem).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "tokenizer/embedded.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer_files.hpp"

using namespace tokenizer_test;

namespace {

TEST_F(TokenizerLoader, ByteLevelMerges) {
    write("bl/tokenizer.json", byte_level_tokenizer(false).dump());
    auto enc = load_ok((dir_ / "bl/tokenizer.json").string());
    ASSERT_NE(enc, nullptr);
    EXPECT_EQ(enc->name(), "bl");
    // "abc" | " abd": a+b first (rank 0), then ab+c; " abd" -> Ġ, ab, d (Ġ a has rank 2 but a
    // already merged with b).
    EXPECT_EQ(ids_of(*enc, "abc abd"), (std::vector<token_id>{257, 32, 256, 100}));
    // "bd" is in the vocab but no merge makes it.
    EXPECT_EQ(ids_of(*enc, "bd"), (std::vector<token_id>{98, 100}));
    // By default (special_tokens: match, as Hugging Face does) every added token is matched.
    EXPECT_EQ(ids_of(*enc, "<|eot|>"), (std::vector<token_id>{260}));
    EXPECT_EQ(ids_of(*enc, "a<x>b"), (std::vector<token_id>{97, 261, 98}));
    EXPECT_EQ(streamed(*enc, "x<|eot|>y<|eo", 1), ids_of(*enc, "x<|eot|>y<|eo"));
    // special_tokens: text: special added tokens are ordinary text; non-special ones still match.
    const auto as_text = tokenmeter::tokenizer::load(
        (dir_ / "bl/tokenizer.json").string(),
        tokenmeter::tokenizer::load_options{{}, true, tokenmeter::tokenizer::special_tokens::text});
    ASSERT_NE(as_text.value, nullptr) << as_text.error;
    EXPECT_EQ(as_text.special_mode, "text");
    EXPECT_EQ(ids_of(*as_text.value, "<|eot|>"),
              (std::vector<token_id>{'<', '|', 101, 111, 116, '|', '>'}));
    EXPECT_EQ(ids_of(*as_text.value, "a<x>b"), (std::vector<token_id>{97, 261, 98}));
    const std::string text = "abc abd <x><x <|eot|> bd ab  \n";
    EXPECT_EQ(streamed(*enc, text, 1), ids_of(*enc, text));
    EXPECT_EQ(streamed(*enc, text, 2), ids_of(*enc, text));
}

TEST_F(TokenizerLoader, SequenceOfSplitsLikeDeepSeekV3) {
    // Three Isolated splits in turn (digits, CJK runs, then the Llama 3 pattern): each splits
    // every piece of the previous one. Expected ids from Hugging Face tokenizers on this file.
    json j = byte_level_tokenizer(false);
    j["added_tokens"] = json::array();
    auto split = [](const std::string& re) {
        return json{{"type", "Split"},
                    {"pattern", {{"Regex", re}}},
                    {"behavior", "Isolated"},
                    {"invert", false}};
    };
    j["pre_tokenizer"]["pretokenizers"] = json::array(
        {split("\\p{N}{1,3}"), split("[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"),
         split("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
               "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
         json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}});
    const std::string path = write("ds.json", j.dump());
    auto enc = load_ok(path);
    ASSERT_NE(enc, nullptr);
    const std::vector<std::pair<std::string, std::vector<token_id>>> cases = {
        {"ab12345ab日本abc abc",
         {256, 49, 50, 51, 52, 53, 256, 230, 151, 165, 230, 156, 172, 257, 32, 257}},
        {"x1ab ab日本語ab  abc",
         {120, 49, 256, 32, 256, 230, 151, 165, 230, 156, 172, 232, 170, 158, 256, 32, 32, 257}},
        {"abc日ab本 ab1234abc",
         {257, 230, 151, 165, 256, 230, 156, 172, 32, 256, 49, 50, 51, 52, 257}},
    };
    for (const auto& [text, expected] : cases) {
        EXPECT_EQ(ids_of(*enc, text), expected) << text;
        for (unsigned seed = 0; seed < 16; ++seed) {
            EXPECT_EQ(streamed(*enc, text, seed), expected) << text << " seed " << seed;
        }
    }
}

TEST_F(TokenizerLoader, ByteLevelIgnoreMerges) {
    write("tokenizer.json", byte_level_tokenizer(true).dump());
    auto enc = load_ok((dir_ / "tokenizer.json").string());
    ASSERT_NE(enc, nullptr);
    EXPECT_EQ(ids_of(*enc, "bd"), (std::vector<token_id>{259}));  // a whole-piece vocab hit
}


TEST_F(TokenizerLoader, SentencePieceStyle) {
    write("sp/tokenizer.json", sentencepiece_tokenizer().dump());
    auto enc = load_ok((dir_ / "sp/tokenizer.json").string());
    ASSERT_NE(enc, nullptr);
    EXPECT_EQ(ids_of(*enc, "ab ab"), (std::vector<token_id>{262, 262}));
    EXPECT_EQ(ids_of(*enc, "abc"), (std::vector<token_id>{262, 1 + 'c'}));  // c: byte fallback
    EXPECT_EQ(ids_of(*enc, "é"), (std::vector<token_id>{257, 1 + 0xC3, 1 + 0xA9}));
    EXPECT_EQ(ids_of(*enc, ""), (std::vector<token_id>{}));
    const std::string text = "ab ab  abba a\xc3\xa9 b ab";
    for (unsigned seed = 0; seed < 8; ++seed) {
        EXPECT_EQ(streamed(*enc, text, seed), ids_of(*enc, text)) << seed;
    }
}

TEST_F(TokenizerLoader, MetaspacePreTokenizer) {
    // Expected ids from Hugging Face tokenizers (@anush008/tokenizers) on the same files.
    json j = sentencepiece_tokenizer();
    j["normalizer"] = nullptr;
    j["model"]["vocab"]["b\u2581"] = 263;
    j["model"]["merges"].push_back("b \u2581");
    struct variant {
        std::string scheme;
        bool split;
        std::vector<std::vector<token_id>> expected;  // for the texts below
    };
    const std::vector<std::string> texts = {"ab ab", " ab", "a ab", "ab  ab", "abc", "b ab"};
    const std::vector<variant> variants = {
        {"first",
         true,
         {{262, 262}, {262}, {260, 262}, {262, 257, 262}, {262, 100}, {257, 259, 262}}},
        {"always",
         false,
         {{262, 262}, {262}, {260, 262}, {262, 257, 262}, {262, 100}, {257, 259, 262}}},
        {"never", true, {{261, 262}, {262}, {258, 262}, {261, 257, 262}, {261, 100}, {259, 262}}},
    };
    for (const auto& v : variants) {
        j["pre_tokenizer"] = {{"type", "Metaspace"},
                              {"replacement", "\u2581"},
                              {"prepend_scheme", v.scheme},
                              {"split", v.split}};
        const std::string path = write("ms_" + v.scheme + ".json", j.dump());
        auto enc = load_ok(path);
        ASSERT_NE(enc, nullptr);
        for (std::size_t i = 0; i < texts.size(); ++i) {
            EXPECT_EQ(ids_of(*enc, texts[i]), v.expected[i]) << v.scheme << ": " << texts[i];
            EXPECT_EQ(streamed(*enc, texts[i], static_cast<unsigned>(i)), v.expected[i])
                << v.scheme;
        }
    }
}

TEST_F(TokenizerLoader, TiktokenRankFile) {
    // A classic .tiktoken file: base64 token, space, rank. Found by name in the search dir.
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    auto encode64 = [](const std::string& in) {
        std::string out;
        std::size_t i = 0;
        for (; i + 2 < in.size(); i += 3) {
            const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                               (static_cast<unsigned char>(in[i + 1]) << 8) |
                               static_cast<unsigned char>(in[i + 2]);
            out += {b64[v >> 18], b64[(v >> 12) & 63], b64[(v >> 6) & 63], b64[v & 63]};
        }
        if (in.size() - i == 1) {
            const unsigned v = static_cast<unsigned char>(in[i]) << 16;
            out += {b64[v >> 18], b64[(v >> 12) & 63], '=', '='};
        } else if (in.size() - i == 2) {
            const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                               (static_cast<unsigned char>(in[i + 1]) << 8);
            out += {b64[v >> 18], b64[(v >> 12) & 63], b64[(v >> 6) & 63], '='};
        }
        return out;
    };
    std::string file;
    for (int b = 0; b < 256; ++b) {
        file += encode64(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
    }
    file += encode64("he") + " 256\n" + encode64("ll") + " 257\n" + encode64("hell") + " 258\n";
    file += encode64("hello") + " 259\n" + encode64(" w") + " 260\n";
    write("cl100k_base.tiktoken", file);
    auto enc = load_ok("cl100k_base");
    ASSERT_NE(enc, nullptr);
    EXPECT_EQ(enc->name(), "cl100k_base");
    EXPECT_EQ(ids_of(*enc, "hello world"), (std::vector<token_id>{259, 260, 'o', 'r', 'l', 'd'}));
    EXPECT_EQ(ids_of(*enc, "hellx"), (std::vector<token_id>{258, 'x'}));
}

TEST_F(TokenizerLoader, MissingFileNamesWhatWasTried) {
    const std::string error = load_error("my_encoding");
    EXPECT_NE(error.find("no such file"), std::string::npos) << error;
    EXPECT_NE(error.find((dir_ / "my_encoding.json").string()), std::string::npos) << error;
    EXPECT_NE(error.find((dir_ / "my_encoding/tokenizer.json").string()), std::string::npos)
        << error;
    const std::string error2 = load_error((dir_ / "nope/tokenizer.json").string());
    EXPECT_NE(error2.find("nope/tokenizer.json"), std::string::npos) << error2;
}

TEST_F(TokenizerLoader, NotJson) {
    const std::string path = write("bad.json", "{\"model\": [1, 2");
    const std::string error = load_error(path);
    EXPECT_NE(error.find(path), std::string::npos) << error;
    EXPECT_NE(error.find("is not JSON"), std::string::npos) << error;
}

TEST_F(TokenizerLoader, UnsupportedConfigurationsAreRefused) {
    struct refused {
        std::string what;
        std::function<void(json&)> edit;
        std::string message;
    };
    const std::vector<refused> cases = {
        {"wordpiece", [](json& j) { j["model"]["type"] = "WordPiece"; },
         "model type \"WordPiece\" is not supported"},
        {"no vocab", [](json& j) { j["model"].erase("vocab"); }, "model.vocab is missing"},
        {"lowercase",
         [](json& j) {
             j["normalizer"] = {{"type", "Lowercase"}};
         },
         "normalizer \"Lowercase\" is not supported"},
        {"metaspace",
         [](json& j) {
             j["pre_tokenizer"] = {{"type", "UnicodeScripts"}};
         },
         "pre_tokenizer \"UnicodeScripts\" is not supported"},
        {"split merged",
         [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "MergedWithPrevious"; },
         "behavior \"MergedWithPrevious\" is not supported"},
        {"lookbehind",
         [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(?<=a)b|."; },
         "looks behind"},
        {"bad regex",
         [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(a"; },
         "does not compile"},
        {"dropout", [](json& j) { j["model"]["dropout"] = 0.1; }, "dropout"},
        {"merge of unknown token", [](json& j) { j["model"]["merges"].push_back("q zz"); },
         "not in the vocab"},
        {"normalized added token after NFC",
         [](json& j) {
             j["normalizer"] = {{"type", "NFC"}};
             j["added_tokens"][1]["normalized"] = true;
         },
         "is matched after normalization"},
    };
    for (const auto& c : cases) {
        json j = byte_level_tokenizer(false);
        c.edit(j);
        const std::string path = write(c.what + ".json", j.dump());
        const std::string error = load_error(path);
        EXPECT_NE(error.find(path), std::string::npos) << c.what << ": " << error;
        EXPECT_NE(error.find(c.message), std::string::npos) << c.what << ": " << error;
    }
}

}  // namespace

// o200k_base and cl100k_base need no file: with none in the search path the built-in table is
// used, and it encodes as tiktoken does (ids from tiktoken 1.0.22's encode_ordinary).
TEST_F(TokenizerLoader, BuiltInTablesNeedNoFile) {
    for (const auto& [name, text, ids] :
         std::vector<std::tuple<std::string, std::string, std::vector<token_id>>>{
             {"o200k_base", "hello world", {24912, 2375}},
             {"cl100k_base", "hello world", {15339, 1917}},
             {"o200k_base", "<|endoftext|>", {27, 91, 419, 1440, 919, 91, 29}},
         }) {
        const auto result = tokenmeter::tokenizer::load(
            name, tokenmeter::tokenizer::load_options{{dir_.string()}, true});
        ASSERT_NE(result.value, nullptr) << result.error;
        EXPECT_TRUE(result.embedded());
        EXPECT_EQ(result.value->name(), name);
        EXPECT_EQ(ids_of(*result.value, text), ids) << name << ": " << text;
    }
}

namespace {

// Pages of [data, data + size) that lie wholly inside it and are mapped in this process now
// (bit 63 of /proc/self/pagemap, readable without privileges); -1 if pagemap cannot be read.
int present_pages(std::string_view range) {
    const long page = ::sysconf(_SC_PAGESIZE);
    const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || page <= 0) {
        return -1;
    }
    const auto size = static_cast<std::uintptr_t>(page);
    const auto begin = reinterpret_cast<std::uintptr_t>(range.data());
    int present = 0;
    for (std::uintptr_t p = (begin + size - 1) / size * size; p + size <= begin + range.size();
         p += size) {
        std::uint64_t entry = 0;
        if (::pread(fd, &entry, sizeof entry, static_cast<off_t>(p / size * sizeof entry)) !=
            static_cast<ssize_t>(sizeof entry)) {
            ::close(fd);
            return -1;
        }
        present += static_cast<int>(entry >> 63U);
    }
    ::close(fd);
    return present;
}

}  // namespace

// The compressed table is read once, to build the encoder; its pages are then given back to the
// kernel (they would stay resident for nothing), and a later load reads them again from the
// binary, unchanged.
TEST_F(TokenizerLoader, BuiltInTableGivesItsCompressedPagesBack) {
    const std::string_view blob = tokenmeter::tokenizer::detail::embedded_blob("cl100k_base");
    ASSERT_GT(blob.size(), 100000U);
    const std::size_t digest = std::hash<std::string_view>{}(blob);  // reads every page
    ASSERT_GT(present_pages(blob), 100);
    const tokenmeter::tokenizer::load_options options{{dir_.string()}, true};
    const auto first = tokenmeter::tokenizer::load("cl100k_base", options);
    ASSERT_NE(first.value, nullptr) << first.error;
    EXPECT_EQ(present_pages(blob), 0);
    EXPECT_EQ(std::hash<std::string_view>{}(blob), digest);
    const auto second = tokenmeter::tokenizer::load("cl100k_base", options);
    ASSERT_NE(second.value, nullptr) << second.error;
    EXPECT_EQ(ids_of(*second.value, "hello world"), (std::vector<token_id>{15339, 1917}));
}

TEST_F(TokenizerLoader, BuiltInTablesCanBeTurnedOff) {
    const auto result = tokenmeter::tokenizer::load(
        "o200k_base", tokenmeter::tokenizer::load_options{{dir_.string()}, false});
    EXPECT_EQ(result.value, nullptr);
    EXPECT_NE(result.error.find("no such file"), std::string::npos) << result.error;
}

// The search path is tried in order and the first file found wins over later directories and
// over the built-in table; every file looked for is reported.
TEST_F(TokenizerLoader, SearchPathInOrderFileBeatsBuiltIn) {
    std::string ranks;
    const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int b = 0; b < 256; ++b) {
        ranks += std::string{b64[b >> 2], b64[(b & 3) << 4], '=', '='} + " " +
                 std::to_string(b) + "\n";
    }
    write("second/o200k_base.tiktoken", ranks + "aGk= 300\n");  // "hi" -> 300
    write("third/o200k_base.tiktoken", ranks + "aGk= 400\n");   // "hi" -> 400
    const std::string first = (dir_ / "first").string();
    const std::string second = (dir_ / "second").string();
    const std::string third = (dir_ / "third").string();
    const auto result = tokenmeter::tokenizer::load(
        "o200k_base", tokenmeter::tokenizer::load_options{{first, second, third}, true});
    ASSERT_NE(result.value, nullptr) << result.error;
    EXPECT_EQ(result.source, second + "/o200k_base.tiktoken");
    EXPECT_FALSE(result.embedded());
    EXPECT_EQ(ids_of(*result.value, "hi"), (std::vector<token_id>{300}));
    EXPECT_EQ(result.tried.size(), 9U);
    EXPECT_EQ(result.tried.front(), first + "/o200k_base.json");
    EXPECT_EQ(result.tried.back(), third + "/o200k_base/tokenizer.json");
}

TEST_F(TokenizerLoader, NoBuiltInTableForOtherNames) {
    const auto result = tokenmeter::tokenizer::load(
        "llama3", tokenmeter::tokenizer::load_options{{dir_.string()}, true});
    EXPECT_EQ(result.value, nullptr);
    EXPECT_NE(result.error.find((dir_ / "llama3/tokenizer.json").string()), std::string::npos)
        << result.error;
}

// tiktoken encodings count special-token text as text by default (encode_ordinary); with
// special_tokens: match each special token is one token, as tiktoken's encode(text, "all"):
// the built-in tables, the npm JSON's "special_tokens" and a rank file named like a built-in one.
TEST_F(TokenizerLoader, TiktokenSpecialTokensTextOrMatch) {
    using tokenmeter::tokenizer::special_tokens;
    const auto as_text = tokenmeter::tokenizer::load(
        "o200k_base", tokenmeter::tokenizer::load_options{{dir_.string()}, true, special_tokens::text});
    ASSERT_NE(as_text.value, nullptr) << as_text.error;
    EXPECT_EQ(as_text.special_mode, "text");
    EXPECT_EQ(ids_of(*as_text.value, "<|endoftext|>"),
              (std::vector<token_id>{27, 91, 419, 1440, 919, 91, 29}));
    for (const auto& [name, endoftext, endofprompt] :
         std::vector<std::tuple<std::string, token_id, token_id>>{{"o200k_base", 199999, 200018},
                                                                  {"cl100k_base", 100257, 100276}}) {
        const auto match = tokenmeter::tokenizer::load(
            name, tokenmeter::tokenizer::load_options{{dir_.string()}, true, special_tokens::match});
        ASSERT_NE(match.value, nullptr) << match.error;
        EXPECT_EQ(match.special_mode, "match");
        const encoder& enc = *match.value;
        EXPECT_EQ(ids_of(enc, "<|endoftext|>"), (std::vector<token_id>{endoftext}));
        EXPECT_EQ(ids_of(enc, "<|endofprompt|><|endoftext|>"),
                  (std::vector<token_id>{endofprompt, endoftext}));
        const std::string text = "hi<|endoftext|> there <|endoftext <|endofprompt|>";
        const std::vector<token_id> ids = ids_of(enc, text);
        EXPECT_EQ(std::count(ids.begin(), ids.end(), endoftext), 1) << name;
        EXPECT_EQ(std::count(ids.begin(), ids.end(), endofprompt), 1) << name;
        for (unsigned seed = 0; seed < 8; ++seed) {
            EXPECT_EQ(streamed(enc, text, seed), ids) << name << " seed " << seed;
        }
    }
    // The npm JSON's own special tokens.
    std::string ranks;
    const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int b = 0; b < 256; ++b) {
        ranks += std::string("x ") + std::to_string(b) + " " +
                 std::string{b64[b >> 2], b64[(b & 3) << 4], '=', '='} + "\n";
    }
    const json npm{{"pat_str", "\\S+|\\s+"},
                   {"special_tokens", {{"<eot>", 300}, {"<eot2>", 301}}},
                   {"bpe_ranks", ranks}};
    const std::string path = write("mine.json", npm.dump());
    const auto from_json = tokenmeter::tokenizer::load(
        path, tokenmeter::tokenizer::load_options{{}, true, special_tokens::match});
    ASSERT_NE(from_json.value, nullptr) << from_json.error;
    EXPECT_EQ(ids_of(*from_json.value, "a<eot2><eot>"), (std::vector<token_id>{'a', 301, 300}));
    EXPECT_EQ(ids_of(*load_ok(path), "<eot>").size(), 5U);  // default: text
}
