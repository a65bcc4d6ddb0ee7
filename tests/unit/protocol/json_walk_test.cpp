// walk_json against the nlohmann-based walker it replaced (json_walk_reference): the same visitor
// calls, in the same order, with the same paths and values, and the same result, for hand-picked
// edge cases, every JSON text in the recorded fixtures, and a few hundred thousand seeded
// mutations of them.
#include "protocol/json_walk.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "json_walk_reference.hpp"
#include "json_walk_trace.hpp"
#include "protocol/json_limits.hpp"

namespace tokenmeter::protocol {
namespace {

using namespace std::string_literals;

struct walk_outcome {
    walk_result result = walk_result::ok;
    std::string events;
    bool operator==(const walk_outcome&) const = default;
};

template <typename Walk>
walk_outcome walk_with(Walk walk, std::string_view text, json_path& path) {
    json_trace trace;
    walk_outcome outcome;
    outcome.result = walk(text, trace, path);
    outcome.events = std::move(trace.events);
    return outcome;
}

// Printable form of a test input for failure messages.
std::string shown(std::string_view text) {
    std::string out;
    for (char c : text) {
        auto b = static_cast<unsigned char>(c);
        if (b >= 0x20 && b < 0x7F && c != '\\') {
            out += c;
        } else {
            std::array<char, 8> hex{};
            std::snprintf(hex.data(), hex.size(), "\\x%02X", b);
            out += hex.data();
        }
    }
    return out;
}

// Walks with both, each with a path that has served earlier walks (its reuse is part of what is
// compared); true if they agree.
class differential {
  public:
    bool agree(std::string_view text) {
        walk_outcome expected = walk_with(reference::walk_json, text, reference_path_);
        walk_outcome actual = walk_with(walk_json, text, path_);
        last_expected_ = std::move(expected);
        last_actual_ = std::move(actual);
        return last_expected_ == last_actual_;
    }

    void expect_agree(std::string_view text) {
        EXPECT_TRUE(agree(text)) << "input: " << shown(text) << "\nreference ("
                                 << (last_expected_.result == walk_result::ok ? "ok" : "invalid")
                                 << "):\n"
                                 << last_expected_.events << "scanner ("
                                 << (last_actual_.result == walk_result::ok ? "ok" : "invalid")
                                 << "):\n"
                                 << last_actual_.events;
    }

    [[nodiscard]] const walk_outcome& last() const { return last_expected_; }

  private:
    json_path reference_path_;
    json_path path_;
    walk_outcome last_expected_;
    walk_outcome last_actual_;
};

// Restores the process-wide depth limit when a test changes it.
class depth_limit {
  public:
    explicit depth_limit(std::size_t depth) { set_max_json_depth(depth); }
    depth_limit(const depth_limit&) = delete;
    depth_limit& operator=(const depth_limit&) = delete;
    ~depth_limit() { set_max_json_depth(saved_); }

