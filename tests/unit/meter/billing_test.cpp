#include "meter/billing.hpp"

#include <gtest/gtest.h>

namespace tokenmeter::meter {
namespace {

constexpr token_count unbilled{0, token_source::unbilled};

// A request the server received and answered, with the prompt counted by the reference
// tokenizer and a stream of `chunks` text chunks.
request_summary served(outcome result, int status, std::uint64_t chunks = 0) {
    request_summary s;
    s.api = protocol::api_kind::openai_chat_completions;
    s.model = "m";
    s.upstream_received = true;
    s.result = result;
    s.status = status;
    s.normalized_input_tokens = 11;
    s.counted_output_tokens = chunks;
    return s;
}

TEST(Billing, CountsComeReportedFirstThenNativeNormalizedCounted) {
    request_summary s = served(outcome::complete, 200, 9);
    s.normalized_input_tokens.reset();
    EXPECT_EQ(billed(s).output, (token_count{9, token_source::counted}));
    EXPECT_EQ(billed(s).input, token_count{});
    s.normalized_output_tokens = 11;
    s.normalized_input_tokens = 5;
    EXPECT_EQ(billed(s).output, (token_count{11, token_source::normalized}));
    EXPECT_EQ(billed(s).input, (token_count{5, token_source::normalized}));
    s.native_output_tokens = 10;
    s.native_input_tokens = 6;
    EXPECT_EQ(billed(s).output, (token_count{10, token_source::native}));
    EXPECT_EQ(billed(s).input, (token_count{6, token_source::native}));
    s.reported.output_tokens = 0;
    s.reported.input_tokens = 7;
    EXPECT_EQ(billed(s).output, (token_count{0, token_source::reported}));
    EXPECT_EQ(billed(s).input, (token_count{7, token_source::reported}));
    EXPECT_TRUE(billed(s).served);
}

// A prompt count past the counting budget stands where its count would, as `estimated`.
TEST(Billing, AnEstimatedPromptCountSaysSo) {
    request_summary s = served(outcome::complete, 200, 3);
    s.normalized_input_estimated = true;
    EXPECT_EQ(billed(s).input, (token_count{11, token_source::estimated}));
    s.native_input_tokens = 12;  // exact: the native count wins and is native
    EXPECT_EQ(billed(s).input, (token_count{12, token_source::native}));
    s.native_input_estimated = true;
    EXPECT_EQ(billed(s).input, (token_count{12, token_source::estimated}));
    s.reported.input_tokens = 13;
    EXPECT_EQ(billed(s).input, (token_count{13, token_source::reported}));
    EXPECT_EQ(token_source_from("estimated"), token_source::estimated);
    EXPECT_EQ(to_string(token_source::estimated), "estimated");
}

TEST(Billing, ReasoningIsReportedElseTheRecountOfReasoningText) {
    request_summary s = served(outcome::complete, 200, 4);
    EXPECT_EQ(billed(s).reasoning, token_count{});
    // A tokenizer that saw no reasoning text says nothing about it.
    s.native_reasoning_tokens = 0;
    s.normalized_reasoning_tokens = 0;
    EXPECT_EQ(billed(s).reasoning, token_count{});
    s.normalized_reasoning_tokens = 6;
    EXPECT_EQ(billed(s).reasoning, (token_count{6, token_source::normalized}));
    s.native_reasoning_tokens = 5;
    EXPECT_EQ(billed(s).reasoning, (token_count{5, token_source::native}));
    s.reported.reasoning_tokens = 4;
    EXPECT_EQ(billed(s).reasoning, (token_count{4, token_source::reported}));
}

TEST(Billing, CacheReadsAndWritesAreReportedOnly) {
    request_summary s = served(outcome::complete, 200, 4);
    EXPECT_EQ(billed(s).cached_input, token_count{});
    EXPECT_EQ(billed(s).cache_write, token_count{});
    s.reported.input_tokens = 1523;
    s.reported.cached_input_tokens = 1000;
    s.reported.cache_write_tokens = 500;
    s.reported.cache_write_1h_tokens = 200;
    const billed_counts b = billed(s);
    EXPECT_EQ(b.cached_input, (token_count{1000, token_source::reported}));
    EXPECT_EQ(b.cache_write, (token_count{500, token_source::reported}));
    EXPECT_EQ(b.cache_write_1h, (token_count{200, token_source::reported}));
}

TEST(Billing, ARequestTheServerNeverGotBillsNothing) {
    // Connect refused, pool exhausted, refused with 429 or 413: whatever was counted of the
    // prompt, and whatever the meter saw, no model consumed a token.
    for (outcome result : {outcome::upstream_error, outcome::rejected, outcome::client_cancel}) {
        request_summary s = served(result, 502, 0);
        s.upstream_received = false;
        s.native_input_tokens = 12;
        s.reported.cached_input_tokens = 3;
        const billed_counts b = billed(s);
        EXPECT_FALSE(b.served);
        EXPECT_EQ(b.input, unbilled);
        EXPECT_EQ(b.output, unbilled);
        EXPECT_EQ(b.reasoning, token_count{});
        EXPECT_EQ(b.cached_input, token_count{});
    }
    // A rejected request is unserved even if something marked it received.
    request_summary rejected = served(outcome::rejected, 400);
    EXPECT_FALSE(billed(rejected).served);
    EXPECT_EQ(billed(rejected).input, unbilled);
}

TEST(Billing, AFailedRequestBillsWhatTheServerReportedElseWhatItStreamed) {
    // A 5xx (or a 4xx) with nothing reported and nothing streamed: no output, and the prompt
    // only when the operator bills failed prompts.
    request_summary answer = served(outcome::upstream_error, 503);
    EXPECT_TRUE(billed(answer).served);
    EXPECT_EQ(billed(answer).input, unbilled);
    EXPECT_EQ(billed(answer).output, (token_count{0, token_source::counted}));
    EXPECT_EQ(billed(answer, {.bill_failed_input = true}).input,
              (token_count{11, token_source::normalized}));

    // Cut after some output: the prompt bills (the server produced output for it).
    request_summary cut = served(outcome::upstream_truncated, 200, 4);
    EXPECT_EQ(billed(cut).input, (token_count{11, token_source::normalized}));
    EXPECT_EQ(billed(cut).output, (token_count{4, token_source::counted}));
    // Cut before any output: like an error answer.
    request_summary cut_early = served(outcome::upstream_truncated, 200, 0);
    EXPECT_EQ(billed(cut_early).input, unbilled);

    // Whatever the server reported bills as reported, failed or not.
    request_summary reported = served(outcome::upstream_error, 500);
    reported.reported.input_tokens = 30;
    reported.reported.output_tokens = 2;
    EXPECT_EQ(billed(reported).input, (token_count{30, token_source::reported}));
    EXPECT_EQ(billed(reported).output, (token_count{2, token_source::reported}));
}

TEST(Billing, AClientThatLeftAfterTheServerGotItBillsWhatWasCounted) {
    // The server received the prompt and began: the prompt bills, with what was streamed.
    request_summary s = served(outcome::client_cancel, 200, 3);
    EXPECT_EQ(billed(s).input, (token_count{11, token_source::normalized}));
    EXPECT_EQ(billed(s).output, (token_count{3, token_source::counted}));
    request_summary before_output = served(outcome::client_cancel, 0, 0);
    EXPECT_EQ(billed(before_output).input, (token_count{11, token_source::normalized}));
}

TEST(Billing, RunningCountsIgnoreHowTheRequestEnds) {
    request_summary s = served(outcome::upstream_error, 503);
    s.upstream_received = false;
    const billed_counts running = running_counts(s);
    EXPECT_EQ(running.input, (token_count{11, token_source::normalized}));
    EXPECT_EQ(running.output, (token_count{0, token_source::counted}));
}

TEST(Billing, SourcesReadBackFromText) {
    for (auto s : {token_source::none, token_source::reported, token_source::native,
                   token_source::normalized, token_source::counted, token_source::unbilled}) {
        EXPECT_EQ(token_source_from(to_string(s)), s);
    }
    EXPECT_EQ(token_source_from("guessed"), token_source::none);
}

}  // namespace
}  // namespace tokenmeter::meter
