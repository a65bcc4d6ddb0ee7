// outbound/resp: every reply type, every split point, the bounds checked before allocation, and
// errors that stay.
#include "outbound/resp.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace tokenmeter::outbound::resp {
namespace {

struct parsed {
    std::vector<value> replies;
    parse_error error = parse_error::none;
};

// Feeds `chunks` one after the other, taking each reply as it is whole.
parsed parse_chunks(const std::vector<std::string_view>& chunks, limits bounds = {}) {
    parser p(bounds);
    parsed out;
    for (std::string_view chunk : chunks) {
        while (!chunk.empty()) {
            const std::size_t used = p.feed(chunk);
            chunk.remove_prefix(used);
            if (p.has_reply()) {
                out.replies.push_back(p.take_reply());
            } else if (p.error() != parse_error::none) {
                out.error = p.error();
                return out;
            } else if (used == 0) {
                ADD_FAILURE() << "feed used nothing without a reply or an error";
                return out;
            }
        }
    }
    return out;
}

parsed parse(std::string_view bytes, limits bounds = {}) {
    return parse_chunks({bytes}, bounds);
}

value simple(std::string text) {
    value v;
    v.type = kind::simple;
    v.text = std::move(text);
    return v;
}

value integer(long long n) {
    value v;
    v.type = kind::integer;
    v.integer = n;
    return v;
}

value bulk(std::string text) {
    value v;
    v.type = kind::bulk;
    v.text = std::move(text);
    return v;
}

value array(std::vector<value> members) {
    value v;
    v.type = kind::array;
    v.members = std::move(members);
    return v;
}

TEST(Resp, EveryReplyType) {
    const parsed out =
        parse("+OK\r\n-ERR wrong\r\n:42\r\n:-7\r\n$5\r\nhello\r\n$0\r\n\r\n$-1\r\n*-1\r\n*0\r\n");
    ASSERT_EQ(out.error, parse_error::none);
    ASSERT_EQ(out.replies.size(), 9U);
    EXPECT_EQ(out.replies[0], simple("OK"));
    EXPECT_EQ(out.replies[1].type, kind::error);
    EXPECT_EQ(out.replies[1].text, "ERR wrong");
    EXPECT_EQ(out.replies[2], integer(42));
    EXPECT_EQ(out.replies[3], integer(-7));
    EXPECT_EQ(out.replies[4], bulk("hello"));
    EXPECT_EQ(out.replies[5], bulk(""));
    EXPECT_EQ(out.replies[6].type, kind::null);
    EXPECT_EQ(out.replies[7].type, kind::null);
    EXPECT_EQ(out.replies[8], array({}));
}

TEST(Resp, BulkStringsCarryAnyBytes) {
    const std::string payload("a\r\nb\0c", 6);
    const parsed out = parse("$6\r\n" + payload + "\r\n");
    ASSERT_EQ(out.replies.size(), 1U);
    EXPECT_EQ(out.replies[0].text, payload);
}

TEST(Resp, NestedArrays) {
    const parsed out = parse("*3\r\n:1\r\n*2\r\n$1\r\na\r\n*0\r\n+x\r\n");
    ASSERT_EQ(out.replies.size(), 1U);
    EXPECT_EQ(out.replies[0], array({integer(1), array({bulk("a"), array({})}), simple("x")}));
}

TEST(Resp, TheBucketScriptsReply) {
    const parsed out = parse("*2\r\n:1\r\n$6\r\n-12.50\r\n");
    ASSERT_EQ(out.replies.size(), 1U);
    EXPECT_EQ(out.replies[0], array({integer(1), bulk("-12.50")}));
}

// Every way of cutting the bytes in two, and one byte at a time, gives the same replies.
TEST(Resp, EverySplitPointGivesTheSameReplies) {
    const std::string bytes =
        "+OK\r\n*3\r\n:1\r\n*2\r\n$5\r\nab\r\nc\r\n$-1\r\n-NOSCRIPT No matching script\r\n:-9\r\n"
        "$0\r\n\r\n*-1\r\n";
    const parsed whole = parse(bytes);
    ASSERT_EQ(whole.error, parse_error::none);
    ASSERT_EQ(whole.replies.size(), 5U);
    const std::string_view view(bytes);
    for (std::size_t cut = 0; cut <= bytes.size(); ++cut) {
        const parsed split = parse_chunks({view.substr(0, cut), view.substr(cut)});
        EXPECT_EQ(split.replies, whole.replies) << "cut at " << cut;
        EXPECT_EQ(split.error, parse_error::none) << "cut at " << cut;
    }
    std::vector<std::string_view> bytewise;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        bytewise.push_back(view.substr(i, 1));
    }
    EXPECT_EQ(parse_chunks(bytewise).replies, whole.replies);
}

TEST(Resp, OneReplyAtATime) {
    parser p;
    const std::string_view bytes = "+A\r\n+B\r\n";
    EXPECT_EQ(p.feed(bytes), 4U);
    ASSERT_TRUE(p.has_reply());
    EXPECT_EQ(p.feed(bytes.substr(4)), 0U) << "nothing is read while a reply waits";
    EXPECT_EQ(p.take_reply(), simple("A"));
    EXPECT_TRUE(p.idle());
    EXPECT_EQ(p.feed(bytes.substr(4, 2)), 2U);
    EXPECT_FALSE(p.idle()) << "part of a reply is held";
}

