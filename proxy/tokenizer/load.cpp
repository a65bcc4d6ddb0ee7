// tokenizer/load: the loader translation unit, the only tokenizer code that reads files. Turns a
// spec into an encoder: a tiktoken name (looked up in the search directory as the tiktoken npm
// package's <name>.json, a <name>.tiktoken rank file, or <name>/tokenizer.json) or a path to a
// Hugging Face tokenizer.json. Every configuration it cannot encode exactly is refused with a
// message naming the file and the offending setting.
#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/embedded.hpp"
#include "tokenizer/encoders.hpp"
#include "tokenizer/utf8.hpp"

namespace tokenmeter::tokenizer {

namespace {

using detail::bytes_map;
using detail::hf_model;
using nlohmann::json;

// A load failure: the message names what is wrong; the caller prefixes the file.
struct load_error {
    std::string message;
};

// tiktoken's published patterns, for .tiktoken rank files (which carry no pattern).
constexpr std::string_view cl100k_pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view o200k_pattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// GPT-2's pattern, used by ByteLevel(use_regex = true).
constexpr std::string_view gpt2_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

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

// The tables hold ids below 2^24 (tables.hpp); every published vocabulary fits.
std::uint32_t checked_id(std::uint64_t id) {
    if (id > bytes_map::max_id) {
        throw load_error{"token id " + std::to_string(id) + " is larger than " +
                         std::to_string(bytes_map::max_id) + ", which is not supported"};
    }
    return static_cast<std::uint32_t>(id);
}

bool file_exists(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return static_cast<bool>(in);
}

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool base64_decode(std::string_view in, std::string& out) {
    out.clear();
    std::uint32_t acc = 0;
    int bits = 0;
    for (char c : in) {
        int v = 0;
        if (c >= 'A' && c <= 'Z') {
            v = c - 'A';
        } else if (c >= 'a' && c <= 'z') {
            v = c - 'a' + 26;
        } else if (c >= '0' && c <= '9') {
            v = c - '0' + 52;
        } else if (c == '+') {
            v = 62;
        } else if (c == '/') {
            v = 63;
        } else if (c == '=') {
            break;
        } else {
            return false;
        }
        acc = (acc << 6) | static_cast<std::uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<char>((acc >> bits) & 0xFFU));
        }
    }
    return true;
}

std::string_view pattern_for(std::string_view name) {
    if (name == "cl100k_base") {
        return cl100k_pattern;
    }
    if (name == "o200k_base") {
        return o200k_pattern;
    }
    return {};
}

std::shared_ptr<const encoder> make_tiktoken(std::string name, std::string_view pattern,
                                             bytes_map ranks) {
    std::string error;
    auto enc = detail::tiktoken_encoder::create(std::move(name), pattern, std::move(ranks), error);
    if (!enc) {
        throw load_error{error};
    }
    return enc;
}

// The tiktoken npm package's encoders/<name>.json: {"pat_str", "special_tokens", "bpe_ranks"},
// bpe_ranks being lines of "<ignored> <first rank> <base64 token> <base64 token> ...".
std::shared_ptr<const encoder> tiktoken_from_json(const json& j, std::string name) {
    if (!j.contains("pat_str") || !j["pat_str"].is_string()) {
        throw load_error{"no \"pat_str\" string"};
    }
    if (!j.contains("bpe_ranks") || !j["bpe_ranks"].is_string()) {
        throw load_error{"no \"bpe_ranks\" string"};
    }
    const std::string& ranks_text = j["bpe_ranks"].get_ref<const std::string&>();
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
    return make_tiktoken(std::move(name), j["pat_str"].get_ref<const std::string&>(),
                         std::move(ranks));
}

// A classic .tiktoken rank file: "<base64 token> <rank>" per line.
std::shared_ptr<const encoder> tiktoken_from_rank_file(const std::string& text, std::string name) {
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
    return make_tiktoken(std::move(name), pattern, std::move(ranks));
}

