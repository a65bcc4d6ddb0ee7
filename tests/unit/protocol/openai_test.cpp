// The OpenAI adapter (through the dialect table, as the exchange builds it) on single events and
// whole bodies, and the OpenAI request reader. Its recorded streams are in the dialect fixture
// harness (dialect_fixture_test.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "protocol/dialects.hpp"
#include "protocol/openai.hpp"
#include "recording_sink.hpp"

namespace tokenmeter::protocol {
namespace {

using test_support::read_file;
using test_support::recording_sink;

// Feeds SSE data events (type "message" unless given) to a fresh chat adapter.
class openai_events {
  public:
    explicit openai_events(api_kind api = api_kind::openai_chat_completions)
        : adapter_(make_adapter(api)) {}
    openai_events& operator()(std::string_view data, std::string_view type = "message") {
        adapter_->on_event(type, data, core::time_point{}, sink);
        return *this;
    }
    recording_sink sink;

  private:
    std::unique_ptr<adapter> adapter_;
};

TEST(OpenAiAdapter, NonStreamedBody) {
    auto body = read_file(TOKENMETER_FIXTURES_DIR "/openai/chat_nonstream.json");
    recording_sink sink;
    make_adapter(api_kind::openai_chat_completions)->on_body(body, core::time_point{}, sink);
    ASSERT_EQ(sink.chunks.size(), 1u);
    EXPECT_EQ(sink.chunks[0].content, "The answer is 42.");
    EXPECT_EQ(sink.chunks[0].reasoning, "Compute.");
    EXPECT_EQ(sink.chunks[0].finish, "stop");
    ASSERT_TRUE(sink.chunks[0].usage);
    EXPECT_EQ(sink.chunks[0].usage->input_tokens, 30u);
    EXPECT_EQ(sink.chunks[0].usage->output_tokens, 7u);
    EXPECT_EQ(sink.chunks[0].usage->reasoning_tokens, 2u);
    EXPECT_EQ(sink.chunks[0].usage->cached_input_tokens, 16u);
    EXPECT_EQ(sink.parse_errors(), 0);
}

TEST(OpenAiAdapter, ExplicitZeroUsageIsKeptAndNullUsageIsAbsent) {
    openai_events feed;
    feed(R"({"choices":[],"usage":{"prompt_tokens":0,"completion_tokens":0}})")(
        R"({"choices":[{"delta":{"content":"x"}}],"usage":null})");
    const auto& sink = feed.sink;
    ASSERT_EQ(sink.chunks.size(), 2u);
    ASSERT_TRUE(sink.chunks[0].usage);
    EXPECT_EQ(sink.chunks[0].usage->output_tokens, 0u);
    EXPECT_EQ(sink.chunks[0].usage->input_tokens, 0u);
    EXPECT_FALSE(sink.chunks[1].usage);
}

TEST(OpenAiAdapter, MalformedAndForeignJsonAreParseErrors) {
    openai_events feed;
    feed("{\"choices\": [")("[1,2,3]")(R"({"object":"something.else"})")("{}", "ping");
    EXPECT_EQ(feed.sink.parse_errors(), 4);
    EXPECT_TRUE(feed.sink.chunks.empty());
}

TEST(OpenAiAdapter, LookalikeFieldsElsewhereAreIgnored) {
    openai_events feed;
    // logprobs.content holds token objects, an extension holds "content" and "usage"-like keys,
    // and a nested "error" is not a stream error: none of it is generated text or usage.
    feed(R"({"choices":[{"index":0,"delta":{"content":"ok","extra":{"content":"no"}},)"
         R"("logprobs":{"content":[{"token":"ok","logprob":-0.1}]},"finish_reason":null}],)"
         R"("meta":{"usage":{"completion_tokens":99},"error":"x"},"usage":null,"error":null})");
    const auto& sink = feed.sink;
    ASSERT_EQ(sink.chunks.size(), 1u);
    EXPECT_EQ(sink.chunks[0].content, "ok");
    EXPECT_FALSE(sink.chunks[0].usage);
    EXPECT_FALSE(sink.chunks[0].error);
    EXPECT_EQ(sink.parse_errors(), 0);
}

TEST(OpenAiAdapter, TopLevelErrorStringOrObjectIsAnError) {
    openai_events feed;
    feed(R"({"error":"boom"})")(R"({"error":{"message":"overloaded","code":529}})", "error");
    ASSERT_EQ(feed.sink.chunks.size(), 2u);
    EXPECT_TRUE(feed.sink.chunks[0].error);
    EXPECT_TRUE(feed.sink.chunks[1].error);
}

TEST(OpenAiAdapter, ErrorNeedsANonNullValueAtTheRoot) {
    openai_events feed;
    feed(R"({"error":false})")(R"({"error":-1})")(R"({"error":[]})")(R"({"error":null})");
    ASSERT_EQ(feed.sink.chunks.size(), 3u);
    for (const auto& chunk : feed.sink.chunks) {
        EXPECT_TRUE(chunk.error);
    }
    EXPECT_EQ(feed.sink.parse_errors(), 1);  // null: neither choices, error nor usage
}

TEST(OpenAiAdapter, FractionalCountsAreTruncated) {
    openai_events feed;
    feed(R"({"choices":[],"usage":{"prompt_tokens":12.7,"completion_tokens":3.0,)"
         R"("completion_tokens_details":{"reasoning_tokens":-1}}})");
    ASSERT_EQ(feed.sink.chunks.size(), 1u);
    ASSERT_TRUE(feed.sink.chunks[0].usage);
    EXPECT_EQ(feed.sink.chunks[0].usage->input_tokens, 12u);
    EXPECT_EQ(feed.sink.chunks[0].usage->output_tokens, 3u);
    EXPECT_FALSE(feed.sink.chunks[0].usage->reasoning_tokens);
}

TEST(OpenAiAdapter, CompletionsTextAndChatDeltaAreNotMixedUp) {
    openai_events completions(api_kind::openai_completions);
    completions(R"({"choices":[{"text":"a","delta":{"content":"b"}}]})");
    openai_events chat;
    chat(R"({"choices":[{"text":"a","delta":{"content":"b"}}]})");
    ASSERT_EQ(completions.sink.chunks.size(), 1u);
    ASSERT_EQ(chat.sink.chunks.size(), 1u);
    EXPECT_EQ(completions.sink.chunks[0].content, "a");
    EXPECT_EQ(chat.sink.chunks[0].content, "b");
}

TEST(OpenAiAdapter, DoneMarkerAndToolCalls) {
    openai_events feed;
    feed(R"({"choices":[{"delta":{"role":"assistant","tool_calls":[{"function":)"
         R"({"name":"f","arguments":"{}"}}]}}]})")("[DONE]");
    ASSERT_EQ(feed.sink.chunks.size(), 1u);
    EXPECT_EQ(feed.sink.chunks[0].tool, "f{}");
    EXPECT_FALSE(feed.sink.chunks[0].role_only);
    EXPECT_EQ(feed.sink.done_markers, 1);
}

TEST(OpenAiAdapter, SeveralChoicesAreOneChunk) {
    openai_events feed;
    feed(R"({"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]})");
    ASSERT_EQ(feed.sink.chunks.size(), 1u);
    EXPECT_EQ(feed.sink.chunks[0].content, "ab");
}

