// The exported families: names, labels, bounded model names, and per-request batching.
#include "metrics/registry.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "meter/stream_meter.hpp"
#include "metrics/slo.hpp"

namespace tokenmeter::metrics {
namespace {

using namespace std::chrono_literals;

registry_options settings_with(std::vector<std::string> allowlist, std::uint32_t max_models) {
    registry_options m;
    m.buckets = default_buckets();
    m.model_allowlist = std::move(allowlist);
    m.max_models = max_models;
    return m;
}

meter::request_summary streamed_summary(const std::vector<double>* itl, std::string model) {
    meter::stream_meter m(protocol::api_kind::openai_chat_completions, std::move(model), true,
                          core::time_point{}, itl);
    m.on_request_sent();  // served: the server got it
    m.on_response_head(200, core::time_point{} + 1ms);
    protocol::response_chunk chunk;
    chunk.content = "a";
    m.on_chunk(chunk, core::time_point{} + 100ms);
    m.on_chunk(chunk, core::time_point{} + 120ms);
    m.on_chunk(chunk, core::time_point{} + 140ms);
    protocol::response_chunk usage;
    usage.usage.emplace();
    usage.usage->input_tokens = 7;
    usage.usage->output_tokens = 3;
    m.on_chunk(usage, core::time_point{} + 141ms);
    return m.finish(meter::end_reason::upstream_complete, core::time_point{} + 150ms);
}

bool contains(const std::string& text, const std::string& needle) {
    return text.find(needle) != std::string::npos;
}

TEST(ModelLabels, FirstNServedThenOther) {
    model_labels labels({}, 2);
    EXPECT_EQ(labels.label_for("a"), "other") << "not served yet: no slot";
    EXPECT_EQ(labels.label_for("a", true), "a");
    EXPECT_EQ(labels.label_for("b", true), "b");
    EXPECT_EQ(labels.label_for("c", true), "other");
    EXPECT_EQ(labels.label_for("a"), "a");
    EXPECT_EQ(labels.label_for(""), "unknown");
    EXPECT_EQ(labels.label_for(std::string(500, 'x')), "other");
}

TEST(ModelLabels, AllowlistIsFixed) {
    model_labels labels({"llama", "qwen"}, 32);
    EXPECT_EQ(labels.label_for("qwen"), "qwen");
    EXPECT_EQ(labels.label_for("mistral"), "other");
}

TEST(Registry, ExposesEveryFamilyWithItsLabels) {
    registry r(settings_with({}, 32));
    r.record(streamed_summary(&r.inter_token_latency_bounds(), "llama"));
    r.upstream_error("connect_refused");
    r.stream_opened();
    auto text = r.expose();
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_time_to_first_token_seconds_count{api="openai_chat",model="llama",prompt_class="0-512"} 1)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_time_to_first_token_seconds_sum{api="openai_chat",model="llama",prompt_class="0-512"} 0.1)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_inter_token_latency_seconds_count{api="openai_chat",model="llama"} 2)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_inter_token_latency_seconds_bucket{api="openai_chat",model="llama",le="0.0221"} 2)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_time_per_output_token_seconds_count{api="openai_chat",model="llama"} 1)"));
    EXPECT_TRUE(contains(
        text, R"(tokenmeter_output_tokens_per_second_count{api="openai_chat",model="llama"} 1)"));
    EXPECT_TRUE(contains(
        text, R"(tokenmeter_decode_tokens_per_second_count{api="openai_chat",model="llama"} 1)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_request_duration_seconds_count{api="openai_chat",model="llama",outcome="complete"} 1)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_requests_total{api="openai_chat",code="200",model="llama",outcome="complete"} 1)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_tokens_total{api="openai_chat",model="llama",source="reported",type="input"} 7)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_tokens_total{api="openai_chat",model="llama",source="reported",type="output"} 3)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_reported_tokens_total{api="openai_chat",model="llama",type="input"} 7)"));
    EXPECT_FALSE(contains(text, "tokenmeter_native_tokens_total")) << "no tokenizer counted it";
    EXPECT_FALSE(contains(text, "count=")) << "the label is called source";
    EXPECT_TRUE(contains(text, R"(tokenmeter_upstream_errors_total{reason="connect_refused"} 1)"));
    EXPECT_TRUE(contains(text, "tokenmeter_streams_active 1"));
    // A bare registry has no parse-error series; the metering stack starts them at 0.
    EXPECT_FALSE(contains(text, "tokenmeter_parse_errors_total{"));
}

