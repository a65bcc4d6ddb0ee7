// protocol/types: what a dialect adapter tells the meter, independent of the wire format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/time.hpp"

namespace tokenmeter::protocol {

// Which API a request speaks. Chosen by path, or by a configured route (protocol/dialects).
enum class api_kind : std::uint8_t {
    none,                     // not an LLM API: passed through, not metered
    openai_chat_completions,  // POST /v1/chat/completions
    openai_completions,       // POST /v1/completions
    openai_responses,         // POST /v1/responses
    anthropic_messages,       // POST /v1/messages
    tgi_generate,             // POST /generate, /generate_stream (Hugging Face TGI)
    llamacpp_completion,      // POST /completion (llama.cpp server's native API)
    ollama_chat,              // POST /api/chat (NDJSON)
    ollama_generate,          // POST /api/generate (NDJSON)
    gemini_generate,          // POST .../models/<m>:generateContent, :streamGenerateContent
    // Requests that bill their input only (a pooling model generates nothing; protocol/pooling)
    openai_embeddings,   // POST /v1/embeddings, /embeddings
    rerank,              // POST /rerank, /v1/rerank, /v2/rerank (vLLM, Cohere-compatible)
    score,               // POST /score, /v1/score (vLLM)
    classify,            // POST /classify (vLLM)
    pooling,             // POST /pooling (vLLM)
    openai_moderations,  // POST /v1/moderations
    // Audio in, text out (protocol/audio)
    openai_transcriptions,  // POST /v1/audio/transcriptions
    openai_translations,    // POST /v1/audio/translations
    // Text in, audio out (protocol/speech)
    openai_speech,  // POST /v1/audio/speech
    // A WebSocket tunnel's messages, one usage record per response (protocol/realtime)
    openai_realtime,  // GET /v1/realtime upgraded to a WebSocket
    // The transcriptions of a Realtime session's input (input_audio_transcription), one record
    // per committed input, under the transcription model
    openai_realtime_transcription,
};

// The `api` label value; "none" for pass-through.
std::string_view to_string(api_kind kind) noexcept;

// Why part of a body could not be metered (the `reason` label of tokenmeter_parse_errors_total).
// A small fixed set, so the label stays bounded.
enum class parse_error : std::uint8_t {
    invalid_json,      // not JSON, or JSON cut short
    unexpected_shape,  // valid JSON (or a body) that is not what this dialect sends
    unknown_event,     // an event type the dialect does not define
    oversized_event,   // an event, line or body over the configured bound: forwarded, not read
    truncated_event,   // the body ended inside an event or line
};
inline constexpr std::size_t parse_error_count = 5;
std::string_view to_string(parse_error reason) noexcept;

// What the request body says about the response to expect.
struct request_info {
    std::string model;  // empty when absent or unparsable
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    bool body_parsed = false;    // false: the body was not JSON (still forwarded)
    // The OpenAI reader's notes for usage injection, so that it need not parse the body again:
    // a "stream_options" member at the root (even null), and a root object without members.
    bool has_stream_options = false;
    bool empty_object = false;
    std::uint64_t prompt_chars = 0;
    // Input the request gives as token ids (embeddings' integer arrays): counted as their
    // number, beside whatever prompt_text counts to.
    std::uint64_t prompt_token_ids = 0;
    // false: the input is not text (an audio upload): without the server's report its count is
    // unknown, never a count of prompt_text.
    bool countable_input = true;
    // false: the output is not text (speech's audio): without the server's report its count is
    // unknown, never a count of the text the response carried (meter/billing).
    bool countable_output = true;
    // The most output the request allows (max_tokens, max_completion_tokens, max_output_tokens,
    // Gemini's generationConfig.maxOutputTokens, Ollama's options.num_predict, TGI's
    // parameters.max_new_tokens, llama.cpp's n_predict), the largest when it names several;
    // nullopt when it names none. What a tenant limit reserves for the output at admission.
    std::optional<std::uint64_t> max_output_tokens;
    // The texts of the prompt (message contents, or the completion prompt), joined by newlines:
    // what the proxy tokenizes when the server reports no input count. No chat template.
    std::string prompt_text;
};

// Token counts as a server reports them. Absent fields stay nullopt: an explicit 0 is kept as 0.
struct token_usage {
    std::optional<std::uint64_t> input_tokens;
    std::optional<std::uint64_t> output_tokens;
    std::optional<std::uint64_t> reasoning_tokens;
    std::optional<std::uint64_t> cached_input_tokens;  // cache reads, a part of input
    std::optional<std::uint64_t> cache_write_tokens;   // cache writes, a part of input
    // The part of the cache writes kept for an hour (Anthropic's 1-hour tier).
    std::optional<std::uint64_t> cache_write_1h_tokens;
    // Audio tokens, a part of input and of output (OpenAI Realtime's *_token_details).
    std::optional<std::uint64_t> input_audio_tokens;
    std::optional<std::uint64_t> output_audio_tokens;
    // Seconds of audio the server bills (a transcription's usage of "type": "duration"): not a
    // token count, kept beside them. Finite and not negative.
    std::optional<double> audio_seconds;
};

// One decoded unit of a response: a streamed chunk, or the whole of a non-streamed body.
// Text views are valid only for the duration of the callback.
struct response_chunk {
    std::string_view content;
    std::string_view reasoning;
    std::string_view tool_arguments;
    std::optional<token_usage> usage;
    std::string_view finish_reason;
    // The model the server says produced the answer (OpenAI's "model", Anthropic's
    // message.model, Gemini's modelVersion); empty when this chunk names none.
    std::string_view model;
    bool role_only = false;  // a chunk with only a role (or empty text): not a token
    bool error = false;      // the server reported an error object inside the stream
    // Generated audio, no text: the first output the user gets (its time is the first token's),
    // but nothing to count.
    bool audio = false;
    // Every byte of the text fields is known to be printable ASCII (the reader that produced
    // them accepted nothing else), so a consumer need not check their UTF-8 again.
    bool ascii_text = false;

    [[nodiscard]] bool carries_text() const noexcept {
        return !content.empty() || !reasoning.empty() || !tool_arguments.empty();
    }
    [[nodiscard]] std::size_t text_chars() const noexcept {
        return content.size() + reasoning.size() + tool_arguments.size();
    }
};

// Receives decoded chunks with the time of the read that completed them.
class chunk_sink {
  public:
    virtual ~chunk_sink() = default;
    virtual void on_chunk(const response_chunk& chunk, core::time_point at) = 0;
    // An end-of-stream marker such as OpenAI's `data: [DONE]`.
    virtual void on_done_marker(core::time_point at) = 0;
    // Something in the body could not be understood; it was forwarded unchanged.
    virtual void on_parse_error(parse_error reason) = 0;
};

}  // namespace tokenmeter::protocol
