// Log lines carry client input (model names, tenant headers): no message may end its line or
// forge another record, in either format.
#include "app/log_format.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace tokenmeter::app {
namespace {

std::string line_of(config::log_format format, std::string_view message,
                    spdlog::level::level_enum level = spdlog::level::info) {
    auto formatter = make_log_formatter(format);
    const spdlog::details::log_msg msg(spdlog::source_loc{}, "tokenmeter", level,
                                       spdlog::string_view_t(message.data(), message.size()));
    spdlog::memory_buf_t out;
    formatter->format(msg, out);
    return {out.data(), out.size()};
}

// A model name a client chose: it closes the record, starts a critical one, and adds a raw line.
constexpr std::string_view forged =
    "access model=\"}\n{\"time\":\"x\",\"level\":\"critical\",\"msg\":\"owned\"}\r\n\x1b[31mred\\";

TEST(LogFormat, AJsonLineIsOneRecordWhateverTheMessageHolds) {
    const std::string line = line_of(config::log_format::json, forged);
    ASSERT_FALSE(line.empty());
    EXPECT_EQ(line.back(), '\n');
    const std::string body = line.substr(0, line.size() - 1);
    EXPECT_EQ(body.find('\n'), std::string::npos) << line;
    EXPECT_EQ(body.find('\r'), std::string::npos) << line;
    const nlohmann::json record = nlohmann::json::parse(body);
    EXPECT_EQ(record["level"], "info");
    EXPECT_EQ(record["msg"], std::string(forged)) << "the message reads back exactly";
    EXPECT_EQ(record.size(), 3u);
}

TEST(LogFormat, ATextLineKeepsControlCharactersOutOfTheLine) {
    const std::string line = line_of(config::log_format::text, forged, spdlog::level::warn);
    ASSERT_FALSE(line.empty());
    const std::string body = line.substr(0, line.size() - 1);
    EXPECT_EQ(body.find('\n'), std::string::npos) << line;
    EXPECT_EQ(body.find('\r'), std::string::npos) << line;
    EXPECT_EQ(body.find('\x1b'), std::string::npos) << line;
    EXPECT_NE(body.find("\\x0a{\"time\""), std::string::npos) << line;
    EXPECT_NE(body.find("red\\\\"), std::string::npos) << "a backslash is doubled: " << line;
    EXPECT_NE(body.find(" warning "), std::string::npos) << line;
}

TEST(LogFormat, PlainMessagesAreUnchanged) {
    const std::string json = line_of(config::log_format::json, "upstream reachable");
    EXPECT_EQ(nlohmann::json::parse(json.substr(0, json.size() - 1))["msg"], "upstream reachable");
    const std::string text = line_of(config::log_format::text, "upstream reachable");
    EXPECT_NE(text.find(" info upstream reachable\n"), std::string::npos) << text;
}

// An access record as the log writes it: the access logger's name marks the fields as already
// escaped by format_access_fields.
std::string access_line(config::log_format format, const observe::access_entry& entry) {
    auto formatter = make_log_formatter(format);
    const std::string fields = format_access_fields(entry, format);
    const spdlog::details::log_msg msg(spdlog::source_loc{}, access_logger_name,
                                       spdlog::level::info,
                                       spdlog::string_view_t(fields.data(), fields.size()));
    spdlog::memory_buf_t out;
    formatter->format(msg, out);
    return {out.data(), out.size()};
}

// Every text field a client chooses, chosen to break a line, a field or the JSON around it.
observe::access_entry hostile_entry() {
    observe::access_entry e;
    e.method = "POST";
    e.path = "/v1/chat/completions\" status=200 x=";
    e.status = 200;
    e.outcome = "complete";
    e.api = "openai_chat";
    e.model = forged;
    e.tenant =
        "a b\xe2\x80\xa8"
        "c\xc2\x85"
        "d\xff";  // LS, NEL, a byte that is not UTF-8
    e.request_id = "-";
    e.trace_id = core::trace_id{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
                                0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36};
    e.span_id = core::span_id{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
    e.client = "192.0.2.1";
    e.upstream = "127.0.0.1:8000";
    e.time_to_first_token = 0.0125;
    e.duration_seconds = 1.5;
    e.input_tokens = 12;
    e.output_tokens = 0;
    e.bytes_in = 321;
    return e;
}

TEST(AccessLog, AJsonRecordHasEveryFieldAtTheTopLevel) {
    const std::string line = access_line(config::log_format::json, hostile_entry());
    ASSERT_EQ(line.back(), '\n');
    const std::string body = line.substr(0, line.size() - 1);
    EXPECT_EQ(body.find('\n'), std::string::npos) << line;
    const nlohmann::json r = nlohmann::json::parse(body);
    EXPECT_EQ(r["level"], "info");
    EXPECT_EQ(r["msg"], "access");
    EXPECT_TRUE(r["time"].is_string());
    EXPECT_EQ(r["method"], "POST");
    EXPECT_EQ(r["path"], "/v1/chat/completions\" status=200 x=");
    EXPECT_EQ(r["status"], 200);
    EXPECT_EQ(r["outcome"], "complete");
    EXPECT_EQ(r["api"], "openai_chat");
    EXPECT_EQ(r["model"], std::string(forged)) << "reads back exactly";
    EXPECT_EQ(r["tenant"],
              "a b\xe2\x80\xa8"
              "c\xc2\x85"
              "d\xef\xbf\xbd")
        << "ill-formed UTF-8 becomes U+FFFD; the line stays valid JSON";
    EXPECT_NE(body.find("\\u2028"), std::string::npos) << "a line separator is escaped";
    EXPECT_NE(body.find("\\u0085"), std::string::npos) << "NEL is escaped";
    EXPECT_EQ(r["request_id"], "-");
    EXPECT_EQ(r["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    EXPECT_EQ(r["span_id"], "00f067aa0ba902b7");
    EXPECT_EQ(r["client"], "192.0.2.1");
    EXPECT_EQ(r["upstream"], "127.0.0.1:8000");
    EXPECT_DOUBLE_EQ(r["ttft_s"].get<double>(), 0.0125);
    EXPECT_DOUBLE_EQ(r["duration_s"].get<double>(), 1.5);
    EXPECT_EQ(r["input_tokens"], 12);
    EXPECT_EQ(r["output_tokens"], 0) << "a known 0 stays 0";
    EXPECT_EQ(r["bytes_in"], 321);
    EXPECT_TRUE(r["bytes_out"].is_null()) << "unknown is null";
    EXPECT_EQ(r.size(), 21u);
}

TEST(AccessLog, UnknownValuesAreNullNeverZero) {
    observe::access_entry e;
    e.method = "GET";
    e.path = "/health";
    e.outcome = "client_cancel";
    const std::string line = access_line(config::log_format::json, e);
    const nlohmann::json r = nlohmann::json::parse(line.substr(0, line.size() - 1));
    for (const char* key :
         {"status", "api", "model", "tenant", "request_id", "trace_id", "span_id", "client",
          "upstream", "ttft_s", "input_tokens", "output_tokens", "bytes_in", "bytes_out"}) {
        EXPECT_TRUE(r[key].is_null()) << key << " in " << line;
    }
    const std::string text = access_line(config::log_format::text, e);
    EXPECT_NE(text.find(" status=- "), std::string::npos) << text;
    EXPECT_NE(text.find(" bytes_out=-\n"), std::string::npos) << text;
}

TEST(AccessLog, ATextRecordIsOneLineOfKeyValuePairs) {
    const std::string line = access_line(config::log_format::text, hostile_entry());
    ASSERT_EQ(line.back(), '\n');
    const std::string body = line.substr(0, line.size() - 1);
    for (const char c : {'\n', '\r', '\x1b'}) {
        EXPECT_EQ(body.find(c), std::string::npos) << line;
    }
    EXPECT_NE(body.find(" info access method=POST path=\"/v1/chat/completions\\\" status=200 x=\" "
                        "status=200 outcome=complete api=openai_chat model=\"access model=\\\"}"
                        "\\x0a{\\\"time\\\""),
              std::string::npos)
        << line;
    EXPECT_NE(body.find(" tenant=\"a b\\u2028c\\u0085d\\xff\" request_id=\"-\" "
                        "trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7 "
                        "client=192.0.2.1 "
                        "upstream=127.0.0.1:8000 ttft_s=0.012500 duration_s=1.500000 "
                        "input_tokens=12 output_tokens=0 bytes_in=321 bytes_out=-"),
              std::string::npos)
        << line;
    // Reading the line back: outside quotes, each space starts a field; there are 18.
    std::size_t fields = 0;
    bool quoted = false;
    const std::size_t start = body.find(" access ") + 8;
    for (std::size_t i = start; i < body.size(); ++i) {
        if (body[i] == '\\') {
            ++i;
        } else if (body[i] == '"') {
            quoted = !quoted;
        } else if (body[i] == ' ' && !quoted) {
            ++fields;
        }
    }
    EXPECT_FALSE(quoted);
    EXPECT_EQ(fields + 1, 18u) << line;
}

TEST(AccessLog, OtherLoggersCannotWriteRawFields) {
    const std::string json = line_of(config::log_format::json, R"(","level":"critical)");
    const nlohmann::json r = nlohmann::json::parse(json.substr(0, json.size() - 1));
    EXPECT_EQ(r["level"], "info");
    EXPECT_EQ(r.size(), 3u);
}

}  // namespace
}  // namespace tokenmeter::app
