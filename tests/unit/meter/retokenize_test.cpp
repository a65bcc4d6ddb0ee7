// The meter with re-tokenization: counts from the native and reference tokenizers, each token
// stamped with the read that delivered its last byte, and the count every figure divides by.
// A small word tokenizer stands in for BPE here (the real encoders have their own tests); what
// is tested is the meter's use of the streaming contract.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "meter/billing.hpp"
#include "meter/exchange.hpp"
#include "meter/stream_meter.hpp"
#include "meter/token_counter.hpp"
#include "tokenizer/tokenizer.hpp"

namespace tokenmeter::meter {
namespace {

using namespace std::chrono_literals;
using protocol::api_kind;
using protocol::response_chunk;

const std::vector<double> itl_bounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1};

core::time_point at(std::chrono::nanoseconds offset) {
    return core::time_point{} + 1s + offset;
}

// One token per "word": an optional leading space and the non-space bytes after it, or a run of
// spaces. `width` > 0 also splits every word into pieces of at most `width` bytes, so two
// instances count the same text differently, as two real tokenizers do. Every test runs twice:
// with an encoder that says only how far its text is final (the meter then feeds a read's first
// character apart), and with one that reports where each word ends (as the tiktoken encoders
// do; the meter then times each word by its own last byte).
class word_encoder final : public tokenizer::encoder {
  public:
    static inline bool report_ends = false;  // set by the test fixture

    explicit word_encoder(std::size_t width = 0) : width_(width), name_("words") {}
    const std::string& name() const noexcept override { return name_; }

    std::size_t encode_final(std::string_view pending, bool /*at_start*/,
                             std::vector<tokenizer::token_id>& out) const override {
        // Every word but the last is final: the last may still grow.
        std::size_t last = last_word_start(pending);
        emit(pending.substr(0, last), out);
        return last;
    }
    std::size_t encode_final_pieces(std::string_view pending, bool at_start,
                                    std::vector<tokenizer::token_id>& out,
                                    std::vector<piece_end>& ends) const override {
        if (!report_ends) {
            return encode_final(pending, at_start, out);
        }
        std::size_t last = last_word_start(pending);
        const std::size_t first = out.size();
        emit(pending.substr(0, last), out, [&](std::size_t end) {
            ends.push_back({end, out.size() - first});
        });
        return last;
    }
    void encode_rest_pieces(std::string_view text, bool at_start,
                            std::vector<tokenizer::token_id>& out,
                            std::vector<piece_end>& ends) const override {
        if (!report_ends) {
            encode_rest(text, at_start, out);
            return;
        }
        const std::size_t first = out.size();
        emit(text, out, [&](std::size_t end) { ends.push_back({end, out.size() - first}); });
    }
    bool reports_piece_ends() const noexcept override { return report_ends; }
    void encode_rest(std::string_view text, bool /*at_start*/,
                     std::vector<tokenizer::token_id>& out) const override {
        emit(text, out);
    }

  private:
    static std::size_t last_word_start(std::string_view s) {
        std::size_t start = 0;
        for (std::size_t i = 0; i < s.size(); ++i) {
            if (is_word_start(s, i)) {
                start = i;
            }
        }
        return start;
    }
    static bool is_word_start(std::string_view s, std::size_t i) {
        if (i == 0) {
            return true;
        }
        const bool space = s[i] == ' ';
        const bool prev_space = s[i - 1] == ' ';
        // " x" starts at the space; a space after a non-space starts a new word.
        return (space && !prev_space) || (!space && prev_space && i >= 2 && s[i - 2] == ' ');
    }
    template <class OnWordEnd = void (*)(std::size_t)>
    void emit(
        std::string_view s, std::vector<tokenizer::token_id>& out,
        OnWordEnd on_word_end = [](std::size_t) {}) const {
        std::size_t begin = 0;
        for (std::size_t i = 1; i <= s.size(); ++i) {
            if (i == s.size() || is_word_start(s, i)) {
                std::size_t length = i - begin;
                std::size_t pieces = width_ == 0 ? 1 : (length + width_ - 1) / width_;
                for (std::size_t p = 0; p < pieces; ++p) {
                    out.push_back(static_cast<tokenizer::token_id>(length));
                }
                on_word_end(i);
                begin = i;
            }
        }
    }

