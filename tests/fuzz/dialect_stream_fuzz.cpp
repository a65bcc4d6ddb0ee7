// Differential fuzz target for every dialect's metering path (framing parser → adapter → stream
// meter, through meter::exchange) and for the usage filter of the relay. The same bytes fed
// whole and split at fuzzer-chosen points must give the same counts, usage and parse errors by
// reason; the usage filter must give the same output however the bytes are cut, and never more
// bytes than it was given. Nothing may crash, hang or grow without bound.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meter/exchange.hpp"
#include "protocol/dialect.hpp"
#include "protocol/usage_filter.hpp"

namespace {

using namespace tokenmeter;
using protocol::api_kind;

constexpr std::array<const char*, 3> content_types = {"text/event-stream", "application/x-ndjson",
                                                      "application/json"};

struct digest {
    std::uint64_t counted = 0, chunks = 0, chars = 0, parse_errors = 0;
    std::array<std::uint64_t, protocol::parse_error_count> by_reason{};
    std::optional<std::uint64_t> input, output, reasoning, cached;
    bool done = false, error = false, content_ttft = false;
    bool operator==(const digest&) const = default;
};

digest run(std::string_view bytes, const std::vector<std::size_t>& cuts, api_kind api,
           const char* content_type) {
    static const std::vector<double> bounds = {0.001, 0.01, 0.1};
    protocol::request_info info;
    info.model = "fuzz";
    info.stream = std::string_view(content_type) != "application/json";
    info.body_parsed = true;
    meter::exchange ex(api, info, core::time_point{}, &bounds, meter::exchange_limits{4096, 4096});
    ex.on_response_head(200, content_type, core::time_point{});
    std::size_t from = 0;
    for (std::size_t cut : cuts) {
        ex.on_body(bytes.substr(from, cut - from), core::time_point{});
        from = cut;
        if (ex.buffered_bytes() > 2 * 4096 + 2) {
            std::abort();
        }
    }
    ex.on_body(bytes.substr(from), core::time_point{});
    auto s = ex.finish(meter::end_reason::upstream_complete, core::time_point{});
    return {s.counted_output_tokens,
            s.text_chunks,
            s.output_chars,
            s.parse_errors,
            s.parse_errors_by_reason,
            s.reported.input_tokens,
            s.reported.output_tokens,
            s.reported.reasoning_tokens,
            s.reported.cached_input_tokens,
            s.done_marker,
            s.stream_error,
            s.time_to_first_content_token.has_value()};
}

// With max_held at least the input size no event is passed through early, so the output must
// not depend on the cuts; with a small bound only the safety properties are checked (an event
// over the bound is forwarded as it arrives, keeping a "usage":null member it may carry).
std::string filter(std::string_view bytes, const std::vector<std::size_t>& cuts,
                   std::size_t max_held, bool continuous) {
    protocol::usage_filter f(max_held, continuous);
    std::string out;
    std::size_t from = 0;
    for (std::size_t cut : cuts) {
        out.append(f.feed(bytes.substr(from, cut - from), false));
        from = cut;
        if (f.held_bytes() > max_held + bytes.size()) {
            std::abort();
        }
    }
    out.append(f.feed(bytes.substr(from), true));
    if (f.held_bytes() != 0 || out.size() > bytes.size()) {
        std::abort();
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) {
        return 0;
    }
    // Every row of the dialect table, in table order, so a new dialect is fuzzed without a
    // change here (and the seeds keep their meaning).
    const auto dialects = protocol::dialect_table();
    api_kind api = dialects[data[0] % dialects.size()]->api;
    const char* content_type = content_types[(data[0] / dialects.size()) % content_types.size()];
    std::size_t cut_count = data[1] % 8;
    bool continuous = (data[1] & 0x80) != 0;
    data += 2;
    size -= 2;
    std::string_view bytes(reinterpret_cast<const char*>(data), size);

    std::vector<std::size_t> cuts;
    for (std::size_t i = 0; i < cut_count && size > 0; ++i) {
        cuts.push_back((static_cast<std::size_t>(data[i % size]) * 131 + i * 17) % (size + 1));
    }
    std::sort(cuts.begin(), cuts.end());

    if (!(run(bytes, {}, api, content_type) == run(bytes, cuts, api, content_type))) {
        std::abort();
    }
    if (filter(bytes, {}, size + 1, continuous) != filter(bytes, cuts, size + 1, continuous)) {
        std::abort();
    }
    filter(bytes, cuts, 64, continuous);
    return 0;
}
