#include "app/usage_command.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "app/flags.hpp"
#include "usage/record.hpp"
#include "usage/spool.hpp"

namespace tokenmeter::app {
namespace {

usage::usage_record record(std::string id) {
    usage::usage_record r;
    r.id = std::move(id);
    r.tenant = "t";
    r.model = "m";
    r.start_unix_ms = 0;
    r.end_unix_ms = 1000;
    r.ttft_seconds = 0.1;
    r.input = {1, usage::token_source::reported};
    r.output = {2, usage::token_source::reported};
    r.outcome = "complete";
    return r;
}

struct spool_dir {
    std::filesystem::path path;
    spool_dir() {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "tokenmeter-usage-XXXXXX").string();
        if (::mkdtemp(pattern.data()) != nullptr) {
            path = pattern;
        }
    }
    ~spool_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    spool_dir(const spool_dir&) = delete;
    spool_dir& operator=(const spool_dir&) = delete;
};

TEST(Flags, ValuesSwitchesAndTheLastOccurrence) {
    const auto f =
        parse_flags({"--spool", "a", "--json", "--spool=b"}, {{"spool", true}, {"json"}});
    ASSERT_TRUE(f.ok()) << f.error;
    EXPECT_EQ(f.value("spool"), "b");
    EXPECT_TRUE(f.has("json"));
    EXPECT_FALSE(f.has("help"));
    EXPECT_TRUE(parse_flags({"-h"}, {}).has("help"));
}

TEST(Flags, RefusesUnknownFlagsStrayWordsMissingValuesAndAbbreviations) {
    EXPECT_EQ(parse_flags({"--nope"}, {{"json"}}).error, "unknown argument '--nope'");
    EXPECT_EQ(parse_flags({"word"}, {{"json"}}).error, "unknown argument 'word'");
    EXPECT_EQ(parse_flags({"--spool"}, {{"spool", true}}).error, "--spool needs a value");
    EXPECT_EQ(parse_flags({"--sp", "x"}, {{"spool", true}}).error, "unknown argument '--sp'");
    const auto f = parse_flags({"--json", "--nope"}, {{"json"}});
    EXPECT_FALSE(f.ok());
    EXPECT_TRUE(f.given.empty());
}

// A spool line of the wrong shape is skipped and counted (exit 0); --strict refuses it.
TEST(UsageCommand, SkipsLinesThatAreNotEntriesUnlessStrict) {
    const spool_dir dir;
    ASSERT_FALSE(dir.path.empty());
    {
        std::ofstream out(dir.path / usage::segment_name(1));
        out << usage::encode_close(record("a"));
        out << R"({"v":1,"type":"close","id":"b","streamed":"yes"})"
            << "\n";
        out << usage::encode_close(record("c"));
    }
    EXPECT_EQ(usage_command({"--spool", dir.path.string(), "--json"}), 0);
    EXPECT_EQ(usage_command({"--spool", dir.path.string(), "--strict"}), 1);
}

TEST(UsageCommand, WrongArgumentsExitTwo) {
    const spool_dir dir;
    ASSERT_FALSE(dir.path.empty());
    const std::string spool = dir.path.string();
    EXPECT_EQ(usage_command({"--spool", spool, "--from", "yesterday"}), 2);
    EXPECT_EQ(usage_command({"--spool", spool, "--plan", "--band-size", "0"}), 2);
    EXPECT_EQ(usage_command({"--spool", spool, "--plan", "--ttft-target", "fast"}), 2);
    EXPECT_EQ(usage_command({"--spool", spool, "--reference-mix", "2048"}), 2);
    EXPECT_EQ(usage_command({"--spool", spool, "--bogus"}), 2);
    EXPECT_EQ(usage_command({}), 2);
    EXPECT_EQ(usage_command({"--spool", (dir.path / "missing").string()}), 1);
    EXPECT_EQ(usage_command({"--spool", spool, "--plan", "--reference-mix", "100/10"}), 0);
}

}  // namespace
}  // namespace tokenmeter::app
