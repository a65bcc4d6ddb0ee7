// app/command_line: both flag spellings, errors that name the flag, and overrides validated by
// config/ (the range of --threads is config's rule, not the command line's).
#include "app/command_line.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tokenmeter::app {
namespace {

parsed_command_line parse(std::vector<std::string> args) {
    return parse_command_line(args);
}

TEST(CommandLine, ValueAfterTheFlagOrAfterAnEqualsSign) {
    const auto spaced = parse({"--listen", "127.0.0.1:0", "--admin", "[::1]:9"});
    ASSERT_TRUE(spaced.value) << spaced.error;
    EXPECT_EQ(spaced.value->listen, "127.0.0.1:0");
    EXPECT_EQ(spaced.value->admin, "[::1]:9");
    const auto joined = parse({"--listen=127.0.0.1:0", "--upstream=http://h:1/b", "--threads=2"});
    ASSERT_TRUE(joined.value) << joined.error;
    EXPECT_EQ(joined.value->listen, "127.0.0.1:0");
    EXPECT_EQ(joined.value->upstream, "http://h:1/b");
    EXPECT_EQ(joined.value->threads, "2");
    EXPECT_EQ(joined.value->what, command_line::action::run);
}

TEST(CommandLine, ListenEqualsFormReachesTheSettings) {
    const auto parsed = parse({"--listen=127.0.0.1:0", "--log-level=debug", "--access-log"});
    ASSERT_TRUE(parsed.value) << parsed.error;
    const config::load_result r = build_settings(*parsed.value);
    ASSERT_TRUE(r.ok()) << config::to_string(r.errors.front());
    EXPECT_EQ(r.value.listen, (config::endpoint{"127.0.0.1", 0}));
    EXPECT_EQ(r.value.log.level, config::log_level::debug);
    EXPECT_TRUE(r.value.log.access_log);
}

TEST(CommandLine, ActionsAndTheirArguments) {
    EXPECT_EQ(parse({"--help"}).value->what, command_line::action::help);
    EXPECT_EQ(parse({"-h"}).value->what, command_line::action::help);
    EXPECT_EQ(parse({"--version"}).value->what, command_line::action::version);
    const auto check = parse({"--check-config=/etc/t.yaml"});
    ASSERT_TRUE(check.value) << check.error;
    EXPECT_EQ(check.value->what, command_line::action::check_config);
    EXPECT_EQ(check.value->check_config_path, "/etc/t.yaml");
    EXPECT_EQ(parse({"--config", "/c.yaml"}).value->config_path, "/c.yaml");
    // Given twice, the last value counts (a wrapper may append to a fixed command line).
    EXPECT_EQ(parse({"--listen", "127.0.0.1:1", "--listen=127.0.0.1:2"}).value->listen,
              "127.0.0.1:2");
    EXPECT_TRUE(parse({"--access-log", "--access-log"}).value->access_log);
    EXPECT_FALSE(parse({"--access-log=yes"}).value) << "a switch takes no value";
}

TEST(CommandLine, UnknownFlagsMissingValuesAndStrayWords) {
    EXPECT_EQ(parse({"--bogus"}).error, "unknown argument '--bogus'");
    EXPECT_EQ(parse({"--listen"}).error, "--listen needs a value");
    EXPECT_EQ(parse({"stray"}).error, "unknown argument 'stray'");
    // No abbreviations: --list is not --listen.
    EXPECT_FALSE(parse({"--list=127.0.0.1:1"}).value);
    // Subcommands are dispatched before this parser; their flags are not the proxy's.
    EXPECT_FALSE(parse({"--tokenizer", "o200k_base"}).value);
    EXPECT_FALSE(parse({"--spool", "/tmp"}).value);
}

TEST(CommandLine, OverridesAreValidatedByConfig) {
    command_line flags;
    flags.threads = "300";
    flags.log_level = "VERBOSE";
    flags.listen = "nowhere";
    const config::load_result r = build_settings(flags);
    std::vector<std::string> lines;
    for (const auto& e : r.errors) {
        lines.push_back(config::to_string(e));
    }
    EXPECT_EQ(lines, (std::vector<std::string>{
                         "--listen: expected HOST:PORT, got 'nowhere'",
                         "threads: must be at most 256 (0 means one per core), got 300",
                         "log.level: must be one of trace, debug, info, warn, error, off, got "
                         "\"VERBOSE\"",
                     }));
    command_line words;
    words.threads = "many";
    EXPECT_EQ(config::to_string(build_settings(words).errors.at(0)),
              "--threads: expected a whole number, got 'many' (not a whole number)");
}

}  // namespace
}  // namespace tokenmeter::app
