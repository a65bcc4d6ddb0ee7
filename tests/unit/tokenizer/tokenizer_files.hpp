// tokenizer_files: what the tokenizer loader tests share: a fixture with a temporary directory
// to write tokenizer files into, one-shot and streamed encoding, and two small hand-written
// tokenizer.json files (byte-level and SentencePiece-style BPE) that tests edit.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace tokenizer_test {

namespace fs = std::filesystem;
using nlohmann::json;
using tokenmeter::tokenizer::encoder;
using tokenmeter::tokenizer::token_id;

class TokenizerLoader : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("tokenmeter-tokenizer-test-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::string write(const std::string& name, const std::string& content) {
        const fs::path p = dir_ / name;
        fs::create_directories(p.parent_path());
        std::ofstream(p, std::ios::binary) << content;
        return p.string();
    }

    std::shared_ptr<const encoder> load_ok(const std::string& spec) {
        std::string error;
        auto enc = tokenmeter::tokenizer::load(spec, dir_.string(), error);
        EXPECT_NE(enc, nullptr) << error;
        return enc;
    }

    std::string load_error(const std::string& spec) {
        std::string error;
        auto enc = tokenmeter::tokenizer::load(spec, dir_.string(), error);
        EXPECT_EQ(enc, nullptr);
        return error;
    }

    fs::path dir_;
};

inline std::vector<token_id> ids_of(const encoder& enc, std::string_view text) {
    std::vector<token_id> ids;
    enc.encode(text, ids);
    return ids;
}

inline std::vector<token_id> streamed(const encoder& enc, std::string_view text, unsigned seed) {
    std::mt19937 rng(seed);
    tokenmeter::tokenizer::stream s(enc);
    std::vector<token_id> ids;
    auto sink = [&](token_id id, tokenmeter::core::time_point) { ids.push_back(id); };
    for (std::size_t p = 0; p < text.size();) {
        const std::size_t n = std::min<std::size_t>(1 + rng() % 4, text.size() - p);
        s.feed(text.substr(p, n), {}, sink);
        p += n;
    }
    s.finish({}, sink);
    return ids;
}

// GPT-2's byte-to-unicode alphabet, to write byte-level vocabularies.
inline std::string byte_char(int b) {
    int next = 256;
    for (int x = 0; x < 256; ++x) {
        const bool printable = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174;
        const int cp = printable ? x : next++;
        if (x == b) {
            std::string out;
            if (cp < 0x80) {
                out.push_back(static_cast<char>(cp));
            } else {
                out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
                out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
            }
            return out;
        }
    }
    return {};
}

// A byte-level BPE: ids 0..255 are the bytes; merges "a b" -> 256, "ab c" -> 257, "Ġ a" -> 258.
inline json byte_level_tokenizer(bool ignore_merges) {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) {
        vocab[byte_char(b)] = b;
    }
    vocab["ab"] = 256;
    vocab["abc"] = 257;
    vocab[byte_char(' ') + "a"] = 258;
    vocab["bd"] = 259;  // in the vocab, but no merge makes it
    return json{
        {"version", "1.0"},
        {"added_tokens", json::array({json{{"id", 260}, {"content", "<|eot|>"}, {"special", true}},
                                      json{{"id", 261},
                                           {"content", "<x>"},
                                           {"special", false},
                                           {"normalized", false},
                                           {"lstrip", false},
                                           {"rstrip", false},
                                           {"single_word", false}}})},
        {"normalizer", nullptr},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           json::array(
               {json{{"type", "Split"},
                     {"pattern", {{"Regex", " ?\\p{L}+| ?\\p{N}+|\\s+|[^\\s\\p{L}\\p{N}]+"}}},
                     {"behavior", "Isolated"},
                     {"invert", false}},
                json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
        {"decoder", {{"type", "ByteLevel"}}},
        {"model",
         {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", nullptr},
          {"ignore_merges", ignore_merges},
          {"vocab", vocab},
          {"merges", json::array({"a b", json::array({"ab", "c"}), byte_char(' ') + " a"})}}}};
}

// SentencePiece-style: "▁" for spaces, prepended; <0xAB> byte fallback.
inline json sentencepiece_tokenizer() {
    json vocab = json::object();
    vocab["<unk>"] = 0;
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        vocab[name] = b + 1;
    }
    vocab["\u2581"] = 257;
    vocab["a"] = 258;
    vocab["b"] = 259;
    vocab["\u2581a"] = 260;
    vocab["ab"] = 261;
    vocab["\u2581ab"] = 262;
    return json{
        {"added_tokens", json::array({json{{"id", 0}, {"content", "<unk>"}, {"special", true}}})},
        {"normalizer",
         {{"type", "Sequence"},
          {"normalizers", json::array({json{{"type", "Prepend"}, {"prepend", "\u2581"}},
                                       json{{"type", "Replace"},
                                            {"pattern", {{"String", " "}}},
                                            {"content", "\u2581"}}})}}},
        {"pre_tokenizer", nullptr},
        {"model",
         {{"type", "BPE"},
          {"unk_token", "<unk>"},
          {"fuse_unk", true},
          {"byte_fallback", true},
          {"vocab", vocab},
          {"merges", json::array({"\u2581 a", "a b", "\u2581a b"})}}}};
}

}  // namespace tokenizer_test