TEST(Registry, ParseErrorsStartAtZeroForEveryReasonOfTheGivenApis) {
    registry reg(settings_with({}, 32));
    const std::array apis{protocol::api_kind::openai_chat_completions,
                          protocol::api_kind::ollama_chat};
    reg.start_parse_errors_at_zero(apis);
    reg.parse_errors(protocol::api_kind::ollama_chat, protocol::parse_error::truncated_event, 2);
    const std::string text = reg.expose();
    EXPECT_TRUE(contains(
        text, R"(tokenmeter_parse_errors_total{api="openai_chat",reason="unknown_event"} 0)"));
    EXPECT_TRUE(contains(
        text, R"(tokenmeter_parse_errors_total{api="ollama_chat",reason="truncated_event"} 2)"));
    EXPECT_TRUE(contains(
        text, R"(tokenmeter_parse_errors_total{api="ollama_chat",reason="invalid_json"} 0)"));
    EXPECT_FALSE(contains(text, R"(api="gemini_generate")"));
}

// The registry keeps each series once found (registry::series): a second request lands in the
// same series, another model in its own, and model names holding NUL bytes get series of their
// own (the cache's key is length-prefixed, not separated).
TEST(Registry, SeriesAreFoundAgainAndNeverShared) {
    registry r(settings_with({}, 32));
    r.record(streamed_summary(&r.inter_token_latency_bounds(), "llama"));
    r.record(streamed_summary(&r.inter_token_latency_bounds(), "llama"));
    r.record(streamed_summary(&r.inter_token_latency_bounds(), "qwen"));
    r.record(streamed_summary(&r.inter_token_latency_bounds(), std::string("a\0b", 3)));
    r.record(streamed_summary(&r.inter_token_latency_bounds(), std::string("a\0", 2)));
    r.upstream_error("connect_refused");
    r.upstream_error("connect_refused");
    auto text = r.expose();
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_requests_total{api="openai_chat",code="200",model="llama",outcome="complete"} 2)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_inter_token_latency_seconds_count{api="openai_chat",model="llama"} 4)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_tokens_total{api="openai_chat",model="llama",source="reported",type="output"} 6)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_requests_total{api="openai_chat",code="200",model="qwen",outcome="complete"} 1)"));
    EXPECT_TRUE(contains(text, R"(tokenmeter_upstream_errors_total{reason="connect_refused"} 2)"));
    // The two NUL-bearing names are two series of one request each.
    std::size_t one_request_series = 0;
    for (std::size_t at = text.find("tokenmeter_requests_total{"); at != std::string::npos;
         at = text.find("tokenmeter_requests_total{", at + 1)) {
        const auto line_end = text.find('\n', at);
        if (text.compare(line_end - 2, 2, " 1") == 0) {
            ++one_request_series;
        }
    }
    EXPECT_EQ(one_request_series, 3u);  // qwen and the two NUL-bearing names
}

// The key is built in place, short pieces copied as one or two words: names of every length up
// to 20 (and 100 and 128, copied whole), differing from each other in one byte at the start, the
// middle or the end, each get their own series and find it again.
TEST(Registry, SeriesKeysTellApartNamesOfEveryLengthThatDifferInOneByte) {
    registry r(settings_with({}, 4096));
    std::vector<std::string> names;
    for (const std::size_t n : {1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 20, 100, 128}) {
        const std::string base(n, 'm');
        names.push_back(base);
        for (const std::size_t at : {std::size_t{0}, n / 2, n - 1}) {
            std::string other = base;
            other[at] = 'x';
            if (std::find(names.begin(), names.end(), other) == names.end()) {
                names.push_back(other);
            }
        }
    }
    for (std::size_t i = 0; i < names.size(); ++i) {
        for (std::size_t k = 0; k <= i % 3; ++k) {
            r.record(streamed_summary(&r.inter_token_latency_bounds(), names[i]));
        }
    }
    const auto text = r.expose();
    for (std::size_t i = 0; i < names.size(); ++i) {
        EXPECT_TRUE(contains(
            text, R"(tokenmeter_requests_total{api="openai_chat",code="200",model=")" + names[i] +
                      R"(",outcome="complete"} )" + std::to_string(i % 3 + 1) + "\n"))
            << names[i];
        // The series kept per (model, api) pair are found by a key of their own.
        EXPECT_TRUE(contains(text, R"(tokenmeter_tokens_total{api="openai_chat",model=")" +
                                       names[i] + R"(",source="reported",type="output"} )" +
                                       std::to_string(3 * (i % 3 + 1)) + "\n"))
            << names[i];
    }
}

