// protocol/openai: the OpenAI Chat Completions and Completions dialects (also spoken by vLLM,
// SGLang, TGI's and llama.cpp's OpenAI endpoints). The adapter and both table rows live in
// openai.cpp; this header is the request reader the rows use, exposed for tests.
#pragma once

#include <string_view>

#include "protocol/chunk_builder.hpp"
#include "protocol/types.hpp"

namespace tokenmeter::protocol {

// Reads model, stream, stream_options.include_usage and the prompt's text from a request body.
// One pass of json_walk over the body.
request_info parse_openai_request(std::string_view body);
// The same read from nlohmann/json's DOM: what parse_openai_request gives, and reads in its place
// a body that repeats a key it reads (the DOM keeps the last). Exposed for tests and the fuzzer,
// which compare the two.
request_info parse_openai_request_dom(std::string_view body);

// Streamed Chat Completions chunks of the common shape are read by a one-pass reader instead of
// the general walk (same results); tests and benchmarks turn it off to compare the two.
void set_openai_chunk_reader(bool enabled) noexcept;
// The reader alone, for tests: true if it read `text` whole; `out` then holds what the walk
// would have collected, `choices` whether there was a "choices" array, `role` a delta's role.
bool read_openai_chat_chunk(std::string_view text, chunk_builder& out, bool& choices, bool& role);

}  // namespace tokenmeter::protocol