// GPT-2's byte-to-unicode table: printable bytes map to themselves, the rest to U+0100 onwards.
std::array<char32_t, 256> byte_to_unicode() {
    std::array<char32_t, 256> table{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        table[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
    }
    return table;
}

// Undoes the byte-level alphabet; false if `s` has a character outside it.
bool byte_level_decode(std::string_view s, const std::array<int, 324>& inverse, std::string& out) {
    out.clear();
    std::size_t i = 0;
    while (i < s.size()) {
        const char32_t c = detail::utf8_next(s, i);
        if (c >= inverse.size() || inverse[c] < 0) {
            return false;
        }
        out.push_back(static_cast<char>(inverse[c]));
    }
    return true;
}

std::string type_of(const json& j) {
    if (j.is_object() && j.contains("type") && j["type"].is_string()) {
        return j["type"].get<std::string>();
    }
    return {};
}

void parse_normalizer(const json& n, hf_model& m) {
    if (n.is_null()) {
        return;
    }
    const std::string type = type_of(n);
    if (type == "Sequence") {
        for (const json& item : n.value("normalizers", json::array())) {
            parse_normalizer(item, m);
        }
        return;
    }
    if (type == "NFC") {
        m.nfc = true;
        return;
    }
    if (type == "Prepend") {
        m.prepend = n.value("prepend", std::string()) + m.prepend;
        m.prepend_each_segment = true;
        return;
    }
    if (type == "Replace") {
        const json& pattern = n.value("pattern", json::object());
        if (!pattern.contains("String") || !pattern["String"].is_string()) {
            throw load_error{"normalizer Replace with a Regex pattern is not supported"};
        }
        const std::string from = pattern["String"].get<std::string>();
        const std::string to = n.value("content", std::string());
        if (from.size() != 1 || static_cast<unsigned char>(from[0]) >= 0x80 || to.empty()) {
            throw load_error{
                "normalizer Replace is supported only for one ASCII character to a "
                "non-empty string (got \"" +
                from + "\")"};
        }
        std::string replaced_prepend;
        for (char c : m.prepend) {
            replaced_prepend += (c == from[0]) ? to : std::string(1, c);
        }
        m.prepend = replaced_prepend;
        for (std::string& r : m.replace_with) {
            std::string updated;
            for (char c : r) {
                updated += (c == from[0]) ? to : std::string(1, c);
            }
            r = updated;
        }
        if (m.replace_with[static_cast<unsigned char>(from[0])].empty()) {
            m.replace_with[static_cast<unsigned char>(from[0])] = to;
        }
        return;
    }
    throw load_error{"normalizer \"" + type +
                     "\" is not supported (supported: NFC, Prepend, "
                     "Replace, Sequence)"};
}

void add_split(hf_model& m, std::string_view pattern, bool keep_gaps, const std::string& what) {
    std::string error;
    auto re = detail::regex::compile(pattern, error);
    if (!re) {
        throw load_error{what + ": " + error};
    }
    m.levels.push_back(detail::split_level{std::move(re), keep_gaps});
}

void parse_pre_tokenizer(const json& p, hf_model& m, bool& byte_level, bool& saw_space_split) {
    if (p.is_null()) {
        return;
    }
    const std::string type = type_of(p);
    if (type == "Sequence") {
        for (const json& item : p.value("pretokenizers", json::array())) {
            if (byte_level) {
                throw load_error{"pre_tokenizer: ByteLevel must be the last step of the Sequence"};
            }
            parse_pre_tokenizer(item, m, byte_level, saw_space_split);
        }
        return;
    }
    if (type == "ByteLevel") {
        if (p.value("add_prefix_space", false)) {
            throw load_error{
                "pre_tokenizer ByteLevel with add_prefix_space = true is not supported"};
        }
        if (p.value("use_regex", true)) {
            add_split(m, gpt2_pattern, true, "pre_tokenizer ByteLevel");
        }
        byte_level = true;
        return;
    }
    if (type == "Split") {
        if (p.value("invert", false)) {
            throw load_error{"pre_tokenizer Split with invert = true is not supported"};
        }
        const std::string behavior = p.value("behavior", std::string());
        const json& pattern = p.value("pattern", json::object());
        if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
            if (behavior != "Isolated") {
                throw load_error{"pre_tokenizer Split(Regex) with behavior \"" + behavior +
                                 "\" is not supported (only Isolated)"};
            }
            add_split(m, pattern["Regex"].get<std::string>(), true, "pre_tokenizer Split");
            return;
        }
        if (pattern.contains("String") && pattern["String"].is_string() &&
            pattern["String"].get<std::string>() == " ") {
            saw_space_split = true;  // a no-op if the normalizer replaced every space (Gemma)
            return;
        }
        throw load_error{"pre_tokenizer Split with this pattern is not supported"};
    }
    if (type == "Metaspace") {
        // Spaces become the replacement, which is prepended (unless already there) and, with
        // split, starts every word (MergedWithNext).
        const std::string replacement = p.value("replacement", std::string("\u2581"));
        if (replacement.empty() || detail::utf8_char_length(static_cast<unsigned char>(
                                       replacement[0])) != replacement.size()) {
            throw load_error{"pre_tokenizer Metaspace: replacement must be one character"};
        }
        std::string scheme = p.value("prepend_scheme", std::string());
        if (scheme.empty()) {
            scheme = p.value("add_prefix_space", true) ? "always" : "never";
        }
        if (scheme != "always" && scheme != "first" && scheme != "never") {
            throw load_error{"pre_tokenizer Metaspace: unknown prepend_scheme \"" + scheme + "\""};
        }
        if (!m.prepend.empty()) {
            throw load_error{"pre_tokenizer Metaspace after a Prepend normalizer is not supported"};
        }
        if (m.replace_with[' '].empty()) {
            m.replace_with[' '] = replacement;
        }
        if (scheme != "never") {
            m.prepend = replacement;
            m.prepend_if_absent = true;
            m.prepend_each_segment = scheme == "always";
        }
        if (p.value("split", true)) {
            m.split_before = replacement;
        }
        return;
    }
    throw load_error{"pre_tokenizer \"" + type +
                     "\" is not supported (supported: ByteLevel, "
                     "Split(Regex, Isolated), Metaspace, Sequence)"};
}

