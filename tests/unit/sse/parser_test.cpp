// sse::parser behaviour, each case checked fed whole, at every split point and byte by byte.
#include "sse/parser.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "split_harness.hpp"

namespace tokenmeter::sse {
namespace {

using namespace std::string_view_literals;
using test_support::owned_event;
using test_support::parse_every_way;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

const std::string bom = "\xEF\xBB\xBF";

owned_event msg(std::string data, std::string id = "") {
    return {"message", std::move(data), std::move(id)};
}

owned_event typed(std::string type, std::string data, std::string id = "") {
    return {std::move(type), std::move(data), std::move(id)};
}

std::vector<owned_event> events_of(std::string_view input,
                                   std::size_t max_event_bytes = parser::default_max_event_bytes) {
    return parse_every_way(input, max_event_bytes).events;
}

// Feeds pieces one by one into one parser and returns how many events each piece produced.
struct stepper {
    parser p;
    std::vector<owned_event> events;

    explicit stepper(std::size_t max_event_bytes = parser::default_max_event_bytes)
        : p(max_event_bytes) {}

    std::size_t feed(std::string_view bytes) {
        const std::size_t before = events.size();
        p.feed(bytes, [&](const event& e) { events.push_back(test_support::owned(e)); });
        return events.size() - before;
    }
};

// ---- line endings ----

TEST(SseParser, LfLineEndings) {
    EXPECT_THAT(events_of("data: hello\n\n"), ElementsAre(msg("hello")));
}

TEST(SseParser, CrLineEndings) {
    EXPECT_THAT(events_of("data: a\r\rdata: b\r\r"), ElementsAre(msg("a"), msg("b")));
}

TEST(SseParser, CrLfLineEndings) {
    EXPECT_THAT(events_of("data: a\r\n\r\ndata: b\r\n\r\n"), ElementsAre(msg("a"), msg("b")));
}

TEST(SseParser, MixedLineEndingsInOneEvent) {
    EXPECT_THAT(events_of("data: a\r\ndata: b\rdata: c\ndata: d\n\r\n"),
                ElementsAre(msg("a\nb\nc\nd")));
}

TEST(SseParser, LfCrIsTwoLineEndings) {
    // LF then CR is not a pair: the CR ends an empty line and dispatches.
    EXPECT_THAT(events_of("data: a\n\rdata: b\n\n"), ElementsAre(msg("a"), msg("b")));
}

TEST(SseParser, CrAtEndOfReadAndLfAtStartOfNextAreOneLineEnding) {
    stepper s;
    EXPECT_EQ(s.feed("data: a\r"), 0U);
    // Were the LF counted as a second line ending, this would be a blank line and dispatch.
    EXPECT_EQ(s.feed("\ndata: b\r"), 0U);
    EXPECT_EQ(s.feed(""), 0U);  // an empty read in between changes nothing
    EXPECT_EQ(s.feed("\n"), 0U);
    EXPECT_EQ(s.feed("\r"), 1U);
    EXPECT_EQ(s.feed("\n"), 0U);  // belongs to the CR before it, not a new blank line
    EXPECT_EQ(s.feed("\n"), 0U);
    EXPECT_THAT(s.events, ElementsAre(msg("a\nb")));
    EXPECT_TRUE(s.p.finish());
}

TEST(SseParser, CrAtEndOfReadThenAnotherLine) {
    stepper s;
    EXPECT_EQ(s.feed("data: a\r"), 0U);
    EXPECT_EQ(s.feed("\r"), 1U);  // a CR after a CR is a blank line
    EXPECT_THAT(s.events, ElementsAre(msg("a")));
}

// ---- fields ----

TEST(SseParser, MultiLineData) {
    EXPECT_THAT(events_of("data: a\ndata: b\ndata: c\n\n"), ElementsAre(msg("a\nb\nc")));
}

TEST(SseParser, CommentsAreCountedAndIgnored) {
    const auto r = parse_every_way(": hello\ndata: x\n:\n: another one\n\n");
    EXPECT_THAT(r.events, ElementsAre(msg("x")));
    EXPECT_EQ(r.comments, 3U);
    EXPECT_TRUE(r.clean);
}

TEST(SseParser, KeepAliveCommentsAloneProduceNoEvent) {
    const auto r = parse_every_way(": ping\n\n: ping\n\n");
    EXPECT_THAT(r.events, IsEmpty());
    EXPECT_EQ(r.comments, 2U);
}

TEST(SseParser, FieldWithoutColonHasEmptyValue) {
    EXPECT_THAT(events_of("data\n\n"), ElementsAre(msg("")));
    EXPECT_THAT(events_of("data\ndata\n\n"), ElementsAre(msg("\n")));
    EXPECT_THAT(events_of("event\ndata: x\n\n"), ElementsAre(msg("x")));
}

TEST(SseParser, DataWithoutSpaceAfterColon) {
    EXPECT_THAT(events_of("data:no-space\n\n"), ElementsAre(msg("no-space")));
}

TEST(SseParser, OnlyOneLeadingSpaceIsRemoved) {
    EXPECT_THAT(events_of("data:  two spaces\n\n"), ElementsAre(msg(" two spaces")));
    EXPECT_THAT(events_of("data: trailing \n\n"), ElementsAre(msg("trailing ")));
    EXPECT_THAT(events_of("data:\ttab\n\n"), ElementsAre(msg("\ttab")));
}

TEST(SseParser, ColonsAfterTheFirstBelongToTheValue) {
    EXPECT_THAT(events_of("data: a: b:c\n\n"), ElementsAre(msg("a: b:c")));
}

TEST(SseParser, FieldNamesAreCaseSensitiveAndExact) {
    EXPECT_THAT(events_of("Data: x\n data: y\ndata : z\n\n"), IsEmpty());
}

TEST(SseParser, EventTypeAppliesToOneEventOnly) {
    EXPECT_THAT(events_of("event: add\ndata: 1\n\ndata: 2\n\n"),
                ElementsAre(typed("add", "1"), msg("2")));
}

TEST(SseParser, LastEventFieldWins) {
    EXPECT_THAT(events_of("event: a\nevent: b\ndata: 1\n\n"), ElementsAre(typed("b", "1")));
}

TEST(SseParser, EmptyEventTypeMeansMessage) {
    EXPECT_THAT(events_of("event:\ndata: 1\n\n"), ElementsAre(msg("1")));
}

TEST(SseParser, BlankLineWithoutDataResetsEventType) {
    EXPECT_THAT(events_of("event: lost\n\ndata: x\n\n"), ElementsAre(msg("x")));
}

TEST(SseParser, IdPersistsAcrossEvents) {
    EXPECT_THAT(events_of("id: 1\ndata: a\n\ndata: b\n\nid: 2\ndata: c\n\nid\ndata: d\n\n"),
                ElementsAre(msg("a", "1"), msg("b", "1"), msg("c", "2"), msg("d", "")));
}

TEST(SseParser, IdSetByABlockWithoutDataStillSticks) {
    EXPECT_THAT(events_of("id: 7\n\ndata: x\n\n"), ElementsAre(msg("x", "7")));
}

TEST(SseParser, IdContainingNulIsIgnored) {
    EXPECT_THAT(events_of("id: 3\ndata: a\n\nid: 4\0x\ndata: b\n\n"sv),
                ElementsAre(msg("a", "3"), msg("b", "3")));
}

TEST(SseParser, NulInDataIsKept) {
    EXPECT_THAT(events_of("data: a\0b\n\n"sv), ElementsAre(msg(std::string("a\0b", 3))));
}

TEST(SseParser, RetryAndUnknownFieldsAreIgnored) {
    const auto r = parse_every_way("retry: 1000\nretry: soon\nfoo: bar\nbaz\ndata: x\n\n");
    EXPECT_THAT(r.events, ElementsAre(msg("x")));
    EXPECT_TRUE(r.clean);
}

TEST(SseParser, EmptyDataLineGivesEmptyEventButNoDataGivesNone) {
    EXPECT_THAT(events_of("data:\n\n"), ElementsAre(msg("")));
    EXPECT_THAT(events_of("data\n\n"), ElementsAre(msg("")));
    EXPECT_THAT(events_of("event: x\nid: 1\n\n"), IsEmpty());
    EXPECT_THAT(events_of("\n\n\n"), IsEmpty());
}

TEST(SseParser, OnlyOneTrailingNewlineIsStripped) {
    EXPECT_THAT(events_of("data: a\ndata:\n\n"), ElementsAre(msg("a\n")));
}

// ---- BOM ----

TEST(SseParser, BomAtStartIsSkipped) {
    EXPECT_THAT(events_of(bom + "data: x\n\n"), ElementsAre(msg("x")));
}

TEST(SseParser, BomSplitAcrossReadsIsSkipped) {
    stepper s;
    EXPECT_EQ(s.feed("\xEF"), 0U);
    EXPECT_EQ(s.feed("\xBB"), 0U);
    EXPECT_EQ(s.feed("\xBF" + std::string("data: x\n")), 0U);
    EXPECT_EQ(s.feed("\n"), 1U);
    EXPECT_THAT(s.events, ElementsAre(msg("x")));
    EXPECT_TRUE(s.p.finish());
}

TEST(SseParser, BomBeforeCommentIsSkipped) {
    const auto r = parse_every_way(bom + ": hi\ndata: x\n\n");
    EXPECT_THAT(r.events, ElementsAre(msg("x")));
    EXPECT_EQ(r.comments, 1U);
}

TEST(SseParser, BomNotAtStartIsNotSkipped) {
    // The BOM becomes part of the field name, so the second event has no data field.
    EXPECT_THAT(events_of("data: a\n\n" + bom + "data: b\n\n"), ElementsAre(msg("a")));
}

TEST(SseParser, OnlyOneBomIsSkipped) {
    EXPECT_THAT(events_of(bom + bom + "data: b\n\n"), IsEmpty());
}

TEST(SseParser, BomPrefixThatIsNotABomIsKeptAsLineBytes) {
    const auto r = parse_every_way("\xEF\xBBX");
    EXPECT_EQ(r.buffered_at_end, 3U);
    EXPECT_FALSE(r.clean);
    // Held across reads, then given back when the third byte turns out not to be 0xBF.
    stepper s;
    s.feed("\xEF");
    s.feed("\xBB");
    s.feed("X");
    EXPECT_EQ(s.p.buffered_bytes(), 3U);
    EXPECT_THAT(events_of("\xEF\xBB\ndata: y\n\n"), ElementsAre(msg("y")));
    EXPECT_THAT(events_of("\xEF\xBB" + std::string("data: y\n\n")), IsEmpty());
}

TEST(SseParser, StreamOfOnlyAPartialBomIsNotClean) {
    EXPECT_FALSE(parse_every_way("\xEF\xBB").clean);
    EXPECT_TRUE(parse_every_way(bom).clean);
}

// ---- several events and real streams ----

TEST(SseParser, SeveralEventsInOneFeedArriveInOrder) {
    stepper s;
    EXPECT_EQ(s.feed("data: 1\n\ndata: 2\n\nevent: e\ndata: 3\n\ndata: 4"), 3U);
    EXPECT_THAT(s.events, ElementsAre(msg("1"), msg("2"), typed("e", "3")));
    EXPECT_EQ(s.feed("\n\n"), 1U);
    EXPECT_EQ(s.events.back(), msg("4"));
}

TEST(SseParser, OpenAiChatCompletionStream) {
    const std::string_view stream =
        "data: "
        "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
        "\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n"
        "data: "
        "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
        "\"delta\":{\"content\":\"Hello\"},\"finish_reason\":null}]}\n\n"
        "data: "
        "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
        "\"delta\":{\"content\":\" world\"},\"finish_reason\":null}]}\n\n"
        "data: "
        "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
        "\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":9,"
        "\"completion_tokens\":2,\"total_tokens\":11}}\n\n"
        "data: [DONE]\n\n";
    const auto r = parse_every_way(stream);
    ASSERT_EQ(r.events.size(), 5U);
    EXPECT_EQ(r.events[1],
              msg("{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{"
                  "\"index\":0,\"delta\":{\"content\":\"Hello\"},\"finish_reason\":null}]}"));
    EXPECT_EQ(r.events.back(), msg("[DONE]"));
    EXPECT_TRUE(r.clean);
    EXPECT_EQ(r.stat_bytes, stream.size());
}

// ---- memory bound ----

TEST(SseParser, OversizedEventIsDroppedAndTheNextStillParsed) {
    const std::string big(100, 'x');
    const auto r = parse_every_way("data: " + big + "\ndata: more\n\ndata: next\n\n", 64);
    EXPECT_THAT(r.events, ElementsAre(msg("next")));
    EXPECT_EQ(r.oversized_events, 1U);
    EXPECT_TRUE(r.clean);
}

TEST(SseParser, EventOverTheBoundThroughManySmallLinesIsDropped) {
    std::string input = "event: big\n";
    for (int i = 0; i < 20; ++i) {
        input += "data: 0123456789\n";
    }
    input += "\nevent: small\ndata: ok\n\n";
    const auto r = parse_every_way(input, 128);
    EXPECT_THAT(r.events, ElementsAre(typed("small", "ok")));
    EXPECT_EQ(r.oversized_events, 1U);
}

TEST(SseParser, EventExactlyAtTheBoundIsKept) {
    // The bound covers pending data and type plus the line being read: "data: " + 10 bytes.
    const std::string line = "data: 0123456789";
    EXPECT_THAT(events_of(line + "\n\n", line.size()), ElementsAre(msg("0123456789")));
    const auto r = parse_every_way(line + "\n\n", line.size() - 1);
    EXPECT_THAT(r.events, IsEmpty());
    EXPECT_EQ(r.oversized_events, 1U);
}

TEST(SseParser, OversizedEventIsSkippedWithoutBuffering) {
    stepper s(64);
    s.feed("data: ");
    for (int i = 0; i < 1000; ++i) {
        s.feed("0123456789");
        EXPECT_LE(s.p.buffered_bytes(), 64U);
    }
    EXPECT_EQ(s.p.buffered_bytes(), 0U);
    EXPECT_EQ(s.p.stats().oversized_events, 1U);
    s.feed("\ndata: also skipped, same event\n");
    EXPECT_EQ(s.p.buffered_bytes(), 0U);
    EXPECT_EQ(s.feed("\ndata: fine\n\n"), 1U);
    EXPECT_THAT(s.events, ElementsAre(msg("fine")));
    EXPECT_EQ(s.p.stats().oversized_events, 1U);
}

TEST(SseParser, OversizedEventAtEndOfStreamIsNotClean) {
    const auto r = parse_every_way("data: " + std::string(100, 'x') + "\n", 64);
    EXPECT_THAT(r.events, IsEmpty());
    EXPECT_FALSE(r.clean);
}

TEST(SseParser, LongCommentsAreNotBufferedAndDoNotCount) {
    const std::string comment = ": " + std::string(1000, 'c') + "\n";
    const auto r = parse_every_way(comment + "data: x\n" + comment + "\n", 64);
    EXPECT_THAT(r.events, ElementsAre(msg("x")));
    EXPECT_EQ(r.comments, 2U);
    EXPECT_EQ(r.oversized_events, 0U);
    EXPECT_LE(r.max_buffered, 64U);
}

TEST(SseParser, OnlyLinesSpanningReadsAreBuffered) {
    stepper s;
    s.feed("data: abc\n");
    EXPECT_EQ(s.p.buffered_bytes(), 4U);  // the data buffer "abc\n"; the line was read in place
    s.feed("\n");
    EXPECT_EQ(s.p.buffered_bytes(), 0U);
    s.feed("data: ab");
    EXPECT_EQ(s.p.buffered_bytes(), 8U);  // a partial line must be kept
    s.feed("c\n\n: partial comm");
    EXPECT_EQ(s.p.buffered_bytes(), 0U);  // a partial comment is dropped as it comes
    s.feed("ent\n");
    EXPECT_EQ(s.p.stats().comments, 1U);
    EXPECT_THAT(s.events, ElementsAre(msg("abc"), msg("abc")));
}

// ---- end of stream ----

TEST(SseParser, FinishIsTrueOnAnEventBoundary) {
    EXPECT_TRUE(parse_every_way("").clean);
    EXPECT_TRUE(parse_every_way("data: a\n\n").clean);
    EXPECT_TRUE(parse_every_way("data: a\r\n\r\n").clean);
    EXPECT_TRUE(parse_every_way("data: a\n\n: trailing comment\n").clean);
    EXPECT_TRUE(parse_every_way("event: x\n\n").clean);
}

TEST(SseParser, FinishIsFalseInsideAnEvent) {
    EXPECT_FALSE(parse_every_way("data: a\n").clean);
    EXPECT_FALSE(parse_every_way("data: a").clean);
    EXPECT_FALSE(parse_every_way("data: a\n\ndata").clean);
    EXPECT_FALSE(parse_every_way("id: 1\n").clean);
    EXPECT_FALSE(parse_every_way("foo\n").clean);
    EXPECT_FALSE(parse_every_way("data: a\n\n: partial comment").clean);
}

TEST(SseParser, TrailingEventWithoutBlankLineIsDiscarded) {
    stepper s;
    s.feed("data: a\n\ndata: b\n");
    EXPECT_FALSE(s.p.finish());
    EXPECT_THAT(s.events, ElementsAre(msg("a")));
    // The discarded event must not leak into the next stream.
    s.feed("data: c\n\n");
    EXPECT_THAT(s.events, ElementsAre(msg("a"), msg("c")));
}

TEST(SseParser, FinishStartsANewStreamKeepingTheLastId) {
    stepper s;
    s.feed("id: 42\ndata: a\n\n\xEF\xBB");
    EXPECT_FALSE(s.p.finish());
    EXPECT_EQ(s.p.buffered_bytes(), 0U);
    s.feed(bom + "data: b\n\n");
    EXPECT_TRUE(s.p.finish());
    EXPECT_THAT(s.events, ElementsAre(msg("a", "42"), msg("b", "42")));
}

TEST(SseParser, StatsCountEventsAndBytes) {
    stepper s;
    s.feed("data: 1\n\n");
    s.feed("");
    s.feed("data: 2\n\n");
    EXPECT_EQ(s.p.stats().events, 2U);
    EXPECT_EQ(s.p.stats().bytes, 18U);
    EXPECT_EQ(s.p.stats().comments, 0U);
}

TEST(SseParser, LongCrOnlyStreamIsParsedInOnePass) {
    // Every line end here is a CR with no LF anywhere: a naive "find LF, then look for CR
    // before it" would rescan the rest of the span for each line.
    std::string input;
    for (int i = 0; i < 20000; ++i) {
        input += "data: " + std::to_string(i) + "\r\r";
    }
    std::size_t count = 0;
    std::string last;
    parser p;
    p.feed(input, [&](const event& e) {
        ++count;
        last = e.data;
    });
    EXPECT_EQ(count, 20000U);
    EXPECT_EQ(last, "19999");
    EXPECT_TRUE(p.finish());
}

}  // namespace
}  // namespace tokenmeter::sse
