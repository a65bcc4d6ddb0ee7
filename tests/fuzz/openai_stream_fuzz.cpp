// Differential fuzz target for the metering path below the relay: SSE parser → OpenAI adapter →
// stream meter. The same bytes fed whole and split at fuzzer-chosen points must give the same
// token count, chunk count, parse errors and reported usage (the timestamps are all equal here,
// so only the split can differ). Nothing may crash, hang or grow without bound.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <vector>

#include "meter/exchange.hpp"

namespace {

using namespace tokenmeter;

struct outcome_digest {
    std::uint64_t counted = 0, chunks = 0, chars = 0, parse_errors = 0;
    std::optional<std::uint64_t> input, output;
    bool done = false, error = false;
    bool operator==(const outcome_digest&) const = default;
};

outcome_digest run(std::string_view bytes, const std::vector<std::size_t>& cuts, bool chat,
                   bool json_body) {
    static const std::vector<double> bounds = {0.001, 0.01, 0.1};
    protocol::request_info info;
    info.model = "fuzz";
    info.stream = !json_body;
    info.body_parsed = true;
    auto api =
        chat ? protocol::api_kind::openai_chat_completions : protocol::api_kind::openai_completions;
    meter::exchange ex(api, info, core::time_point{}, &bounds, meter::exchange_limits{4096, 4096});
    ex.on_response_head(200, json_body ? "application/json" : "text/event-stream",
                        core::time_point{});
    std::size_t from = 0;
    for (std::size_t cut : cuts) {
        ex.on_body(bytes.substr(from, cut - from), core::time_point{});
        from = cut;
    }
    ex.on_body(bytes.substr(from), core::time_point{});
    auto s = ex.finish(meter::end_reason::upstream_complete, core::time_point{});
    return {s.counted_output_tokens, s.text_chunks,           s.output_chars,
            s.parse_errors,          s.reported.input_tokens, s.reported.output_tokens,
            s.done_marker,           s.stream_error};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) {
        return 0;
    }
    bool chat = (data[0] & 1) != 0;
    bool json_body = (data[0] & 2) != 0;
    std::size_t cut_count = data[1] % 8;
    data += 2;
    size -= 2;
    std::string_view bytes(reinterpret_cast<const char*>(data), size);

    std::vector<std::size_t> cuts;
    for (std::size_t i = 0; i < cut_count && size > 0; ++i) {
        cuts.push_back((static_cast<std::size_t>(data[i % size]) * 131 + i * 17) % (size + 1));
    }
    std::sort(cuts.begin(), cuts.end());

    auto whole = run(bytes, {}, chat, json_body);
    auto split = run(bytes, cuts, chat, json_body);
    if (!(whole == split)) {
        std::abort();
    }
    return 0;
}
