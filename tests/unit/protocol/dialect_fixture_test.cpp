// Every dialect adapter on recorded-format fixtures (tests/fixtures/dialects and, in their older
// format, tests/fixtures/openai): each streamed fixture is framed by the SSE or NDJSON parser
// split at every byte offset and must give the same chunks, done markers and parse errors (by
// reason, or in total); then, where the fixture states it, the whole exchange (framing, adapter,
// meter) must end with the merged usage and counted tokens it gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "meter/exchange.hpp"
#include "ndjson/parser.hpp"
#include "protocol/dialects.hpp"
#include "recording_sink.hpp"
#include "sse/parser.hpp"

namespace tokenmeter::protocol {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test_support::read_file;
using test_support::recorded_chunk;
using test_support::recording_sink;

enum class framing { sse, ndjson, body };

framing framing_of(const fs::path& input) {
    if (input.extension() == ".sse") {
        return framing::sse;
    }
    if (input.extension() == ".ndjson") {
        return framing::ndjson;
    }
    return framing::body;
}

recording_sink run_split(api_kind api, framing how, std::string_view input, std::size_t split) {
    recording_sink sink;
    auto adapter = make_adapter(api);
    EXPECT_NE(adapter, nullptr);
    if (how == framing::body) {
        adapter->on_body(input, core::time_point{}, sink);
        return sink;
    }
    if (how == framing::sse) {
        sse::parser parser;
        auto deliver = [&](const sse::event& ev) {
            adapter->on_event(ev.type, ev.data, core::time_point{}, sink);
        };
        parser.feed(input.substr(0, split), deliver);
        parser.feed(input.substr(split), deliver);
        EXPECT_TRUE(parser.finish());
        return sink;
    }
    ndjson::parser parser;
    auto deliver = [&](std::string_view line) {
        adapter->on_event({}, line, core::time_point{}, sink);
    };
    parser.feed(input.substr(0, split), deliver);
    parser.feed(input.substr(split), deliver);
    EXPECT_TRUE(parser.finish(deliver));
    return sink;
}

void expect_count(const json& expected, const char* key, const std::optional<std::uint64_t>& actual,
                  const std::string& where) {
    if (expected.contains(key)) {
        ASSERT_TRUE(actual.has_value()) << where << " " << key;
        EXPECT_EQ(*actual, expected[key].get<std::uint64_t>()) << where << " " << key;
    } else {
        EXPECT_FALSE(actual.has_value()) << where << " " << key << " = " << actual.value_or(0);
    }
}

void check_chunks(const json& expected, const recording_sink& sink, const std::string& where) {
    ASSERT_EQ(sink.chunks.size(), expected["chunks"].size()) << where;
    EXPECT_EQ(sink.done_markers, expected["done_markers"].get<int>()) << where;
    const json& errors = expected["parse_errors"];
    if (errors.is_number()) {
        // The OpenAI fixtures give the total only.
        EXPECT_EQ(sink.parse_errors(), errors.get<int>()) << where << " parse errors";
    } else {
        for (std::size_t r = 0; r < parse_error_count; ++r) {
            std::string reason(to_string(static_cast<parse_error>(r)));
            EXPECT_EQ(sink.errors[r], errors.value(reason, 0))
                << where << " parse errors " << reason;
        }
    }
    for (std::size_t i = 0; i < sink.chunks.size(); ++i) {
        const json& want = expected["chunks"][i];
        const recorded_chunk& got = sink.chunks[i];
        std::string at = where + " chunk " + std::to_string(i);
        EXPECT_EQ(got.content, want.value("content", "")) << at;
        EXPECT_EQ(got.reasoning, want.value("reasoning", "")) << at;
        EXPECT_EQ(got.tool, want.value("tool", "")) << at;
        EXPECT_EQ(got.finish, want.value("finish", "")) << at;
        EXPECT_EQ(got.error, want.value("error", false)) << at;
        if (want.contains("role_only")) {
            EXPECT_EQ(got.role_only, want["role_only"].get<bool>()) << at;
        }
        if (want.contains("usage")) {
            ASSERT_TRUE(got.usage.has_value()) << at;
            const json& u = want["usage"];
            expect_count(u, "input", got.usage->input_tokens, at);
            expect_count(u, "output", got.usage->output_tokens, at);
            expect_count(u, "reasoning", got.usage->reasoning_tokens, at);
            expect_count(u, "cached_input", got.usage->cached_input_tokens, at);
            expect_count(u, "cache_write", got.usage->cache_write_tokens, at);
            expect_count(u, "cache_write_1h", got.usage->cache_write_1h_tokens, at);
        } else {
            EXPECT_FALSE(got.usage.has_value()) << at;
        }
    }
}

// The whole metering path, with each read 10 ms after the previous one.
void check_exchange(api_kind api, framing how, std::string_view input, const json& expected,
                    std::size_t reads, const std::string& where) {
    static const std::vector<double> bounds = {0.001, 0.01, 0.1, 1.0};
    request_info info;
    info.model = "m";
    info.body_parsed = true;
    info.stream = how != framing::body;
    using namespace std::chrono_literals;
    core::time_point t0{};
    meter::exchange ex(api, info, t0, &bounds, {});
    const char* type = how == framing::sse      ? "text/event-stream"
                       : how == framing::ndjson ? "application/x-ndjson"
                                                : "application/json";
    ex.on_response_head(200, type, t0 + 1ms);
    std::size_t step = input.size() / reads + 1;
    int n = 0;
    for (std::size_t from = 0; from < input.size(); from += step) {
        ex.on_body(input.substr(from, step), t0 + 10ms * ++n);
    }
    auto s = ex.finish(meter::end_reason::upstream_complete, t0 + 10ms * (n + 1));
    const json& want = expected["final"];
    expect_count(want, "input", s.reported.input_tokens, where);
    expect_count(want, "output", s.reported.output_tokens, where);
    expect_count(want, "reasoning", s.reported.reasoning_tokens, where);
    expect_count(want, "cached_input", s.reported.cached_input_tokens, where);
    expect_count(want, "cache_write", s.reported.cache_write_tokens, where);
    expect_count(want, "cache_write_1h", s.reported.cache_write_1h_tokens, where);
    EXPECT_EQ(s.counted_output_tokens, want["counted_output"].get<std::uint64_t>()) << where;
    EXPECT_EQ(s.stream_error, want.value("stream_error", false)) << where;
    std::uint64_t errors = 0;
    for (const auto& [reason, count] : expected["parse_errors"].items()) {
        errors += count.get<std::uint64_t>();
    }
    EXPECT_EQ(s.parse_errors, errors) << where;
    if (how != framing::body && s.counted_output_tokens > 0) {
        ASSERT_TRUE(s.time_to_first_token.has_value()) << where;
        if (s.time_to_first_content_token) {
            EXPECT_GE(*s.time_to_first_content_token, *s.time_to_first_token) << where;
        }
    }
}

fs::path expected_path_of(fs::path input) {
    input.replace_extension(".expected.json");
    return input;
}

std::vector<fs::path> fixture_inputs() {
    std::vector<fs::path> inputs;
    for (const char* dir : {TOKENMETER_FIXTURES_DIR "/dialects", TOKENMETER_FIXTURES_DIR "/openai"}) {
        for (const auto& entry : fs::directory_iterator(dir)) {
            auto ext = entry.path().extension();
            if (ext == ".sse" || ext == ".ndjson" ||
                (ext == ".json" && entry.path().string().find(".expected.") == std::string::npos)) {
                // openai/chat_nonstream.json has no expected file: the adapter tests read it.
                if (fs::path(dir).filename() == "dialects" ||
                    fs::exists(expected_path_of(entry.path()))) {
                    inputs.push_back(entry.path());
                }
            }
        }
    }
    std::sort(inputs.begin(), inputs.end());
    return inputs;
}

// The fixture's API: a table name, or in the OpenAI fixtures "chat" (the default) or
// "completions".
std::optional<api_kind> api_of(const json& expected) {
    std::string name = expected.value("api", "chat");
    if (name == "chat") {
        return api_kind::openai_chat_completions;
    }
    if (name == "completions") {
        return api_kind::openai_completions;
    }
    return api_from_name(name);
}

TEST(DialectFixtures, EveryFixtureAtEverySplitPoint) {
    auto inputs = fixture_inputs();
    ASSERT_GE(inputs.size(), 18u);
    for (const auto& input_path : inputs) {
        fs::path expected_path = expected_path_of(input_path);
        json expected = json::parse(read_file(expected_path));
        if (input_path.parent_path().filename() == "dialects") {
            // The newer format names the API and states the whole exchange's result.
            ASSERT_TRUE(expected.contains("api") && expected.contains("final")) << expected_path;
        }
        auto api = api_of(expected);
        ASSERT_TRUE(api.has_value()) << expected_path;
        std::string input = read_file(input_path);
        framing how = framing_of(input_path);
        std::string name = input_path.filename().string();
        std::size_t last_split = how == framing::body ? 0 : input.size();
        for (std::size_t split = 0; split <= last_split; ++split) {
            auto sink = run_split(*api, how, input, split);
            check_chunks(expected, sink, name + " split at " + std::to_string(split));
            if (HasFailure()) {
                return;  // one failing split says enough
            }
        }
        if (!expected.contains("final")) {
            continue;  // the OpenAI fixtures state the adapter's chunks only
        }
        for (std::size_t reads : {1u, 3u, 17u}) {
            check_exchange(*api, how, input, expected, reads,
                           name + " exchange in " + std::to_string(reads) + " reads");
        }
    }
}

}  // namespace
}  // namespace tokenmeter::protocol
