// The events and bodies of the dialects beyond OpenAI chat/completions (Responses, Anthropic
// Messages, TGI, llama.cpp, Ollama, Gemini), in the shapes those servers send, with the same
// token text, chunking and timing as the OpenAI endpoints. Like completion_script.cpp: no I/O,
// no clock, every byte predictable. Written from the public API references, not shared with the
// proxy, so a misreading in the proxy's adapters cannot hide in the simulator too.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "completion_script.hpp"

namespace tokenmeter::sim {
namespace {

using json = nlohmann::json;

// Tool-call argument text inside a JSON string: the fragments join to {"text":"<tokens>"}.
constexpr std::string_view tool_open_escaped = R"({\"text\":\")";
constexpr std::string_view tool_close_escaped = R"(\"})";
constexpr std::string_view created_at = "2023-11-14T22:13:20Z";  // Ollama's fixed timestamp

std::string json_quoted(std::string_view text) {
    return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

bool is_dialect(api_kind api) {
    return api != api_kind::chat && api != api_kind::completions;
}

bool has_reasoning(api_kind api) {
    return api == api_kind::chat || api == api_kind::responses || api == api_kind::anthropic ||
           api == api_kind::ollama_chat || api == api_kind::ollama_generate ||
           api == api_kind::gemini;
}

bool has_tool_calls(api_kind api) {
    return api == api_kind::chat || api == api_kind::responses || api == api_kind::anthropic;
}

std::string_view completion_script::stream_content_type() const {
    return plan_.api == api_kind::ollama_chat || plan_.api == api_kind::ollama_generate
               ? "application/x-ndjson"
               : "text/event-stream";
}

void completion_script::close_content_event(std::string& out,
                                            std::optional<std::int64_t> sent_ns) const {
    if (sent_ns) {
        out += ",\"sim_sent_ns\":";
        out += std::to_string(*sent_ns);
    }
    if (plan_.api == api_kind::ollama_chat || plan_.api == api_kind::ollama_generate) {
        out += "}\n";
    } else if (plan_.api == api_kind::gemini) {
        out += "}\r\n\r\n";
    } else {
        out += "}\n\n";
    }
}

void completion_script::append_garbage(std::string& out, std::uint32_t chunk_index) const {
    if (stream_content_type() == "application/x-ndjson") {
        out += "{not json\n{\"sim\":\"unknown object\",\"after_chunk\":";
        out += std::to_string(chunk_index);
        out += "}\n";
        return;
    }
    append_garbage_events(out, chunk_index);
}

// ---- heads ----------------------------------------------------------------------------------

void completion_script::append_responses_object(std::string& out, bool completed) const {
    const std::string id = std::to_string(plan_.request_id);
    out += R"({"id":"resp_sim_)" + id + R"(","object":"response","created_at":)";
    out += std::to_string(fixed_created);
    out += R"(,"status":")";
    out += !completed ? "in_progress" : (plan_.cut_by_max_tokens ? "incomplete" : "completed");
    out += R"(","model":)" + json_quoted(plan_.model) + R"(,"output":[)";
    if (completed) {
        bool comma = false;
        if (plan_.reasoning_tokens > 0) {
            out += R"({"id":"rs_sim_)" + id +
                   R"(","type":"reasoning","summary":[{"type":"summary_text","text":)" +
                   json_quoted(reasoning_text()) + "}]}";
            comma = true;
        }
        if (plan_.completion_tokens > plan_.reasoning_tokens) {
            out += comma ? "," : "";
            if (plan_.tool_call) {
                out += R"({"id":"fc_sim_)" + id +
                       R"(","type":"function_call","status":"completed","call_id":"call_sim_)" +
                       id + R"(","name":")" + std::string(tool_name) + R"(","arguments":)" +
                       json_quoted("{\"text\":\"" + answer_text() + "\"}") + "}";
            } else {
                out +=
                    R"({"id":"msg_sim_)" + id +
                    R"(","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":)" +
                    json_quoted(answer_text()) + R"(,"annotations":[]}]})";
            }
        }
    }
    out += "],\"usage\":";
    if (completed) {
        const std::uint64_t total =
            static_cast<std::uint64_t>(plan_.prompt_tokens) + plan_.completion_tokens;
        out += R"({"input_tokens":)" + std::to_string(plan_.prompt_tokens) +
               R"(,"input_tokens_details":{"cached_tokens":0},"output_tokens":)" +
               std::to_string(plan_.completion_tokens) +
               R"(,"output_tokens_details":{"reasoning_tokens":)" +
               std::to_string(plan_.reasoning_tokens) + R"(},"total_tokens":)" +
               std::to_string(total) + "}";
    } else {
        out += "null";
    }
    out += "}";
}

