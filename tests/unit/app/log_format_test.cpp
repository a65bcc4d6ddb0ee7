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

}  // namespace
}  // namespace tokenmeter::app