  private:
    std::size_t saved_ = max_json_depth();
};

std::vector<std::string> edge_cases() {
    std::vector<std::string> cases = {
        // Typical chunks.
        R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":" hello"},"logprobs":null,"finish_reason":null}]})",
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}})",
        R"({"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"cost":0.5}})",
        // Whole texts and whitespace.
        "", " ", "\t\n\r ", "{}", "[]", " {} ", "\n[ ]\r\n", "{ }", "[\t]", "0", " 1 ", "\"\"",
        "true", "false", "null", "tru", "nul", "fals", "truex", "nulll", "True", "NULL", "t",
        "[true,false,null]", "[true false]", "{\"a\":true,\"b\":false,\"c\":null}",
        "\f1", "1\f", "\v1", "1 2", "{} {}", "[] x", "{}x", "{},", "[1]]", "{\"a\":1}}",
        // NUL bytes: where a token starts nlohmann reads one as the end of the input.
        "\0"s, "1\0"s, "1\0garbage"s, "{}\0{"s, "[1,\0]"s, "\"a\0b\""s, "tr\0e"s, " \0 "s,
        "{\"a\":1}\0"s, "{\"a\0\":1}"s, "[\0]"s, "{\0}"s, "\"\"\0x"s, "-\0"s, "1.\0"s,
        // BOM.
        "\xEF\xBB\xBF{}", "\xEF\xBB\xBF", "\xEF\xBB\xBF 1 ", "\xEF\xBB{}", "\xEF{}", "\xEF",
        "\xEF\xBB", " \xEF\xBB\xBF{}", "\xEF\xBB\xBF\xEF\xBB\xBF{}", "\xBB\xBF{}",
        "[\"\xEF\xBB\xBF\"]",
        // Structure errors.
        "{", "[", "}", "]", "{\"a\"}", "{\"a\":}", "{\"a\" 1}", "{\"a\":1,}", "[1,]", "[,1]",
        "{,}", "{1:2}", "{a:1}", "{'a':1}", "[1 2]", "[1:2]", "{\"a\":1 \"b\":2}", ":", ",",
        "{\"a\":1,\"a\":2}", "{\"\":1}", "[[[]]]", "[[],[{}],{\"x\":[]}]", "{\"a\":[1,{\"b\":2}]}",
        "{\"a\" : [ 1 , 2 ] , \"b\" : { } }", "[{\"k\":\"v\"},{\"k\":\"w\"}]", "{\"a\":{\"b\":{}}}",
        // Strings and escapes.
        R"(["\"\\\/\b\f\n\r\t"])", R"(["\u0041\u00e9\u20AC\uFFFF"])", R"(["\u0000"])",
        R"(["\uD83D\uDE00"])", R"(["\ud83d\ude00"])", R"(["\uD83D"])", R"(["\uD83Dx"])",
        R"(["\uD83D\n"])", R"(["\uD83D\u0041"])", R"(["\uD83D\uD83D"])", R"(["\uDE00"])",
        R"(["\uDBFF\uDFFF"])", R"(["\uD800\uDC00"])", R"(["\uD800\uDBFF"])", R"(["\uD800\uE000"])",
        R"(["\u12"])", R"(["\u12G4"])", R"(["\u"])", R"(["\x41"])", R"(["\a"])", R"(["\'"])",
        R"(["\U0041"])", R"(["\)", R"(["\u004)", R"(["\uD83D\u)", R"(["\uD83D\uDE0)",
        R"({"k\n":1})", R"({"k\u0041":{"\t":"x\"y"}})", R"({"a\\b":"c\\d","e":"f"})",
        "\"abc", "\"abc\\", "[\"a\tb\"]", "[\"a\nb\"]", "[\"\x1F\"]", "[\"\x7F\"]", "[\" \"]",
        "[\"\x01\"]", "\"a\"\"b\"",
        // UTF-8 in strings, each class at its edges.
        "[\"\xC2\x80\"]", "[\"\xDF\xBF\"]", "[\"\xC0\x80\"]", "[\"\xC1\xBF\"]", "[\"\xC2\"]",
        "[\"\xC2\x7F\"]", "[\"\xC2\xC0\"]", "[\"\xE0\xA0\x80\"]", "[\"\xE0\x9F\xBF\"]",
        "[\"\xE1\x80\x80\"]", "[\"\xEC\xBF\xBF\"]", "[\"\xED\x80\x80\"]", "[\"\xED\x9F\xBF\"]",
        "[\"\xED\xA0\x80\"]", "[\"\xEE\x80\x80\"]", "[\"\xEF\xBF\xBF\"]", "[\"\xEF\xBF\"]",
        "[\"\xE1\x80\"]", "[\"\xE1\x80\x7F\"]", "[\"\xF0\x90\x80\x80\"]", "[\"\xF0\x8F\xBF\xBF\"]",
        "[\"\xF1\x80\x80\x80\"]", "[\"\xF3\xBF\xBF\xBF\"]", "[\"\xF4\x80\x80\x80\"]",
        "[\"\xF4\x8F\xBF\xBF\"]", "[\"\xF4\x90\x80\x80\"]", "[\"\xF5\x80\x80\x80\"]",
        "[\"\xF8\x80\x80\x80\x80\"]", "[\"\xFF\"]", "[\"\x80\"]", "[\"\xBF\"]", "[\"\xF0\x90\x80\"]",
        "[\"\xF0\x90\x80\xC0\"]", "\"\xE2\x82\xAC\"", "\"\xE2\x82", "{\"\xC3\xA9\":\"\xC3\xA9\"}",
        "{\"\xC3\":1}", "\xC3\xA9", "[\xC3\xA9]", "\"\\n\xC3\xA9\"", "\"\\n\xC3\"", "\"\\n\x01\"",
        // Numbers.
        "0", "-0", "-0.0", "0.0", "1.0", "1.5", "-1.5", "01", "-01", "00", "1.", "1.e1", ".5",
        "-", "-a", "+1", "1e", "1e+", "1e-", "1E5", "1e+5", "1e-5", "1e05", "-1e2", "1.5e3",
        "2.5E-3", "1e400", "-1e400", "1e-400", "1e308", "1.7976931348623157e308",
        "1.7976931348623159e308", "4.9e-324", "2e-324", "1.0e18", "999999999999999999",
        "1000000000000000000", "999999999999999999.5", "1e17", "123456789012345678.0",
        "18446744073709551615", "18446744073709551616", "99999999999999999999",
        "184467440737095516150", "-9223372036854775808", "-9223372036854775809",
        "-9223372036854775807", "-18446744073709551616", "9223372036854775808",
        "123456789012345678901234567890.5", "[1,-1,0,-0,1.25,-1.25,3.0,1e2,1e-2]",
        "[1.]", "[1.2.3]", "[1e2e3]", "[-]", "[0x10]", "[1a]", "[1 ]", "[1,2", "{\"a\":1.}",
        "{\"a\":-}", "{\"a\":01}", "[0.1e1]", "[1E+0]", "[-0e0]", "[0.0000000001]", "[1e-0]",
        "[NaN]", "[Infinity]", "[-Infinity]", "0.30000000000000004", "5e-324", "1e-320",
        "3.141592653589793238462643383279502884197169399375105820974944592307816406286",
        "1" + std::string(400, '0'), "0." + std::string(400, '1'),
        "-" + std::string(350, '9') + ".5", "1e" + std::string(40, '9'),
        "1e-" + std::string(40, '9'),
        // Non-JSON.
        "/* c */1", "// c\n1", "1 // c", "[1,/*x*/2]", "undefined", "'a'", "x",
        "data: {\"a\":1}", "\x80", "\xFF", "{\"a\":\xFF}",
    };
    // Long strings: a run longer than any scratch capacity so far, with and without escapes.
    cases.push_back("[\"" + std::string(5000, 'x') + "\"]");
    cases.push_back("[\"" + std::string(5000, 'x') + "\\n" + std::string(5000, 'y') + "\"]");
    cases.push_back("{\"" + std::string(3000, 'k') + "\\t\":\"" + std::string(3000, 'v') + "\"}");
    return cases;
}

