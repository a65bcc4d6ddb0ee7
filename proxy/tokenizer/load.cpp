// tokenizer/load: turns a spec into an encoder: a tiktoken name (looked up in the search
// directories as the tiktoken npm package's <name>.json, a <name>.tiktoken rank file or
// <name>/tokenizer.json, else built in) or a path to a file. This file finds and reads the file;
// load_tiktoken.cpp and load_hf*.cpp build the encoder, refusing every configuration they cannot
// encode exactly with a message naming the file and the offending setting.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/embedded.hpp"
#include "tokenizer/load_internal.hpp"

namespace tokenmeter::tokenizer {

namespace loader {

std::uint32_t checked_id(std::uint64_t id) {
    if (id > detail::bytes_map::max_id) {
        throw load_error{"token id " + std::to_string(id) + " is larger than " +
                         std::to_string(detail::bytes_map::max_id) + ", which is not supported"};
    }
    return static_cast<std::uint32_t>(id);
}

}  // namespace loader

namespace {

using loader::hf_document;
using loader::load_error;
using loader::special_outcome;

bool read_file(const std::string& path, std::string& out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return false;
    }
    std::ostringstream buf;
    buf << in.rdbuf();
    out = std::move(buf).str();
    return static_cast<bool>(in) || in.eof();
}

bool file_exists(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return static_cast<bool>(in);
}

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string stem_of(const std::string& path) {
    const std::size_t slash = path.find_last_of('/');
    std::string file = slash == std::string::npos ? path : path.substr(slash + 1);
    if (file == "tokenizer.json" && slash != std::string::npos && slash > 0) {
        std::string dir = path.substr(0, slash);
        const std::size_t s2 = dir.find_last_of('/');
        return s2 == std::string::npos ? dir : dir.substr(s2 + 1);
    }
    const std::size_t dot = file.find('.');
    return dot == std::string::npos ? file : file.substr(0, dot);
}

std::shared_ptr<const encoder> load_file(const std::string& path, const std::string& name,
                                         special_tokens special, special_outcome& outcome) {
    std::string text;
    if (!read_file(path, text)) {
        throw load_error{"cannot be read"};
    }
    if (ends_with(path, ".tiktoken")) {
        return loader::tiktoken_from_rank_file(text, name, special, outcome);
    }
    hf_document doc;
    loader::parse_hf_document(text, doc);
    text.clear();
    text.shrink_to_fit();
    if (!doc.dom.is_object()) {
        throw load_error{"is not a JSON object"};
    }
    if (doc.dom.contains("bpe_ranks")) {
        return loader::tiktoken_from_json(doc.dom, name, special, outcome);
    }
    return loader::hf_from_json(doc, name, special, outcome);
}

}  // namespace

load_result load(std::string_view spec, const load_options& options) {
    load_result result;
    const std::string s(spec);
    std::string name;
    const bool bare =
        s.find('/') == std::string::npos && !ends_with(s, ".json") && !ends_with(s, ".tiktoken");
    if (bare) {
        for (const std::string& configured : options.search_dirs) {
            const std::string dir = configured.empty() ? std::string(".") : configured;
            for (const char* suffix : {".json", ".tiktoken", "/tokenizer.json"}) {
                std::string& path = result.tried.emplace_back(dir);
                path.append("/").append(s).append(suffix);
            }
        }
        name = s;
    } else {
        result.tried = {s};
        name = stem_of(s);
    }
    for (const std::string& path : result.tried) {
        if (!file_exists(path)) {
            continue;
        }
        try {
            special_outcome outcome;
            result.value = load_file(path, name, options.special, outcome);
            result.source = path;
            result.special_mode = std::move(outcome.mode);
            result.warnings = std::move(outcome.warnings);
            return result;
        } catch (const load_error& e) {
            result.error = path + ": " + e.message;
        } catch (const std::exception& e) {
            result.error = path + ": " + e.what();
        }
        return result;
    }
    if (bare && options.embedded && detail::is_embedded(s)) {
        special_outcome outcome;
        const bool match = loader::tiktoken_matches_special(options.special, outcome);
        result.special_mode = outcome.mode;
        result.value = detail::load_embedded(s, match, result.error);
        if (result.value) {
            result.source = "embedded";
        }
        return result;
    }
    result.error = "tokenizer \"" + s + "\": no such file (tried ";
    for (std::size_t i = 0; i < result.tried.size(); ++i) {
        result.error += (i > 0 ? ", " : "") + result.tried[i];
    }
    result.error += ")";
    return result;
}

std::shared_ptr<const encoder> load(std::string_view spec, const std::string& search_dir,
                                    std::string& error) {
    load_result result = load(spec, load_options{{search_dir}, true, special_tokens::file_default});
    error = std::move(result.error);
    return std::move(result.value);
}

}  // namespace tokenmeter::tokenizer
