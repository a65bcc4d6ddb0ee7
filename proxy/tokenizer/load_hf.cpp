// tokenizer/load_hf: a Hugging Face tokenizer.json (already read into an hf_document) turned into
// an hf_encoder: the BPE model's vocab and merges, and the added tokens with their flags.
#include <algorithm>
#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "tokenizer/load_internal.hpp"
#include "tokenizer/utf8.hpp"

namespace tokenmeter::tokenizer::loader {

namespace {

using detail::bytes_map;
using detail::hf_model;
using nlohmann::json;

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

// Added tokens as Hugging Face's AddedVocabulary matches them: those with normalized = false in
// the text as given, those with normalized = true in each segment left between them after the
// normalizer ran, which the engine supports when the normalizer leaves text as it is. Special
// tokens only in match mode (the default); non-special ones always (they are vocabulary).
void parse_added_tokens(const json& j, special_tokens special, hf_model& m,
                        special_outcome& outcome) {
    outcome.mode = special == special_tokens::text ? "text" : "match";
    m.added.prepend_each_segment = !m.prepend.empty() && m.prepend_each_segment;
    if (!j.contains("added_tokens") || !j["added_tokens"].is_array()) {
        return;
    }
    for (const json& t : j["added_tokens"]) {
        const bool is_special = t.value("special", false);
        if (is_special && outcome.mode == "text") {
            continue;
        }
        detail::added_token token;
        token.content = t.value("content", std::string());
        if (token.content.empty() || !detail::utf8_valid(token.content)) {
            continue;
        }
        token.id = checked_id(t.value("id", std::uint64_t{0}));
        token.lstrip = t.value("lstrip", false);
        token.rstrip = t.value("rstrip", false);
        token.single_word = t.value("single_word", false);
        // Hugging Face writes all five flags (and refuses a file without them); a missing one
        // is taken as false, the token's text as it is.
        const bool normalized = t.value("normalized", false);
        if (normalized && !m.identity_normalizer) {
            throw load_error{"added token \"" + token.content +
                             "\" is matched after normalization (normalized = true), which is "
                             "supported only without a normalizer" +
                             (is_special ? " (special_tokens: text avoids matching it)" : "")};
        }
        (normalized ? m.added.normalized : m.added.raw).add(std::move(token));
    }
    m.added.raw.finish();
    m.added.normalized.finish();
}

// The model's settings the engine cannot reproduce, and what the SAX reader found wrong in
// model.vocab and model.merges.
void check_model(const hf_document& doc, const json& model) {
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
}

// The normalizer and the pre-tokenizer, refusing combinations the engine cannot encode exactly;
// sets m.mode.
void parse_pipeline(const json& j, hf_model& m) {
    const json normalizer = j.value("normalizer", json());
    parse_normalizer(normalizer, m);
    m.identity_normalizer =
        normalizer.is_null() || (type_of(normalizer) == "Sequence" &&
                                 normalizer.value("normalizers", json::array()).empty());
    bool byte_level = false;
    bool saw_space_split = false;
    parse_pre_tokenizer(j.value("pre_tokenizer", json()), m, byte_level, saw_space_split);
    m.mode = byte_level ? hf_model::kind::byte_level : hf_model::kind::sentencepiece;
    if (byte_level &&
        (!m.prepend.empty() || std::any_of(m.replace_with.begin(), m.replace_with.end(),
                                           [](const std::string& r) { return !r.empty(); }))) {
        throw load_error{
            "normalizer Prepend/Replace with a ByteLevel pre_tokenizer is not supported"};
    }
    if (!byte_level && m.nfc) {
        throw load_error{"normalizer NFC without a ByteLevel pre_tokenizer is not supported"};
    }
    if (!byte_level && !m.levels.empty()) {
        throw load_error{"pre_tokenizer Split(Regex) without ByteLevel is not supported"};
    }
    if (saw_space_split && (byte_level || m.replace_with[' '].empty() ||
                            m.replace_with[' '].find(' ') != std::string::npos)) {
        throw load_error{
            "pre_tokenizer Split(\" \") is supported only after a normalizer that "
            "replaces every space"};
    }
}

// Byte-level: the vocab by raw bytes (the byte-to-unicode alphabet of the file's strings undone)
// and every byte's initial symbol. The caller reserves m.vocab.
void byte_level_vocab(const bytes_map& by_string, hf_model& m) {
    const std::array<char32_t, 256> b2u = byte_to_unicode();
    std::array<int, 324> inverse{};
    inverse.fill(-1);
    for (int b = 0; b < 256; ++b) {
        inverse[b2u[static_cast<std::size_t>(b)]] = b;
    }
    std::string raw;
    by_string.for_each([&](std::string_view key, token_id id) {
        if (byte_level_decode(key, inverse, raw)) {
            m.vocab.insert(raw, id);
        }
    });
    for (int b = 0; b < 256; ++b) {
        std::string ch;
        detail::utf8_append(b2u[static_cast<std::size_t>(b)], ch);
        if (!by_string.find(ch, m.byte_ids[static_cast<std::size_t>(b)])) {
            throw load_error{"byte-level vocab has no token for byte " + std::to_string(b)};
        }
        m.byte_present[static_cast<std::size_t>(b)] = true;
    }
}

// SentencePiece byte fallback: the ids of <0x00> to <0xFF>.
void byte_fallback_ids(hf_model& m) {
    for (int b = 0; b < 256; ++b) {
        std::array<char, 8> name{};
        std::snprintf(name.data(), name.size(), "<0x%02X>", b);
        if (!m.vocab.find(name.data(), m.byte_ids[static_cast<std::size_t>(b)])) {
            throw load_error{std::string("byte_fallback is set but the vocab has no ") +
                             name.data()};
        }
        m.byte_present[static_cast<std::size_t>(b)] = true;
    }
}

[[noreturn]] void throw_merge_not_in_vocab(std::size_t i, const std::string& a,
                                           const std::string& b) {
    throw load_error{"model.merges[" + std::to_string(i) + "] (\"" + a + "\", \"" + b +
                     "\") uses a token that is not in the vocab"};
}

// merges: "a b" or ["a", "b"]; rank = position. Like Hugging Face, a later duplicate pair wins,
// so insert from the end keeping the first seen. `strings`: the vocab by the file's strings.
void parse_merges(const hf_document& doc, const bytes_map& strings, hf_model& m) {
    const bool byte_level = m.mode == hf_model::kind::byte_level;
    const auto& merges = doc.merges;
    m.merges.reserve(merges.size());
    std::vector<bool> is_byte_token;
    if (!byte_level && m.byte_fallback) {
        std::uint32_t max_id = 0;
        strings.for_each([&](std::string_view, token_id id) { max_id = std::max(max_id, id); });
        is_byte_token.assign(max_id + 1, false);
        for (token_id id : m.byte_ids) {
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
            throw_merge_not_in_vocab(i, a, b);
        }
        m.merges.insert(ia, ib, {static_cast<std::uint32_t>(i), iab});
        if (!byte_level) {
            if (m.has_unk && (ia == m.unk || ib == m.unk)) {
                throw load_error{"merges of the unk token are not supported"};
            }
            if (m.byte_fallback && (is_byte_token[ia] || is_byte_token[ib])) {
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
                m.joined_chars.insert(left, right, {0, 0});
            }
        }
    }
}

}  // namespace

std::shared_ptr<const encoder> hf_from_json(const hf_document& doc, std::string name,
                                            special_tokens special, special_outcome& outcome) {
    const json& j = doc.dom;
    if (!j.contains("model") || !j["model"].is_object()) {
        throw load_error{"no \"model\" object (not a tokenizer.json?)"};
    }
    const json& model = j["model"];
    check_model(doc, model);

    auto m = std::make_unique<hf_model>();
    parse_pipeline(j, *m);
    const bool byte_level = m->mode == hf_model::kind::byte_level;
    m->byte_fallback = model.value("byte_fallback", false);
    m->fuse_unk = model.value("fuse_unk", false);
    m->ignore_merges = model.value("ignore_merges", false);

    // The vocab by the file's strings: SentencePiece's vocab as it is; byte-level's is decoded
    // from it, and the merges name tokens by these strings.
    bytes_map by_string;
    bytes_map& strings = byte_level ? by_string : m->vocab;
    strings.reserve(doc.vocab.size());
    for (const auto& [key, id] : doc.vocab) {
        strings.insert(key, checked_id(id));
    }
    if (model.contains("unk_token") && model["unk_token"].is_string()) {
        const std::string unk = model["unk_token"].get<std::string>();
        if (!strings.find(unk, m->unk)) {
            throw load_error{"model.unk_token \"" + unk + "\" is not in the vocab"};
        }
        m->has_unk = true;
    }
    if (byte_level) {
        m->vocab.reserve(doc.vocab.size());
        byte_level_vocab(strings, *m);
    } else {
        if (!m->has_unk && !m->byte_fallback) {
            throw load_error{
                "a model without byte_fallback needs an unk_token (characters outside "
                "the vocab would be dropped)"};
        }
        if (m->byte_fallback) {
            byte_fallback_ids(*m);
        }
    }
    parse_merges(doc, strings, *m);

    parse_added_tokens(j, special, *m, outcome);

    detail::hf_encoder::compute_whole_ok(*m);
    return std::make_shared<detail::hf_encoder>(std::move(name), std::move(m));
}

}  // namespace tokenmeter::tokenizer::loader