    std::size_t width_;
    std::string name_;
};

// The parameter: whether the encoders report piece ends.
class Retokenize : public ::testing::TestWithParam<bool> {
  protected:
    void SetUp() override { word_encoder::report_ends = GetParam(); }
    void TearDown() override { word_encoder::report_ends = false; }
};

INSTANTIATE_TEST_SUITE_P(Encoders, Retokenize, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param) {
                             return param.param ? std::string("PieceEnds")
                                                : std::string("FinalPrefixOnly");
                         });

response_chunk text(std::string_view content) {
    response_chunk chunk;
    chunk.content = content;
    return chunk;
}

TEST_P(Retokenize, TokensAreStampedWithTheReadThatDeliveredTheirLastByte) {
    word_encoder words;
    stream_meter meter(api_kind::openai_chat_completions, "m", true, at(0ms), &itl_bounds);
    meter.use_encoders({&words, nullptr});
    meter.on_response_head(200, at(1ms));
    meter.on_chunk(text("Hel"), at(10ms));
    meter.on_chunk(text("lo"), at(20ms));      // "Hello" complete here, known final later
    meter.on_chunk(text(" big"), at(30ms));    // " big" complete here
    meter.on_chunk(text(" world"), at(40ms));  // " world" complete here, final at the end
    auto s = meter.finish(end_reason::upstream_complete, at(50ms));

    ASSERT_TRUE(s.native_output_tokens);
    EXPECT_EQ(*s.native_output_tokens, 3u);
    EXPECT_FALSE(s.normalized_output_tokens);
    EXPECT_EQ(s.timing_token_source, "native");
    // TTFT is the first visible text, not the first finished token.
    ASSERT_TRUE(s.time_to_first_token);
    EXPECT_DOUBLE_EQ(*s.time_to_first_token, 0.010);
    // Tokens at 20, 30, 40 ms: two gaps of 10 ms.
    EXPECT_EQ(s.inter_token_latency.count(), 2u);
    EXPECT_NEAR(s.inter_token_latency.sum(), 0.020, 1e-12);
    // TPOT = (40 - 10) ms / (3 - 1).
    ASSERT_TRUE(s.time_per_output_token);
    EXPECT_NEAR(*s.time_per_output_token, 0.015, 1e-12);
    EXPECT_EQ(s.output_tokens, 3u);
}

TEST_P(Retokenize, SeveralTokensInOneReadSplitTheGap) {
    word_encoder words;
    stream_meter meter(api_kind::openai_chat_completions, "m", true, at(0ms), &itl_bounds);
    meter.use_encoders({&words, nullptr});
    meter.on_chunk(text("one"), at(10ms));
    meter.on_chunk(text(" two three four"), at(40ms));  // three tokens after a 30 ms gap
    meter.on_chunk(text(" five"), at(50ms));
    auto s = meter.finish(end_reason::upstream_complete, at(60ms));
    EXPECT_EQ(*s.native_output_tokens, 5u);
    EXPECT_EQ(s.inter_token_latency.count(), 4u);
    // 3 x 10 ms for " two three four", then 10 ms for " five".
    EXPECT_NEAR(s.inter_token_latency.sum(), 0.040, 1e-12);
    EXPECT_EQ(s.inter_token_latency.bucket_increments()[3], 4.0);  // all in le=0.01
}

TEST_P(Retokenize, NativeAndNormalizedCountsAreKeptApart) {
    word_encoder native;
    word_encoder reference(2);  // splits words into 2-byte pieces
    stream_meter meter(api_kind::openai_chat_completions, "m", true, at(0ms), &itl_bounds);
    meter.use_encoders({&native, &reference});
    response_chunk reasoning;
    reasoning.reasoning = "think hard";
    meter.on_chunk(reasoning, at(5ms));
    meter.on_chunk(text("abcd"), at(10ms));
    meter.on_chunk(text(" ef"), at(20ms));
    auto s = meter.finish(end_reason::upstream_complete, at(30ms));
    // native: "think", " hard", "abcd", " ef" = 4; reference (2-byte pieces): 3 + 3 + 2 + 2.
    EXPECT_EQ(*s.native_output_tokens, 4u);
    EXPECT_EQ(*s.native_reasoning_tokens, 2u);
    EXPECT_EQ(*s.normalized_output_tokens, 10u);
    EXPECT_EQ(*s.normalized_reasoning_tokens, 6u);
    ASSERT_TRUE(s.normalized_output_tokens_per_second);
    EXPECT_NEAR(*s.normalized_output_tokens_per_second, 10 / 0.030, 1e-9);
    ASSERT_TRUE(s.output_tokens_per_second);
    EXPECT_NEAR(*s.output_tokens_per_second, 4 / 0.030, 1e-9);
}

