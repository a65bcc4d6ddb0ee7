// tokenizer/load_tiktoken: tiktoken encodings from files: the tiktoken npm package's
// encoders/<name>.json and classic .tiktoken rank files, whose tokens are base64 (decoded with
// OpenSSL's EVP_DecodeBlock).
#include <openssl/evp.h>

#include <string>
#include <utility>
#include <vector>

#include "tokenizer/embedded.hpp"
#include "tokenizer/load_internal.hpp"
#include "tokenizer/regex_ascii.hpp"

namespace tokenmeter::tokenizer::loader {

using detail::bytes_map;
using nlohmann::json;

namespace {

// Standard, padded base64 (what tiktoken writes). EVP_DecodeBlock decodes whole 4-character
// groups and counts padding as output bytes, so the '=' are subtracted; unpadded input is padded
// first, as the decoder this replaced accepted it.
bool base64_decode(std::string_view in, std::string& out) {
    std::string padded;
    if (in.size() % 4 != 0) {
        if (in.size() % 4 == 1) {
            return false;
        }
        padded.assign(in);
        padded.append(4 - in.size() % 4, '=');
        in = padded;
    }
    std::size_t pad = 0;
    while (pad < 2 && pad < in.size() && in[in.size() - 1 - pad] == '=') {
        ++pad;
    }
    if (in.find_first_of("= \t\r\n") < in.size() - pad) {
        return false;  // EVP_DecodeBlock skips surrounding whitespace; a token has none
    }
    out.resize(in.size() / 4 * 3);
    if (in.empty()) {
        return true;
    }
    const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(in.data()),
                                  static_cast<int>(in.size()));
    if (n < 0 || static_cast<std::size_t>(n) != out.size()) {
        return false;
    }
    out.resize(out.size() - pad);
    return true;
}

std::string_view pattern_for(std::string_view name) {
    // tiktoken's published patterns, for .tiktoken rank files (which carry no pattern).
    if (name == "cl100k_base") {
        return detail::cl100k_pattern;
    }
    if (name == "o200k_base") {
        return detail::o200k_pattern;
    }
    return {};
}

std::shared_ptr<const encoder> make_tiktoken(
    std::string name, std::string_view pattern, bytes_map ranks,
    const std::vector<std::pair<std::string, token_id>>& specials) {
    std::string error;
    auto enc = detail::tiktoken_encoder::create(std::move(name), pattern, std::move(ranks), error);
    if (!enc) {
        throw load_error{error};
    }
    if (!specials.empty()) {
        enc->match_special_tokens(specials);
    }
    return enc;
}

}  // namespace

// The tiktoken npm package's encoders/<name>.json: {"pat_str", "special_tokens", "bpe_ranks"},
// bpe_ranks being lines of "<ignored> <first rank> <base64 token> <base64 token> ...".
std::shared_ptr<const encoder> tiktoken_from_json(const json& j, std::string name,
                                                  special_tokens special,
                                                  special_outcome& outcome) {
    if (!j.contains("pat_str") || !j["pat_str"].is_string()) {
        throw load_error{"no \"pat_str\" string"};
    }
    if (!j.contains("bpe_ranks") || !j["bpe_ranks"].is_string()) {
        throw load_error{"no \"bpe_ranks\" string"};
    }
    const auto& ranks_text = j["bpe_ranks"].get_ref<const std::string&>();
    bytes_map ranks;
    ranks.reserve(ranks_text.size() / 8);
    std::string token;
    std::size_t line_start = 0;
    while (line_start < ranks_text.size()) {
        std::size_t line_end = ranks_text.find('\n', line_start);
        if (line_end == std::string::npos) {
            line_end = ranks_text.size();
        }
        std::string_view line(ranks_text.data() + line_start, line_end - line_start);
        line_start = line_end + 1;
        if (line.empty()) {
            continue;
        }
        std::size_t field = 0;
        std::uint32_t rank = 0;
        std::size_t p = 0;
        while (p <= line.size()) {
            std::size_t q = line.find(' ', p);
            if (q == std::string_view::npos) {
                q = line.size();
            }
            const std::string_view word = line.substr(p, q - p);
            p = q + 1;
            if (field == 1) {
                rank = static_cast<std::uint32_t>(std::stoul(std::string(word)));
            } else if (field >= 2) {
                if (!base64_decode(word, token)) {
                    throw load_error{"bpe_ranks: bad base64 \"" + std::string(word) + "\""};
                }
                ranks.insert(token, checked_id(rank++));
            }
            ++field;
        }
    }
    if (ranks.size() == 0) {
        throw load_error{"bpe_ranks is empty"};
    }
    std::vector<std::pair<std::string, token_id>> specials;
    if (tiktoken_matches_special(special, outcome)) {
        if (!j.contains("special_tokens") || !j["special_tokens"].is_object()) {
            throw load_error{"special_tokens: match needs a \"special_tokens\" object"};
        }
        for (const auto& [content, id] : j["special_tokens"].items()) {
            if (!id.is_number_unsigned()) {
                throw load_error{"special_tokens[\"" + content + "\"] is not a token id"};
            }
            specials.emplace_back(content, checked_id(id.get<std::uint64_t>()));
        }
    }
    return make_tiktoken(std::move(name), j["pat_str"].get_ref<const std::string&>(),
                         std::move(ranks), specials);
}

// A classic .tiktoken rank file: "<base64 token> <rank>" per line.
std::shared_ptr<const encoder> tiktoken_from_rank_file(const std::string& text, std::string name,
                                                       special_tokens special,
                                                       special_outcome& outcome) {
    const std::string_view pattern = pattern_for(name);
    if (pattern.empty()) {
        throw load_error{
            "a .tiktoken rank file has no pattern; only cl100k_base and o200k_base "
            "are known by name (use the tiktoken npm JSON instead)"};
    }
    bytes_map ranks;
    std::string token;
    std::size_t line_start = 0;
    std::size_t line_no = 0;
    while (line_start < text.size()) {
        std::size_t line_end = text.find('\n', line_start);
        if (line_end == std::string::npos) {
            line_end = text.size();
        }
        const std::string_view line(text.data() + line_start, line_end - line_start);
        line_start = line_end + 1;
        ++line_no;
        if (line.empty()) {
            continue;
        }
        const std::size_t space = line.find(' ');
        if (space == std::string_view::npos || !base64_decode(line.substr(0, space), token)) {
            throw load_error{"line " + std::to_string(line_no) + " is not \"<base64> <rank>\""};
        }
        ranks.insert(token, checked_id(std::stoul(std::string(line.substr(space + 1)))));
    }
    std::vector<std::pair<std::string, token_id>> specials;
    if (tiktoken_matches_special(special, outcome)) {
        specials = detail::builtin_special_tokens(name);
    }
    return make_tiktoken(std::move(name), pattern, std::move(ranks), specials);
}

bool tiktoken_matches_special(special_tokens special, special_outcome& outcome) {
    // tiktoken's encode_ordinary (the default) counts special-token text as text; match is
    // encode(text, allowed_special="all").
    outcome.mode = special == special_tokens::match ? "match" : "text";
    return special == special_tokens::match;
}

}  // namespace tokenmeter::tokenizer::loader
