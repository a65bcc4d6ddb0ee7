// tokenizer/load_hf_steps: a tokenizer.json's normalizer and pre-tokenizer, turned into the
// engine's settings (hf_model); every step or option the engine cannot encode exactly is refused
// with a message naming it.
#include <string>

#include "tokenizer/load_internal.hpp"
#include "tokenizer/utf8.hpp"

namespace tokenmeter::tokenizer::loader {

using detail::hf_model;
using nlohmann::json;

namespace {

// GPT-2's pattern, used by ByteLevel(use_regex = true).
constexpr std::string_view gpt2_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

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

namespace {

void add_split(hf_model& m, std::string_view pattern, bool keep_gaps, const std::string& what) {
    std::string error;
    auto re = detail::regex::compile(pattern, error);
    if (!re) {
        throw load_error{what + ": " + error};
    }
    m.levels.push_back(detail::split_level{std::move(re), keep_gaps});
}

}  // namespace

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

}  // namespace tokenmeter::tokenizer::loader
