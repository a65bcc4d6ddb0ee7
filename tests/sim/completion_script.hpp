#pragma once

// The deterministic content of one completion: which token carries which text and the
// exact bytes of every SSE event and of the non-streaming body. No I/O and no clock, so
// a test can predict every byte the simulator sends.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace tokenmeter::sim {

enum class api_kind {
    chat,             // POST /v1/chat/completions
    completions,      // POST /v1/completions
    responses,        // POST /v1/responses (OpenAI Responses API)
    anthropic,        // POST /v1/messages (Anthropic Messages)
    tgi,              // POST /generate, /generate_stream (Hugging Face TGI)
    llamacpp,         // POST /completion (llama.cpp server)
    ollama_chat,      // POST /api/chat (NDJSON)
    ollama_generate,  // POST /api/generate (NDJSON)
    gemini,           // POST /v1beta/models/<m>:generateContent, :streamGenerateContent
};

// The dialects beyond OpenAI chat/completions; their events are built in dialect_script.cpp.
bool is_dialect(api_kind api);
// Whether a dialect sends reasoning text or tool calls at all.
bool has_reasoning(api_kind api);
bool has_tool_calls(api_kind api);

struct completion_plan {
    api_kind api = api_kind::chat;
    std::string model;
    std::uint64_t request_id = 0;
    std::uint32_t prompt_tokens = 1;
    std::uint32_t completion_tokens = 0;  // after max_tokens
    std::uint32_t tokens_per_chunk = 1;
    std::uint32_t reasoning_tokens = 0;  // the first this many completion tokens (chat only)
    bool tool_call = false;              // chat only
    bool cut_by_max_tokens = false;
    bool continuous_usage = false;
    bool usage_chunk = false;  // a final usage chunk follows; other chunks carry "usage":null
    std::size_t pad_bytes = 0;
    std::uint64_t seed = 0;
};

// A constant instead of the wall clock keeps responses byte-for-byte reproducible.
inline constexpr std::int64_t fixed_created = 1700000000;
inline constexpr std::string_view tool_name = "sim_tool";

// Token i is word[(7 * i + seed) % 32] followed by pad_bytes of "abc...z" repeated.
std::string_view token_word(std::uint64_t seed, std::uint64_t index);
void append_token_text(std::string& out, std::uint64_t seed, std::uint64_t index,
                       std::size_t pad_bytes);

// Whitespace-separated words; the simulator's stand-in for a tokenizer.
std::uint32_t count_words(std::string_view text);
// Words in every message content (string or text parts) or prompt, at least 1.
std::uint32_t count_prompt_tokens(const nlohmann::json& body, api_kind api);

class completion_script {
  public:
    explicit completion_script(completion_plan plan);

    const completion_plan& plan() const { return plan_; }
    std::uint32_t content_chunk_count() const;
    std::string_view finish_reason() const;
    bool has_role_event() const {
        return plan_.api == api_kind::chat || plan_.api == api_kind::responses ||
               plan_.api == api_kind::anthropic;
    }
    // application/x-ndjson for Ollama, text/event-stream for everything else.
    std::string_view stream_content_type() const;

    void append_role_event(std::string& out) const;
    // Leaves the top-level object open so the caller can stamp the send time at the
    // last moment before the write; close it with close_event.
    void open_content_event(std::string& out, std::uint32_t chunk_index) const;
    static void close_event(std::string& out, std::optional<std::int64_t> sent_ns);
    // close_event with the dialect's event terminator (NDJSON: one newline; Gemini: CR LF).
    void close_content_event(std::string& out, std::optional<std::int64_t> sent_ns) const;
    // Everything after the last content chunk for a dialect: finish, usage, end marker.
    void append_dialect_tail(std::string& out) const;
    void append_finish_event(std::string& out) const;
    void append_usage_event(std::string& out) const;
    static void append_done_event(std::string& out);
    // x-sim-fail: garbage, after each content chunk: a malformed JSON line and an unknown event.
    static void append_garbage_events(std::string& out, std::uint32_t chunk_index);
    // The same for this script's framing (NDJSON gets a malformed line and a foreign object).
    void append_garbage(std::string& out, std::uint32_t chunk_index) const;

    // The non-streaming response body.
    std::string response_body(bool include_usage) const;
    // All completion text concatenated (reasoning, then content), without tool JSON framing.
    std::string reasoning_text() const;
    std::string answer_text() const;

  private:
    void append_dialect_head(std::string& out) const;
    void open_dialect_content(std::string& out, std::uint32_t chunk_index) const;
    std::string dialect_body() const;
    void append_responses_object(std::string& out, bool completed) const;
    void append_anthropic_stop_reason(std::string& out) const;
    void append_gemini_chunk(std::string& out, std::uint32_t reasoning_end,
                             std::uint32_t answer_end, std::string_view parts, bool finish) const;
    void append_chunk_prefix(std::string& out) const;
    void append_usage_object(std::string& out, std::uint32_t completion_tokens) const;
    void append_tokens(std::string& out, std::uint32_t begin, std::uint32_t end) const;
    std::uint32_t answer_begin() const;

    completion_plan plan_;
    std::string chunk_prefix_;  // data: {"id":...,"object":...,"created":...,"model":...,
};

}  // namespace tokenmeter::sim