TEST(JsonWalk, EdgeCasesMatchTheReference) {
    differential walkers;
    for (const std::string& text : edge_cases()) {
        walkers.expect_agree(text);
        // Every prefix: a text cut anywhere.
        for (std::size_t cut = 0; cut < text.size() && text.size() < 400; ++cut) {
            walkers.expect_agree(std::string_view(text).substr(0, cut));
        }
    }
}

TEST(JsonWalk, TheReferenceSeesWhatTheEdgeCasesClaim) {
    // A few sanity anchors, so that a broken reference cannot make everything agree.
    differential walkers;
    ASSERT_TRUE(walkers.agree(R"({"a":[1,"x"]})"));
    EXPECT_EQ(walkers.last().result, walk_result::ok);
    EXPECT_EQ(walkers.last().events,
              "{=object\n{/a=array\nc/a/[]=1\ns/a/[]=x\n}/a=array\n}=object\n");
    ASSERT_TRUE(walkers.agree("1\0garbage"s));
    EXPECT_EQ(walkers.last().result, walk_result::ok);
    ASSERT_TRUE(walkers.agree("01"));
    EXPECT_EQ(walkers.last().result, walk_result::invalid_json);
    EXPECT_EQ(walkers.last().events, "c=0\n");
    ASSERT_TRUE(walkers.agree("[-0.0,1e400]"));
    EXPECT_EQ(walkers.last().events, "{=array\nc/[]=0\n");
    ASSERT_TRUE(walkers.agree(R"(["\uD83D\uDE00"])"));
    EXPECT_EQ(walkers.last().events, "{=array\ns/[]=\xF0\x9F\x98\x80\n}=array\n");
}