// A model takes a label slot only once the upstream served it: 32 invented names the upstream
// refused (404), and names the proxy answered itself, leave every slot to the real model.
TEST(Registry, RefusedModelNamesTakeNoLabelSlot) {
    registry r(settings_with({}, 32));
    for (int i = 0; i < 40; ++i) {
        meter::request_summary refused =
            streamed_summary(&r.inter_token_latency_bounds(), "invented-" + std::to_string(i));
        refused.status = 404;
        refused.result = meter::outcome::upstream_error;
        r.record(refused);
        r.record_unforwarded(protocol::api_kind::openai_chat_completions,
                             "unforwarded-" + std::to_string(i), meter::outcome::rejected, 400, 0);
    }
    EXPECT_EQ(r.model_label("invented-0"), "other");
    r.record(streamed_summary(&r.inter_token_latency_bounds(), "llama"));
    EXPECT_EQ(r.model_label("llama"), "llama");
    const auto text = r.expose();
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_requests_total{api="openai_chat",code="404",model="other",outcome="upstream_error"} 40)"))
        << text;
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_requests_total{api="openai_chat",code="200",model="llama",outcome="complete"} 1)"));
    EXPECT_FALSE(contains(text, "invented-"));
    EXPECT_FALSE(contains(text, "unforwarded-"));
}

// One model behind two APIs: each pair keeps its own series, and neither shows in the other's.
TEST(Registry, OneModelBehindTwoApisKeepsTwoSetsOfSeries) {
    registry r(settings_with({}, 32));
    r.record(streamed_summary(&r.inter_token_latency_bounds(), "llama"));
    meter::request_summary completions = streamed_summary(&r.inter_token_latency_bounds(), "llama");
    completions.api = protocol::api_kind::openai_completions;
    r.record(completions);
    r.record(completions);
    const auto text = r.expose();
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_tokens_total{api="openai_chat",model="llama",source="reported",type="output"} 3)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_tokens_total{api="openai_completions",model="llama",source="reported",type="output"} 6)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_inter_token_latency_seconds_count{api="openai_completions",model="llama"} 4)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_request_duration_seconds_count{api="openai_chat",model="llama",outcome="complete"} 1)"));
}

// Workers record at once: the slots each fill once, to the one series of their labels, and no
// observation is lost.
TEST(Registry, ConcurrentRecordsShareTheirSeries) {
    registry r(settings_with({}, 32));
    constexpr int threads = 4;
    constexpr int each = 200;
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&r, t] {
            for (int i = 0; i < each; ++i) {
                r.record(streamed_summary(&r.inter_token_latency_bounds(),
                                          (i + t) % 2 == 0 ? "llama" : "qwen"));
            }
        });
    }
    for (auto& w : workers) {
        w.join();
    }
    const auto text = r.expose();
    for (const char* model : {"llama", "qwen"}) {
        const std::string m(model);
        EXPECT_TRUE(
            contains(text, R"(tokenmeter_requests_total{api="openai_chat",code="200",model=")" + m +
                               R"(",outcome="complete"} 400)"))
            << m;
        EXPECT_TRUE(contains(text, R"(tokenmeter_tokens_total{api="openai_chat",model=")" + m +
                                       R"(",source="reported",type="output"} 1200)"))
            << m;
        EXPECT_TRUE(contains(
            text, R"(tokenmeter_time_to_first_token_seconds_count{api="openai_chat",model=")" + m +
                      R"(",prompt_class="0-512"} 400)"))
            << m;
    }
}

TEST(Registry, RetokenizedCountsAndMismatches) {
    registry r(settings_with({}, 32));
    auto s = streamed_summary(&r.inter_token_latency_bounds(), "llama");
    s.native_output_tokens = 40;  // the server reported 3: a broken report
    s.normalized_output_tokens = 44;
    s.normalized_input_tokens = 9;
    s.normalized_output_tokens_per_second = 22.0;
    s.output_chars = 180;
    r.record(s);
    auto close = streamed_summary(&r.inter_token_latency_bounds(), "llama");
    close.native_output_tokens = 4;  // within 2 tokens of the report: not a mismatch
    r.record(close);
    auto text = r.expose();
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_native_tokens_total{api="openai_chat",model="llama",type="output"} 44)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_normalized_tokens_total{api="openai_chat",model="llama",type="output"} 44)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_normalized_tokens_total{api="openai_chat",model="llama",type="input"} 9)"));
    // Billed once, from the best source: the server's report (3 + 3), not the tokenizers' counts.
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_tokens_total{api="openai_chat",model="llama",source="reported",type="output"} 6)"));
    EXPECT_FALSE(contains(text, R"(source="native")"));
    EXPECT_TRUE(
        contains(text, R"(tokenmeter_token_count_mismatch_total{model="llama",type="output"} 1)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_normalized_output_tokens_per_second_count{api="openai_chat",model="llama"} 1)"));
    EXPECT_TRUE(
        contains(text, R"(tokenmeter_output_chars_total{api="openai_chat",model="llama"} 183)"));
}