// The chunk reader against the walk it stands in for: every recorded chat chunk, shapes it must
// accept or leave to the walk, and thousands of one-byte mutations of them. The adapter's output
// (chunks and parse errors) must be the same with the reader on and off, and where the reader
// says yes on its own, what it collected is what the adapter reports.
std::vector<std::string> chat_chunk_corpus() {
    std::vector<std::string> texts = {
        R"({"id":"chatcmpl-sim-1","object":"chat.completion.chunk","created":1700000000,"model":"bench-model","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]})",
        R"({"id":"c","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" woman"},"logprobs":null,"finish_reason":null}]})",
        R"({"id":"c","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}],"usage":null})",
        R"({"choices":[{"index":0,"delta":{"reasoning_content":"think","content":null}}]})",
        R"({"choices":[{"index":0,"delta":{"reasoning":"r"}},{"index":1,"delta":{"content":"b"}}]})",
        R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}})",
        R"({"choices":[{"delta":{"content":"x","content":"y"},"finish_reason":"stop","finish_reason":"length"}]})",
        R"({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]}}]})",
        R"({"choices":[{"delta":{"content":"a\nb"}}]})",
        R"({"choices":[{"delta":{"content":"caf\u00e9 \ud83d\ude00"}}]})",
        "{\"choices\":[{\"delta\":{\"content\":\"caf\xc3\xa9\"}}]}",
        R"({"choices":[{"delta":{"content":"x"}}],"error":null})",
        R"({"error":{"message":"overloaded"}})",
        R"({"choices":null})",
        R"({"choices":"none","delta":{"content":"not in a choice"}})",
        R"({"choices":[1,{"delta":{"content":"z"}}]})",
        R"({"choices":[{"delta":"text","finish_reason":7}]})",
        R"({"created":01,"choices":[]})",
        R"({"created":1.5,"choices":[]})",
        R"({"created":-1,"choices":[]})",
        R"({"created":123456789012345678901234567890,"choices":[]})",
        R"({"created":1e400,"choices":[]})",
        R"({"choices":[{"delta":{"content":"x"}}]} )",
        R"( {"choices":[{"delta":{"content":"x"}}]})",
        R"({"choices":[{"delta":{"content":"x"}}]}x)",
        R"({"choices":[{"delta":{"content":"x"}}])",
        R"({})",
        R"([])",
        R"({"choices":[{"logprobs":{"content":[{"token":"a"}]},"delta":{"content":"a"}}]})",
    };
    texts.push_back(std::string(R"({"choices":[{"delta":{"content":"x"}}]})") + '\0');
    for (const auto& entry : std::filesystem::directory_iterator(TOKENMETER_FIXTURES_DIR "/openai")) {
        if (entry.path().extension() != ".sse") {
            continue;
        }
        std::istringstream lines(read_file(entry.path().string()));
        for (std::string line; std::getline(lines, line);) {
            if (line.rfind("data: {", 0) == 0) {
                texts.push_back(line.substr(6));
            }
        }
    }
    return texts;
}