TEST_P(Retokenize, ReadsOfValidAndInvalidUtf8CountAsTheRepairedWhole) {
    // The counter checks each read's UTF-8 once and lets the streams skip their repair when it
    // is valid; a valid read that follows an incomplete sequence must still end that sequence as
    // the repair does (U+FFFD, 3 bytes, which the 1-byte-piece reference counts as 3).
    word_encoder native;
    word_encoder reference(1);
    token_counter counter({&native, &reference});
    const std::vector<std::string> reads = {
        "ab\xE2\x82",      // an incomplete euro sign ...
        "\xAC cd",         // ... completed by the next read
        " e\xE2",          // incomplete ...
        "f g",             // ... and cut by a valid read: "e\uFFFDf"
        " \xFF\xFEh",      // invalid bytes inside one read
        " \xC3\xA9t\xC3",  // valid, then an incomplete sequence at the end of the text
    };
    std::string whole;
    for (const std::string& r : reads) {
        counter.feed(text(r), at(1ms), [](core::time_point, std::uint64_t) {});
        whole += r;
    }
    counter.finish([](core::time_point, std::uint64_t) {});
    ASSERT_TRUE(counter.native_output());
    ASSERT_TRUE(counter.normalized_output());
    EXPECT_EQ(*counter.native_output(), native.count(whole));
    EXPECT_EQ(*counter.normalized_output(), reference.count(whole));
    // The repaired whole: 2 + 3 ("€") + 3 (" cd") + 2 (" e") + 3 (U+FFFD) + 3 ("f g") + 1 +
    // 6 (two U+FFFD) + 1 + 1 + 2 ("é") + 1 + 3 (U+FFFD at the end) = 31 bytes.
    EXPECT_EQ(*counter.normalized_output(), 31u);
}

TEST_P(Retokenize, AHugePreTokenIsCutAndItsWorkBounded) {
    // One "word" of 1 MiB, as a hostile upstream might send. What the tokenizer holds stays
    // under the cut; the first cut part is tokenized exactly (the word encoder makes it one
    // token) and later parts are counted at that part's bytes per token: about one per part.
    word_encoder words;
    token_counter counter({&words, nullptr});
    const std::string word(1u << 20, 'a');
    std::uint64_t timed = 0;
    for (std::size_t i = 0; i < word.size(); i += 64 * 1024) {
        counter.feed(text(std::string_view(word).substr(i, 64 * 1024)), at(1ms),
                     [&timed](core::time_point, std::uint64_t n) { timed += n; });
        EXPECT_LE(counter.pending_bytes(), token_counter::max_pending_bytes);
    }
    counter.finish([&timed](core::time_point, std::uint64_t n) { timed += n; });
    EXPECT_GT(counter.cut_pieces(), 50u);
    ASSERT_TRUE(counter.native_output());
    const auto parts =
        (word.size() + token_counter::max_pending_bytes - 1) / token_counter::max_pending_bytes;
    EXPECT_NEAR(static_cast<double>(*counter.native_output()), static_cast<double>(parts), 3.0);
    EXPECT_EQ(timed, *counter.native_output());
}

TEST_P(Retokenize, TheSameTokenizerAsNativeAndReferenceCountsOnce) {
    word_encoder words;
    stream_meter meter(api_kind::openai_chat_completions, "m", true, at(0ms), &itl_bounds);
    meter.use_encoders({&words, &words});
    meter.on_chunk(text("a b c"), at(10ms));
    auto s = meter.finish(end_reason::upstream_complete, at(20ms));
    EXPECT_EQ(*s.native_output_tokens, 3u);
    EXPECT_EQ(*s.normalized_output_tokens, 3u);
}

