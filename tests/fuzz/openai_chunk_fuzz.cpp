// Differential fuzz target for the OpenAI adapter's one-pass chunk reader (protocol/openai.cpp):
// arbitrary bytes as the streamed Chat Completions events of one response (one event per line,
// so that the reader's memory of the bytes before "choices", before a delta's text and after it
// is exercised across events), decoded by one adapter with the reader on and by another with it
// off (the general walk alone). The chunks and parse errors reported must be the same, field for
// field. Nothing may crash or throw.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/dialects.hpp"
#include "protocol/openai.hpp"

namespace {

using namespace tokenmeter;

struct seen {
    std::string content, reasoning, tool, finish;
    bool role_only = false, error = false, usage = false;
    bool operator==(const seen&) const = default;
};

class sink final : public protocol::chunk_sink {
  public:
    void on_chunk(const protocol::response_chunk& chunk, core::time_point) override {
        chunks.push_back({std::string(chunk.content), std::string(chunk.reasoning),
                          std::string(chunk.tool_arguments), std::string(chunk.finish_reason),
                          chunk.role_only, chunk.error, chunk.usage.has_value()});
    }
    void on_done_marker(core::time_point) override { ++done; }
    void on_parse_error(protocol::parse_error reason) override {
        ++errors[static_cast<std::size_t>(reason)];
    }
    std::vector<seen> chunks;
    int done = 0;
    std::array<int, protocol::parse_error_count> errors{};
};

sink decode(std::string_view data, bool reader) {
    protocol::set_openai_chunk_reader(reader);
    sink out;
    auto adapter = protocol::make_adapter(protocol::api_kind::openai_chat_completions);
    for (std::size_t start = 0; start <= data.size();) {
        const std::size_t end = std::min(data.find('\n', start), data.size());
        adapter->on_event("message", data.substr(start, end - start), core::time_point{}, out);
        start = end + 1;
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    const sink with = decode(text, true);
    const sink without = decode(text, false);
    if (with.chunks != without.chunks || with.errors != without.errors ||
        with.done != without.done) {
        std::abort();
    }
    return 0;
}