std::string nested(std::size_t depth, std::string_view inner) {
    std::string text;
    for (std::size_t i = 0; i < depth; ++i) {
        text += i % 2 == 0 ? "[" : "{\"k\":";
    }
    text += inner;
    for (std::size_t i = depth; i > 0; --i) {
        text += (i - 1) % 2 == 0 ? "]" : "}";
    }
    return text;
}

TEST(JsonWalk, DepthLimitMatchesTheReference) {
    differential walkers;
    for (std::size_t depth : {254, 255, 256, 257, 300}) {
        walkers.expect_agree(nested(depth, "1"));
        walkers.expect_agree(nested(depth, "[]"));
        walkers.expect_agree(nested(depth, "{}"));
    }
    depth_limit limit(3);
    for (std::size_t depth = 0; depth < 6; ++depth) {
        for (std::string_view inner : {"1", "[]", "{}", "[1]", "{\"a\":[]}", "", "x"}) {
            walkers.expect_agree(nested(depth, inner));
        }
    }
    depth_limit none(0);
    walkers.expect_agree("[]");
    walkers.expect_agree("7");
}

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

// Every recorded fixture (OpenAI, Anthropic, Ollama, TGI, Gemini, llama.cpp, Responses): whole
// files, and each SSE data line and NDJSON line on its own.
std::vector<std::string> fixture_texts() {
    std::vector<std::string> texts;
    for (const char* dir : {"dialects", "openai", "sse"}) {
        std::filesystem::path root = std::filesystem::path(TOKENMETER_FIXTURES_DIR) / dir;
        for (const auto& entry : std::filesystem::directory_iterator(root)) {
            std::string body = read_file(entry.path());
            texts.push_back(body);
            std::istringstream lines(body);
            std::string line;
            while (std::getline(lines, line)) {
                if (!line.empty() && line.back() == '\r') {
                    line.pop_back();
                }
                if (line.rfind("data:", 0) == 0) {
                    line.erase(0, line.size() > 5 && line[5] == ' ' ? 6 : 5);
                }
                if (!line.empty()) {
                    texts.push_back(line);
                }
            }
        }
    }
    return texts;
}

TEST(JsonWalk, RecordedFixturesMatchTheReference) {
    differential walkers;
    std::vector<std::string> texts = fixture_texts();
    ASSERT_GT(texts.size(), 100U);
    std::size_t valid = 0;
    for (const std::string& text : texts) {
        walkers.expect_agree(text);
        valid += walkers.last().result == walk_result::ok ? 1 : 0;
    }
    EXPECT_GT(valid, 100U);  // the lines are mostly real JSON, not only errors
}

// Bytes a mutation inserts: JSON's structure and the starts of its tokens, and bytes that test
// its error paths.
constexpr std::string_view mutation_bytes = "{}[]\":,\\ \t\n0123456789-+.eEtfnulrsaU\x00\xEF\xBB\xBF"
                                            "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x80\xED\xA0\xFF\x1F\x7F"
                                            "/bu";

