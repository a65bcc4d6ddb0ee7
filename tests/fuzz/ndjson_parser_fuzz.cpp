// Differential fuzz target for ndjson::parser: the same bytes fed whole and split at
// fuzzer-chosen points must give the same lines, oversized count and end state, and the
// buffer must stay within max_line_bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "ndjson/parser.hpp"

namespace {

using tokenmeter::ndjson::parser;

struct digest {
    std::vector<std::string> lines;
    std::uint64_t oversized = 0;
    bool clean = false;
    bool operator==(const digest&) const = default;
};

digest run(std::string_view bytes, const std::vector<std::size_t>& cuts, std::size_t max_line) {
    digest d;
    parser p(max_line);
    auto on_line = [&](std::string_view line) {
        if (line.empty() || line.size() > max_line) {
            std::abort();  // blank and oversized lines are never dispatched
        }
        d.lines.emplace_back(line);
    };
    std::size_t from = 0;
    for (std::size_t cut : cuts) {
        p.feed(bytes.substr(from, cut - from), on_line);
        from = cut;
        if (p.buffered_bytes() > max_line) {
            std::abort();
        }
    }
    p.feed(bytes.substr(from), on_line);
    if (p.buffered_bytes() > max_line) {
        std::abort();
    }
    d.clean = p.finish(on_line);
    d.oversized = p.stats().oversized_lines;
    if (p.stats().bytes != bytes.size()) {
        std::abort();
    }
    return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) {
        return 0;
    }
    std::size_t max_line = 1 + data[0] % 64;
    std::size_t cut_count = data[1] % 8;
    data += 2;
    size -= 2;
    std::string_view bytes(reinterpret_cast<const char*>(data), size);
    std::vector<std::size_t> cuts;
    for (std::size_t i = 0; i < cut_count && size > 0; ++i) {
        cuts.push_back((static_cast<std::size_t>(data[i % size]) * 131 + i * 17) % (size + 1));
    }
    std::sort(cuts.begin(), cuts.end());
    if (!(run(bytes, {}, max_line) == run(bytes, cuts, max_line))) {
        std::abort();
    }
    return 0;
}
