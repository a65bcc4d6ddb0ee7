#include "pooling_script.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "completion_script.hpp"

namespace tokenmeter::sim {
namespace {

using json = nlohmann::json;

constexpr std::size_t default_dimensions = 8;
constexpr std::size_t max_dimensions = 4096;

std::string dump(const json& value) {
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

pooling_answer bad_request(std::string_view message) {
    json error = {
        {"message", message}, {"type", "BadRequestError"}, {"param", nullptr}, {"code", 400}};
    return {400, dump(json{{"error", std::move(error)}})};
}

// One input item: a string, or a token id array.
struct input_item {
    std::string text;
    std::uint64_t tokens = 0;
};

// "input": a string, an array of strings, an array of token ids, or an array of such arrays;
// moderations' parts ({"type": "text", "text": ...}) are texts too, and image parts count no
// tokens. nullopt: not one of these.
std::optional<std::vector<input_item>> read_inputs(const json& input) {
    std::vector<input_item> items;
    const auto text_item = [](const std::string& text) {
        return input_item{text, count_words(text)};
    };
    if (input.is_string()) {
        items.push_back(text_item(input.get_ref<const std::string&>()));
        return items;
    }
    if (!input.is_array() || input.empty()) {
        return std::nullopt;
    }
    if (input.front().is_number_integer()) {
        items.push_back({{}, input.size()});
        return items;
    }
    for (const json& item : input) {
        if (item.is_string()) {
            items.push_back(text_item(item.get_ref<const std::string&>()));
        } else if (item.is_array() && !item.empty() && item.front().is_number_integer()) {
            items.push_back({{}, item.size()});
        } else if (!item.is_object() || !item.contains("type")) {
            return std::nullopt;
        } else if (auto text = item.find("text"); text != item.end() && text->is_string()) {
            items.push_back(text_item(text->get_ref<const std::string&>()));
        } else {
            items.push_back({});  // an image part: no text tokens
        }
    }
    return items;
}

// A string or an array of strings; nullopt otherwise.
std::optional<std::vector<std::string>> read_texts(const json* value) {
    if (value == nullptr) {
        return std::nullopt;
    }
    std::vector<std::string> texts;
    if (value->is_string()) {
        texts.push_back(value->get<std::string>());
        return texts;
    }
    if (!value->is_array() || value->empty()) {
        return std::nullopt;
    }
    for (const json& item : *value) {
        if (item.is_string()) {
            texts.push_back(item.get<std::string>());
        } else if (auto text = item.find("text");
                   item.is_object() && text != item.end() && text->is_string()) {
            texts.push_back(text->get<std::string>());
        } else {
            return std::nullopt;
        }
    }
    return texts;
}

const json* member(const json& body, const char* key) {
    auto it = body.find(key);
    return it == body.end() || it->is_null() ? nullptr : &*it;
}

// A deterministic unit-ish vector for item `index`.
std::vector<float> embedding_of(std::size_t index, std::size_t dimensions) {
    std::vector<float> out(dimensions);
    for (std::size_t d = 0; d < dimensions; ++d) {
        out[d] = static_cast<float>((index * 31 + d * 7) % 97) / 97.0F - 0.5F;
    }
    return out;
}

json usage_of(std::uint64_t prompt_tokens) {
    return {{"prompt_tokens", prompt_tokens},
            {"total_tokens", prompt_tokens},
            {"completion_tokens", 0},
            {"prompt_tokens_details", nullptr}};
}

std::string id_of(std::string_view prefix, std::uint64_t request_id) {
    return std::string(prefix) + "-sim-" + std::to_string(request_id);
}

// vLLM's list answer (embeddings, score, classify, pooling), with its usage when asked.
pooling_answer list_answer(std::string_view prefix, std::uint64_t request_id,
                           std::string_view model, json data, std::optional<std::uint64_t> usage) {
    json out = {{"id", id_of(prefix, request_id)},
                {"object", "list"},
                {"created", fixed_created},
                {"model", model},
                {"data", std::move(data)}};
    if (usage) {
        out["usage"] = usage_of(*usage);
    }
    return {200, dump(out)};
}

// Relevance of a document to the query: word overlap, in [0, 1).
double relevance(const std::string& query, const std::string& document, std::size_t index) {
    const double words = count_words(query) + count_words(document);
    return (words + static_cast<double>(index % 5)) / (words + 10.0);
}

pooling_answer embeddings(const json& body, std::uint64_t request_id, bool usage,
                          std::string_view model) {
    const json* input = member(body, "input");
    const auto items = input != nullptr ? read_inputs(*input) : std::nullopt;
    if (!items) {
        return bad_request("input must be a string, an array of strings or of token ids");
    }
    std::size_t dimensions = default_dimensions;
    if (const json* asked = member(body, "dimensions")) {
        if (!asked->is_number_unsigned() || asked->get<std::uint64_t>() == 0 ||
            asked->get<std::uint64_t>() > max_dimensions) {
            return bad_request("dimensions must be an integer in 1..4096");
        }
        dimensions = asked->get<std::size_t>();
    }
    bool as_base64 = false;
    if (const json* format = member(body, "encoding_format")) {
        if (*format == "base64") {
            as_base64 = true;
        } else if (*format != "float") {
            return bad_request("encoding_format must be float or base64");
        }
    }
    json data = json::array();
    std::uint64_t prompt_tokens = 0;
    for (std::size_t i = 0; i < items->size(); ++i) {
        prompt_tokens += (*items)[i].tokens;
        const std::vector<float> vector = embedding_of(i, dimensions);
        json embedding;
        if (as_base64) {
            std::string bytes(vector.size() * sizeof(float), '\0');
            std::memcpy(bytes.data(), vector.data(), bytes.size());  // little-endian hosts
            embedding = base64(bytes);
        } else {
            embedding = vector;
        }
        data.push_back(
            {{"index", i}, {"object", "embedding"}, {"embedding", std::move(embedding)}});
    }
    return list_answer("embd", request_id, model, std::move(data),
                       usage ? std::optional<std::uint64_t>(prompt_tokens) : std::nullopt);
}

pooling_answer rerank(const json& body, std::uint64_t request_id, bool usage,
                      std::string_view model) {
    const json* query = member(body, "query");
    const auto documents = read_texts(member(body, "documents"));
    if (query == nullptr || !query->is_string() || !documents) {
        return bad_request("rerank needs a query string and documents");
    }
    const auto& q = query->get_ref<const std::string&>();
    std::uint64_t tokens = 0;
    json results = json::array();
    for (std::size_t i = 0; i < documents->size(); ++i) {
        tokens += count_words(q) + count_words((*documents)[i]);
        results.push_back({{"index", i},
                           {"document", {{"text", (*documents)[i]}}},
                           {"relevance_score", relevance(q, (*documents)[i], i)}});
    }
    std::stable_sort(results.begin(), results.end(), [](const json& a, const json& b) {
        return a["relevance_score"].get<double>() > b["relevance_score"].get<double>();
    });
    if (const json* top = member(body, "top_n");
        top != nullptr && top->is_number_unsigned() && top->get<std::size_t>() < results.size()) {
        results.erase(results.begin() + top->get<std::ptrdiff_t>(), results.end());
    }
    json out = {{"id", id_of("rerank", request_id)}, {"model", model}};
    if (usage) {
        out["usage"] = {{"total_tokens", tokens}};
    }
    out["results"] = std::move(results);
    return {200, dump(out)};
}

pooling_answer score(const json& body, std::uint64_t request_id, bool usage,
                     std::string_view model) {
    const auto first = read_texts(member(body, "text_1"));
    const auto second = read_texts(member(body, "text_2"));
    if (!first || !second || (first->size() != 1 && first->size() != second->size())) {
        return bad_request("text_1 and text_2 must be strings or arrays of equal length");
    }
    std::uint64_t tokens = 0;
    json data = json::array();
    for (std::size_t i = 0; i < second->size(); ++i) {
        const std::string& left = first->size() == 1 ? first->front() : (*first)[i];
        tokens += count_words(left) + count_words((*second)[i]);
        data.push_back(
            {{"index", i}, {"object", "score"}, {"score", relevance(left, (*second)[i], i)}});
    }
    return list_answer("score", request_id, model, std::move(data),
                       usage ? std::optional<std::uint64_t>(tokens) : std::nullopt);
}

// classify, pooling and moderations: one result per input.
pooling_answer per_input(pooling_kind kind, const json& body, std::uint64_t request_id, bool usage,
                         std::string_view model) {
    const json* input = member(body, "input");
    const auto items = input != nullptr ? read_inputs(*input) : std::nullopt;
    if (!items) {
        return bad_request("input must be a string, an array of strings or of token ids");
    }
    std::uint64_t tokens = 0;
    json data = json::array();
    for (std::size_t i = 0; i < items->size(); ++i) {
        tokens += (*items)[i].tokens;
        if (kind == pooling_kind::classify) {
            data.push_back({{"index", i},
                            {"label", i % 2 == 0 ? "positive" : "negative"},
                            {"probs", {0.75, 0.25}},
                            {"num_classes", 2}});
        } else if (kind == pooling_kind::pooling) {
            data.push_back({{"index", i}, {"object", "pooling"}, {"data", embedding_of(i, 4)}});
        } else {
            data.push_back({{"flagged", false},
                            {"categories", {{"violence", false}}},
                            {"category_scores", {{"violence", 0.01}}}});
        }
    }
    if (kind == pooling_kind::moderations) {
        // OpenAI's moderation answer reports no usage.
        return {200, dump(json{{"id", id_of("modr", request_id)},
                               {"model", model},
                               {"results", std::move(data)}})};
    }
    return list_answer(kind == pooling_kind::classify ? "classify" : "pool", request_id, model,
                       std::move(data),
                       usage ? std::optional<std::uint64_t>(tokens) : std::nullopt);
}

}  // namespace

std::optional<pooling_kind> pooling_for_path(std::string_view path) {
    if (path == "/v1/embeddings") {
        return pooling_kind::embeddings;
    }
    if (path == "/rerank" || path == "/v1/rerank" || path == "/v2/rerank") {
        return pooling_kind::rerank;
    }
    if (path == "/score" || path == "/v1/score") {
        return pooling_kind::score;
    }
    if (path == "/classify") {
        return pooling_kind::classify;
    }
    if (path == "/pooling") {
        return pooling_kind::pooling;
    }
    if (path == "/v1/moderations") {
        return pooling_kind::moderations;
    }
    return std::nullopt;
}

pooling_answer pooling_response(pooling_kind kind, const json& body, std::uint64_t request_id,
                                bool usage) {
    std::string model = "sim-model";
    if (const json* named = member(body, "model"); named != nullptr && named->is_string()) {
        model = named->get<std::string>();
    }
    switch (kind) {
        case pooling_kind::embeddings:
            return embeddings(body, request_id, usage, model);
        case pooling_kind::rerank:
            return rerank(body, request_id, usage, model);
        case pooling_kind::score:
            return score(body, request_id, usage, model);
        case pooling_kind::classify:
        case pooling_kind::pooling:
        case pooling_kind::moderations:
            return per_input(kind, body, request_id, usage, model);
    }
    return bad_request("unknown endpoint");
}

std::string base64(std::string_view data) {
    static constexpr std::string_view table =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((data.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 2 < data.size(); i += 3) {
        const auto n = (static_cast<std::uint32_t>(static_cast<unsigned char>(data[i])) << 16) |
                       (static_cast<std::uint32_t>(static_cast<unsigned char>(data[i + 1])) << 8) |
                       static_cast<std::uint32_t>(static_cast<unsigned char>(data[i + 2]));
        out += table[(n >> 18) & 63];
        out += table[(n >> 12) & 63];
        out += table[(n >> 6) & 63];
        out += table[n & 63];
    }
    if (i < data.size()) {
        auto n = static_cast<std::uint32_t>(static_cast<unsigned char>(data[i])) << 16;
        const bool two = i + 1 < data.size();
        if (two) {
            n |= static_cast<std::uint32_t>(static_cast<unsigned char>(data[i + 1])) << 8;
        }
        out += table[(n >> 18) & 63];
        out += table[(n >> 12) & 63];
        out += two ? table[(n >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

}  // namespace tokenmeter::sim