recording_sink adapter_output(const std::string& text, bool reader) {
    set_openai_chunk_reader(reader);
    openai_events feed;
    feed(text);
    set_openai_chunk_reader(true);
    return feed.sink;
}

// The reader's output (with) against the walk's (without), chunk by chunk.
void expect_same_chunks(const recording_sink& with, const recording_sink& without,
                        const std::string& context) {
    ASSERT_EQ(with.errors, without.errors) << context;
    ASSERT_EQ(with.chunks.size(), without.chunks.size()) << context;
    for (std::size_t i = 0; i < with.chunks.size(); ++i) {
        const auto& a = with.chunks[i];
        const auto& b = without.chunks[i];
        ASSERT_EQ(a.content, b.content) << context << " #" << i;
        ASSERT_EQ(a.reasoning, b.reasoning) << context << " #" << i;
        ASSERT_EQ(a.tool, b.tool) << context << " #" << i;
        ASSERT_EQ(a.finish, b.finish) << context << " #" << i;
        ASSERT_EQ(a.role_only, b.role_only) << context << " #" << i;
        ASSERT_EQ(a.error, b.error) << context << " #" << i;
        ASSERT_EQ(a.usage.has_value(), b.usage.has_value()) << context << " #" << i;
        // A chunk said to be ASCII (so the meter skips its UTF-8 check) is: every text byte.
        if (a.ascii_text) {
            for (const std::string* field : {&a.content, &a.reasoning, &a.tool}) {
                for (const char c : *field) {
                    ASSERT_LT(static_cast<unsigned char>(c), 0x80) << context << " #" << i;
                }
            }
        }
        ASSERT_FALSE(b.ascii_text) << context << " #" << i;  // the walk does not know
    }
}