TEST_P(Retokenize, WithoutNativeTheReportedCountBeatsTheReferenceForTiming) {
    word_encoder reference(1);  // one token per byte: far from the model's count
    stream_meter meter(api_kind::openai_chat_completions, "m", true, at(0ms), &itl_bounds);
    meter.use_encoders({nullptr, &reference});
    meter.on_chunk(text("abc"), at(10ms));
    meter.on_chunk(text(" de"), at(20ms));
    response_chunk usage;
    usage.usage.emplace();
    usage.usage->input_tokens = 5;
    usage.usage->output_tokens = 2;
    meter.on_chunk(usage, at(21ms));
    auto s = meter.finish(end_reason::upstream_complete, at(22ms));
    EXPECT_EQ(*s.normalized_output_tokens, 6u);
    EXPECT_EQ(s.timing_token_source, "reported");
    EXPECT_EQ(s.output_tokens, 2u);
    ASSERT_TRUE(s.time_per_output_token);
    EXPECT_NEAR(*s.time_per_output_token, 0.010, 1e-12);  // (20 - 10) ms / (2 - 1)
    // ITL, though, has only the reference tokenizer to go by.
    EXPECT_EQ(s.inter_token_latency.count(), 5u);
}

TEST_P(Retokenize, RunningUsageTimesTokensWhenThereIsNoNativeTokenizer) {
    word_encoder reference(1);
    stream_meter meter(api_kind::openai_chat_completions, "m", true, at(0ms), &itl_bounds);
    meter.use_encoders({nullptr, &reference});
    for (int i = 1; i <= 4; ++i) {
        response_chunk chunk = text("xx");
        chunk.usage = protocol::token_usage{};
        chunk.usage->output_tokens = static_cast<std::uint64_t>(i);
        meter.on_chunk(chunk, at(std::chrono::milliseconds(10 * i)));
    }
    auto s = meter.finish(end_reason::upstream_complete, at(50ms));
    // The server's running count says one token per chunk: 3 gaps of 10 ms.
    EXPECT_EQ(s.inter_token_latency.count(), 3u);
    EXPECT_NEAR(s.inter_token_latency.sum(), 0.030, 1e-12);
    EXPECT_EQ(*s.normalized_output_tokens, 8u);
}

TEST_P(Retokenize, ANonStreamedBodyIsCountedWithoutTiming) {
    word_encoder words;
    stream_meter meter(api_kind::openai_chat_completions, "m", false, at(0ms), &itl_bounds);
    meter.use_encoders({&words, nullptr});
    meter.on_chunk(text("the whole answer at once"), at(30ms));
    auto s = meter.finish(end_reason::upstream_complete, at(31ms));
    EXPECT_EQ(*s.native_output_tokens, 5u);
    EXPECT_EQ(s.inter_token_latency.count(), 0u);
    EXPECT_FALSE(s.time_per_output_token);
}

TEST_P(Retokenize, ACancelledStreamCountsTheTextThatArrived) {
    word_encoder words;
    stream_meter meter(api_kind::openai_chat_completions, "m", true, at(0ms), &itl_bounds);
    meter.use_encoders({&words, nullptr});
    meter.on_chunk(text("partial ans"), at(10ms));
    auto s = meter.finish(end_reason::client_cancel, at(15ms));
    EXPECT_EQ(s.result, outcome::client_cancel);
    EXPECT_EQ(*s.native_output_tokens, 2u);
}

// A real encoder that hides its piece ends, so the meter takes the split-feed path with it.
class final_prefix_only final : public tokenizer::encoder {
  public:
    explicit final_prefix_only(const tokenizer::encoder& inner) : inner_(inner) {}
    const std::string& name() const noexcept override { return inner_.name(); }
    std::size_t encode_final(std::string_view pending, bool at_start,
                             std::vector<tokenizer::token_id>& out) const override {
        return inner_.encode_final(pending, at_start, out);
    }
    void encode_rest(std::string_view text, bool at_start,
                     std::vector<tokenizer::token_id>& out) const override {
        inner_.encode_rest(text, at_start, out);
    }

  private:
    const tokenizer::encoder& inner_;
};

std::shared_ptr<const tokenizer::encoder> embedded(const char* name) {
    auto loaded = tokenizer::load(name, tokenizer::load_options{{}, true});
    EXPECT_NE(loaded.value, nullptr) << loaded.error;
    return loaded.value;
}