// A tokenizer.json read with the SAX parser: model.vocab and model.merges (hundreds of thousands
// of entries) go straight into flat vectors instead of a DOM of std::map nodes, which made them
// most of the load time and a peak of several times the file's size; everything else becomes an
// ordinary DOM, where model.vocab is left as an empty object and model.merges as an empty array.
struct hf_document {
    json dom;
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

class hf_reader {
  public:
    using string_t = json::string_t;
    explicit hf_reader(hf_document& doc) : doc_(doc), dom_(doc.dom, true) {}

    bool null() { return scalar([&] { return dom_.null(); }); }
    bool boolean(bool v) { return scalar([&] { return dom_.boolean(v); }); }
    bool number_integer(json::number_integer_t v) {
        return scalar([&] { return dom_.number_integer(v); });
    }
    bool number_unsigned(json::number_unsigned_t v) {
        if (mode_ == mode::vocab && skip_ == 0) {
            doc_.vocab.emplace_back(std::move(key_), v);
            return true;
        }
        return scalar([&] { return dom_.number_unsigned(v); });
    }
    bool number_float(json::number_float_t v, const string_t& text) {
        return scalar([&] { return dom_.number_float(v, text); });
    }
    bool string(string_t& v) {
        if (skip_ == 0 && mode_ == mode::merges) {
            const std::size_t space = v.find(' ');
            if (space == std::string::npos || v.find(' ', space + 1) != std::string::npos) {
                bad_merge(v);
            } else {
                doc_.merges.emplace_back(v.substr(0, space), v.substr(space + 1));
            }
            return true;
        }
        if (skip_ == 0 && mode_ == mode::merge_pair) {
            pair_.push_back(std::move(v));
            return true;
        }
        return scalar([&] { return dom_.string(v); });
    }
    bool binary(json::binary_t& v) { return scalar([&] { return dom_.binary(v); }); }

