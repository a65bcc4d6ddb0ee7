// meter/summary: what one request came to (request_summary), the shape every consumer of the
// meter reads (billing, records, metrics), apart from the stream meter that fills it so that
// none of them reaches the tokenizer.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.hpp"
#include "meter/outcome.hpp"
#include "protocol/types.hpp"

namespace tokenmeter::meter {

// Observations of one histogram accumulated locally and added to Prometheus once per request,
// so a long stream costs one registry update instead of one per token.
// Only the buckets a request's values fall in are stored, in index order. With the status page's
// fine bounds (hundreds of buckets) a stream's gaps still fall in a few dozen, but the span from
// its smallest to its largest gap was some 200 buckets (a first token's zero gap at one end,
// 20 ms at the other): 1.6 KiB of counts per open stream, most of them zero.
class histogram_batch {
  public:
    explicit histogram_batch(const std::vector<double>* bounds = nullptr);
    void observe(double value, std::uint64_t times = 1);
    // One increment per bound plus +Inf, not cumulative (built when asked: once per request).
    [[nodiscard]] std::vector<double> bucket_increments() const;
    // f(bucket index, count) for each bucket with a nonzero count, in index order: what the
    // consumers of a request's batch need without a vector of every bound's increment.
    template <typename F>
    void for_each_bucket(F&& f) const {
        for (const bucket& b : buckets_) {
            f(std::size_t{b.index}, b.count);
        }
    }
    // f(bucket index, the last value observed in it) for each bucket with a nonzero count: an
    // exemplar's value. A float, in the bucket's padding: no memory and one store per token.
    template <typename F>
    void for_each_last_value(F&& f) const {
        for (const bucket& b : buckets_) {
            f(std::size_t{b.index}, static_cast<double>(b.last));
        }
    }
    [[nodiscard]] double sum() const noexcept { return sum_; }
    [[nodiscard]] std::uint64_t count() const noexcept { return count_; }

  private:
    struct bucket {
        std::uint32_t index;  // into the bounds (one more: +Inf); a few hundred at most
        float last;           // the last value observed in it
        std::uint64_t count;  // never 0
    };
    static_assert(sizeof(bucket) == 16, "the last value fits the padding");
    const std::vector<double>* bounds_;
    std::size_t last_index_ = 0;   // the bucket of the last value observed
    std::size_t last_slot_ = 0;    // where buckets_ holds it
    std::vector<bucket> buckets_;  // the buckets hit, by index
    double sum_ = 0.0;
    std::uint64_t count_ = 0;
};

struct request_summary {
    protocol::api_kind api = protocol::api_kind::none;
    std::string model;
    // The model the response names (the first chunk that names one; protocol::response_chunk::
    // model); empty when none did. Not billed by: the request's model is.
    std::string response_model;
    int status = 0;
    outcome result = outcome::complete;
    bool streamed = false;

    core::time_point request_received{};
    std::optional<core::time_point> response_head;
    std::optional<core::time_point> first_token;
    std::optional<core::time_point> last_token;
    core::time_point end{};

    std::optional<double> time_to_first_token;       // seconds, streamed responses only
    std::optional<double> time_per_output_token;     // (t_last - t_first) / (n_out - 1)
    std::optional<double> output_tokens_per_second;  // n_out / (t_end - t_request)
    std::optional<double> decode_tokens_per_second;  // (n_out - 1) / (t_last - t_first)
    double duration_seconds = 0.0;

    std::uint64_t output_tokens = 0;          // best known: reported usage, else counted
    std::uint64_t counted_output_tokens = 0;  // from the stream (1 per text chunk, or usage deltas)
    // Re-tokenized counts (tokenizer/): the model's own tokenizer when configured ("native"), and
    // the reference tokenizer shared by every model ("normalized"). nullopt: not configured.
    std::optional<std::uint64_t> native_output_tokens;
    std::optional<std::uint64_t> normalized_output_tokens;
    std::optional<std::uint64_t> native_input_tokens;      // prompt texts, no chat template
    std::optional<std::uint64_t> normalized_input_tokens;  // prompt texts, no chat template
    // The prompt counts above are estimates: the prompt was longer than the counting budget, or
    // had a pre-token longer than the tokenizer merges at once (tokenizer::count_bounded).
    bool native_input_estimated = false;
    bool normalized_input_estimated = false;
    std::optional<std::uint64_t> native_reasoning_tokens;
    std::optional<std::uint64_t> normalized_reasoning_tokens;
    // The count TPOT, TPS and decode TPS divide by: "native", "reported", "normalized" or
    // "chunks" (one per text chunk: nothing better was known).
    std::string_view timing_token_source = "chunks";
    std::optional<double> normalized_output_tokens_per_second;  // normalized / (end - request)
    protocol::token_usage reported;  // merged usage reports from the server
    // The model server received the whole request (its write completed, or it answered). A
    // request without it was never served: meter/billing bills it nothing.
    bool upstream_received = false;
    // The response body was not read whole: larger than the meter reads
    // (limits.max_buffered_response_bytes; only a usage report at its end was looked for), or in
    // a content coding the meter does not decode. What was not read is not counted.
    bool response_unread = false;
    // The output is not text (speech's audio, request_info::countable_output): only the
    // server's report counts it.
    bool output_not_text = false;
    // The JSON error code of the proxy's own answer ("upstream_unreachable", "rate_limited"
    // ...), "" when the upstream answered: the reason a usage record gives for an unserved
    // request.
    std::string local_answer;
    std::uint64_t text_chunks = 0;
    std::uint64_t output_chars = 0;
    std::uint64_t parse_errors = 0;
    bool done_marker = false;
    bool stream_error = false;  // the server sent an error object in the stream
    std::string finish_reason;

    histogram_batch inter_token_latency;

    // First streamed content (answer) text, after any reasoning or tool-call text.
    std::optional<core::time_point> first_content_token;
    std::optional<double> time_to_first_content_token;  // seconds, streamed responses only
    // parse_errors split by reason, indexed by protocol::parse_error.
    std::array<std::uint64_t, protocol::parse_error_count> parse_errors_by_reason{};
};

}  // namespace tokenmeter::meter
