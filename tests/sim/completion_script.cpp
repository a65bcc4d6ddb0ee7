#include "completion_script.hpp"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <vector>

namespace tokenmeter::sim {
namespace {

using json = nlohmann::json;

// 32 common English nouns with a leading space, so a BPE tokenizer is likely to see one token
// per word; 32 is coprime with the stride 7, so the sequence visits every word.
constexpr std::array<std::string_view, 32> words = {
    " time",    " year",    " people", " way",    " day",   " man",    " thing",   " woman",
    " life",    " child",   " world",  " school", " state", " family", " student", " group",
    " country", " problem", " hand",   " part",   " place", " case",   " week",    " company",
    " system",  " program", " work",   " number", " night", " point",  " home",    " water",
};

constexpr std::string_view alphabet = "abcdefghijklmnopqrstuvwxyz";

// Padding is appended in slices of this precomputed pattern; its length is a multiple of 26
// so every slice starts at 'a'.
const std::string& pad_pattern() {
    static const std::string pattern = [] {
        std::string text;
        text.reserve(alphabet.size() * 2048);
        for (int i = 0; i < 2048; ++i) {
            text += alphabet;
        }
        return text;
    }();
    return pattern;
}

constexpr std::string_view tool_arguments_open = R"({\"text\":\")";
constexpr std::string_view tool_arguments_close = R"(\"})";

std::string json_string(std::string_view text) {
    return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::uint64_t count_content_words(const json& content) {
    if (content.is_string()) {
        return count_words(content.get_ref<const std::string&>());
    }
    std::uint64_t total = 0;
    if (content.is_array()) {
        for (const auto& part : content) {
            if (part.is_object()) {
                if (auto text = part.find("text"); text != part.end() && text->is_string()) {
                    total += count_words(text->get_ref<const std::string&>());
                }
            } else if (part.is_string()) {
                total += count_words(part.get_ref<const std::string&>());
            }
        }
    }
    return total;
}

}  // namespace

std::string_view token_word(std::uint64_t seed, std::uint64_t index) {
    return words[(index * 7 + seed) % words.size()];
}

void append_token_text(std::string& out, std::uint64_t seed, std::uint64_t index,
                       std::size_t pad_bytes) {
    out += token_word(seed, index);
    const std::string& pattern = pad_pattern();
    while (pad_bytes > 0) {
        std::size_t slice = std::min(pad_bytes, pattern.size());
        out.append(pattern, 0, slice);
        pad_bytes -= slice;
    }
}

std::uint32_t count_words(std::string_view text) {
    std::uint32_t count = 0;
    bool in_word = false;
    for (char c : text) {
        if (is_space(c)) {
            in_word = false;
        } else if (!in_word) {
            in_word = true;
            ++count;
        }
    }
    return count;
}

namespace {

// Words in any prompt-like value: a string, an array of them, or objects with text/content/parts.
// Iterative: a request nested 100,000 deep must not reach the call stack.
std::uint64_t count_any_words(const json& root) {
    std::uint64_t total = 0;
    std::vector<const json*> todo{&root};
    while (!todo.empty()) {
        const json* value = todo.back();
        todo.pop_back();
        if (value->is_string()) {
            total += count_words(value->get_ref<const std::string&>());
        } else if (value->is_array()) {
            for (const auto& item : *value) {
                todo.push_back(&item);
            }
        } else if (value->is_object()) {
            for (const char* key : {"text", "content", "parts"}) {
                if (auto inner = value->find(key); inner != value->end()) {
                    todo.push_back(&*inner);
                }
            }
        }
    }
    return total;
}

}  // namespace

std::uint32_t count_prompt_tokens(const json& body, api_kind api) {
    std::uint64_t total = 0;
    if (is_dialect(api)) {
        for (const char* key : {"messages", "system", "input", "inputs", "prompt", "contents"}) {
            if (auto value = body.find(key); value != body.end()) {
                total += count_any_words(*value);
            }
        }
    } else if (api == api_kind::chat) {
        if (auto messages = body.find("messages"); messages != body.end() && messages->is_array()) {
            for (const auto& message : *messages) {
                if (!message.is_object()) {
                    continue;
                }
                if (auto content = message.find("content"); content != message.end()) {
                    total += count_content_words(*content);
                }
            }
        }
    } else if (auto prompt = body.find("prompt"); prompt != body.end()) {
        if (prompt->is_string()) {
            total = count_words(prompt->get_ref<const std::string&>());
        } else if (prompt->is_array()) {
            for (const auto& item : *prompt) {
                if (item.is_string()) {
                    total += count_words(item.get_ref<const std::string&>());
                } else if (item.is_number()) {
                    ++total;  // a pre-tokenized prompt: one id is one token
                } else if (item.is_array()) {
                    total += item.size();
                }
            }
        }
    }
    total = std::clamp<std::uint64_t>(total, 1, UINT32_MAX);
    return static_cast<std::uint32_t>(total);
}

completion_script::completion_script(completion_plan plan) : plan_(std::move(plan)) {
    plan_.reasoning_tokens =
        has_reasoning(plan_.api) ? std::min(plan_.reasoning_tokens, plan_.completion_tokens) : 0;
    if (!has_tool_calls(plan_.api)) {
        plan_.tool_call = false;
    }
    plan_.tokens_per_chunk = std::max<std::uint32_t>(plan_.tokens_per_chunk, 1);
    const bool chat = plan_.api == api_kind::chat;
    chunk_prefix_ = "data: {\"id\":\"";
    chunk_prefix_ += chat ? "chatcmpl-sim-" : "cmpl-sim-";
    chunk_prefix_ += std::to_string(plan_.request_id);
    chunk_prefix_ += "\",\"object\":\"";
    chunk_prefix_ += chat ? "chat.completion.chunk" : "text_completion";
    chunk_prefix_ += "\",\"created\":";
    chunk_prefix_ += std::to_string(fixed_created);
    chunk_prefix_ += ",\"model\":";
    chunk_prefix_ += json_string(plan_.model);
    chunk_prefix_ += ',';
}

std::uint32_t completion_script::content_chunk_count() const {
    return (plan_.completion_tokens + plan_.tokens_per_chunk - 1) / plan_.tokens_per_chunk;
}

std::string_view completion_script::finish_reason() const {
    if (plan_.cut_by_max_tokens) {
        return "length";
    }
    return plan_.tool_call ? "tool_calls" : "stop";
}

std::uint32_t completion_script::answer_begin() const {
    return plan_.reasoning_tokens;
}

void completion_script::append_chunk_prefix(std::string& out) const {
    out += chunk_prefix_;
}

void completion_script::append_tokens(std::string& out, std::uint32_t begin,
                                      std::uint32_t end) const {
    for (std::uint32_t i = begin; i < end; ++i) {
        append_token_text(out, plan_.seed, i, plan_.pad_bytes);
    }
}

void completion_script::append_usage_object(std::string& out,
                                            std::uint32_t completion_tokens) const {
    const std::uint64_t total = static_cast<std::uint64_t>(plan_.prompt_tokens) + completion_tokens;
    out += "{\"prompt_tokens\":";
    out += std::to_string(plan_.prompt_tokens);
    out += ",\"completion_tokens\":";
    out += std::to_string(completion_tokens);
    out += ",\"total_tokens\":";
    out += std::to_string(total);
    if (plan_.reasoning_tokens > 0) {
        out += ",\"completion_tokens_details\":{\"reasoning_tokens\":";
        out += std::to_string(std::min(plan_.reasoning_tokens, completion_tokens));
        out += '}';
    }
    out += '}';
}

void completion_script::append_role_event(std::string& out) const {
    if (is_dialect(plan_.api)) {
        append_dialect_head(out);
        return;
    }
    append_chunk_prefix(out);
    out += R"("choices":[{"index":0,"delta":{"role":"assistant",)";
    if (plan_.tool_call) {
        out += R"("content":null,"tool_calls":[{"index":0,"id":"call_sim_)";
        out += std::to_string(plan_.request_id);
        out += R"(","type":"function","function":{"name":")";
        out += tool_name;
        out += R"(","arguments":""}}]})";
    } else {
        out += R"("content":""})";
    }
    out += R"(,"logprobs":null,"finish_reason":null}])";
    if (plan_.continuous_usage) {
        out += ",\"usage\":";
        append_usage_object(out, 0);
    } else if (plan_.usage_chunk) {
        out += ",\"usage\":null";
    }
    out += "}\n\n";
}