request_summary meter_words(const tokenizer::encoder& native, const tokenizer::encoder& reference,
                            const std::vector<std::string>& reads) {
    stream_meter meter(api_kind::openai_chat_completions, "m", true, at(0ms), &itl_bounds);
    meter.use_encoders({&native, &reference});
    meter.on_response_head(200, at(1ms));
    std::chrono::milliseconds t{10};
    for (const auto& r : reads) {
        meter.on_chunk(text(r), at(t));
        t += std::chrono::milliseconds(3 + (r.size() % 7));  // uneven gaps
    }
    return meter.finish(end_reason::upstream_complete, at(t));
}

TEST(RetokenizeReal, PieceEndsTimeTokensAsTheSplitFeedDoesForWordReads) {
    // cl100k_base (native, timed) and o200k_base (reference), as the sidecar runs them, with
    // and without piece ends. With one word per read (what servers stream) both stamp every
    // token with its own read, so the summaries are the same; with reads cut anywhere the
    // counts are the same and so is the number of gaps.
    auto cl100k = embedded("cl100k_base");
    auto o200k = embedded("o200k_base");
    ASSERT_TRUE(cl100k && o200k);
    ASSERT_TRUE(cl100k->reports_piece_ends());
    final_prefix_only split(*cl100k);
    const std::string prose =
        "The quick brown fox jumps over the lazy dog. It's 2024, and 12345 tokens later "
        "we're still counting: naïve café, 日本語のテキスト, emoji 😀 and\n\ncode(x) { return x; }";
    std::vector<std::string> words;
    std::size_t begin = 0;
    for (std::size_t i = 1; i <= prose.size(); ++i) {
        if (i == prose.size() || prose[i] == ' ') {
            words.push_back(prose.substr(begin, i - begin));
            begin = i;
        }
    }
    const auto by_pieces = meter_words(*cl100k, *o200k, words);
    const auto by_split = meter_words(split, *o200k, words);
    ASSERT_TRUE(by_pieces.native_output_tokens);
    EXPECT_EQ(by_pieces.native_output_tokens, by_split.native_output_tokens);
    EXPECT_EQ(by_pieces.normalized_output_tokens, by_split.normalized_output_tokens);
    EXPECT_EQ(by_pieces.inter_token_latency.count(), by_split.inter_token_latency.count());
    EXPECT_NEAR(by_pieces.inter_token_latency.sum(), by_split.inter_token_latency.sum(), 1e-12);
    EXPECT_EQ(by_pieces.inter_token_latency.bucket_increments(),
              by_split.inter_token_latency.bucket_increments());
    EXPECT_EQ(by_pieces.time_per_output_token, by_split.time_per_output_token);

    std::mt19937 rng(7);
    for (int round = 0; round < 20; ++round) {
        std::vector<std::string> reads;
        for (std::size_t p = 0; p < prose.size();) {
            const std::size_t n = std::min<std::size_t>(1 + rng() % 9, prose.size() - p);
            reads.push_back(prose.substr(p, n));
            p += n;
        }
        const auto a = meter_words(*cl100k, *o200k, reads);
        const auto b = meter_words(split, *o200k, reads);
        EXPECT_EQ(a.native_output_tokens, b.native_output_tokens) << round;
        // The reference lane counts in batches; its count is the whole text's.
        EXPECT_EQ(a.native_output_tokens, cl100k->count(prose)) << round;
        EXPECT_EQ(a.normalized_output_tokens, o200k->count(prose)) << round;
        EXPECT_EQ(a.normalized_output_tokens, b.normalized_output_tokens) << round;
        EXPECT_EQ(a.inter_token_latency.count(), b.inter_token_latency.count()) << round;
    }
}

// Each timed token's time, in order, and the final counts, for one counter fed `reads`.
struct counted {
    std::vector<core::time_point> token_times;
    std::optional<std::uint64_t> native;
    std::optional<std::uint64_t> normalized;
    std::optional<std::uint64_t> native_reasoning;
    std::optional<std::uint64_t> normalized_reasoning;
    std::size_t most_held = 0;
};

counted count_reads(token_counter& counter, const std::vector<response_chunk>& reads) {
    counted c;
    auto take = [&c](core::time_point t, std::uint64_t n) {
        c.token_times.insert(c.token_times.end(), n, t);
    };
    std::chrono::milliseconds t{10};
    for (const response_chunk& r : reads) {
        counter.feed(r, at(t), take);
        c.most_held = std::max(c.most_held, counter.held_bytes());
        t += 1ms;
    }
    counter.finish(take);
    c.native = counter.native_output();
    c.normalized = counter.normalized_output();
    c.native_reasoning = counter.native_reasoning();
    c.normalized_reasoning = counter.normalized_reasoning();
    return c;
}