TEST(Resp, MalformedInputIsAnError) {
    EXPECT_EQ(parse("%1\r\n").error, parse_error::bad_type) << "RESP3 map";
    EXPECT_EQ(parse("_\r\n").error, parse_error::bad_type) << "RESP3 null";
    EXPECT_EQ(parse(">2\r\n").error, parse_error::bad_type) << "RESP3 push";
    EXPECT_EQ(parse("OK\r\n").error, parse_error::bad_type);
    EXPECT_EQ(parse("\r\n").error, parse_error::bad_type);
    EXPECT_EQ(parse(":1x\r\n").error, parse_error::bad_number);
    EXPECT_EQ(parse(":\r\n").error, parse_error::bad_number);
    EXPECT_EQ(parse(":+1\r\n").error, parse_error::bad_number);
    EXPECT_EQ(parse(":99999999999999999999\r\n").error, parse_error::bad_number);
    EXPECT_EQ(parse(":1234567890123456789012345").error, parse_error::bad_number)
        << "a number too long is refused before its line ends";
    EXPECT_EQ(parse("$-2\r\n").error, parse_error::bad_number);
    EXPECT_EQ(parse("*-5\r\n").error, parse_error::bad_number);
    EXPECT_EQ(parse("+OK\n").error, parse_error::bad_line_end);
    EXPECT_EQ(parse("+OK\rX\r\n").error, parse_error::bad_line_end);
    EXPECT_EQ(parse_chunks({"+OK\r", "X"}).error, parse_error::bad_line_end);
    EXPECT_EQ(parse("$3\r\nabcd\r\n").error, parse_error::bad_line_end);
    EXPECT_EQ(parse("$3\r\nabc\n\r").error, parse_error::bad_line_end);
}

TEST(Resp, ErrorsStay) {
    parser p;
    EXPECT_EQ(p.feed("?\r\n+OK\r\n"), 0U);
    EXPECT_EQ(p.error(), parse_error::bad_type);
    EXPECT_EQ(p.feed("+OK\r\n"), 0U);
    EXPECT_FALSE(p.has_reply());
    EXPECT_EQ(p.error(), parse_error::bad_type);
}

TEST(Resp, AHugeArrayHeaderIsRefusedAtOnce) {
    // Twenty million members announced: refused on the header, nothing reserved for them.
    const parsed out = parse("*20000000\r\n");
    EXPECT_EQ(out.error, parse_error::too_many_elements);
    EXPECT_EQ(parse("*9223372036854775807\r\n").error, parse_error::too_many_elements);
}

TEST(Resp, AHugeBulkHeaderIsRefusedAtOnce) {
    EXPECT_EQ(parse("$2000000000\r\n").error, parse_error::too_large);
    EXPECT_EQ(parse("$9223372036854775807\r\n").error, parse_error::too_large);
}

TEST(Resp, BoundsAreExact) {
    limits small;
    small.max_reply_bytes = 16;
    small.max_elements = 3;
    small.max_depth = 2;
    // "$10\r\n" (5) + 10 + CRLF (2) = 17 bytes: one too many; 9 fits.
    EXPECT_EQ(parse("$10\r\n0123456789\r\n", small).error, parse_error::too_large);
    EXPECT_EQ(parse("$9\r\n012345678\r\n", small).replies.size(), 1U);
    // A simple string counts as it arrives, before its line ends.
    EXPECT_EQ(parse("+0123456789abcdefgh", small).error, parse_error::too_large);
    EXPECT_EQ(parse("+0123456789abc\r\n", small).replies.size(), 1U);
    EXPECT_EQ(parse("*3\r\n:1\r\n:2\r\n:3\r\n", small).replies.size(), 1U);
    EXPECT_EQ(parse("*4\r\n", small).error, parse_error::too_many_elements);
    // Nested members count too.
    EXPECT_EQ(parse("*2\r\n*2\r\n", small).error, parse_error::too_many_elements);
    EXPECT_EQ(parse("*1\r\n*1\r\n:1\r\n", small).replies.size(), 1U);
    EXPECT_EQ(parse("*1\r\n*1\r\n*1\r\n", small).error, parse_error::too_deep);
    // The bounds are per reply: many small replies in a row are fine.
    std::string many;
    for (int i = 0; i < 100; ++i) {
        many += "*3\r\n:1\r\n:2\r\n+a\r\n";  // 16 bytes
    }
    const parsed out = parse(many, small);
    EXPECT_EQ(out.error, parse_error::none);
    EXPECT_EQ(out.replies.size(), 100U);
}

TEST(Resp, DeepNestingIsBoundedWithoutRecursion) {
    std::string deep;
    for (int i = 0; i < 100'000; ++i) {
        deep += "*1\r\n";
    }
    EXPECT_EQ(parse(deep).error, parse_error::too_deep);
    limits wide;
    wide.max_depth = 100'000;
    wide.max_elements = 200'000;
    wide.max_reply_bytes = 1 << 22;
    // 1000 levels deep, each closed from the inside out by one integer.
    std::string nested;
    for (int i = 0; i < 1000; ++i) {
        nested += "*1\r\n";
    }
    nested += ":1\r\n";
    const parsed out = parse(nested, wide);
    ASSERT_EQ(out.replies.size(), 1U);
    EXPECT_EQ(out.replies[0].type, kind::array);
}

TEST(Resp, CommandsAreArraysOfBulkStrings) {
    std::string out;
    append_command(out, {"EVALSHA", "abc", "1", "k{t}"});
    EXPECT_EQ(out, "*4\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n1\r\n$4\r\nk{t}\r\n");
    // Parsed back as a reply, a command is the array of its arguments.
    const parsed back = parse(out);
    ASSERT_EQ(back.replies.size(), 1U);
    EXPECT_EQ(back.replies[0], array({bulk("EVALSHA"), bulk("abc"), bulk("1"), bulk("k{t}")}));
}

}  // namespace
}  // namespace tokenmeter::outbound::resp
