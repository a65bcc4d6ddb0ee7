// protocol/openai: the OpenAI Chat Completions and Completions dialect (also spoken by vLLM,
// SGLang, TGI's and llama.cpp's OpenAI endpoints). Turns SSE events or a whole JSON body into
// response_chunks; never throws, never alters bytes.
#pragma once

#include <string>
#include <string_view>

#include "core/time.hpp"
#include "protocol/adapter.hpp"
#include "protocol/types.hpp"

namespace tokenmeter::protocol {

// Reads model, stream and stream_options.include_usage from a request body.
request_info parse_openai_request(std::string_view body);

class openai_adapter final : public adapter {
  public:
    explicit openai_adapter(api_kind kind) noexcept : kind_(kind) {}

    // One SSE event (type + data), as the SSE parser dispatches it.
    void on_event(std::string_view type, std::string_view data, core::time_point at,
                  chunk_sink& sink) override;
    // A whole non-streamed JSON response body.
    void on_body(std::string_view body, core::time_point at, chunk_sink& sink) override;

  private:
    void decode(std::string_view json_text, bool streamed, core::time_point at, chunk_sink& sink);

    api_kind kind_;
    // Reused across chunks so that a chunk with several choices or tool calls can be handed
    // over as one contiguous view without allocating per chunk.
    std::string content_;
    std::string reasoning_;
    std::string tool_arguments_;
    std::string finish_reason_;
};

}  // namespace tokenmeter::protocol