    bool start_object(std::size_t n) {
        if (mode_ != mode::dom) {
            invalid_nested();
            return true;
        }
        if (depth_ == 2 && key1_ == "model" && key2_ == "vocab") {
            doc_.has_vocab = true;
            mode_ = mode::vocab;
            ++depth_;
            return dom_.start_object(0) && dom_.end_object();
        }
        ++depth_;
        return dom_.start_object(n);
    }
    bool key(string_t& k) {
        if (mode_ == mode::vocab && skip_ == 0) {
            key_ = std::move(k);
            return true;
        }
        if (mode_ != mode::dom) {
            return true;
        }
        if (depth_ == 1) {
            key1_ = k;
        } else if (depth_ == 2) {
            key2_ = k;
        }
        return dom_.key(k);
    }
    bool end_object() {
        if (skip_ > 0) {
            --skip_;
            return true;
        }
        if (mode_ == mode::vocab) {
            mode_ = mode::dom;
            --depth_;
            return true;
        }
        --depth_;
        return dom_.end_object();
    }
    bool start_array(std::size_t n) {
        if (mode_ == mode::merges && skip_ == 0) {
            mode_ = mode::merge_pair;
            pair_.clear();
            return true;
        }
        if (mode_ != mode::dom) {
            invalid_nested();
            return true;
        }
        if (depth_ == 2 && key1_ == "model" && key2_ == "merges") {
            doc_.has_merges = true;
            mode_ = mode::merges;
            ++depth_;
            return dom_.start_array(0) && dom_.end_array();
        }
        ++depth_;
        return dom_.start_array(n);
    }
    bool end_array() {
        if (skip_ > 0) {
            --skip_;
            return true;
        }
        if (mode_ == mode::merge_pair) {
            mode_ = mode::merges;
            if (pair_.size() == 2) {
                doc_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
            } else {
                bad_merge("[...]");
            }
            return true;
        }
        if (mode_ == mode::merges) {
            mode_ = mode::dom;
            --depth_;
            return true;
        }
        --depth_;
        return dom_.end_array();
    }
    bool parse_error(std::size_t position, const std::string& last_token,
                     const nlohmann::detail::exception& e) {
        return dom_.parse_error(position, last_token, e);
    }

  private:
    enum class mode { dom, vocab, merges, merge_pair };

    // A scalar in the DOM, or where the vocab or merges expect something else: an error there.
    template <class F>
    bool scalar(F&& to_dom) {
        if (skip_ > 0) {
            return true;
        }
        if (mode_ == mode::dom) {
            return to_dom();
        }
        invalid_here();
        return true;
    }
    void invalid_here() {
        if (mode_ == mode::vocab) {
            if (!doc_.bad_vocab) {
                doc_.bad_vocab = true;
                doc_.bad_vocab_key = key_;
            }
        } else {
            bad_merge(mode_ == mode::merge_pair ? "[...]" : "a non-string");
        }
    }
    void invalid_nested() {
        invalid_here();
        ++skip_;
    }
    void bad_merge(const std::string& text) {
        if (!doc_.bad_merges) {
            doc_.bad_merges = true;
            doc_.bad_merge = doc_.merges.size();
            doc_.bad_merge_text = text;
        }
        if (mode_ == mode::merge_pair) {
            pair_.clear();
        }
    }

