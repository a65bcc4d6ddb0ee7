// meter/billing: the one rule for what a finished request bills. Every count a request is billed
// or metered by (input, output, reasoning, cache reads, cache writes) and its source is chosen
// here, and so is what a request the model server never served bills: usage records, the token
// counter families, tenant counters and buckets, the status page and cost all read billed().
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "meter/summary.hpp"

namespace tokenmeter::meter {

// Where a token count came from, best first: the server's usage report, the model's own
// tokenizer, the shared reference tokenizer, one per streamed text chunk; or nothing known
// (none), or nothing billed by rule (unbilled: the value is 0 because the request was not
// served, or failed with nothing the server reported or streamed).
// `estimated`: input only, a native or normalized count of a prompt past the counting budget
// (limits.max_prompt_count_bytes) or with a pre-token too long to merge whole; it stands where
// that count would.
enum class token_source : std::uint8_t {
    none,
    reported,
    native,
    normalized,
    counted,
    unbilled,
    estimated
};
std::string_view to_string(token_source s) noexcept;
token_source token_source_from(std::string_view text) noexcept;

struct token_count {
    std::optional<std::uint64_t> value;  // nullopt: unknown (never guessed)
    token_source source = token_source::none;
    bool operator==(const token_count&) const = default;
};

struct billing_policy {
    // A request the server received and failed (an upstream error answer, a response cut
    // before any output) bills its counted prompt when the server reported no input count.
    bool bill_failed_input = false;
};

// What one request bills. input includes cache reads and cache writes; cached_input and
// cache_write are parts of it, cache_write_1h a part of cache_write; reasoning is a part of
// output. A part that is unknown stays nullopt (priced as the whole it belongs to).
struct billed_counts {
    bool served = false;  // the model server received the whole request
    token_count input;
    token_count output;
    token_count reasoning;
    token_count cached_input;
    token_count cache_write;
    token_count cache_write_1h;
    token_count input_audio;   // a part of input (OpenAI Realtime's audio tokens)
    token_count output_audio;  // a part of output
};

// The counts of a finished request under `policy`:
// - not served (refused locally, or the upstream never got the whole request): every count 0,
//   source unbilled;
// - served and not failed (complete, cut by the upstream, cancelled by the client): input and
//   output from the server's report, else the model's own tokenizer, else the reference one
//   (output: else one per streamed chunk); reasoning likewise, from the report or a re-count of
//   the reasoning text; cache reads and writes, and audio tokens, from the report only;
// - a response too large to read whole (response_unread): its output only as reported (the
//   usage at the end of the body), else unknown;
// - served and failed (outcome upstream_error): what the server reported, else what it
//   streamed; with nothing reported the prompt bills only under bill_failed_input, or when the
//   server streamed output for it.
billed_counts billed(const request_summary& s, const billing_policy& policy = {});

// The counts of a request still running (a checkpoint): the same sources, before any rule on
// how it ended.
billed_counts running_counts(const request_summary& s);

}  // namespace tokenmeter::meter
