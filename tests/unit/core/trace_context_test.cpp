// W3C traceparent reading and writing, and the ids the proxy makes, with hostile values.
#include "core/trace_context.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>

namespace tokenmeter::core {
namespace {

constexpr std::string_view trace_hex = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr std::string_view parent_hex = "00f067aa0ba902b7";

std::string value(std::string_view version, std::string_view trace, std::string_view parent,
                  std::string_view flags) {
    return std::string(version) + "-" + std::string(trace) + "-" + std::string(parent) + "-" +
           std::string(flags);
}

TEST(Traceparent, AValidVersion00ValueIsRead) {
    const auto parsed = parse_traceparent(value("00", trace_hex, parent_hex, "01"));
    ASSERT_TRUE(parsed);
    EXPECT_EQ(to_hex(parsed->trace), trace_hex);
    EXPECT_EQ(to_hex(parsed->parent), parent_hex);
    EXPECT_EQ(parsed->flags, 0x01);
    const auto unsampled = parse_traceparent(value("00", trace_hex, parent_hex, "00"));
    ASSERT_TRUE(unsampled);
    EXPECT_EQ(unsampled->flags, 0x00);
    // Flags the proxy does not know are kept as they came (passed on unchanged).
    const auto other = parse_traceparent(value("00", trace_hex, parent_hex, "ff"));
    ASSERT_TRUE(other);
    EXPECT_EQ(other->flags, 0xff);
}

TEST(Traceparent, OptionalWhitespaceAroundTheValueIsNotPartOfIt) {
    EXPECT_TRUE(parse_traceparent(" \t" + value("00", trace_hex, parent_hex, "01") + " "));
}

TEST(Traceparent, UppercaseHexIsRefusedAnywhere) {
    EXPECT_FALSE(
        parse_traceparent(value("00", "4BF92F3577B34DA6A3CE929D0E0E4736", parent_hex, "01")));
    EXPECT_FALSE(parse_traceparent(value("00", trace_hex, "00F067AA0BA902B7", "01")));
    EXPECT_FALSE(parse_traceparent(value("00", trace_hex, parent_hex, "0A")));
    EXPECT_FALSE(parse_traceparent(value("0A", trace_hex, parent_hex, "01")));
}

TEST(Traceparent, WrongLengthsAndSeparatorsAreRefused) {
    const std::string good = value("00", trace_hex, parent_hex, "01");
    EXPECT_FALSE(parse_traceparent(""));
    EXPECT_FALSE(parse_traceparent(good.substr(0, good.size() - 1)));
    EXPECT_FALSE(parse_traceparent(good + "0"));
    EXPECT_FALSE(parse_traceparent(good + "-"));
    EXPECT_FALSE(parse_traceparent(value("00", trace_hex.substr(1), parent_hex, "01") + "0"));
    EXPECT_FALSE(parse_traceparent(value("00", trace_hex, parent_hex.substr(1), "01") + "0"));
    EXPECT_FALSE(parse_traceparent(value("0", trace_hex, parent_hex, "01") + "0"));
    EXPECT_FALSE(parse_traceparent(value("000", trace_hex, parent_hex, "1")));
    for (const std::size_t at : {2U, 35U, 52U}) {
        std::string swapped = good;
        swapped[at] = '_';
        EXPECT_FALSE(parse_traceparent(swapped)) << swapped;
    }
    std::string with_nul = good;
    with_nul[10] = '\0';
    EXPECT_FALSE(parse_traceparent(with_nul));
    std::string with_g = good;
    with_g[40] = 'g';
    EXPECT_FALSE(parse_traceparent(with_g));
    EXPECT_FALSE(parse_traceparent(std::string(4096, 'a')));
}

TEST(Traceparent, VersionFfIsInvalid) {
    EXPECT_FALSE(parse_traceparent(value("ff", trace_hex, parent_hex, "01")));
}

TEST(Traceparent, AllZeroIdsAreInvalid) {
    EXPECT_FALSE(
        parse_traceparent(value("00", "00000000000000000000000000000000", parent_hex, "01")));
    EXPECT_FALSE(parse_traceparent(value("00", trace_hex, "0000000000000000", "01")));
}

TEST(Traceparent, ALaterVersionIsReadByTheVersion00Layout) {
    // Exactly 55 characters, or more after a '-' (fields a later version adds).
    const auto same = parse_traceparent(value("01", trace_hex, parent_hex, "01"));
    ASSERT_TRUE(same);
    EXPECT_EQ(to_hex(same->trace), trace_hex);
    const auto longer =
        parse_traceparent(value("cc", trace_hex, parent_hex, "01") + "-what-the-future-holds");
    ASSERT_TRUE(longer);
    EXPECT_EQ(to_hex(longer->parent), parent_hex);
    EXPECT_EQ(longer->flags, 0x01);
    // ... but not a field run on without its dash, nor a version-00 value with extra fields.
    EXPECT_FALSE(parse_traceparent(value("cc", trace_hex, parent_hex, "01") + "0"));
    EXPECT_FALSE(parse_traceparent(value("00", trace_hex, parent_hex, "01") + "-extra"));
    // A later version still needs valid ids.
    EXPECT_FALSE(parse_traceparent(
        value("02", "00000000000000000000000000000000", parent_hex, "01") + "-x"));
}

TEST(Traceparent, FormattedAsVersion00WithTheProxysSpan) {
    trace_context context;
    context.trace = parse_traceparent(value("00", trace_hex, parent_hex, "01"))->trace;
    context.span = {1, 2, 3, 4, 5, 6, 7, 0xab};
    context.flags = 0x01;
    const std::string formatted = format_traceparent(context);
    EXPECT_EQ(formatted, value("00", trace_hex, "01020304050607ab", "01"));
    EXPECT_EQ(formatted.size(), traceparent_length);
    // What the proxy writes, it reads back.
    const auto back = parse_traceparent(formatted);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->trace, context.trace);
    EXPECT_EQ(back->parent, context.span);
}

TEST(TraceRandom, IdsAreNeverZeroAndDoNotRepeat) {
    trace_random random(42);
    std::set<trace_id> traces;
    std::set<span_id> spans;
    for (int i = 0; i < 10'000; ++i) {
        const trace_id t = random.new_trace_id();
        const span_id s = random.new_span_id();
        EXPECT_NE(t, trace_id{});
        EXPECT_NE(s, span_id{});
        traces.insert(t);
        spans.insert(s);
    }
    EXPECT_EQ(traces.size(), 10'000U);
    EXPECT_EQ(spans.size(), 10'000U);
}

TEST(TraceRandom, EachThreadHasItsOwnSource) {
    trace_random& here = trace_random::for_thread();
    EXPECT_EQ(&here, &trace_random::for_thread());
    trace_random* there = nullptr;
    std::thread other([&there] { there = &trace_random::for_thread(); });
    other.join();
    EXPECT_NE(&here, there);
}

TEST(TraceRandom, ChanceFollowsTheRatio) {
    trace_random random(3);
    int hits = 0;
    for (int i = 0; i < 100'000; ++i) {
        hits += random.chance(0.25) ? 1 : 0;
    }
    EXPECT_NEAR(hits, 25'000, 1'000);
    for (int i = 0; i < 1000; ++i) {
        EXPECT_FALSE(random.chance(0.0));
        EXPECT_FALSE(random.chance(-1.0));
        EXPECT_TRUE(random.chance(1.0));
    }
}

TEST(ContinueTrace, KeepsTheClientsTraceAndFlagsAndMakesANewSpan) {
    trace_random random(5);
    const auto incoming = parse_traceparent(value("00", trace_hex, parent_hex, "00"));
    const trace_context context = continue_trace(incoming, 1.0, random);
    EXPECT_EQ(context.trace, incoming->trace);
    EXPECT_EQ(context.parent, incoming->parent);
    EXPECT_FALSE(context.sampled()) << "the client's decision stands whatever the ratio";
    EXPECT_NE(context.span, incoming->parent);
    EXPECT_NE(context.span, span_id{});
}

TEST(ContinueTrace, ANewTraceIsSampledByTheRatio) {
    trace_random random(9);
    const trace_context sampled = continue_trace(std::nullopt, 1.0, random);
    EXPECT_TRUE(sampled.valid());
    EXPECT_TRUE(sampled.sampled());
    EXPECT_EQ(sampled.parent, span_id{});
    EXPECT_FALSE(continue_trace(std::nullopt, 0.0, random).sampled());
}

}  // namespace
}  // namespace tokenmeter::core
