// sse/line_splitter: the same lines, line ends and bytes whatever the split: whole, at every
// split point, at every pair of split points, and byte by byte.
#include "sse/line_splitter.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace tokenmeter::sse {
namespace {

struct split_result {
    std::vector<std::string> lines;  // complete lines, a line cut by a split joined again
    std::vector<std::string> ends;   // each line's end bytes as seen: "\r", "\n", "\r\n"
    std::string rest;                // the unterminated tail at the end of the input
    std::string bytes;               // every byte the splitter accounted for, in order
    bool after_cr = false;

    bool operator==(const split_result&) const = default;
};

// Feeds `input` cut at `cuts` (ascending). A line end whose CR and LF fall in two spans is
// reported as "\r" by the first span and completed by begin() in the second: both halves are
// recorded against the line they end.
split_result run(std::string_view input, const std::vector<std::size_t>& cuts) {
    split_result out;
    line_splitter splitter;
    std::string pending;  // a line cut by a split
    std::size_t from = 0;
    std::vector<std::size_t> ends = cuts;
    ends.push_back(input.size());
    for (std::size_t to : ends) {
        std::string_view span = input.substr(from, to - from);
        from = to;
        if (splitter.begin(span)) {
            EXPECT_FALSE(out.ends.empty());
            EXPECT_EQ(out.ends.back(), "\r");
            out.ends.back() = "\r\n";
            out.bytes.push_back('\n');
        }
        line l;
        while (splitter.next(l)) {
            EXPECT_GE(l.text.data(), span.data());
            out.bytes.append(l.text);
            if (!l.complete()) {
                EXPECT_FALSE(l.text.empty());
                EXPECT_EQ(l.text.data() + l.text.size(), span.data() + span.size());
                pending.append(l.text);
                continue;
            }
            std::string_view end(l.text.data() + l.text.size(), l.end_size);
            out.bytes.append(end);
            out.lines.push_back(pending + std::string(l.text));
            out.ends.emplace_back(end);
            pending.clear();
        }
        out.after_cr = splitter.after_cr();
    }
    out.rest = pending;
    return out;
}

void expect_same_at_every_split(std::string_view input, const std::vector<std::string>& lines,
                                const std::string& rest) {
    auto whole = run(input, {});
    EXPECT_EQ(whole.lines, lines) << ::testing::PrintToString(std::string(input));
    EXPECT_EQ(whole.rest, rest);
    EXPECT_EQ(whole.bytes, input);
    for (std::size_t a = 0; a <= input.size(); ++a) {
        ASSERT_EQ(run(input, {a}), whole) << "split at " << a;
        for (std::size_t b = a; b <= input.size(); ++b) {
            ASSERT_EQ(run(input, {a, b}), whole) << "split at " << a << " and " << b;
        }
    }
    std::vector<std::size_t> every;
    for (std::size_t i = 1; i < input.size(); ++i) {
        every.push_back(i);
    }
    EXPECT_EQ(run(input, every), whole) << "byte by byte";
}

TEST(LineSplitter, LfCrAndCrLfAtEverySplit) {
    expect_same_at_every_split("a\nb\rc\r\nd", {"a", "b", "c"}, "d");
    expect_same_at_every_split("data: x\r\n\r\ndata: y\r\n\r\n", {"data: x", "", "data: y", ""},
                               "");
    expect_same_at_every_split("\r\r\n\n\r", {"", "", "", ""}, "");
    expect_same_at_every_split("\n\r\n\r\r\n", {"", "", "", ""}, "");
    expect_same_at_every_split("no line end", {}, "no line end");
    expect_same_at_every_split("", {}, "");
}

TEST(LineSplitter, ACrSplitFromItsLfIsOneLineEnd) {
    line_splitter s;
    line l;
    EXPECT_FALSE(s.begin("a\r"));
    ASSERT_TRUE(s.next(l));
    EXPECT_EQ(l.text, "a");
    EXPECT_EQ(l.end_size, 1u);
    EXPECT_FALSE(s.next(l));
    EXPECT_TRUE(s.after_cr());
    EXPECT_FALSE(s.begin(""));  // an empty read changes nothing
    EXPECT_TRUE(s.after_cr());
    EXPECT_TRUE(s.begin("\nb\n"));  // the LF completes the CR: no empty line
    ASSERT_TRUE(s.next(l));
    EXPECT_EQ(l.text, "b");
    EXPECT_FALSE(s.after_cr());
    EXPECT_FALSE(s.next(l));
    // A CR followed by anything else in the next read ended its line by itself.
    EXPECT_FALSE(s.begin("c\r"));
    ASSERT_TRUE(s.next(l));
    EXPECT_FALSE(s.begin("\r"));
    ASSERT_TRUE(s.next(l));
    EXPECT_EQ(l.text, "");
    EXPECT_EQ(l.end_size, 1u);
}

TEST(LineSplitter, ResetForgetsAPendingCr) {
    line_splitter s;
    line l;
    s.begin("x\r");
    while (s.next(l)) {
    }
    s.reset();
    EXPECT_FALSE(s.after_cr());
    EXPECT_FALSE(s.begin("\n"));
    ASSERT_TRUE(s.next(l));
    EXPECT_EQ(l.text, "");
    EXPECT_EQ(l.end_size, 1u);
}

TEST(LineSplitter, HoldsNoBytesWhateverTheLineLength) {
    // A line longer than any read is handed back piece by piece, each a view into its read.
    std::string big(100000, 'x');
    line_splitter s;
    line l;
    std::size_t seen = 0;
    for (std::size_t from = 0; from < big.size(); from += 4096) {
        std::string_view span = std::string_view(big).substr(from, 4096);
        s.begin(span);
        ASSERT_TRUE(s.next(l));
        EXPECT_FALSE(l.complete());
        EXPECT_EQ(l.text.data(), span.data());
        seen += l.text.size();
    }
    EXPECT_EQ(seen, big.size());
    EXPECT_LE(sizeof(line_splitter), 5 * sizeof(void*));
}

}  // namespace
}  // namespace tokenmeter::sse