TEST(RetokenizeReal, HoldingReadsForABatchGivesEveryTokenTheTimeAndCountItHadWithout) {
    // The counter holds valid reads until a batch is due and then feeds the lanes once; every
    // token must keep the time of the read of its last byte and every count must be the same as
    // feeding each read to the lanes as it comes. Reads are cut anywhere (inside UTF-8
    // sequences, which must not be held), carry invalid bytes, and mix content and reasoning.
    auto cl100k = embedded("cl100k_base");
    auto o200k = embedded("o200k_base");
    ASSERT_TRUE(cl100k && o200k);
    const std::vector<std::string> parts = {" The",
                                            " quick",
                                            " brown",
                                            " fox",
                                            "'s",
                                            " 12345",
                                            "\n\n",
                                            " naïve",
                                            " café",
                                            " 日本語",
                                            " 😀",
                                            "\xFF",
                                            "\xE2\x82",
                                            "  ",
                                            "code(x);",
                                            " {",
                                            "}\n",
                                            " réponse",
                                            std::string(300, 'a'),
                                            " end."};
    std::mt19937 rng(11);
    for (int round = 0; round < 60; ++round) {
        std::string content;
        std::string reasoning;
        for (int i = 0; i < 120; ++i) {
            (rng() % 4 == 0 ? reasoning : content) += parts[rng() % parts.size()];
        }
        std::vector<response_chunk> reads;
        std::size_t c = 0;
        std::size_t r = 0;
        while (c < content.size() || r < reasoning.size()) {
            response_chunk chunk;
            const std::size_t n = round % 3 == 0 ? 1 + rng() % 4 : 1 + rng() % 40;
            if (r < reasoning.size() && (c == content.size() || rng() % 3 == 0)) {
                chunk.reasoning = std::string_view(reasoning).substr(r, n);
                r += chunk.reasoning.size();
            } else {
                chunk.content = std::string_view(content).substr(c, n);
                c += chunk.content.size();
            }
            reads.push_back(chunk);
        }
        token_counter held({cl100k.get(), o200k.get()}, true);
        token_counter fed({cl100k.get(), o200k.get()}, false);
        counted a = count_reads(held, reads);
        counted b = count_reads(fed, reads);
        ASSERT_TRUE(a.native && a.normalized) << round;
        EXPECT_EQ(a.native, b.native) << round;
        EXPECT_EQ(a.normalized, b.normalized) << round;
        EXPECT_EQ(a.native_reasoning, b.native_reasoning) << round;
        EXPECT_EQ(a.normalized_reasoning, b.normalized_reasoning) << round;
        // Each kind of text is batched on its own, so tokens of different kinds may come in
        // another order; every token's time must be the same.
        std::sort(a.token_times.begin(), a.token_times.end());
        std::sort(b.token_times.begin(), b.token_times.end());
        ASSERT_EQ(a.token_times.size(), b.token_times.size()) << round;
        for (std::size_t i = 0; i < a.token_times.size(); ++i) {
            ASSERT_EQ(a.token_times[i], b.token_times[i])
                << "round " << round << ", token " << i << ": held "
                << (a.token_times[i] - at(0ms)).count() / 1000000 << " ms, fed "
                << (b.token_times[i] - at(0ms)).count() / 1000000 << " ms";
        }
        EXPECT_EQ(held.pending_bytes(), 0u);
        EXPECT_GT(a.most_held, 0u) << "the counter held no read";
        EXPECT_EQ(b.most_held, 0u);
    }
}

protocol::request_info prompt_request(std::string prompt) {
    protocol::request_info info;
    info.model = "m";
    info.stream = true;
    info.body_parsed = true;
    info.prompt_text = std::move(prompt);
    return info;
}

const std::string_view sse_usage_stream =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi there\"}}]}\n\n"
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":2}}\n\n"
    "data: [DONE]\n\n";
const std::string_view sse_plain_stream =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi there\"}}]}\n\n"
    "data: [DONE]\n\n";

