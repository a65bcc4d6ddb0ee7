// sse golden fixtures: every tests/fixtures/sse/<name>.sse must give <name>.events.json.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "split_harness.hpp"
#include "sse/parser.hpp"

namespace tokenmeter::sse {
namespace {

namespace fs = std::filesystem;

fs::path fixture_dir() {
    return fs::path(TOKENMETER_FIXTURES_DIR) / "sse";
}

std::vector<std::string> fixture_names() {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(fixture_dir(), ec)) {
        if (entry.path().extension() == ".sse") {
            names.push_back(entry.path().stem().string());
        }
    }
    std::sort(names.begin(), names.end());
    return names;
}

std::string read_bytes(const fs::path& path) {
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) {
        ADD_FAILURE() << "cannot read " << path << ": " << ec.message();
        return {};
    }
    std::string bytes(static_cast<std::size_t>(size), '\0');
    std::ifstream in(path, std::ios::binary);
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(in.good()) << "short read of " << path;
    return bytes;
}

TEST(SseGolden, FixturesArePresent) {
    // Guards against a moved directory silently turning the golden tests into zero tests.
    EXPECT_GE(fixture_names().size(), 6U) << "looked in " << fixture_dir();
}

class SseGoldenFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(SseGoldenFixture, ProducesTheRecordedEvents) {
    const fs::path base = fixture_dir() / GetParam();
    const fs::path input_path = fs::path(base).concat(".sse");
    const fs::path expected_path = fs::path(base).concat(".events.json");
    ASSERT_TRUE(fs::exists(expected_path)) << expected_path << " is missing";

    const std::string input = read_bytes(input_path);
    const auto expected = nlohmann::json::parse(read_bytes(expected_path));

    std::vector<test_support::owned_event> want;
    for (const auto& e : expected.at("events")) {
        want.push_back({e.at("type").get<std::string>(), e.at("data").get<std::string>(),
                        e.at("id").get<std::string>()});
    }
    const auto max_bytes =
        expected.value("max_event_bytes", std::size_t{parser::default_max_event_bytes});

    const auto got = test_support::parse_every_way(input, max_bytes);
    EXPECT_EQ(got.events, want);
    EXPECT_EQ(got.clean, expected.at("clean_end").get<bool>());
    EXPECT_EQ(got.comments, expected.at("comments").get<std::uint64_t>());
    EXPECT_EQ(got.oversized_events, expected.at("oversized_events").get<std::uint64_t>());
    EXPECT_EQ(got.stat_events, want.size());
    EXPECT_EQ(got.stat_bytes, input.size());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SseGoldenFixture, ::testing::ValuesIn(fixture_names()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                             return param_info.param;
                         });

}  // namespace
}  // namespace tokenmeter::sse
