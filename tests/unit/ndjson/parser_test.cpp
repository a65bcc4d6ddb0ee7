// ndjson::parser: line framing at every split point, CR LF, blank lines, an unterminated last
// line, and the bound on a line's size.
#include "ndjson/parser.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tokenmeter::ndjson {
namespace {

struct run_result {
    std::vector<std::string> lines;
    bool clean = false;
    std::uint64_t oversized = 0;
    std::size_t max_buffered = 0;
};

run_result run(std::string_view input, std::vector<std::size_t> cuts, std::size_t max_line) {
    run_result r;
    parser p(max_line);
    auto on_line = [&](std::string_view line) { r.lines.emplace_back(line); };
    std::size_t from = 0;
    cuts.push_back(input.size());
    for (std::size_t cut : cuts) {
        p.feed(input.substr(from, cut - from), on_line);
        r.max_buffered = std::max(r.max_buffered, p.buffered_bytes());
        from = cut;
    }
    r.clean = p.finish(on_line);
    r.oversized = p.stats().oversized_lines;
    return r;
}

// Same lines, same cleanliness and same oversized count whatever the cuts; memory bounded.
run_result every_way(std::string_view input, std::size_t max_line = 1024) {
    run_result whole = run(input, {}, max_line);
    for (std::size_t a = 0; a <= input.size(); ++a) {
        for (std::size_t b = a; b <= input.size(); ++b) {
            run_result r = run(input, {a, b}, max_line);
            EXPECT_EQ(r.lines, whole.lines) << "cuts " << a << "," << b;
            EXPECT_EQ(r.clean, whole.clean) << "cuts " << a << "," << b;
            EXPECT_EQ(r.oversized, whole.oversized) << "cuts " << a << "," << b;
            EXPECT_LE(r.max_buffered, max_line) << "cuts " << a << "," << b;
            if (testing::Test::HasFailure()) {
                return whole;
            }
        }
    }
    return whole;
}

TEST(NdjsonParser, LinesAtEverySplitPoint) {
    auto r = every_way("{\"a\":1}\n{\"b\":\"x y\"}\r\n\n  \n{\"c\":3}\n");
    EXPECT_EQ(r.lines, (std::vector<std::string>{"{\"a\":1}", "{\"b\":\"x y\"}", "{\"c\":3}"}));
    EXPECT_TRUE(r.clean);
    EXPECT_EQ(r.oversized, 0u);
}

TEST(NdjsonParser, UnterminatedLastLineIsDispatchedAtFinish) {
    auto r = every_way("{\"a\":1}\n{\"done\":true}");
    EXPECT_EQ(r.lines, (std::vector<std::string>{"{\"a\":1}", "{\"done\":true}"}));
    EXPECT_TRUE(r.clean);
}

TEST(NdjsonParser, OversizedLinesAreSkippedNotBuffered) {
    std::string big(40, 'x');
    auto r = every_way("{\"a\":1}\n" + big + "\n{\"b\":2}\n" + big, 16);
    EXPECT_EQ(r.lines, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}"}));
    EXPECT_EQ(r.oversized, 2u);
    EXPECT_FALSE(r.clean);  // the body ended inside an oversized line
}

TEST(NdjsonParser, StatsCountLinesAndBytes) {
    parser p;
    int n = 0;
    p.feed("a\nb\n\nc", [&](std::string_view) { ++n; });
    EXPECT_EQ(n, 2);
    EXPECT_EQ(p.stats().lines, 2u);
    EXPECT_EQ(p.stats().bytes, 6u);
    EXPECT_EQ(p.buffered_bytes(), 1u);
}

}  // namespace
}  // namespace tokenmeter::ndjson