TEST(Registry, ModelLabelIsBounded) {
    registry r(settings_with({}, 1));
    r.record(streamed_summary(&r.inter_token_latency_bounds(), "first"));
    r.record(streamed_summary(&r.inter_token_latency_bounds(), "second"));
    auto text = r.expose();
    EXPECT_TRUE(contains(text, R"(model="first")"));
    EXPECT_FALSE(contains(text, R"(model="second")"));
    EXPECT_TRUE(contains(text, R"(model="other")"));
}

TEST(Registry, PassThroughRequestsHaveModelNone) {
    registry r(settings_with({}, 4));
    meter::stream_meter m(protocol::api_kind::none, "", false, core::time_point{}, nullptr);
    m.on_request_sent();  // served: the server got it
    m.on_response_head(404, core::time_point{} + 1ms);
    r.record(m.finish(meter::end_reason::upstream_complete, core::time_point{} + 2ms));
    auto text = r.expose();
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_requests_total{api="none",code="404",model="none",outcome="upstream_error"} 1)"));
    EXPECT_FALSE(contains(text, "tokenmeter_time_to_first_token_seconds_count"));
}

TEST(Registry, UnforwardedRequestsAreCounted) {
    registry r(settings_with({}, 4));
    r.record_unforwarded(protocol::api_kind::none, "", meter::outcome::rejected, 400, 0.001);
    auto text = r.expose();
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_requests_total{api="none",code="400",model="none",outcome="rejected"} 1)"));
}

TEST(Registry, ReasoningCachedInputContentTtftAndParseErrorReasons) {
    registry r(settings_with({}, 4));
    meter::stream_meter m(protocol::api_kind::anthropic_messages, "claude", true,
                          core::time_point{}, &r.inter_token_latency_bounds());
    m.on_request_sent();  // served: the server got it
    m.on_response_head(200, core::time_point{} + 1ms);
    protocol::response_chunk thinking;
    thinking.reasoning = "hmm";
    m.on_chunk(thinking, core::time_point{} + 100ms);
    protocol::response_chunk answer;
    answer.content = "yes";
    m.on_chunk(answer, core::time_point{} + 2500ms);
    protocol::response_chunk usage;
    usage.usage = protocol::token_usage{
        120, 40, 30, 100, std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt};
    m.on_chunk(usage, core::time_point{} + 2501ms);
    m.on_parse_error(protocol::parse_error::unknown_event);
    m.on_parse_error(protocol::parse_error::invalid_json);
    m.on_parse_error(protocol::parse_error::invalid_json);
    auto s = m.finish(meter::end_reason::upstream_complete, core::time_point{} + 2600ms);
    ASSERT_TRUE(s.time_to_first_content_token);
    EXPECT_DOUBLE_EQ(*s.time_to_first_content_token, 2.5);
    EXPECT_DOUBLE_EQ(*s.time_to_first_token, 0.1);
    r.record(s);
    auto text = r.expose();
    const std::string labels = R"(api="anthropic_messages",model="claude")";
    EXPECT_TRUE(
        contains(text, "tokenmeter_time_to_first_content_token_seconds_sum{" + labels + "} 2.5"));
    EXPECT_TRUE(contains(text, "tokenmeter_time_to_first_token_seconds_sum{" + labels +
                                   R"(,prompt_class="0-512"} 0.1)"));
    EXPECT_TRUE(contains(
        text, "tokenmeter_reasoning_tokens_total{" + labels + R"(,source="reported"} 30)"));
    EXPECT_TRUE(contains(text, "tokenmeter_cached_input_tokens_total{" + labels + "} 100"));
    EXPECT_TRUE(contains(
        text, "tokenmeter_tokens_total{" + labels + R"(,source="reported",type="output"} 40)"));
    EXPECT_TRUE(contains(
        text, "tokenmeter_tokens_total{" + labels + R"(,source="reported",type="input"} 120)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_parse_errors_total{api="anthropic_messages",reason="invalid_json"} 2)"));
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_parse_errors_total{api="anthropic_messages",reason="unknown_event"} 1)"));
}