void completion_script::append_dialect_head(std::string& out) const {
    if (plan_.api == api_kind::responses) {
        out +=
            "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,"
            "\"response\":";
        append_responses_object(out, false);
        out +=
            "}\n\nevent: response.in_progress\ndata: {\"type\":\"response.in_progress\","
            "\"sequence_number\":1,\"response\":";
        append_responses_object(out, false);
        out += "}\n\n";
    } else if (plan_.api == api_kind::anthropic) {
        out += R"(event: message_start
data: {"type":"message_start","message":{"id":"msg_sim_)";
        out += std::to_string(plan_.request_id);
        out +=
            R"(","type":"message","role":"assistant","model":)" + json_quoted(plan_.model) +
            R"(,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":)" +
            std::to_string(plan_.prompt_tokens) +
            R"(,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}})";
        out += "\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n";
    }
}

// ---- content --------------------------------------------------------------------------------

void completion_script::append_gemini_chunk(std::string& out, std::uint32_t reasoning_end,
                                            std::uint32_t answer_end, std::string_view parts,
                                            bool finish) const {
    out += R"(data: {"candidates":[{"content":{"parts":[)";
    out += parts;
    out += R"(],"role":"model"},)";
    if (finish) {
        out += plan_.cut_by_max_tokens ? R"("finishReason":"MAX_TOKENS",)"
                                       : R"("finishReason":"STOP",)";
    }
    const std::uint32_t thoughts = std::min(reasoning_end, plan_.reasoning_tokens);
    const std::uint32_t candidates =
        answer_end > plan_.reasoning_tokens ? answer_end - plan_.reasoning_tokens : 0;
    out += R"("index":0}],"usageMetadata":{"promptTokenCount":)" +
           std::to_string(plan_.prompt_tokens) + R"(,"candidatesTokenCount":)" +
           std::to_string(candidates) + R"(,"totalTokenCount":)" +
           std::to_string(plan_.prompt_tokens + candidates + thoughts);
    if (plan_.reasoning_tokens > 0) {
        out += R"(,"thoughtsTokenCount":)" + std::to_string(thoughts);
    }
    out += R"(},"modelVersion":)" + json_quoted(plan_.model) + R"(,"responseId":"sim-)" +
           std::to_string(plan_.request_id) + "\"";
}