std::string mutate(const std::vector<std::string>& seeds, std::mt19937_64& rng) {
    auto pick = [&rng](std::size_t n) {
        return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
    };
    std::string text = seeds[pick(seeds.size())];
    const std::size_t edits = 1 + pick(4);
    for (std::size_t e = 0; e < edits; ++e) {
        const std::size_t at = pick(text.size() + 1);
        switch (pick(8)) {
            case 0:  // any byte
                if (at < text.size()) {
                    text[at] = static_cast<char>(pick(256));
                }
                break;
            case 1:  // a byte JSON cares about
                if (at < text.size()) {
                    text[at] = mutation_bytes[pick(mutation_bytes.size())];
                }
                break;
            case 2:
                text.insert(at, 1, mutation_bytes[pick(mutation_bytes.size())]);
                break;
            case 3:
                if (at < text.size()) {
                    text.erase(at, 1 + pick(3));
                }
                break;
            case 4:
                text.resize(at);
                break;
            case 5: {  // splice: this text's head, another's tail
                const std::string& other = seeds[pick(seeds.size())];
                text = text.substr(0, at) + other.substr(pick(other.size() + 1));
                break;
            }
            case 6: {  // repeat a piece
                const std::size_t length = pick(text.size() - at + 1);
                text.insert(at, text.substr(at, length));
                break;
            }
            default: {  // an escape or a number from a small menu
                constexpr std::array<std::string_view, 10> pieces = {
                    "\\u", "\\uD83D", "\\uDE00", "\\u00", "1e400", "-0", "18446744073709551616",
                    "-9223372036854775809", "0.5", "\xEF\xBB\xBF"};
                text.insert(at, pieces[pick(pieces.size())]);
                break;
            }
        }
    }
    return text;
}

TEST(JsonWalk, SeededMutationsMatchTheReference) {
    std::vector<std::string> seeds = edge_cases();
    for (std::string& text : fixture_texts()) {
        if (text.size() < 2000) {
            seeds.push_back(std::move(text));
        }
    }
    std::size_t count = 300000;
    if (const char* env = std::getenv("TOKENMETER_JSON_WALK_MUTATIONS")) {
        count = std::strtoull(env, nullptr, 10);
    }
    differential walkers;
    std::mt19937_64 rng(13);  // fixed so that a failure reproduces
    std::size_t failures = 0;
    std::size_t valid = 0;
    for (std::size_t i = 0; i < count && failures < 5; ++i) {
        std::string text = mutate(seeds, rng);
        if (!walkers.agree(text)) {
            ++failures;
            walkers.expect_agree(text);
        }
        valid += walkers.last().result == walk_result::ok ? 1 : 0;
    }
    EXPECT_EQ(failures, 0U);
    EXPECT_GT(valid, count / 20);  // enough mutants stay valid to reach deep into the scanner
}

// The thread's scratch path, as the response adapters walk: a walk started inside another's
// callback gets a path of its own, so the outer walk's path is intact when it resumes.
TEST(JsonWalk, AScratchWalkInsideAnotherKeepsBothPaths) {
    struct inner_visitor : json_visitor {
        std::vector<std::string> seen;
        void on_string(const json_path& path, std::string_view value) override {
            seen.push_back(std::string(path.back()) + "=" + std::string(value));
        }
    };
    struct outer_visitor : json_visitor {
        inner_visitor inner;
        std::vector<std::string> seen;
        void on_string(const json_path& path, std::string_view value) override {
            // The value is itself a JSON document (as tool arguments are): walk it now.
            EXPECT_EQ(walk_json_scratch(value, inner), walk_result::ok);
            seen.push_back(std::string(path[0]) + "." + std::string(path.back()));
        }
    } outer;
    const std::string text = R"({"a":{"b":"{\"x\":\"1\"}","c":"{\"y\":\"2\"}"}})";
    ASSERT_EQ(walk_json_scratch(text, outer), walk_result::ok);
    EXPECT_EQ(outer.seen, (std::vector<std::string>{"a.b", "a.c"}));
    EXPECT_EQ(outer.inner.seen, (std::vector<std::string>{"x=1", "y=2"}));
    // And the scratch path serves the next walk from a clean start.
    outer.seen.clear();
    ASSERT_EQ(walk_json_scratch(R"({"d":"{}"})", outer), walk_result::ok);
    EXPECT_EQ(outer.seen, (std::vector<std::string>{"d.d"}));
}

}  // namespace
}  // namespace tokenmeter::protocol