// The vector scan (64 bytes at a time past bytes that cannot end a line, then 16 at a time, the
// last 1-15 bytes by one overlapping load) finds what a byte-by-byte scan finds: the first CR or
// LF wherever it lies, or the length. Two alphabets: one with the bytes the 64-byte skip cannot
// tell from a line end (tab, VT, FF, 0x08, 0x0E, 0x0F), so it stops early, and one without.
TEST(LineSplitter, FindLineEndMatchesAByteScanAtEveryLengthAndPosition) {
    std::mt19937 random(7);
    const std::string alphabets[] = {
        std::string("ab \x7f\x80\xff\t\x0b\x0c\x08\x0e\x0f", 12),  // no CR or LF
        std::string("ab {}\":,\x7f\x80\xff\x07\x10\x8a\x8d", 16),  // none near them either
    };
    for (const std::string& bytes : alphabets) {
        for (std::size_t size = 0; size <= 200; ++size) {
            for (std::size_t at = 0; at <= size; ++at) {
                for (const char end : {'\n', '\r'}) {
                    std::string text(size, 'x');
                    for (auto& c : text) {
                        c = bytes[random() % bytes.size()];
                    }
                    if (at < size) {
                        text[at] = end;
                        if (at + 1 < size && random() % 2 == 0) {
                            text[at + 1 + random() % (size - at - 1)] = "\r\n"[random() % 2];
                        }
                    }
                    const auto expected = std::min(text.find('\n'), text.find('\r'));
                    ASSERT_EQ(tokenmeter::sse::line_splitter::find_line_end(text),
                              expected == std::string::npos ? size : expected)
                        << "size " << size << " at " << at;
                }
            }
        }
    }
}