void completion_script::open_content_event(std::string& out, std::uint32_t chunk_index) const {
    if (is_dialect(plan_.api)) {
        open_dialect_content(out, chunk_index);
        return;
    }
    const std::uint32_t begin =
        std::min(chunk_index * plan_.tokens_per_chunk, plan_.completion_tokens);
    const std::uint32_t end = std::min(begin + plan_.tokens_per_chunk, plan_.completion_tokens);
    const std::uint32_t reasoning_end = plan_.reasoning_tokens;
    append_chunk_prefix(out);
    if (plan_.api == api_kind::completions) {
        out += R"("choices":[{"index":0,"text":")";
        append_tokens(out, begin, end);
        out += R"(","logprobs":null,"finish_reason":null}])";
    } else {
        out += R"("choices":[{"index":0,"delta":{)";
        const bool has_reasoning = begin < reasoning_end;
        if (has_reasoning) {
            out += R"("reasoning_content":")";
            append_tokens(out, begin, std::min(end, reasoning_end));
            out += '"';
        }
        if (end > reasoning_end) {
            const std::uint32_t answer_start = std::max(begin, reasoning_end);
            if (has_reasoning) {
                out += ',';
            }
            if (plan_.tool_call) {
                out += R"("tool_calls":[{"index":0,"function":{"arguments":")";
                if (answer_start == answer_begin()) {
                    out += tool_arguments_open;
                }
                append_tokens(out, answer_start, end);
                if (end == plan_.completion_tokens) {
                    out += tool_arguments_close;
                }
                out += R"("}}])";
            } else {
                out += R"("content":")";
                append_tokens(out, answer_start, end);
                out += '"';
            }
        }
        out += R"(},"logprobs":null,"finish_reason":null}])";
    }
    if (plan_.continuous_usage) {
        out += ",\"usage\":";
        append_usage_object(out, end);
    } else if (plan_.usage_chunk) {
        out += ",\"usage\":null";
    }
}

