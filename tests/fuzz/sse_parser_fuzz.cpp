// sse_parser_fuzz: differential fuzzing of sse::parser. The same bytes are fed whole, split at
// fuzzer-chosen points and byte by byte, and every way must give identical events and end
// state; the whole-feed result must also match a slow, spec-literal reference model.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "sse/parser.hpp"

namespace {

using tokenmeter::sse::event;
using tokenmeter::sse::parser;

struct owned_event {
    std::string type;
    std::string data;
    std::string id;
    friend bool operator==(const owned_event&, const owned_event&) = default;
};

struct outcome {
    std::vector<owned_event> events;
    std::uint64_t comments = 0;
    std::uint64_t oversized_events = 0;
    bool clean = false;
    friend bool operator==(const outcome&, const outcome&) = default;
};

struct run_result {
    outcome out;
    std::uint64_t stat_events = 0;
    std::uint64_t stat_bytes = 0;
    std::size_t buffered_at_end = 0;
    friend bool operator==(const run_result&, const run_result&) = default;
};

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "sse_parser_fuzz: %s\n", what);
    std::abort();
}

void require(bool ok, const char* what) {
    if (!ok) {
        fail(what);
    }
}

run_result run(std::string_view input, const std::vector<std::size_t>& cuts,
               std::size_t max_event_bytes) {
    run_result r;
    parser p(max_event_bytes);
    auto on_event = [&](const event& e) {
        require(!e.type.empty(), "event with an empty type");
        require(e.data.size() <= max_event_bytes, "event data over the bound");
        r.out.events.push_back({std::string(e.type), std::string(e.data), std::string(e.id)});
    };
    std::size_t from = 0;
    auto feed_to = [&](std::size_t to) {
        p.feed(input.substr(from, to - from), on_event);
        from = to;
        // Two bytes of a possible BOM may be held before they are known to be one.
        require(p.buffered_bytes() <= max_event_bytes + 2, "buffered bytes over the bound");
    };
    for (const std::size_t cut : cuts) {
        feed_to(cut);
    }
    feed_to(input.size());
    r.out.comments = p.stats().comments;
    r.out.oversized_events = p.stats().oversized_events;
    r.stat_events = p.stats().events;
    r.stat_bytes = p.stats().bytes;
    r.buffered_at_end = p.buffered_bytes();
    r.out.clean = p.finish();
    require(p.buffered_bytes() == 0, "finish() left bytes buffered");
    require(r.stat_events == r.out.events.size(), "stats().events disagrees with callbacks");
    require(r.stat_bytes == input.size(), "stats().bytes disagrees with the input");
    return r;
}

// The WHATWG algorithm read literally, on the whole stream at once, with the parser's size
// rule (pending data + type + the line being read) stated on complete lines.
outcome reference(std::string_view input, std::size_t max_event_bytes) {
    outcome out;
    constexpr std::string_view bom = "\xEF\xBB\xBF";
    if (!input.empty() && input.size() < bom.size() && bom.substr(0, input.size()) == input) {
        // Ended inside what may be a BOM: not yet a line, so neither a comment nor oversized.
        out.clean = false;
        return out;
    }
    if (input.substr(0, bom.size()) == bom) {
        input.remove_prefix(bom.size());
    }
    std::string data;
    std::string type;
    std::string id;
    bool skipping = false;
    bool has_fields = false;
    auto reset = [&] {
        data.clear();
        type.clear();
        has_fields = false;
    };
    auto oversized = [&](std::size_t line_size) {
        return data.size() + type.size() + line_size > max_event_bytes;
    };

    std::size_t pos = 0;
    while (true) {
        std::size_t eol = pos;
        while (eol < input.size() && input[eol] != '\r' && input[eol] != '\n') {
            ++eol;
        }
        if (eol == input.size()) {
            break;
        }
        const std::string line(input.substr(pos, eol - pos));
        pos = eol + 1;
        if (input[eol] == '\r' && pos < input.size() && input[pos] == '\n') {
            ++pos;
        }

        if (line.empty()) {
            if (!skipping && !data.empty()) {
                out.events.push_back(
                    {type.empty() ? "message" : type, data.substr(0, data.size() - 1), id});
            }
            skipping = false;
            reset();
            continue;
        }
        if (skipping) {
            continue;
        }
        if (line[0] == ':') {
            ++out.comments;
            continue;
        }
        if (oversized(line.size())) {
            ++out.oversized_events;
            skipping = true;
            reset();
            continue;
        }
        has_fields = true;
        const std::size_t colon = line.find(':');
        const std::string name = line.substr(0, colon);
        std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
        if (!value.empty() && value[0] == ' ') {
            value.erase(0, 1);
        }
        if (name == "data") {
            data += value + "\n";
        } else if (name == "event") {
            type = value;
        } else if (name == "id" && value.find('\0') == std::string::npos) {
            id = value;
        }
    }

    const std::string_view rest = input.substr(pos);
    if (!rest.empty() && !skipping && rest[0] != ':' && oversized(rest.size())) {
        ++out.oversized_events;
        skipping = true;
    }
    out.clean = rest.empty() && !skipping && !has_fields;
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
    FuzzedDataProvider provider(bytes, size);
    // Small bounds make the oversized path reachable; the default keeps the common one.
    const std::size_t max_event_bytes = provider.ConsumeBool()
                                            ? parser::default_max_event_bytes
                                            : provider.ConsumeIntegralInRange<std::size_t>(0, 300);
    const std::size_t cut_count = provider.ConsumeIntegralInRange<std::size_t>(0, 12);
    std::vector<std::uint16_t> cut_seeds;
    for (std::size_t i = 0; i < cut_count; ++i) {
        cut_seeds.push_back(provider.ConsumeIntegral<std::uint16_t>());
    }
    const std::string input = provider.ConsumeRemainingBytesAsString();

    std::vector<std::size_t> cuts;
    for (const std::uint16_t seed : cut_seeds) {
        cuts.push_back(seed % (input.size() + 1));
    }
    std::sort(cuts.begin(), cuts.end());

    const run_result whole = run(input, {}, max_event_bytes);
    require(run(input, cuts, max_event_bytes) == whole, "split feed differs from whole feed");

    std::vector<std::size_t> every_byte;
    for (std::size_t i = 1; i < input.size(); ++i) {
        every_byte.push_back(i);
    }
    require(run(input, every_byte, max_event_bytes) == whole,
            "byte-by-byte feed differs from whole feed");

    require(reference(input, max_event_bytes) == whole.out,
            "parser differs from the reference model");
    return 0;
}