TEST(Registry, ReasoningOnlyStreamHasNoContentTtft) {
    registry r(settings_with({}, 4));
    meter::stream_meter m(protocol::api_kind::openai_responses, "o", true, core::time_point{},
                          &r.inter_token_latency_bounds());
    m.on_request_sent();  // served: the server got it
    protocol::response_chunk thinking;
    thinking.reasoning = "hmm";
    m.on_chunk(thinking, core::time_point{} + 100ms);
    auto s = m.finish(meter::end_reason::upstream_complete, core::time_point{} + 200ms);
    EXPECT_FALSE(s.time_to_first_content_token);
    r.record(s);
    EXPECT_FALSE(contains(r.expose(), "tokenmeter_time_to_first_content_token_seconds_count{"));
}

}  // namespace
}  // namespace tokenmeter::metrics

namespace tokenmeter::metrics {
namespace {

TEST(Registry, PerRequestTokenHistogramsUseTheOpenTelemetryBuckets) {
    registry r(settings_with({}, 32));
    r.record(streamed_summary(&r.inter_token_latency_bounds(), "llama"));  // 7 in, 3 out
    auto big = streamed_summary(&r.inter_token_latency_bounds(), "llama");
    big.reported.input_tokens = 5000;
    big.reported.output_tokens = 300;
    r.record(big);
    auto unknown_input = streamed_summary(&r.inter_token_latency_bounds(), "llama");
    unknown_input.reported.input_tokens.reset();
    r.record(unknown_input);
    const auto text = r.expose();
    const std::string in =
        R"(tokenmeter_request_input_tokens_bucket{api="openai_chat",model="llama",le=")";
    const std::string out =
        R"(tokenmeter_request_output_tokens_bucket{api="openai_chat",model="llama",le=")";
    // 7 falls in (4, 16], 5000 in (4096, 16384]; the request without an input count adds none.
    EXPECT_TRUE(contains(text, in + R"(4"} 0)")) << text;
    EXPECT_TRUE(contains(text, in + R"(16"} 1)"));
    EXPECT_TRUE(contains(text, in + R"(4096"} 1)"));
    EXPECT_TRUE(contains(text, in + R"(16384"} 2)"));
    EXPECT_TRUE(contains(text, in + R"(67108864"} 2)"));
    EXPECT_TRUE(contains(text, in + R"(+Inf"} 2)"));
    // Output: 3, 300 and 3 tokens.
    EXPECT_TRUE(contains(text, out + R"(4"} 2)"));
    EXPECT_TRUE(contains(text, out + R"(256"} 2)"));
    EXPECT_TRUE(contains(text, out + R"(1024"} 3)"));
    EXPECT_TRUE(contains(
        text, R"(tokenmeter_request_output_tokens_sum{api="openai_chat",model="llama"} 306)"));
    EXPECT_EQ(token_usage_bounds().size(), 14U);
    EXPECT_EQ(token_usage_bounds().back(), 67108864.0);
}

}  // namespace
}  // namespace tokenmeter::metrics

namespace tokenmeter::metrics {
namespace {

// The status page's finer inter-token latency batch (every 2^(k/16) s) must not change the
// classic histogram: the same gaps give the same exposition with and without it.
TEST(Registry, FineInterTokenLatencyBatchKeepsTheClassicHistogram) {
    registry_options coarse = settings_with({}, 32);
    registry_options fine = coarse;
    fine.fine_inter_token_latency = true;
    registry plain(coarse);
    registry finer(fine);
    EXPECT_GT(finer.inter_token_latency_bounds().size(),
              plain.inter_token_latency_bounds().size() + 300);
    const auto itl_lines = [](const std::string& text) {
        std::string out;
        std::size_t at = 0;
        while ((at = text.find("tokenmeter_inter_token_latency_seconds", at)) !=
               std::string::npos) {
            const std::size_t end = text.find('\n', at);
            out += text.substr(at, end - at) + "\n";
            at = end;
        }
        return out;
    };
    for (auto* r : {&plain, &finer}) {
        meter::request_summary s = streamed_summary(&r->inter_token_latency_bounds(), "m");
        s.inter_token_latency.observe(0.0, 3);
        s.inter_token_latency.observe(1e-6, 2);
        s.inter_token_latency.observe(0.0123, 5);
        s.inter_token_latency.observe(500.0, 1);
        r->record(s);
    }
    EXPECT_EQ(itl_lines(plain.expose()), itl_lines(finer.expose()));
    EXPECT_TRUE(contains(finer.expose(), "tokenmeter_inter_token_latency_seconds_count"));
}

}  // namespace
}  // namespace tokenmeter::metrics