void expect_same_output(const std::string& text) {
    expect_same_chunks(adapter_output(text, true), adapter_output(text, false), text);
}

TEST(OpenAiChunkReader, SameOutputAsTheWalk) {
    int read_by_reader = 0;
    const auto corpus = chat_chunk_corpus();
    ASSERT_GT(corpus.size(), 40u);  // the fixtures were found
    for (const auto& text : corpus) {
        expect_same_output(text);
        chunk_builder out;
        bool choices = false;
        bool role = false;
        read_by_reader += read_openai_chat_chunk(text, out, choices, role) ? 1 : 0;
    }
    // The common shape is the reader's; escapes, non-ASCII, usage, tool calls, errors and
    // anything invalid are the walk's.
    EXPECT_GE(read_by_reader, 12);
    // What the reader takes reaches the sink marked ASCII.
    const recording_sink plain = adapter_output(
        R"({"id":"c","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]})",
        true);
    ASSERT_EQ(plain.chunks.size(), 1u);
    EXPECT_TRUE(plain.chunks[0].ascii_text);
    EXPECT_LT(read_by_reader, static_cast<int>(corpus.size()));
}

TEST(OpenAiChunkReader, SameOutputOnMutations) {
    std::mt19937 random(13);
    const auto corpus = chat_chunk_corpus();
    const std::string alphabet = "{}[]:,\"\\ 0123456789.eE-+ntrufalsx\x01\x7f\xc3\xa9";
    int accepted = 0;
    for (int round = 0; round < 20000; ++round) {
        std::string text = corpus[random() % corpus.size()];
        const int edits = 1 + static_cast<int>(random() % 3);
        for (int e = 0; e < edits && !text.empty(); ++e) {
            const std::size_t at = random() % text.size();
            switch (random() % 3) {
                case 0:
                    text[at] = alphabet[random() % alphabet.size()];
                    break;
                case 1:
                    text.insert(text.begin() + static_cast<std::ptrdiff_t>(at),
                                alphabet[random() % alphabet.size()]);
                    break;
                default:
                    text.erase(at, 1 + random() % 4);
                    break;
            }
        }
        expect_same_output(text);
        chunk_builder out;
        bool choices = false;
        bool role = false;
        accepted += read_openai_chat_chunk(text, out, choices, role) ? 1 : 0;
    }
    // Some mutations keep the shape (a changed letter in a string), so the reader's answers
    // were compared too, not only the walk's.
    EXPECT_GT(accepted, 1000);
}

// A stream's chunks through one adapter: the reader keeps the bytes before "choices" of the last
// chunk it accepted and compares them instead of reading them again. Sequences that repeat,
// change and break that prefix (and what follows it) must give what the walk gives.
recording_sink adapter_outputs(const std::vector<std::string>& texts, bool reader) {
    set_openai_chunk_reader(reader);
    openai_events feed;
    for (const auto& text : texts) {
        feed(text);
    }
    set_openai_chunk_reader(true);
    return feed.sink;
}

