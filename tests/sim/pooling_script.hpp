#pragma once

// The pooling-model endpoints as vLLM answers them: embeddings, rerank, score, classify, pooling
// and moderations. Deterministic, no I/O: the same request gets the same bytes.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace tokenmeter::sim {

enum class pooling_kind {
    embeddings,   // POST /v1/embeddings
    rerank,       // POST /rerank, /v1/rerank, /v2/rerank
    score,        // POST /score, /v1/score
    classify,     // POST /classify
    pooling,      // POST /pooling
    moderations,  // POST /v1/moderations
};

std::optional<pooling_kind> pooling_for_path(std::string_view path);

struct pooling_answer {
    unsigned status = 200;
    std::string body;  // JSON; an OpenAI-style error object when status is not 200
};

// The answer to `body` (a parsed JSON object). Prompt tokens are whitespace-separated words of
// every input text, token ids one each; rerank and score pair the query with each document, as
// a cross-encoder reads them. `usage`: whether the answer carries its usage report.
pooling_answer pooling_response(pooling_kind kind, const nlohmann::json& body,
                                std::uint64_t request_id, bool usage);

std::string base64(std::string_view data);

}  // namespace tokenmeter::sim
