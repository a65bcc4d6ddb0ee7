// tokenizer/load_internal: what the loader's translation units share (load*.cpp): the error
// they throw, what they learn about added tokens, and each file type's entry point.
// Exceptions are fine here: loading happens at start-up, never on the data plane.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/encoders.hpp"
#include "tokenizer/tokenizer.hpp"

namespace tokenmeter::tokenizer::loader {

// A load failure: the message names what is wrong; the caller prefixes the file.
struct load_error {
    std::string message;
};

// What the loaders learn about added tokens, for load_result.
struct special_outcome {
    std::string mode;  // "match" or "text"
    std::vector<std::string> warnings;
};

// The tables hold ids below 2^24 (tables.hpp); every published vocabulary fits.
std::uint32_t checked_id(std::uint64_t id);

// load_tiktoken.cpp. The tiktoken npm package's encoders/<name>.json, and a classic .tiktoken
// rank file ("<base64 token> <rank>" per line; only cl100k_base and o200k_base, whose pattern
// and special tokens are known by name).
std::shared_ptr<const encoder> tiktoken_from_json(const nlohmann::json& j, std::string name,
                                                  special_tokens special, special_outcome& outcome);
std::shared_ptr<const encoder> tiktoken_from_rank_file(const std::string& text, std::string name,
                                                       special_tokens special,
                                                       special_outcome& outcome);
// What special_tokens means for a tiktoken encoding: text unless asked to match.
bool tiktoken_matches_special(special_tokens special, special_outcome& outcome);

// load_hf_json.cpp. A tokenizer.json read with the SAX parser: model.vocab and model.merges
// (hundreds of thousands of entries) go straight into flat vectors instead of a DOM of std::map
// nodes, which made them most of the load time and a peak of several times the file's size;
// everything else becomes an ordinary DOM, where model.vocab is left as an empty object and
// model.merges as an empty array.
// NOLINTNEXTLINE(bugprone-exception-escape): json() is noexcept, its throw unreachable
struct hf_document {
    nlohmann::json dom;
    bool has_vocab = false;   // model.vocab was an object
    bool has_merges = false;  // model.merges was an array
    std::vector<std::pair<std::string, std::uint64_t>> vocab;
    std::string bad_vocab_key;  // the first entry whose value is not a non-negative integer
    bool bad_vocab = false;
    std::vector<std::pair<std::string, std::string>> merges;
    std::size_t bad_merge = 0;  // index of the first entry that is not "a b" or [a, b]
    std::string bad_merge_text;
    bool bad_merges = false;
};
// Throws load_error if `text` is not JSON.
void parse_hf_document(const std::string& text, hf_document& doc);

// load_hf_steps.cpp: the normalizer and pre-tokenizer, refusing what the engine cannot encode
// exactly.
std::string type_of(const nlohmann::json& j);
void parse_normalizer(const nlohmann::json& n, detail::hf_model& m);
void parse_pre_tokenizer(const nlohmann::json& p, detail::hf_model& m, bool& byte_level,
                         bool& saw_space_split);

// load_hf.cpp: the model (vocab, merges) and the added tokens.
std::shared_ptr<const encoder> hf_from_json(const hf_document& doc, std::string name,
                                            special_tokens special, special_outcome& outcome);

}  // namespace tokenmeter::tokenizer::loader