TEST(OpenAiChunkReader, AStreamWithRepeatedPrefixesGivesWhatTheWalkGives) {
    const std::string key = "\"choices\":";
    std::vector<std::string> prefixes;
    std::vector<std::string> suffixes;
    for (const auto& text : chat_chunk_corpus()) {
        if (const auto at = text.find(key); at != std::string::npos) {
            prefixes.push_back(text.substr(0, at + key.size()));
            suffixes.push_back(text.substr(at + key.size()));
        }
    }
    ASSERT_GT(prefixes.size(), 20u);
    suffixes.emplace_back(R"([{"index":0,"finish_reason":"stop","delta":{"content":"x"}}]})");
    suffixes.emplace_back(R"([{"delta":{"role":"assistant","content":""}}]})");
    suffixes.emplace_back(R"([{"delta":{"reasoning":"r","content":"c"}}]})");
    suffixes.emplace_back("null}");
    suffixes.emplace_back("\"x\"}");
    suffixes.emplace_back("[]");
    suffixes.emplace_back("");
    std::mt19937 random(29);
    int streams_compared = 0;
    for (int round = 0; round < 400; ++round) {
        std::vector<std::string> texts;
        std::string prefix = prefixes[random() % prefixes.size()];
        for (int i = 0; i < 12; ++i) {
            switch (random() % 8) {
                case 0:  // another prefix from here on
                    prefix = prefixes[random() % prefixes.size()];
                    break;
                case 1: {  // one byte of it changed, for one chunk
                    std::string changed = prefix;
                    changed[random() % changed.size()] = "{}\"x:,0"[random() % 7];
                    texts.push_back(changed + suffixes[random() % suffixes.size()]);
                    continue;
                }
                case 2:  // the prefix alone, or cut short
                    texts.push_back(prefix.substr(0, random() % (prefix.size() + 1)));
                    continue;
                default:
                    break;
            }
            std::string suffix = suffixes[random() % suffixes.size()];
            if (random() % 2 == 0 && !texts.empty()) {
                // The last text up to a delta's text value, then other text and another end.
                static const std::vector<std::string> ends = {
                    "\"}}]}", "\"},\"finish_reason\":null}]}", "\"},\"finish_reason\":\"stop\"}]}",
                    "\",\"role\":\"assistant\"}}]}", "\\n\"}}]}", "\"}},{\"delta\":{\"content\":\"b\"}}]}",
                    "\"}}],\"usage\":null}", "\"}}]", "\"}}]}x", "\",\"content\":\"y\"}}]}",
                    "\"},\"index\":0,\"finish_reason\":\"length\",\"logprobs\":null}]}"};
                const std::string& last = texts.back();
                std::size_t at = std::string::npos;
                for (const char* field : {"\"content\":\"", "\"reasoning_content\":\"",
                                          "\"reasoning\":\""}) {
                    at = std::min(at, last.find(field));
                }
                if (at != std::string::npos) {
                    const std::size_t quote = last.find(":\"", at) + 2;
                    std::string text = last.substr(0, quote);
                    text.append(random() % 4, "ab c"[random() % 4]);
                    text += ends[random() % ends.size()];
                    texts.push_back(text);
                    continue;
                }
            }
            if (random() % 4 == 0 && !suffix.empty()) {
                suffix[random() % suffix.size()] = "{}[]\":,x0"[random() % 9];
            }
            texts.push_back(prefix + suffix);
        }
        expect_same_chunks(adapter_outputs(texts, true), adapter_outputs(texts, false),
                           "round " + std::to_string(round));
        if (HasFatalFailure()) {
            return;
        }
        ++streams_compared;
    }
    EXPECT_EQ(streams_compared, 400);
}

