#include "usage/record.hpp"

#include <gtest/gtest.h>

#include <set>

namespace tokenmeter::usage {
namespace {

usage_record sample() {
    usage_record r;
    r.id = "00112233445566778899aabbccddeeff";
    r.tenant = "team-a";
    r.model = "llama";
    r.api = "openai_chat";
    r.route = "/v1/chat/completions";
    r.request_id = "req-1";
    r.start_unix_ms = 1795266307123;
    r.end_unix_ms = 1795266309000;
    r.ttft_seconds = 0.25;
    r.duration_seconds = 1.877;
    r.streamed = true;
    r.input = {12, token_source::reported};
    r.output = {0, token_source::reported};  // an explicit zero
    r.reasoning = {};                        // unknown
    r.cached_input = {4, token_source::reported};
    r.outcome = "complete";
    r.status = 200;
    return r;
}

TEST(UsageTime, FormatsAndParsesUtc) {
    EXPECT_EQ(format_time(1795266307123), "2026-11-21T13:05:07.123Z");
    EXPECT_EQ(format_time(0), "1970-01-01T00:00:00.000Z");
    EXPECT_EQ(format_time(1709164800000), "2024-02-29T00:00:00.000Z");
    EXPECT_EQ(parse_time("2026-11-21T13:05:07.123Z"), 1795266307123);
    EXPECT_EQ(parse_time("2024-02-29"), 1709164800000);
    EXPECT_EQ(parse_time("2026-11-21T13:05"), 1795266300000);
    EXPECT_EQ(parse_time("2026-11-21T13:05:07Z"), 1795266307000);
    EXPECT_FALSE(parse_time("yesterday"));
    EXPECT_FALSE(parse_time("2026-13-01"));
    EXPECT_FALSE(parse_time("2026-11-21T25:00"));
    EXPECT_FALSE(parse_time("2026-11-21x"));
    for (std::int64_t t : {0LL, 1LL, 999LL, 86'399'999LL, 951'782'400'000LL, 4'102'444'800'000LL}) {
        EXPECT_EQ(parse_time(format_time(t)), t) << t;
    }
}

// The edges of the calendar arithmetic (std::chrono's year_month_day): times
// before 1970 fall in the day before, century leap years, and a day past the month's end, which
// was always accepted and counts on into the next month.
TEST(UsageTime, CalendarEdges) {
    EXPECT_EQ(format_time(-1), "1969-12-31T23:59:59.999Z");
    EXPECT_EQ(format_time(-86'400'000), "1969-12-31T00:00:00.000Z");
    EXPECT_EQ(parse_time("1969-12-31T23:59:59.999Z"), -1);
    EXPECT_EQ(format_time(951'782'400'000), "2000-02-29T00:00:00.000Z");
    EXPECT_EQ(parse_time("2100-03-01"), parse_time("2100-02-29"));  // 2100 is not a leap year
    EXPECT_EQ(parse_time("2023-02-31"), parse_time("2023-03-03"));
    EXPECT_EQ(parse_time("2024-02-31"), parse_time("2024-03-02"));
    EXPECT_EQ(format_time(253'402'300'799'999), "9999-12-31T23:59:59.999Z");
    EXPECT_EQ(parse_time("9999-12-31T23:59:59.999"), 253'402'300'799'999);
    EXPECT_EQ(parse_time("0000-01-01"), -62'167'219'200'000);
    EXPECT_FALSE(parse_time("2026-01-32"));
    EXPECT_FALSE(parse_time("2026-00-10"));
}

TEST(UsageRecord, CloseRoundTripKeepsZeroAndUnknownApart) {
    auto r = sample();
    std::string line = encode_close(r);
    ASSERT_EQ(line.back(), '\n');
    EXPECT_NE(line.find("\"v\":1,\"type\":\"close\""), std::string::npos) << line;
    EXPECT_NE(line.find("\"output_tokens\":0,\"output_source\":\"reported\""), std::string::npos)
        << line;
    EXPECT_NE(line.find("\"reasoning_tokens\":null,\"reasoning_source\":\"none\""),
              std::string::npos)
        << line;
    auto e = decode_line(std::string_view(line).substr(0, line.size() - 1));
    ASSERT_TRUE(e);
    ASSERT_EQ(e->kind, entry_kind::close);
    const auto& d = e->record;
    EXPECT_EQ(d.id, r.id);
    EXPECT_EQ(d.tenant, r.tenant);
    EXPECT_EQ(d.model, r.model);
    EXPECT_EQ(d.route, r.route);
    EXPECT_EQ(d.request_id, r.request_id);
    EXPECT_EQ(d.start_unix_ms, r.start_unix_ms);
    EXPECT_EQ(d.end_unix_ms, r.end_unix_ms);
    EXPECT_DOUBLE_EQ(*d.ttft_seconds, 0.25);
    EXPECT_DOUBLE_EQ(d.duration_seconds, 1.877);
    EXPECT_EQ(d.input, r.input);
    EXPECT_EQ(d.output, r.output);
    EXPECT_EQ(d.reasoning, token_count{});
    EXPECT_EQ(d.cached_input, r.cached_input);
    EXPECT_EQ(d.outcome, "complete");
    EXPECT_EQ(d.status, 200);
    EXPECT_TRUE(d.streamed);
}

TEST(UsageRecord, OpenAndCheckpointRoundTrip) {
    open_info o{"abc", "t", "m", "openai_chat", "/v1/chat/completions", "", 1000, true};
    auto e = decode_line(encode_open(o));
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind, entry_kind::open);
    EXPECT_EQ(e->open.id, "abc");
    EXPECT_EQ(e->open.start_unix_ms, 1000);
    EXPECT_EQ(e->open.request_id, "");
    checkpoint_info c{"abc", 2500, 200, 0.1, {}, {17, token_source::counted}};
    auto f = decode_line(encode_checkpoint(c));
    ASSERT_TRUE(f);
    EXPECT_EQ(f->kind, entry_kind::checkpoint);
    EXPECT_EQ(f->checkpoint.at_unix_ms, 2500);
    EXPECT_EQ(f->checkpoint.output, (token_count{17, token_source::counted}));
    EXPECT_EQ(f->checkpoint.input, token_count{});
}

TEST(UsageRecord, RejectsWhatItCannotTrust) {
    EXPECT_FALSE(decode_line(""));
    EXPECT_FALSE(decode_line("{not json"));
    EXPECT_FALSE(decode_line(R"({"v":2,"type":"close","id":"x"})"));
    EXPECT_FALSE(decode_line(R"({"v":1,"type":"bogus","id":"x"})"));
    EXPECT_FALSE(decode_line(R"({"v":1,"type":"open","id":"","start":"2026-01-01"})"));
    EXPECT_FALSE(decode_line(R"({"v":1,"type":"close","id":"x","start":"2026-01-01"})"));
    // A cut line (SIGKILL in the middle of a write) is not JSON.
    auto line = encode_close(sample());
    EXPECT_FALSE(decode_line(std::string_view(line).substr(0, line.size() / 2)));
}

TEST(UsageRecord, InvalidUtf8FromClientsStillGivesValidJson) {
    auto r = sample();
    r.model = "bad\xff\xfe model";
    auto e = decode_line(encode_close(r));
    ASSERT_TRUE(e);
    EXPECT_NE(e->record.model, r.model);
    EXPECT_EQ(e->record.id, r.id);
}

TEST(UsageRecord, MakeRecordCarriesTheSummary) {
    meter::request_summary s;
    s.api = protocol::api_kind::openai_chat_completions;
    s.model = "m";
    s.status = 200;
    s.result = meter::outcome::client_cancel;
    s.upstream_received = true;
    s.streamed = true;
    s.counted_output_tokens = 3;
    s.reported.reasoning_tokens = 2;
    s.time_to_first_token = 0.5;
    s.duration_seconds = 2.0;
    open_info o{"id1", "t", "m", "openai_chat", "/v1/chat/completions", "r", 1000, true};
    auto r = make_record(o, s, meter::billed(s), 3000);
    EXPECT_EQ(r.id, "id1");
    EXPECT_EQ(r.outcome, "client_cancel");
    EXPECT_EQ(r.output, (token_count{3, token_source::counted}));
    EXPECT_EQ(r.reasoning, (token_count{2, token_source::reported}));
    EXPECT_EQ(r.end_unix_ms, 3000);
    EXPECT_EQ(r.request_id, "r");
}

TEST(UsageRecord, AudioSecondsAreWrittenWhenReportedAndServedOnly) {
    meter::request_summary s;
    s.api = protocol::api_kind::openai_transcriptions;
    s.status = 200;
    s.result = meter::outcome::complete;
    s.upstream_received = true;
    s.reported.audio_seconds = 9.5;
    open_info o{"id1", "t",  "w", "openai_transcriptions", "/v1/audio/transcriptions",
                "",    1000, true};
    auto r = make_record(o, s, meter::billed(s), 3000);
    ASSERT_TRUE(r.audio_seconds);
    const std::string line = encode_close(r);
    EXPECT_NE(line.find("\"audio_seconds\":9.5"), std::string::npos) << line;
    auto e = decode_line(std::string_view(line).substr(0, line.size() - 1));
    ASSERT_TRUE(e);
    ASSERT_TRUE(e->record.audio_seconds);
    EXPECT_DOUBLE_EQ(*e->record.audio_seconds, 9.5);

    // Never served: nothing billed, no seconds either.
    s.upstream_received = false;
    EXPECT_FALSE(make_record(o, s, meter::billed(s), 3000).audio_seconds);
    // Without a report the field is absent, and a hostile spool line's negative or
    // non-number seconds are not read.
    EXPECT_EQ(encode_close(sample()).find("audio_seconds"), std::string::npos);
    std::string hostile = encode_close(r);
    hostile.replace(hostile.find("9.5"), 3, "-4");
    auto h = decode_line(std::string_view(hostile).substr(0, hostile.size() - 1));
    ASSERT_TRUE(h);
    EXPECT_FALSE(h->record.audio_seconds);
}

TEST(UsageRecord, RecoveredRecordKeepsIdAndLastCheckpoint) {
    open_info o{"id1", "t", "m", "openai_chat", "/v1/chat/completions", "", 1000, true};
    checkpoint_info c{"id1", 4000, 200, 0.2, {}, {40, token_source::counted}};
    auto r = recover_record(o, c);
    EXPECT_EQ(r.id, "id1");
    EXPECT_EQ(r.outcome, "crash_recovered");
    EXPECT_EQ(r.output, (token_count{40, token_source::counted}));
    EXPECT_EQ(r.end_unix_ms, 4000);
    EXPECT_DOUBLE_EQ(r.duration_seconds, 3.0);
    EXPECT_EQ(r.status, 200);
    auto bare = recover_record(o, std::nullopt);
    EXPECT_EQ(bare.output, (token_count{0, token_source::counted}));
    EXPECT_EQ(bare.end_unix_ms, 1000);
    EXPECT_EQ(bare.status, 0);
}

TEST(UsageIds, UniqueAcrossGeneratorsAndCalls) {
    std::set<std::string> seen;
    id_generator a;
    id_generator b;
    for (int i = 0; i < 1000; ++i) {
        auto x = a.next();
        auto y = b.next();
        EXPECT_EQ(x.size(), 32u);
        EXPECT_TRUE(seen.insert(x).second);
        EXPECT_TRUE(seen.insert(y).second);
    }
    id_generator fixed(0x1234, 7);
    EXPECT_EQ(fixed.next(), "00000000000012340000000000000007");
}

// A spool line is read from disk, hostile like a socket: a field of the wrong type, a number out
// of range or nonsense makes the line malformed (nullopt), never an exception.
TEST(UsageRecord, LinesWithFieldsOfTheWrongTypeAreMalformedNotThrown) {
    const std::string open_line =
        encode_open(open_info{"id1", "t", "m", "openai_chat", "/r", "", 0, true});
    const std::string close_line = encode_close(sample());
    for (std::string line : {open_line, close_line}) {
        line.pop_back();  // the newline
        for (const char* field : {"\"streamed\":true", "\"streamed\":false"}) {
            const auto at = line.find(field);
            if (at == std::string::npos) {
                continue;
            }
            std::string bad = line;
            bad.replace(at, std::string_view(field).size(), "\"streamed\":\"yes\"");
            std::optional<spool_entry> e;
            EXPECT_NO_THROW(e = decode_line(bad)) << bad;
            ASSERT_TRUE(e) << "a wrong-typed optional field reads as absent: " << bad;
            EXPECT_FALSE(e->kind == entry_kind::open ? e->open.streamed : e->record.streamed);
        }
    }
    for (const char* bad :
         {R"({"v":1,"type":"close","id":"x","start":7})", R"({"v":1e999,"type":"close"})",
          R"({"v":1,"type":"close","id":"x","start":"2026-01-01","end":"2026-01-01",)"
          R"("outcome":"complete","status":99999999999999,"cost":1e308,"currency":"USD"})",
          R"({"v":1,"type":["open"],"id":{"a":1}})", "[1,2]", "\"str\"", ""}) {
        EXPECT_NO_THROW((void)decode_line(bad)) << bad;
    }
}

}  // namespace
}  // namespace tokenmeter::usage