    hf_document& doc_;
    nlohmann::detail::json_sax_dom_parser<json> dom_;
    mode mode_ = mode::dom;
    int depth_ = 0;
    std::size_t skip_ = 0;
    std::string key1_;
    std::string key2_;
    std::string key_;
    std::vector<std::string> pair_;
};

// What the loaders learn about added tokens, for load_result.
struct special_outcome {
    std::string mode;  // "match" or "text"
    std::vector<std::string> warnings;
};

// tiktoken encodings count special-token text as text (encode_ordinary); matching them is not
// implemented.
void tiktoken_special(special_tokens special, special_outcome& outcome) {
    if (special == special_tokens::match) {
        throw load_error{
            "special_tokens: match is not supported for tiktoken encodings (tiktoken's "
            "encode_ordinary, the default, counts special-token text as text)"};
    }
    outcome.mode = "text";
}

std::shared_ptr<const encoder> hf_from_json(const hf_document& doc, std::string name,
                                            special_tokens special, special_outcome& outcome) {
    const json& j = doc.dom;
    if (!j.contains("model") || !j["model"].is_object()) {
        throw load_error{"no \"model\" object (not a tokenizer.json?)"};
    }
    const json& model = j["model"];
    const std::string type = type_of(model);
    if (type != "BPE" && !(type.empty() && model.contains("merges"))) {
        throw load_error{"model type \"" + type + "\" is not supported (only BPE)"};
    }
    if (model.contains("dropout") && !model["dropout"].is_null() &&
        model["dropout"].get<double>() != 0.0) {
        throw load_error{"model.dropout is set (BPE dropout is random, not reproducible)"};
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        if (model.contains(key) && model[key].is_string() &&
            !model[key].get<std::string>().empty()) {
            throw load_error{std::string("model.") + key + " is not supported"};
        }
    }
    if (!doc.has_vocab || doc.vocab.empty()) {
        if (!doc.bad_vocab) {
            throw load_error{"model.vocab is missing or empty"};
        }
    }
    if (doc.bad_vocab) {
        throw load_error{"model.vocab[\"" + doc.bad_vocab_key +
                         "\"] is not a non-negative integer"};
    }
    if (!doc.has_merges) {
        throw load_error{"model.merges is missing"};
    }
    if (doc.bad_merges) {
        throw load_error{"model.merges[" + std::to_string(doc.bad_merge) + "] (" +
                         doc.bad_merge_text + ") is not \"a b\" or [a, b]"};
    }

    auto m = std::make_unique<hf_model>();
    parse_normalizer(j.value("normalizer", json()), *m);
    bool byte_level = false;
    bool saw_space_split = false;
    parse_pre_tokenizer(j.value("pre_tokenizer", json()), *m, byte_level, saw_space_split);
    m->mode = byte_level ? hf_model::kind::byte_level : hf_model::kind::sentencepiece;
    if (byte_level &&
        (!m->prepend.empty() || std::any_of(m->replace_with.begin(), m->replace_with.end(),
                                            [](const std::string& r) { return !r.empty(); }))) {
        throw load_error{
            "normalizer Prepend/Replace with a ByteLevel pre_tokenizer is not supported"};
    }
    if (!byte_level && m->nfc) {
        throw load_error{"normalizer NFC without a ByteLevel pre_tokenizer is not supported"};
    }
    if (!byte_level && !m->levels.empty()) {
        throw load_error{"pre_tokenizer Split(Regex) without ByteLevel is not supported"};
    }
    if (saw_space_split && (byte_level || m->replace_with[' '].empty() ||
                            m->replace_with[' '].find(' ') != std::string::npos)) {
        throw load_error{
            "pre_tokenizer Split(\" \") is supported only after a normalizer that "
            "replaces every space"};
    }
    m->byte_fallback = model.value("byte_fallback", false);
    m->fuse_unk = model.value("fuse_unk", false);
    m->ignore_merges = model.value("ignore_merges", false);

    // vocab, by the file's strings
    bytes_map by_string;
    by_string.reserve(doc.vocab.size());
    for (const auto& [key, id] : doc.vocab) {
        by_string.insert(key, checked_id(id));
    }
    if (model.contains("unk_token") && model["unk_token"].is_string()) {
        const std::string unk = model["unk_token"].get<std::string>();
        if (!by_string.find(unk, m->unk)) {
            throw load_error{"model.unk_token \"" + unk + "\" is not in the vocab"};
        }
        m->has_unk = true;
    }

    const std::array<char32_t, 256> b2u = byte_to_unicode();
    if (byte_level) {
        std::array<int, 324> inverse{};
        inverse.fill(-1);
        for (int b = 0; b < 256; ++b) {
            inverse[b2u[static_cast<std::size_t>(b)]] = b;
        }
        m->vocab.reserve(doc.vocab.size());
        std::string raw;
        by_string.for_each([&](std::string_view key, token_id id) {
            if (byte_level_decode(key, inverse, raw)) {
                m->vocab.insert(raw, id);
            }
        });
        for (int b = 0; b < 256; ++b) {
            std::string ch;
            detail::utf8_append(b2u[static_cast<std::size_t>(b)], ch);
            if (!by_string.find(ch, m->byte_ids[static_cast<std::size_t>(b)])) {
                throw load_error{"byte-level vocab has no token for byte " + std::to_string(b)};
            }
            m->byte_present[static_cast<std::size_t>(b)] = true;
        }
    } else {
        if (!m->has_unk && !m->byte_fallback) {
            throw load_error{
                "a model without byte_fallback needs an unk_token (characters outside "
                "the vocab would be dropped)"};
        }
        m->vocab = std::move(by_string);
        if (m->byte_fallback) {
            for (int b = 0; b < 256; ++b) {
                char name_buf[8];
                std::snprintf(name_buf, sizeof name_buf, "<0x%02X>", b);
                if (!m->vocab.find(name_buf, m->byte_ids[static_cast<std::size_t>(b)])) {
                    throw load_error{std::string("byte_fallback is set but the vocab has no ") +
                                     name_buf};
                }
                m->byte_present[static_cast<std::size_t>(b)] = true;
            }
        }
    }
    const bytes_map& strings = byte_level ? by_string : m->vocab;

    // merges: "a b" or ["a", "b"]; rank = position. Like Hugging Face, a later duplicate pair
    // wins, so insert from the end keeping the first seen.
    const auto& merges = doc.merges;
    m->merges.reserve(merges.size());
    std::vector<bool> is_byte_token;
    if (!byte_level && m->byte_fallback) {
        std::uint32_t max_id = 0;
        strings.for_each([&](std::string_view, token_id id) { max_id = std::max(max_id, id); });
        is_byte_token.assign(max_id + 1, false);
        for (token_id id : m->byte_ids) {
            is_byte_token[id] = true;
        }
    }
    for (std::size_t i = merges.size(); i-- > 0;) {
        const std::string& a = merges[i].first;
        const std::string& b = merges[i].second;
        token_id ia = 0;
        token_id ib = 0;
        token_id iab = 0;
        if (!strings.find(a, ia) || !strings.find(b, ib) || !strings.find(a + b, iab)) {
            throw load_error{"model.merges[" + std::to_string(i) + "] (\"" + a + "\", \"" + b +
                             "\") uses a token that is not in the vocab"};
        }
        m->merges.insert(ia, ib, {static_cast<std::uint32_t>(i), iab});
        if (!byte_level) {
            if (m->has_unk && (ia == m->unk || ib == m->unk)) {
                throw load_error{"merges of the unk token are not supported"};
            }
            if (m->byte_fallback && (is_byte_token[ia] || is_byte_token[ib])) {
                throw load_error{"merges of <0xAB> byte-fallback tokens are not supported"};
            }
            // The characters this merge puts next to each other: a streaming cut between them is
            // not safe.
            std::size_t last = a.size();
            do {
                --last;
            } while (last > 0 && (static_cast<unsigned char>(a[last]) & 0xC0U) == 0x80U);
            const std::size_t first_len =
                detail::utf8_char_length(static_cast<unsigned char>(b[0]));
            token_id left = 0;
            token_id right = 0;
            if (strings.find(std::string_view(a).substr(last), left) &&
                strings.find(std::string_view(b).substr(0, first_len), right)) {
                m->joined_chars.insert(left, right, {0, 0});
            }
        }
    }

    // Added tokens are matched in the raw text, leftmost-longest: the non-special ones always
    // (as Hugging Face does), the special ones in match mode (Hugging Face's default).
    outcome.mode = special == special_tokens::text ? "text" : "match";
    if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
        const bool has_normalizer = m->nfc || !m->prepend.empty() ||
                                    std::any_of(m->replace_with.begin(), m->replace_with.end(),
                                                [](const std::string& r) { return !r.empty(); });
        const bool per_segment_prepend = !m->prepend.empty() && m->prepend_each_segment;
        for (const json& t : j["added_tokens"]) {
            const bool is_special = t.value("special", false);
            if (is_special && outcome.mode == "text") {
                continue;
            }
            const std::string content = t.value("content", std::string());
            if (content.empty() || !detail::utf8_valid(content)) {
                continue;
            }
            if (is_special && per_segment_prepend && special == special_tokens::file_default) {
                // Hugging Face normalizes each piece between added tokens on its own, so each
                // gets the prepended "▁"; the engine cannot do that yet. Count them as text and
                // say so, rather than refuse a file that loads today.
                outcome.mode = "text";
                outcome.warnings.push_back(
                    name + ": special tokens are counted as text, not matched as Hugging Face "
                           "does: matching added tokens with a Prepend normalizer (or Metaspace "
                           "prepend_scheme \"always\") is not supported; set special_tokens: "
                           "text to make this explicit");
                continue;
            }
            if (t.value("lstrip", false) || t.value("rstrip", false) ||
                t.value("single_word", false)) {
                throw load_error{"added token \"" + content +
                                 "\" uses lstrip/rstrip/single_word, which is not supported" +
                                 (is_special ? " (special_tokens: text avoids matching it)" : "")};
            }
            if (t.value("normalized", false) && has_normalizer) {
                throw load_error{"added token \"" + content +
                                 "\" is matched after normalization, which is not supported" +
                                 (is_special ? " (special_tokens: text avoids matching it)" : "")};
            }
            if (per_segment_prepend) {
                throw load_error{
                    "added tokens with a Prepend normalizer (or Metaspace prepend_scheme "
                    "\"always\") are not supported" +
                    std::string(is_special ? " (special_tokens: text avoids matching them)" : "")};
            }
            m->added.insert(content, checked_id(t.value("id", std::uint64_t{0})));
            m->added_first[static_cast<unsigned char>(content[0])] = true;
            m->has_added = true;
        }
        // prefixes: flag 1 = a proper prefix of some content (the text may still grow into it)
        std::vector<std::pair<std::string, bool>> prefixes;
        m->added.for_each([&](std::string_view content, token_id) {
            for (std::size_t len = 1; len <= content.size(); ++len) {
                prefixes.emplace_back(std::string(content.substr(0, len)), len < content.size());
            }
        });
        // Insert proper prefixes first so their flag wins over a whole-token entry.
        std::stable_partition(prefixes.begin(), prefixes.end(),
                              [](const auto& p) { return p.second; });
        for (const auto& [prefix, proper] : prefixes) {
            m->added_prefixes.insert(prefix, proper ? 1U : 0U);
        }
    }