void completion_script::close_event(std::string& out, std::optional<std::int64_t> sent_ns) {
    if (sent_ns) {
        out += ",\"sim_sent_ns\":";
        out += std::to_string(*sent_ns);
    }
    out += "}\n\n";
}

void completion_script::append_finish_event(std::string& out) const {
    append_chunk_prefix(out);
    if (plan_.api == api_kind::completions) {
        out += R"("choices":[{"index":0,"text":"","logprobs":null,"finish_reason":")";
    } else {
        out += R"("choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":")";
    }
    out += finish_reason();
    out += "\"}]";
    if (plan_.continuous_usage) {
        out += ",\"usage\":";
        append_usage_object(out, plan_.completion_tokens);
    } else if (plan_.usage_chunk) {
        out += ",\"usage\":null";
    }
    out += "}\n\n";
}

void completion_script::append_usage_event(std::string& out) const {
    append_chunk_prefix(out);
    out += R"("choices":[],"usage":)";
    append_usage_object(out, plan_.completion_tokens);
    out += "}\n\n";
}

void completion_script::append_done_event(std::string& out) {
    out += "data: [DONE]\n\n";
}

void completion_script::append_garbage_events(std::string& out, std::uint32_t chunk_index) {
    out += "data: {not json\n\n";
    out += "event: sim-unknown\ndata: {\"sim\":\"unknown event\",\"after_chunk\":";
    out += std::to_string(chunk_index);
    out += "}\n\n";
}

std::string completion_script::reasoning_text() const {
    std::string text;
    append_tokens(text, 0, plan_.reasoning_tokens);
    return text;
}

std::string completion_script::answer_text() const {
    std::string text;
    append_tokens(text, answer_begin(), plan_.completion_tokens);
    return text;
}

std::string completion_script::response_body(bool include_usage) const {
    if (is_dialect(plan_.api)) {
        return dialect_body();
    }
    const bool chat = plan_.api == api_kind::chat;
    json body;
    body["id"] = (chat ? "chatcmpl-sim-" : "cmpl-sim-") + std::to_string(plan_.request_id);
    body["object"] = chat ? "chat.completion" : "text_completion";
    body["created"] = fixed_created;
    body["model"] = plan_.model;
    json choice;
    choice["index"] = 0;
    if (chat) {
        json message;
        message["role"] = "assistant";
        if (plan_.tool_call) {
            message["content"] = nullptr;
            std::string arguments;
            if (plan_.completion_tokens > answer_begin()) {
                arguments = "{\"text\":\"" + answer_text() + "\"}";
            }
            message["tool_calls"] = json::array({{
                {"id", "call_sim_" + std::to_string(plan_.request_id)},
                {"type", "function"},
                {"function", {{"name", tool_name}, {"arguments", arguments}}},
            }});
        } else {
            message["content"] = answer_text();
        }
        if (plan_.reasoning_tokens > 0) {
            message["reasoning_content"] = reasoning_text();
        }
        choice["message"] = std::move(message);
    } else {
        choice["text"] = answer_text();
    }
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = finish_reason();
    body["choices"] = json::array({std::move(choice)});
    if (include_usage) {
        std::string usage;
        append_usage_object(usage, plan_.completion_tokens);
        body["usage"] = json::parse(usage);
    }
    return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace tokenmeter::sim
