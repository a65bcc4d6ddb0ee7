// sse tests: runs one input through sse::parser fed whole, at every split point, byte by byte
// and in pseudo-random chunks, and requires every way to give the same events and end state.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "sse/parser.hpp"

namespace tokenmeter::sse::test_support {

struct owned_event {
    std::string type;
    std::string data;
    std::string id;

    friend bool operator==(const owned_event&, const owned_event&) = default;
    friend void PrintTo(const owned_event& e, std::ostream* os) {
        *os << "{type=" << ::testing::PrintToString(e.type)
            << " data=" << ::testing::PrintToString(e.data)
            << " id=" << ::testing::PrintToString(e.id) << "}";
    }
};

struct run_result {
    std::vector<owned_event> events;
    bool clean = false;  // what finish() returned
    std::uint64_t comments = 0;
    std::uint64_t oversized_events = 0;
    std::uint64_t stat_events = 0;
    std::uint64_t stat_bytes = 0;
    std::size_t buffered_at_end = 0;  // buffered_bytes() just before finish()
    std::size_t max_buffered = 0;     // highest buffered_bytes() seen after any feed

    // max_buffered depends on where the cuts fall, so it is left out on purpose.
    bool same_outcome(const run_result& o) const {
        return events == o.events && clean == o.clean && comments == o.comments &&
               oversized_events == o.oversized_events && stat_events == o.stat_events &&
               stat_bytes == o.stat_bytes && buffered_at_end == o.buffered_at_end;
    }
};

inline owned_event owned(const event& e) {
    return {std::string(e.type), std::string(e.data), std::string(e.id)};
}

// Feeds input in pieces ending at each cut (ascending offsets; the rest goes last).
inline run_result run_cuts(std::string_view input, const std::vector<std::size_t>& cuts,
                           std::size_t max_event_bytes) {
    run_result result;
    parser p(max_event_bytes);
    auto on_event = [&](const event& e) { result.events.push_back(owned(e)); };
    std::size_t from = 0;
    auto feed_to = [&](std::size_t to) {
        p.feed(input.substr(from, to - from), on_event);
        from = to;
        if (p.buffered_bytes() > result.max_buffered) {
            result.max_buffered = p.buffered_bytes();
        }
    };
    for (const std::size_t cut : cuts) {
        feed_to(cut);
    }
    feed_to(input.size());
    result.comments = p.stats().comments;
    result.oversized_events = p.stats().oversized_events;
    result.stat_events = p.stats().events;
    result.stat_bytes = p.stats().bytes;
    result.buffered_at_end = p.buffered_bytes();
    result.clean = p.finish();
    return result;
}

inline std::string describe(const run_result& r) {
    std::string out = "events=" + ::testing::PrintToString(r.events);
    out += " clean=" + std::to_string(static_cast<int>(r.clean));
    out += " comments=" + std::to_string(r.comments);
    out += " oversized=" + std::to_string(r.oversized_events);
    out += " buffered_at_end=" + std::to_string(r.buffered_at_end);
    return out;
}

// Returns the result of feeding the input whole, after checking that every other way of
// cutting it agrees. Records at most one failure per way so a bug does not flood the log.
inline run_result parse_every_way(std::string_view input,
                                  std::size_t max_event_bytes = parser::default_max_event_bytes) {
    const run_result whole = run_cuts(input, {}, max_event_bytes);
    // A possible BOM may be held before it is known to be one: two bytes over the bound.
    const std::size_t bound = max_event_bytes + 2;
    EXPECT_LE(whole.max_buffered, bound);

    auto check = [&](const std::vector<std::size_t>& cuts, const std::string& how) {
        const run_result r = run_cuts(input, cuts, max_event_bytes);
        if (!r.same_outcome(whole)) {
            ADD_FAILURE() << "fed " << how << ": " << describe(r)
                          << "\n  fed whole: " << describe(whole);
            return false;
        }
        if (r.max_buffered > bound) {
            ADD_FAILURE() << "fed " << how << ": buffered " << r.max_buffered << " > " << bound;
            return false;
        }
        return true;
    };

    // Cuts at 0 and at the end also exercise empty feeds.
    for (std::size_t cut = 0; cut <= input.size(); ++cut) {
        if (!check({cut}, "split at " + std::to_string(cut))) {
            break;
        }
    }

    std::vector<std::size_t> every_byte;
    for (std::size_t cut = 1; cut < input.size(); ++cut) {
        every_byte.push_back(cut);
    }
    check(every_byte, "byte by byte");

    // Three-way splits find bugs that need state carried across two boundaries (a BOM or a
    // CR LF pair cut twice); they cost n^2 runs, so only on short inputs.
    if (input.size() <= 64) {
        bool ok = true;
        for (std::size_t a = 0; a <= input.size() && ok; ++a) {
            for (std::size_t b = a; b <= input.size() && ok; ++b) {
                ok = check({a, b}, "split at " + std::to_string(a) + "," + std::to_string(b));
            }
        }
    }

    // Deterministic pseudo-random chunk sizes (xorshift), so a failure reproduces.
    std::uint64_t state = 0x9E3779B97F4A7C15ULL ^ input.size();
    for (int round = 0; round < 16; ++round) {
        std::vector<std::size_t> cuts;
        std::size_t at = 0;
        for (;;) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            at += 1 + static_cast<std::size_t>(state % 23);
            if (at >= input.size()) {
                break;
            }
            cuts.push_back(at);
        }
        if (!check(cuts, "random chunks, round " + std::to_string(round))) {
            break;
        }
    }
    return whole;
}

}  // namespace tokenmeter::sse::test_support