// The bytes after a delta's text value repeat from chunk to chunk too; once read without effect
// they are compared, not read again. Streams whose chunks share the bytes before the value and
// end in the same, in other, in changed, cut or extended ways must give what the walk gives.
TEST(OpenAiChunkReader, AStreamWithRepeatedEndsGivesWhatTheWalkGives) {
    const std::vector<std::string> prefixes = {
        R"({"id":"chatcmpl-sim-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":")",
        R"({"id":"c","choices":[{"delta":{"reasoning_content":")",
        R"({"choices":[{"index":0,"delta":{"role":"assistant","content":")",
    };
    const std::vector<std::string> ends = {
        R"("},"logprobs":null,"finish_reason":null}],"usage":null})",
        R"("},"logprobs":null,"finish_reason":null}]})",
        R"("}}]})",
        R"("},"logprobs":null,"finish_reason":"stop"}],"usage":null})",
        R"(","role":"assistant"},"logprobs":null,"finish_reason":null}],"usage":null})",
        R"(","content":"more"},"logprobs":null,"finish_reason":null}],"usage":null})",
        R"("},"logprobs":null,"finish_reason":null},{"index":1,"delta":{"content":"b"}}],"usage":null})",
        R"("},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}})",
        R"("},"logprobs":null,"finish_reason":null}],"error":{"message":"m"}})",
        R"("},"logprobs":null,"finish_reason":null}],"usage":null} )",
        R"("},"logprobs":null,"finish_reason":null}],"usage":null)",
        R"("},"logprobs":null,"finish_reason":null}],"usage":null}})",
        "\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":\"caf\xc3\xa9\"}",
    };
    const std::vector<std::string> values = {"", " time", " a", "x y", "\\n", "\xc3\xa9", "\"", " long value of several words"};
    std::mt19937 random(31);
    int streams_compared = 0;
    for (int round = 0; round < 600; ++round) {
        std::vector<std::string> texts;
        const std::string& prefix = prefixes[random() % prefixes.size()];
        // Mostly the quiet end of the first entries, as servers send it.
        std::size_t usual = random() % 3;
        for (int i = 0; i < 16; ++i) {
            std::string end = random() % 3 == 0 ? ends[random() % ends.size()] : ends[usual];
            if (random() % 8 == 0) {
                end[random() % end.size()] = "{}[]\":,x0 "[random() % 11];
            }
            if (random() % 10 == 0) {
                usual = random() % ends.size();
            }
            texts.push_back(prefix + values[random() % values.size()] + end);
        }
        expect_same_chunks(adapter_outputs(texts, true), adapter_outputs(texts, false),
                           "round " + std::to_string(round));
        if (HasFatalFailure()) {
            return;
        }
        ++streams_compared;
    }
    EXPECT_EQ(streams_compared, 600);
}

TEST(OpenAiChunkReader, ARepeatedPrefixBeforeSomethingElseIsNotTakenForChoices) {
    openai_events feed;
    feed(R"({"id":"a","choices":[{"delta":{"content":"x"}}]})");
    feed(R"({"id":"a","choices":null,"x":[{"delta":{"content":"y"}}]})");
    feed(R"({"id":"a","choices":[{"delta":{"content":"z"}}],"error":{"message":"m"}})");
    feed(R"({"id":"a","choices":[{"delta":{"content":"w"}}]})");
    const auto& sink = feed.sink;
    ASSERT_EQ(sink.chunks.size(), 3u);
    EXPECT_EQ(sink.chunks[0].content, "x");
    EXPECT_EQ(sink.chunks[1].content, "z");
    EXPECT_TRUE(sink.chunks[1].error);
    EXPECT_EQ(sink.chunks[2].content, "w");
    EXPECT_EQ(sink.parse_errors(), 1);  // "choices":null: not the shape of a chunk
}

TEST(OpenAiRequest, ReadsModelStreamAndUsageOption) {
    auto info = parse_openai_request(
        R"({"model":"llama","stream":true,"stream_options":{"include_usage":true},)"
        R"("messages":[{"role":"user","content":"hello"},{"role":"user","content":[{"type":"text","text":"abc"}]}]})");
    EXPECT_TRUE(info.body_parsed);
    EXPECT_EQ(info.model, "llama");
    EXPECT_TRUE(info.stream);
    EXPECT_TRUE(info.include_usage);
    EXPECT_EQ(info.prompt_chars, 8u);

    auto bad = parse_openai_request("not json");
    EXPECT_FALSE(bad.body_parsed);
    EXPECT_TRUE(bad.model.empty());
    EXPECT_FALSE(bad.stream);

    auto completions = parse_openai_request(R"({"model":7,"prompt":"four","stream":"yes"})");
    EXPECT_TRUE(completions.body_parsed);
    EXPECT_TRUE(completions.model.empty());
    EXPECT_FALSE(completions.stream);
    EXPECT_EQ(completions.prompt_chars, 4u);
}