void completion_script::open_dialect_content(std::string& out, std::uint32_t chunk_index) const {
    const std::uint32_t total = plan_.completion_tokens;
    const std::uint32_t begin = std::min(chunk_index * plan_.tokens_per_chunk, total);
    const std::uint32_t end = std::min(begin + plan_.tokens_per_chunk, total);
    const std::uint32_t r = plan_.reasoning_tokens;
    const std::uint32_t reasoning_end = std::min(end, r);
    const std::uint32_t answer_start = std::max(begin, r);
    const bool has_thinking = begin < r;
    const bool has_answer = end > r;
    const std::string id = std::to_string(plan_.request_id);
    std::string text;

    switch (plan_.api) {
        case api_kind::responses: {
            if (has_thinking) {
                out +=
                    "event: response.reasoning_summary_text.delta\ndata: "
                    "{\"type\":\"response.reasoning_summary_text.delta\",\"item_id\":\"rs_sim_" +
                    id + "\",\"output_index\":0,\"summary_index\":0,\"delta\":\"";
                append_tokens(out, begin, reasoning_end);
                out += "\"";
                if (has_answer) {
                    out += "}\n\n";
                }
            }
            if (has_answer) {
                const std::string index = r > 0 ? "1" : "0";
                if (plan_.tool_call) {
                    out +=
                        "event: response.function_call_arguments.delta\ndata: "
                        "{\"type\":\"response.function_call_arguments.delta\",\"item_id\":"
                        "\"fc_sim_" +
                        id + "\",\"output_index\":" + index + ",\"delta\":\"";
                    if (answer_start == r) {
                        out += tool_open_escaped;
                    }
                    append_tokens(out, answer_start, end);
                    if (end == total) {
                        out += tool_close_escaped;
                    }
                } else {
                    out +=
                        "event: response.output_text.delta\ndata: "
                        "{\"type\":\"response.output_text.delta\",\"item_id\":\"msg_sim_" +
                        id + "\",\"output_index\":" + index + ",\"content_index\":0,\"delta\":\"";
                    append_tokens(out, answer_start, end);
                }
                out += "\"";
            }
            return;
        }
        case api_kind::anthropic: {
            if (has_thinking) {
                if (begin == 0) {
                    out +=
                        "event: content_block_start\ndata: {\"type\":\"content_block_start\","
                        "\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\","
                        "\"signature\":\"\"}}\n\n";
                }
                out +=
                    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
                    "\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"";
                append_tokens(out, begin, reasoning_end);
                out += "\"}";
                if (has_answer) {
                    out += "}\n\n";
                }
            }
            if (has_answer) {
                const std::string index = r > 0 ? "1" : "0";
                if (answer_start == r) {
                    if (r > 0) {
                        out +=
                            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\","
                            "\"index\":0}\n\n";
                    }
                    out +=
                        "event: content_block_start\ndata: {\"type\":\"content_block_start\","
                        "\"index\":" +
                        index + ",\"content_block\":";
                    out += plan_.tool_call ? "{\"type\":\"tool_use\",\"id\":\"toolu_sim_" + id +
                                                 "\",\"name\":\"" + std::string(tool_name) +
                                                 "\",\"input\":{}}}\n\n"
                                           : std::string("{\"type\":\"text\",\"text\":\"\"}}\n\n");
                }
                out +=
                    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
                    "\"index\":" +
                    index + ",\"delta\":";
                if (plan_.tool_call) {
                    out += "{\"type\":\"input_json_delta\",\"partial_json\":\"";
                    if (answer_start == r) {
                        out += tool_open_escaped;
                    }
                    append_tokens(out, answer_start, end);
                    if (end == total) {
                        out += tool_close_escaped;
                    }
                } else {
                    out += "{\"type\":\"text_delta\",\"text\":\"";
                    append_tokens(out, answer_start, end);
                }
                out += "\"}";
            }
            return;
        }
        case api_kind::tgi: {
            // One event per token, as TGI sends them; the last token carries the details.
            for (std::uint32_t i = begin; i < end; ++i) {
                out += "data:{\"index\":" + std::to_string(i + 1) +
                       ",\"token\":{\"id\":" + std::to_string(1000 + i) + ",\"text\":\"";
                append_token_text(out, plan_.seed, i, plan_.pad_bytes);
                out += "\",\"logprob\":-0.25,\"special\":false},";
                if (i + 1 == total) {
                    out += "\"generated_text\":" + json_quoted(answer_text()) +
                           ",\"details\":{\"finish_reason\":\"";
                    out += plan_.cut_by_max_tokens ? "length" : "eos_token";
                    out += "\",\"generated_tokens\":" + std::to_string(total) +
                           ",\"input_length\":" + std::to_string(plan_.prompt_tokens) +
                           ",\"seed\":null}";
                } else {
                    out += "\"generated_text\":null,\"details\":null";
                }
                if (i + 1 < end) {
                    out += "}\n\n";
                }
            }
            return;
        }
        case api_kind::llamacpp: {
            out += "data: {\"index\":0,\"content\":\"";
            append_tokens(out, begin, end);
            out += "\",\"tokens\":[";
            for (std::uint32_t i = begin; i < end; ++i) {
                out += (i == begin ? "" : ",") + std::to_string(1000 + i);
            }
            out += "],\"stop\":false,\"id_slot\":0,\"tokens_predicted\":" + std::to_string(end) +
                   ",\"tokens_evaluated\":" + std::to_string(plan_.prompt_tokens);
            return;
        }
        case api_kind::ollama_chat:
        case api_kind::ollama_generate: {
            const bool chat = plan_.api == api_kind::ollama_chat;
            out += "{\"model\":" + json_quoted(plan_.model) + ",\"created_at\":\"" +
                   std::string(created_at) + "\",";
            out += chat ? "\"message\":{\"role\":\"assistant\",\"content\":\"" : "\"response\":\"";
            if (has_answer) {
                append_tokens(out, answer_start, end);
            }
            out += "\"";
            if (has_thinking) {
                out += ",\"thinking\":\"";
                append_tokens(out, begin, reasoning_end);
                out += "\"";
            }
            out += chat ? "},\"done\":false" : ",\"done\":false";
            return;
        }
        case api_kind::gemini: {
            std::string parts;
            if (has_thinking) {
                parts += "{\"text\":\"";
                append_tokens(parts, begin, reasoning_end);
                parts += "\",\"thought\":true}";
            }
            if (has_answer) {
                parts += has_thinking ? ",{\"text\":\"" : "{\"text\":\"";
                append_tokens(parts, answer_start, end);
                parts += "\"}";
            }
            append_gemini_chunk(out, reasoning_end, end, parts, false);
            return;
        }
        case api_kind::chat:
        case api_kind::completions:
            break;
    }
}

