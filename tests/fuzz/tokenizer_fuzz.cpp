// Fuzz target for the tokenizer: any bytes, encoded whole and streamed in deltas split where the
// input says, must give the same ids, and nothing may crash. The encoders are small
// tokenizer.json files written at start-up (byte-level with added tokens and an NFC normalizer;
// byte-level with added tokens using every flag; SentencePiece-style with byte fallback and a
// Prepend normalizer, with added tokens that get a prepend after them), the built-in o200k_base
// matching its special tokens, plus the real ones named in $TOKENMETER_FUZZ_TOKENIZERS
// (comma-separated specs, looked up in $TOKENMETER_TOKENIZER_DIR).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace {

using tokenmeter::tokenizer::encoder;
using tokenmeter::tokenizer::token_id;

std::vector<std::shared_ptr<const encoder>> encoders;

std::string byte_char_json(int b) {
    int next = 256;
    for (int x = 0; x < 256; ++x) {
        const bool printable = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174;
        const int cp = printable ? x : next++;
        if (x == b) {
            char buf[16];
            std::snprintf(buf, sizeof buf, "\\u%04x", cp);
            return buf;
        }
    }
    return {};
}

// `flags`: no normalizer, and added tokens with lstrip, rstrip, single_word and normalized.
std::string byte_level_json(bool flags) {
    std::string vocab;
    for (int b = 0; b < 256; ++b) {
        vocab += "\"" + byte_char_json(b) + "\": " + std::to_string(b) + ", ";
    }
    vocab += "\"ab\": 256, \"abc\": 257, \"" + byte_char_json(' ') + "a\": 258";
    const std::string added =
        flags ? R"({"id": 259, "content": "<x>", "special": true, "lstrip": true},
                   {"id": 260, "content": "<xy>", "special": false, "rstrip": true},
                   {"id": 261, "content": "ab", "special": false, "single_word": true},
                   {"id": 262, "content": "b c", "special": false, "normalized": true},
                   {"id": 263, "content": " <|s|>", "special": true, "lstrip": true, "rstrip": true})"
              : R"({"id": 259, "content": "<x>", "special": false},
                   {"id": 260, "content": "<xy>", "special": false},
                   {"id": 261, "content": "<|s|>", "special": true})";
    return R"({"added_tokens": [)" + added + R"(],
      "normalizer": )" + (flags ? "null" : R"({"type": "NFC"})") + R"(,
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated"},
        {"type": "Split", "pattern": {"Regex": "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated"},
        {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
      "model": {"type": "BPE", "vocab": {)" +
           vocab + R"(}, "merges": ["a b", "ab c", ")" + byte_char_json(' ') + R"( a"]}})";
}

std::string sentencepiece_json() {
    std::string vocab = "\"<unk>\": 0, ";
    for (int b = 0; b < 256; ++b) {
        char name[16];
        std::snprintf(name, sizeof name, "\"<0x%02X>\": %d, ", b, b + 1);
        vocab += name;
    }
    vocab +=
        "\"\\u2581\": 257, \"a\": 258, \"b\": 259, \"\\u2581a\": 260, \"ab\": 261, "
        "\"\\u2581ab\": 262, \"\\u2581\\u2581\": 263";
    return R"({"added_tokens": [{"id": 264, "content": "<s>", "special": true},
                                {"id": 265, "content": "ab>", "special": false, "rstrip": true}],
      "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
      "pre_tokenizer": null,
      "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
        "vocab": {)" +
           vocab + R"(}, "merges": ["\u2581 a", "a b", "\u2581a b", "\u2581 \u2581"]}})";
}

void add(const std::string& spec, const std::string& dir) {
    std::string error;
    auto enc = tokenmeter::tokenizer::load(spec, dir, error);
    if (!enc) {
        std::fprintf(stderr, "tokenizer_fuzz: %s\n", error.c_str());
        std::abort();
    }
    encoders.push_back(std::move(enc));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const char* tmp = std::getenv("TMPDIR");
    const std::string base = std::string(tmp != nullptr ? tmp : "/tmp") + "/tokenmeter-fuzz-" +
                             std::to_string(static_cast<long>(::getpid()));
    const std::string byte_level = base + "-byte-level.json";
    const std::string flags = base + "-flags.json";
    const std::string sentencepiece = base + "-sentencepiece.json";
    std::ofstream(byte_level) << byte_level_json(false);
    std::ofstream(flags) << byte_level_json(true);
    std::ofstream(sentencepiece) << sentencepiece_json();
    add(byte_level, "");
    add(flags, "");
    add(sentencepiece, "");
    std::remove(byte_level.c_str());
    std::remove(flags.c_str());
    std::remove(sentencepiece.c_str());
    const auto o200k = tokenmeter::tokenizer::load(
        "o200k_base", tokenmeter::tokenizer::load_options{
                          {}, true, tokenmeter::tokenizer::special_tokens::match});
    if (!o200k.value) {
        std::fprintf(stderr, "tokenizer_fuzz: %s\n", o200k.error.c_str());
        std::abort();
    }
    encoders.push_back(o200k.value);
    if (const char* specs = std::getenv("TOKENMETER_FUZZ_TOKENIZERS"); specs != nullptr) {
        const char* dir = std::getenv("TOKENMETER_TOKENIZER_DIR");
        std::string list = specs;
        std::size_t start = 0;
        while (start <= list.size()) {
            std::size_t comma = list.find(',', start);
            if (comma == std::string::npos) {
                comma = list.size();
            }
            if (comma > start) {
                add(list.substr(start, comma - start), dir != nullptr ? dir : "");
            }
            start = comma + 1;
        }
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) {
        return 0;
    }
    // First byte: delta sizes (1..16, from a tiny generator); the rest: the text.
    std::uint32_t state = data[0];
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    for (const auto& enc : encoders) {
        std::vector<token_id> whole;
        enc->encode(text, whole);
        tokenmeter::tokenizer::stream s(*enc);
        std::vector<token_id> streamed;
        auto sink = [&](token_id id, tokenmeter::core::time_point) { streamed.push_back(id); };
        std::size_t p = 0;
        while (p < text.size()) {
            state = state * 1103515245U + 12345U;
            const std::size_t n = std::min<std::size_t>(1 + (state >> 16) % 16, text.size() - p);
            s.feed(text.substr(p, n), {}, sink);
            p += n;
        }
        s.finish({}, sink);
        if (streamed != whole) {
            std::fprintf(stderr, "tokenizer_fuzz: %s: streamed ids differ from one-shot\n",
                         enc->name().c_str());
            std::abort();
        }
        // As the meter's lanes take it: append + analyse in batches, runs of ids with their ends.
        tokenmeter::tokenizer::stream b(*enc);
        b.batch(state % 200);
        std::size_t counted = 0;
        std::uint64_t last_end = 0;
        auto runs = [&](std::uint64_t end, std::size_t count) {
            if (count == 0 || end <= last_end || end > b.appended_bytes()) {
                std::fprintf(stderr, "tokenizer_fuzz: %s: bad run (end %llu after %llu)\n",
                             enc->name().c_str(), static_cast<unsigned long long>(end),
                             static_cast<unsigned long long>(last_end));
                std::abort();
            }
            last_end = end;
            counted += count;
        };
        for (p = 0; p < text.size();) {
            state = state * 1103515245U + 12345U;
            const std::size_t n = std::min<std::size_t>(1 + (state >> 16) % 16, text.size() - p);
            b.append(text.substr(p, n));
            b.analyse(runs);
            p += n;
        }
        b.finish_pieces(runs);
        if (counted != whole.size() || b.consumed_bytes() != b.appended_bytes()) {
            std::fprintf(stderr, "tokenizer_fuzz: %s: batched count %zu, one-shot %zu\n",
                         enc->name().c_str(), counted, whole.size());
            std::abort();
        }
    }
    return 0;
}