// The one-pass reader against the DOM reader it replaced, field by field.
void expect_same_as_dom(std::string_view body) {
    SCOPED_TRACE(std::string(body));
    const request_info walk = parse_openai_request(body);
    const request_info dom = parse_openai_request_dom(body);
    EXPECT_EQ(walk.body_parsed, dom.body_parsed);
    EXPECT_EQ(walk.model, dom.model);
    EXPECT_EQ(walk.stream, dom.stream);
    EXPECT_EQ(walk.include_usage, dom.include_usage);
    EXPECT_EQ(walk.has_stream_options, dom.has_stream_options);
    EXPECT_EQ(walk.empty_object, dom.empty_object);
    EXPECT_EQ(walk.prompt_chars, dom.prompt_chars);
    EXPECT_EQ(walk.prompt_text, dom.prompt_text);
    EXPECT_EQ(walk.max_output_tokens, dom.max_output_tokens);
}

TEST(OpenAiRequest, OnePassReadsWhatTheDomReads) {
    for (const char* body : {
             R"({"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]})",
             R"({})",
             R"( { } )",
             R"([])",
             R"("text")",
             R"(7)",
             R"({"model":"m"} x)",
             R"({"model":"m",)",
             R"({"stream_options":null})",
             R"({"stream_options":{"include_usage":true,"continuous_usage_stats":true}})",
             R"({"stream_options":{"include_usage":"yes"}})",
             R"({"stream_options":[{"include_usage":true}]})",
             R"({"stream_options":7,"stream":false})",
             R"({"model":"m","max_tokens":64})",
             R"({"max_completion_tokens":300,"max_tokens":64})",
             R"({"max_tokens":-1,"max_output_tokens":1.5})",
             R"({"max_tokens":"64","n_predict":12})",
             R"({"model":null,"stream":null,"messages":null,"prompt":null})",
             R"({"messages":[{"content":null},{"content":7},"text",["content"],{"content":""}]})",
             R"({"messages":[{"content":""},{"content":"a"},{"content":""},{"content":"b"}]})",
             R"({"messages":[{"content":[{"text":"a"},"b",{"text":["c"]},{"type":"image"}]}]})",
             R"({"messages":[{"content":[{"text":"x","image":{"text":"no"}}],"name":{"content":"no"}}]})",
             R"({"messages":{"[]":{"content":"no"}}})",
             R"({"prompt":{"[]":"no"},"messages":[{"content":{"[]":{"text":"no"}}}]})",
             R"({"prompt":["", "a", 3, "", "b"],"messages":[{"content":"m"}]})",
             R"({"prompt":"p","messages":[{"content":""},{"content":"m"}]})",
             R"({"prompt":[["nested"]],"other":{"messages":[{"content":"no"}]}})",
             R"({"messages":[{"content":"caf\u00e9 \"quoted\" \n"}],"model":"a\/b"})",
             R"({"model":"first","model":"second"})",
             R"({"model":"first","model":5})",
             R"({"stream":true,"stream":false})",
             R"({"messages":[{"content":"a","content":"b"}]})",
             R"({"messages":[{"content":[{"text":"a","text":"b"}]}]})",
             R"({"stream_options":{"include_usage":true,"include_usage":false}})",
             R"({"prompt":"a","prompt":["b"]})",
             R"({"messages":[{"content":"a"}],"messages":[{"content":"b"}]})",
             R"({"x":{"model":"no","stream":true},"y":[{"model":"no"}]})",
             "{\"model\":\"\xff\"}",
         }) {
        expect_same_as_dom(body);
    }
}

}  // namespace
}  // namespace tokenmeter::protocol
