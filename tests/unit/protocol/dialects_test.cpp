// The protocol registry: the dialect table, path and route → API, per-dialect request reading,
// usage injection, the usage merge rules through the meter, and the usage filter at every split
// point.
#include "protocol/dialects.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "meter/exchange.hpp"
#include "protocol/dialect.hpp"
#include "protocol/usage_filter.hpp"

namespace tokenmeter::protocol {
namespace {

TEST(Dialects, ApiByWellKnownPath) {
    EXPECT_EQ(api_for_path("/v1/chat/completions"), api_kind::openai_chat_completions);
    EXPECT_EQ(api_for_path("/chat/completions"), api_kind::openai_chat_completions);
    EXPECT_EQ(api_for_path("/v1/completions?x=1"), api_kind::openai_completions);
    EXPECT_EQ(api_for_path("/v1/responses"), api_kind::openai_responses);
    EXPECT_EQ(api_for_path("/v1/messages"), api_kind::anthropic_messages);
    EXPECT_EQ(api_for_path("/generate_stream"), api_kind::tgi_generate);
    EXPECT_EQ(api_for_path("/generate"), api_kind::tgi_generate);
    EXPECT_EQ(api_for_path("/completion"), api_kind::llamacpp_completion);
    EXPECT_EQ(api_for_path("/api/chat"), api_kind::ollama_chat);
    EXPECT_EQ(api_for_path("/api/generate"), api_kind::ollama_generate);
    EXPECT_EQ(api_for_path("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"),
              api_kind::gemini_generate);
    EXPECT_EQ(api_for_path("/v1/projects/p/locations/l/publishers/google/models/g:generateContent"),
              api_kind::gemini_generate);
    EXPECT_EQ(api_for_path("/v1beta/models/:generateContent"), api_kind::none);
    EXPECT_EQ(api_for_path("/v1/files"), api_kind::none);
    EXPECT_EQ(api_for_path("/v1/messages/count_tokens"), api_kind::none);
}

TEST(Dialects, NamesRoundTrip) {
    for (auto kind :
         {api_kind::none, api_kind::openai_chat_completions, api_kind::openai_completions,
          api_kind::openai_responses, api_kind::anthropic_messages, api_kind::tgi_generate,
          api_kind::llamacpp_completion, api_kind::ollama_chat, api_kind::ollama_generate,
          api_kind::gemini_generate}) {
        EXPECT_EQ(api_from_name(to_string(kind)), kind) << to_string(kind);
    }
    EXPECT_FALSE(api_from_name("openai"));
}

TEST(Dialects, TableRowsAreDistinctAndNamedOnce) {
    auto table = dialect_table();
    ASSERT_EQ(table.size(), 20u);
    for (std::size_t i = 0; i < table.size(); ++i) {
        EXPECT_EQ(find_dialect(table[i]->api), table[i]);
        EXPECT_NE(table[i]->api, api_kind::none);
        EXPECT_NE(table[i]->matches_path, nullptr);
        EXPECT_NE(table[i]->parse_request, nullptr);
        EXPECT_NE(table[i]->make_adapter, nullptr);
        for (std::size_t j = i + 1; j < table.size(); ++j) {
            EXPECT_NE(table[i]->name, table[j]->name);
        }
    }
    EXPECT_EQ(find_dialect(api_kind::none), nullptr);
    EXPECT_EQ(api_names_list(),
              "openai_chat, openai_completions, openai_responses, anthropic_messages, "
              "tgi_generate, llamacpp_completion, ollama_chat, ollama_generate, gemini_generate, "
              "openai_embeddings, rerank, score, classify, pooling, openai_moderations, "
              "openai_transcriptions, openai_translations, openai_speech, openai_realtime, "
              "openai_realtime_transcription or none");
}

TEST(Routes, RulesOverridePathsInOrder) {
    std::vector<route_rule> rules = {
        {"/ollama/", true, api_kind::ollama_chat, std::nullopt},
        {"/llm/v1/chat/completions", false, api_kind::openai_chat_completions, false},
        {"/v1/messages", false, api_kind::none, std::nullopt},
    };
    route_table routes(rules, true);
    auto r = routes.choose("/ollama/api/chat");
    EXPECT_EQ(r.api, api_kind::ollama_chat);
    EXPECT_TRUE(r.usage_injection);
    r = routes.choose("/llm/v1/chat/completions?a=b");
    EXPECT_EQ(r.api, api_kind::openai_chat_completions);
    EXPECT_FALSE(r.usage_injection);
    EXPECT_EQ(routes.choose("/v1/messages").api, api_kind::none);
    EXPECT_EQ(routes.choose("/llm/other").api, api_kind::none);
    r = route_table(rules, false).choose("/v1/chat/completions");
    EXPECT_EQ(r.api, api_kind::openai_chat_completions);
    EXPECT_FALSE(r.usage_injection);
    EXPECT_EQ(route_table().choose("/v1/messages?x").api, api_kind::anthropic_messages);
}

TEST(Routes, ContinuousUsageOnlyWithInjection) {
    route_table routes({{"/a", false, api_kind::openai_chat_completions, std::nullopt, true},
                        {"/b", false, api_kind::openai_chat_completions, false, true}},
                       true);
    auto a = routes.choose("/a");
    EXPECT_TRUE(a.usage_injection);
    EXPECT_TRUE(a.continuous_usage);
    auto b = routes.choose("/b");
    EXPECT_FALSE(b.usage_injection);
    EXPECT_FALSE(b.continuous_usage);
    EXPECT_FALSE(routes.choose("/v1/completions").continuous_usage);
}

TEST(Dialects, RequestReadingPerDialect) {
    auto ollama =
        parse_request(api_kind::ollama_chat, "/api/chat",
                      R"({"model":"llama3","messages":[{"role":"user","content":"hi"}]})");
    EXPECT_TRUE(ollama.stream);  // Ollama streams unless told not to
    EXPECT_EQ(ollama.model, "llama3");
    EXPECT_EQ(ollama.prompt_chars, 2u);
    EXPECT_FALSE(parse_request(api_kind::ollama_generate, "/api/generate",
                               R"({"model":"m","prompt":"x","stream":false})")
                     .stream);
    auto tgi = parse_request(api_kind::tgi_generate, "/generate_stream", R"({"inputs":"abc"})");
    EXPECT_TRUE(tgi.stream);
    EXPECT_EQ(tgi.prompt_chars, 3u);
    EXPECT_FALSE(parse_request(api_kind::tgi_generate, "/generate", R"({"inputs":"abc"})").stream);
    auto gemini = parse_request(api_kind::gemini_generate,
                                "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
                                R"({"contents":[{"parts":[{"text":"hello"}]}]})");
    EXPECT_TRUE(gemini.stream);
    EXPECT_EQ(gemini.model, "gemini-2.5-pro");
    EXPECT_EQ(gemini.prompt_chars, 5u);
    auto anthropic = parse_request(
        api_kind::anthropic_messages, "/v1/messages",
        R"({"model":"claude","stream":true,"system":"be brief","messages":[{"role":"user","content":[{"type":"text","text":"hey"}]}]})");
    EXPECT_TRUE(anthropic.stream);
    EXPECT_EQ(anthropic.prompt_chars, 11u);
    auto bad = parse_request(api_kind::openai_responses, "/v1/responses", "not json");
    EXPECT_FALSE(bad.body_parsed);
    EXPECT_FALSE(bad.stream);
}

TEST(Dialects, InjectionOnlyForStreamedOpenAiWithoutUsage) {
    request_info info;
    info.body_parsed = true;
    info.stream = true;
    EXPECT_TRUE(can_inject_usage(api_kind::openai_chat_completions, info));
    EXPECT_TRUE(can_inject_usage(api_kind::openai_completions, info));
    EXPECT_FALSE(can_inject_usage(api_kind::openai_responses, info));
    EXPECT_FALSE(can_inject_usage(api_kind::anthropic_messages, info));
    info.include_usage = true;
    EXPECT_FALSE(can_inject_usage(api_kind::openai_chat_completions, info));
    info.include_usage = false;
    info.stream = false;
    EXPECT_FALSE(can_inject_usage(api_kind::openai_chat_completions, info));
}

TEST(Dialects, InjectedBodyKeepsEveryOtherByte) {
    std::string body = "{ \"model\": \"m\",\n  \"stream\": true }";
    auto out = inject_usage_request(body);
    ASSERT_TRUE(out);
    EXPECT_EQ(
        *out,
        "{\"stream_options\":{\"include_usage\":true}, \"model\": \"m\",\n  \"stream\": true }");
    EXPECT_EQ(*inject_usage_request("{}"), "{\"stream_options\":{\"include_usage\":true}}");
    EXPECT_EQ(*inject_usage_request("{\"a\":1}", true),
              "{\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":true},"
              "\"a\":1}");
    auto with_options = inject_usage_request(
        R"({"model":"m","stream":true,"stream_options":{"include_usage":false,"x":1}})");
    ASSERT_TRUE(with_options);
    auto parsed = nlohmann::json::parse(*with_options);
    EXPECT_EQ(parsed["stream_options"]["include_usage"], true);
    EXPECT_EQ(parsed["stream_options"]["x"], 1);
    EXPECT_EQ(parsed["model"], "m");
    EXPECT_FALSE(inject_usage_request("[1,2]"));
    EXPECT_FALSE(inject_usage_request("{\"a\":"));
}

TEST(Dialects, InjectionFromTheParsedRequestEqualsParsingAgain) {
    // The relay passes what parse_request read, so the body is not parsed twice; the result
    // must be byte for byte what a second parse gives, whatever the body.
    const std::vector<std::string> bodies = {
        "{}",
        " { } ",
        "{\"model\":\"m\",\"stream\":true,\"messages\":[]}",
        "\n{ \"stream\": true , \"model\" : \"x\" }\n",
        "{\"stream\":true,\"stream_options\":null}",
        "{\"stream\":true,\"stream_options\":{\"include_usage\":false}}",
        "{\"stream\":true,\"stream_options\":7}",
        "[1,2]",
        "{\"a\":",
        "not json",
        "{\"a\":1} trailing",
        std::string(300, '[') + std::string(300, ']'),
    };
    for (const auto& body : bodies) {
        const request_info info =
            parse_request(api_kind::openai_chat_completions, "/v1/chat/completions", body);
        for (bool continuous : {false, true}) {
            EXPECT_EQ(inject_usage_request(body, continuous, &info),
                      inject_usage_request(body, continuous))
                << body << " continuous " << continuous;
        }
    }
}

// The merge rules end to end (adapter + meter): reports are running totals, so a field given
// again replaces its earlier value; it is never added twice.
meter::request_summary meter_stream(api_kind api, const char* content_type, std::string_view body) {
    static const std::vector<double> bounds = {0.01, 0.1};
    request_info info;
    info.stream = true;
    info.body_parsed = true;
    meter::exchange ex(api, info, core::time_point{}, &bounds, {});
    ex.on_response_head(200, content_type, core::time_point{});
    ex.on_body(body, core::time_point{});
    return ex.finish(meter::end_reason::upstream_complete, core::time_point{});
}

TEST(MergeRules, AnthropicUsageRepeatedInMessageDeltaIsNotAddedTwice) {
    auto s = meter_stream(
        api_kind::anthropic_messages, "text/event-stream",
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":"
        "{\"input_tokens\":10,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n"
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{},\"usage\":"
        "{\"input_tokens\":10,\"cache_read_input_tokens\":5,\"output_tokens\":7}}\n\n"
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{},\"usage\":"
        "{\"output_tokens\":9}}\n\n");
    EXPECT_EQ(s.reported.input_tokens, 15u);
    EXPECT_EQ(s.reported.cached_input_tokens, 5u);
    EXPECT_EQ(s.reported.output_tokens, 9u);
    EXPECT_EQ(s.output_tokens, 9u);
}

TEST(MergeRules, GeminiRunningTotalsAndExplicitZeros) {
    auto s =
        meter_stream(api_kind::gemini_generate, "text/event-stream",
                     "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}],"
                     "\"usageMetadata\":{\"promptTokenCount\":4,\"candidatesTokenCount\":3}}\n\n"
                     "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"b\"}]}}],"
                     "\"usageMetadata\":{\"promptTokenCount\":4,\"candidatesTokenCount\":5,"
                     "\"thoughtsTokenCount\":0}}\n\n");
    EXPECT_EQ(s.reported.input_tokens, 4u);
    EXPECT_EQ(s.reported.output_tokens, 5u);
    EXPECT_EQ(s.reported.reasoning_tokens, 0u);  // explicit zero kept
    EXPECT_EQ(s.counted_output_tokens, 5u);      // 3, then 2 more: exact per chunk
}

TEST(MergeRules, OllamaExplicitZeroOutputIsNotReplacedByTheCount) {
    auto s = meter_stream(api_kind::ollama_chat, "application/x-ndjson",
                          "{\"message\":{\"content\":\"a\"},\"done\":false}\n"
                          "{\"message\":{\"content\":\"b\"},\"done\":false}\n"
                          "{\"message\":{\"content\":\"\"},\"done\":true,\"eval_count\":0}\n");
    EXPECT_EQ(s.counted_output_tokens, 2u);
    EXPECT_EQ(s.reported.output_tokens, 0u);
    EXPECT_EQ(s.output_tokens, 0u);
    EXPECT_FALSE(s.reported.input_tokens);  // absent (prompt cached): unknown, not 0
    EXPECT_TRUE(s.done_marker);
}

// ---- usage_filter ------------------------------------------------------------------------

std::string filter_with_cuts(std::string_view input, std::vector<std::size_t> cuts,
                             bool* removed = nullptr) {
    usage_filter f;
    std::string out;
    std::size_t from = 0;
    cuts.push_back(input.size());
    for (std::size_t i = 0; i < cuts.size(); ++i) {
        bool last = i + 1 == cuts.size();
        out.append(f.feed(input.substr(from, cuts[i] - from), last));
        from = cuts[i];
    }
    if (removed != nullptr) {
        *removed = f.removed();
    }
    return out;
}

const std::string usage_event =
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":"
    "{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}";

void expect_removed_everywhere(const std::string& before, const std::string& usage,
                               const std::string& after) {
    std::string input = before + usage + after;
    std::string want = before + after;
    for (std::size_t a = 0; a <= input.size(); ++a) {
        bool removed = false;
        ASSERT_EQ(filter_with_cuts(input, {a}, &removed), want) << "split at " << a;
        ASSERT_TRUE(removed);
    }
    std::vector<std::size_t> every_byte;
    for (std::size_t i = 1; i < input.size(); ++i) {
        every_byte.push_back(i);
    }
    EXPECT_EQ(filter_with_cuts(input, every_byte), want) << "byte by byte";
}

TEST(UsageFilter, RemovesExactlyTheUsageChunkAtEverySplit) {
    std::string before =
        ": keep-alive\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
    expect_removed_everywhere(before, usage_event + "\n\n", "data: [DONE]\n\n");
    // CR LF framing: the event's own line ends go with it, nothing else.
    expect_removed_everywhere("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\r\n\r\n",
                              usage_event + "\r\n\r\n", "data: [DONE]\r\n\r\n");
    // Bare CR framing.
    expect_removed_everywhere("data: {\"choices\":[{\"text\":\"x\"}]}\r\r", usage_event + "\r\r",
                              "data: [DONE]\r\r");
}

TEST(UsageFilter, KeepsContinuousUsageChunksAndLookalikes) {
    // Chunks with choices and usage (vLLM continuous_usage_stats), usage in a string, and an
    // event without choices all pass unchanged.
    std::string input =
        "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":{\"completion_tokens\":1}}"
        "\n\n"
        "data: {\"choices\":[{\"delta\":{\"content\":\"\\\"choices\\\":[],\\\"usage\\\":{}\"}}]}"
        "\n\n"
        "data: {\"error\":{\"message\":\"x\"},\"usage\":{\"prompt_tokens\":1}}\n\n"
        "data: [DONE]\n\n";
    for (std::size_t a = 0; a <= input.size(); ++a) {
        bool removed = true;
        ASSERT_EQ(filter_with_cuts(input, {a}, &removed), input) << "split at " << a;
        EXPECT_FALSE(removed);
    }
}

TEST(UsageFilter, OnlyOneChunkIsRemoved) {
    std::string input = usage_event + "\n\n" + usage_event + "\n\n";
    EXPECT_EQ(filter_with_cuts(input, {}), usage_event + "\n\n");
}

TEST(UsageFilter, EventsGoOutInTheReadThatCompletesThem) {
    usage_filter f;
    EXPECT_EQ(f.feed("data: {\"choices\":[{\"delta\":{\"content\":\"A\"}}]}\n\n", false),
              "data: {\"choices\":[{\"delta\":{\"content\":\"A\"}}]}\n\n");
    // A partial event is held only until its blank line.
    EXPECT_EQ(f.feed("data: {\"choices\":[{\"del", false), "");
    EXPECT_EQ(f.held_bytes(), std::string_view("data: {\"choices\":[{\"del").size());
    EXPECT_EQ(f.feed("ta\":{}}]}\n\ndata: {\"choices\":[],\"us", false),
              "data: {\"choices\":[{\"delta\":{}}]}\n\n");
    EXPECT_EQ(f.feed("age\":{\"prompt_tokens\":1}}\n\ndata: [DONE]\n\n", true), "data: [DONE]\n\n");
    EXPECT_TRUE(f.removed());
}

TEST(UsageFilter, NullUsageMembersAddedByTheServerAreRemoved) {
    std::string asked =
        "data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\"A\"}}],\"usage\":null}\n\n"
        "data: {\"usage\":null,\"choices\":[{\"delta\":{}}]}\n\n" +
        usage_event + "\n\ndata: [DONE]\n\n";
    std::string want =
        "data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\"A\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{}}]}\n\ndata: [DONE]\n\n";
    for (std::size_t a = 0; a <= asked.size(); ++a) {
        ASSERT_EQ(filter_with_cuts(asked, {a}), want) << "split at " << a;
    }
}

TEST(UsageFilter, ContinuousUsageMembersAreRemovedWhenTheProxyAskedForThem) {
    std::string got =
        "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}],\"usage\":{\"prompt_tokens\":3,"
        "\"completion_tokens\":0,\"completion_tokens_details\":{\"reasoning_tokens\":0}}}\n\n"
        "data: "
        "{\"choices\":[{\"delta\":{\"content\":\"}{\\\"\"}}],\"usage\":{\"completion_tokens\":1}}"
        "\n\n" +
        usage_event + "\n\ndata: [DONE]\n\n";
    std::string want =
        "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"content\":\"}{\\\"\"}}]}\n\ndata: [DONE]\n\n";
    for (std::size_t a = 0; a <= got.size(); ++a) {
        usage_filter f(usage_filter::default_max_held_bytes, true);
        std::string out(f.feed(std::string_view(got).substr(0, a), false));
        out.append(f.feed(std::string_view(got).substr(a), true));
        ASSERT_EQ(out, want) << "split at " << a;
    }
    // Without the option, the usage a server sends in every chunk is left alone.
    EXPECT_EQ(filter_with_cuts(got, {}), got.substr(0, got.find(usage_event)) + "data: [DONE]\n\n");
}

TEST(UsageFilter, LargeEventsPassThroughAsTheyArrive) {
    usage_filter f(32);
    std::string big = "data: {\"choices\":[{\"delta\":{\"content\":\"" + std::string(100, 'x');
    EXPECT_EQ(f.feed(big, false), big);
    EXPECT_EQ(f.feed("\"}}]}\n\n", false), "\"}}]}\n\n");
    EXPECT_EQ(f.held_bytes(), 0u);
}

TEST(UsageFilter, AnUnfinishedEventIsReleasedAtTheEnd) {
    usage_filter f;
    EXPECT_EQ(f.feed("data: {\"choices\":[]", false), "");
    EXPECT_EQ(f.feed(",\"usage\":{}", true), "data: {\"choices\":[],\"usage\":{}");
    EXPECT_FALSE(f.removed());
}

// What a tenant limit reserves for the output: the limit each dialect's body names.
TEST(Dialects, EachDialectsOutputLimitIsRead) {
    const auto limit = [](api_kind api, std::string_view path, std::string_view body) {
        return parse_request(api, path, body).max_output_tokens;
    };
    EXPECT_EQ(limit(api_kind::openai_chat_completions, "/v1/chat/completions",
                    R"({"model":"m","max_completion_tokens":300,"messages":[]})"),
              300u);
    EXPECT_EQ(limit(api_kind::openai_responses, "/v1/responses",
                    R"({"model":"m","max_output_tokens":256,"input":"hi"})"),
              256u);
    EXPECT_EQ(limit(api_kind::anthropic_messages, "/v1/messages",
                    R"({"model":"m","max_tokens":1024,"messages":[]})"),
              1024u);
    EXPECT_EQ(limit(api_kind::gemini_generate, "/v1beta/models/g:generateContent",
                    R"({"contents":[],"generationConfig":{"maxOutputTokens":77}})"),
              77u);
    EXPECT_EQ(limit(api_kind::ollama_chat, "/api/chat",
                    R"({"model":"m","options":{"num_predict":42},"messages":[]})"),
              42u);
    EXPECT_EQ(limit(api_kind::tgi_generate, "/generate",
                    R"({"inputs":"x","parameters":{"max_new_tokens":20}})"),
              20u);
    EXPECT_EQ(
        limit(api_kind::llamacpp_completion, "/completion", R"({"prompt":"x","n_predict":9})"), 9u);
    // llama.cpp's -1 (no limit), a string, or nothing: no limit named.
    EXPECT_FALSE(limit(api_kind::llamacpp_completion, "/completion", R"({"n_predict":-1})"));
    EXPECT_FALSE(limit(api_kind::anthropic_messages, "/v1/messages", R"({"max_tokens":"9"})"));
    EXPECT_FALSE(limit(api_kind::openai_chat_completions, "/v1/chat/completions", R"({})"));
}

}  // namespace
}  // namespace tokenmeter::protocol