// ---- tails ----------------------------------------------------------------------------------

void completion_script::append_anthropic_stop_reason(std::string& out) const {
    out += plan_.cut_by_max_tokens ? "max_tokens" : (plan_.tool_call ? "tool_use" : "end_turn");
}

void completion_script::append_dialect_tail(std::string& out) const {
    const std::uint32_t total = plan_.completion_tokens;
    switch (plan_.api) {
        case api_kind::responses:
            out +=
                "event: response.completed\ndata: {\"type\":\"response.completed\","
                "\"response\":";
            append_responses_object(out, true);
            out += "}\n\n";
            return;
        case api_kind::anthropic:
            if (total > 0) {
                out +=
                    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\","
                    "\"index\":";
                out += plan_.reasoning_tokens > 0 && total > plan_.reasoning_tokens ? "1" : "0";
                out += "}\n\n";
            }
            out +=
                "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":"
                "{\"stop_reason\":\"";
            append_anthropic_stop_reason(out);
            out +=
                "\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":" + std::to_string(total) +
                "}}\n\n";
            out += "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
            return;
        case api_kind::tgi:
            if (total == 0) {
                out +=
                    "data:{\"index\":1,\"token\":{\"id\":2,\"text\":\"</s>\",\"logprob\":0.0,"
                    "\"special\":true},\"generated_text\":\"\",\"details\":{\"finish_reason\":"
                    "\"eos_token\",\"generated_tokens\":0,\"input_length\":" +
                    std::to_string(plan_.prompt_tokens) + ",\"seed\":null}}\n\n";
            }
            return;
        case api_kind::llamacpp:
            out +=
                "data: {\"index\":0,\"content\":\"\",\"tokens\":[],\"id_slot\":0,\"stop\":true,"
                "\"model\":" +
                json_quoted(plan_.model) + ",\"tokens_predicted\":" + std::to_string(total) +
                ",\"tokens_evaluated\":" + std::to_string(plan_.prompt_tokens) +
                ",\"stop_type\":\"" + (plan_.cut_by_max_tokens ? "limit" : "eos") +
                "\",\"timings\":{\"cache_n\":0,\"prompt_n\":" +
                std::to_string(plan_.prompt_tokens) + ",\"predicted_n\":" + std::to_string(total) +
                "}}\n\n";
            return;
        case api_kind::ollama_chat:
        case api_kind::ollama_generate: {
            const bool chat = plan_.api == api_kind::ollama_chat;
            out += "{\"model\":" + json_quoted(plan_.model) + ",\"created_at\":\"" +
                   std::string(created_at) + "\",";
            out += chat ? "\"message\":{\"role\":\"assistant\",\"content\":\"\"},"
                        : "\"response\":\"\",";
            out += "\"done_reason\":\"";
            out += plan_.cut_by_max_tokens ? "length" : "stop";
            out +=
                "\",\"done\":true,\"total_duration\":0,\"load_duration\":0,"
                "\"prompt_eval_count\":" +
                std::to_string(plan_.prompt_tokens) +
                ",\"prompt_eval_duration\":0,\"eval_count\":" + std::to_string(total) +
                ",\"eval_duration\":0}\n";
            return;
        }
        case api_kind::gemini:
            append_gemini_chunk(out, plan_.reasoning_tokens, total, "{\"text\":\"\"}", true);
            out += "}\r\n\r\n";
            return;
        case api_kind::chat:
        case api_kind::completions:
            return;
    }
}

// ---- whole bodies ---------------------------------------------------------------------------

