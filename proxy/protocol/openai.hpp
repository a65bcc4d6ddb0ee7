// protocol/openai: the OpenAI Chat Completions and Completions dialects (also spoken by vLLM,
// SGLang, TGI's and llama.cpp's OpenAI endpoints). The adapter and both table rows live in
// openai.cpp; this header is the request reader the rows use, exposed for tests.
#pragma once

#include <string_view>

#include "protocol/types.hpp"

namespace tokenmeter::protocol {

// Reads model, stream, stream_options.include_usage and the prompt's text from a request body.
request_info parse_openai_request(std::string_view body);

}  // namespace tokenmeter::protocol