request_summary run_exchange(input_counting policy, std::string_view body, encoders which) {
    auto request = prompt_request("system words\nuser asks a question");
    exchange ex(api_kind::openai_chat_completions, request, at(0ms), &itl_bounds, {});
    ex.use_encoders(which, policy, request.prompt_text);
    ex.on_request_sent();
    ex.on_response_head(200, "text/event-stream", at(1ms));
    ex.on_body(body, at(10ms));
    return ex.finish(end_reason::upstream_complete, at(20ms));
}

// A prompt the server never got is not counted: it bills nothing, so no CPU goes to it.
TEST_P(Retokenize, ThePromptOfAnUnservedRequestIsNotCounted) {
    word_encoder native;
    word_encoder reference(2);
    auto request = prompt_request("system words\nuser asks a question");
    exchange ex(api_kind::openai_chat_completions, request, at(0ms), &itl_bounds, {});
    ex.use_encoders({&native, &reference}, input_counting::always, request.prompt_text);
    ex.on_response_head(502, "application/json", at(1ms));
    const request_summary s = ex.finish(end_reason::upstream_failed, at(2ms));
    EXPECT_FALSE(s.upstream_received);
    EXPECT_FALSE(s.native_input_tokens);
    EXPECT_FALSE(s.normalized_input_tokens);
}

TEST_P(Retokenize, ThePromptIsCountedOnlyWhenTheServerDoesNotReportIt) {
    word_encoder native;
    word_encoder reference(2);
    auto reported =
        run_exchange(input_counting::when_unreported, sse_usage_stream, {&native, &reference});
    EXPECT_EQ(*reported.reported.input_tokens, 11u);
    EXPECT_FALSE(reported.native_input_tokens);
    EXPECT_FALSE(reported.normalized_input_tokens);

    auto unreported =
        run_exchange(input_counting::when_unreported, sse_plain_stream, {&native, &reference});
    // "system", " words\nuser"... the word encoder splits on spaces only.
    ASSERT_TRUE(unreported.native_input_tokens);
    EXPECT_EQ(*unreported.native_input_tokens, 5u);
    ASSERT_TRUE(unreported.normalized_input_tokens);
    EXPECT_GT(*unreported.normalized_input_tokens, 5u);
    EXPECT_EQ(*unreported.native_output_tokens, 2u);

    auto always = run_exchange(input_counting::always, sse_usage_stream, {&native, &reference});
    EXPECT_EQ(*always.native_input_tokens, 5u);
    auto never = run_exchange(input_counting::never, sse_plain_stream, {&native, &reference});
    EXPECT_FALSE(never.native_input_tokens);
}

// Token ids a request gives (an embeddings input of integers) are tokens as they are: added to
// what each tokenizer counts of the text, and only when the server reports no input count.
TEST_P(Retokenize, TokenIdsInTheRequestCountOneEach) {
    word_encoder native;
    word_encoder reference(2);
    const auto run = [&](std::string_view body) {
        auto request = prompt_request("two words");
        request.stream = false;
        request.prompt_token_ids = 5;
        exchange ex(api_kind::openai_embeddings, request, at(0ms), &itl_bounds, {});
        ex.use_encoders({&native, &reference}, input_counting::when_unreported,
                        request.prompt_text);
        ex.on_request_sent();
        ex.on_response_head(200, "application/json", at(1ms));
        ex.on_body(body, at(10ms));
        return ex.finish(end_reason::upstream_complete, at(20ms));
    };
    const request_summary counted = run(R"({"data":[]})");
    ASSERT_TRUE(counted.native_input_tokens);
    EXPECT_EQ(*counted.native_input_tokens, 2U + 5U);
    ASSERT_TRUE(counted.normalized_input_tokens);
    EXPECT_EQ(*counted.normalized_input_tokens,
              reference.count_bounded("two words", 1024).tokens + 5U);
    EXPECT_FALSE(counted.time_to_first_token);
    EXPECT_EQ(billed(counted).input, (token_count{7, token_source::native}));

    const request_summary reported = run(R"({"data":[],"usage":{"prompt_tokens":40}})");
    EXPECT_FALSE(reported.native_input_tokens);
    EXPECT_EQ(billed(reported).input, (token_count{40, token_source::reported}));
}

}  // namespace
}  // namespace tokenmeter::meter