    detail::hf_encoder::compute_whole_ok(*m);
    return std::make_shared<detail::hf_encoder>(std::move(name), std::move(m));
}

std::string stem_of(const std::string& path) {
    std::string p = path;
    std::size_t slash = p.find_last_of('/');
    std::string file = slash == std::string::npos ? p : p.substr(slash + 1);
    if (file == "tokenizer.json" && slash != std::string::npos && slash > 0) {
        std::string dir = p.substr(0, slash);
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
        tiktoken_special(special, outcome);
        return tiktoken_from_rank_file(text, name);
    }
    hf_document doc;
    try {
        hf_reader reader(doc);
        json::sax_parse(text, &reader);
    } catch (const json::exception& e) {
        throw load_error{std::string("is not JSON: ") + e.what()};
    }
    text.clear();
    text.shrink_to_fit();
    if (!doc.dom.is_object()) {
        throw load_error{"is not a JSON object"};
    }
    if (doc.dom.contains("bpe_ranks")) {
        tiktoken_special(special, outcome);
        return tiktoken_from_json(doc.dom, name);
    }
    return hf_from_json(doc, name, special, outcome);
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
                result.tried.push_back(dir + "/" + s + suffix);
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
        try {
            special_outcome outcome;
            tiktoken_special(options.special, outcome);
            result.special_mode = outcome.mode;
        } catch (const load_error& e) {
            result.error = "built-in " + s + ": " + e.message;
            return result;
        }
        result.value = detail::load_embedded(s, result.error);
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