std::string completion_script::dialect_body() const {
    const std::uint32_t total = plan_.completion_tokens;
    const std::uint32_t r = plan_.reasoning_tokens;
    const std::string answer = answer_text();
    std::string out;
    switch (plan_.api) {
        case api_kind::responses:
            append_responses_object(out, true);
            return out;
        case api_kind::anthropic: {
            out = "{\"id\":\"msg_sim_" + std::to_string(plan_.request_id) +
                  "\",\"type\":\"message\",\"role\":\"assistant\",\"model\":" +
                  json_quoted(plan_.model) + ",\"content\":[";
            bool comma = false;
            if (r > 0) {
                out += "{\"type\":\"thinking\",\"thinking\":" + json_quoted(reasoning_text()) +
                       ",\"signature\":\"sim\"}";
                comma = true;
            }
            if (total > r) {
                out += comma ? "," : "";
                out += plan_.tool_call ? "{\"type\":\"tool_use\",\"id\":\"toolu_sim_" +
                                             std::to_string(plan_.request_id) + "\",\"name\":\"" +
                                             std::string(tool_name) +
                                             "\",\"input\":{\"text\":" + json_quoted(answer) + "}}"
                                       : "{\"type\":\"text\",\"text\":" + json_quoted(answer) + "}";
            }
            out += "],\"stop_reason\":\"";
            append_anthropic_stop_reason(out);
            out += "\",\"stop_sequence\":null,\"usage\":{\"input_tokens\":" +
                   std::to_string(plan_.prompt_tokens) +
                   ",\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,"
                   "\"output_tokens\":" +
                   std::to_string(total) + "}}";
            return out;
        }
        case api_kind::tgi:
            return "{\"generated_text\":" + json_quoted(answer) +
                   ",\"details\":{\"finish_reason\":\"" +
                   (plan_.cut_by_max_tokens ? "length" : "eos_token") +
                   "\",\"generated_tokens\":" + std::to_string(total) +
                   ",\"input_length\":" + std::to_string(plan_.prompt_tokens) + ",\"seed\":null}}";
        case api_kind::llamacpp:
            out +=
                "{\"index\":0,\"content\":" + json_quoted(answer) +
                ",\"tokens\":[],\"id_slot\":0,\"stop\":true,\"model\":" + json_quoted(plan_.model) +
                ",\"tokens_predicted\":" + std::to_string(total) +
                ",\"tokens_evaluated\":" + std::to_string(plan_.prompt_tokens) +
                ",\"stop_type\":\"" + (plan_.cut_by_max_tokens ? "limit" : "eos") +
                "\",\"timings\":{\"cache_n\":0,\"prompt_n\":" +
                std::to_string(plan_.prompt_tokens) + ",\"predicted_n\":" + std::to_string(total) +
                "}}";
            return out;
        case api_kind::ollama_chat:
        case api_kind::ollama_generate: {
            const bool chat = plan_.api == api_kind::ollama_chat;
            out = "{\"model\":" + json_quoted(plan_.model) + ",\"created_at\":\"" +
                  std::string(created_at) + "\",";
            std::string thinking = r > 0 ? ",\"thinking\":" + json_quoted(reasoning_text()) : "";
            out += chat ? "\"message\":{\"role\":\"assistant\",\"content\":" + json_quoted(answer) +
                              thinking + "},"
                        : "\"response\":" + json_quoted(answer) + thinking + ",";
            out += std::string("\"done_reason\":\"") +
                   (plan_.cut_by_max_tokens ? "length" : "stop") +
                   "\",\"done\":true,\"total_duration\":0,\"load_duration\":0,"
                   "\"prompt_eval_count\":" +
                   std::to_string(plan_.prompt_tokens) +
                   ",\"prompt_eval_duration\":0,\"eval_count\":" + std::to_string(total) +
                   ",\"eval_duration\":0}";
            return out;
        }
        case api_kind::gemini: {
            std::string parts;
            if (r > 0) {
                parts += "{\"text\":" + json_quoted(reasoning_text()) + ",\"thought\":true},";
            }
            parts += "{\"text\":" + json_quoted(answer) + "}";
            append_gemini_chunk(out, r, total, parts, true);
            out += "}";
            // A whole body, not an event: drop the SSE field name.
            return out.substr(6);
        }
        case api_kind::chat:
        case api_kind::completions:
            break;
    }
    return out;
}

}  // namespace tokenmeter::sim
