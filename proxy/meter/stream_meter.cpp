#include "meter/stream_meter.hpp"

#include <algorithm>
#include <utility>

namespace tokenmeter::meter {

std::string_view to_string(outcome o) noexcept {
    switch (o) {
        case outcome::complete:
            return "complete";
        case outcome::client_cancel:
            return "client_cancel";
        case outcome::upstream_error:
            return "upstream_error";
        case outcome::upstream_truncated:
            return "upstream_truncated";
        case outcome::rejected:
            return "rejected";
    }
    return "unknown";
}

histogram_batch::histogram_batch(const std::vector<double>* bounds)
    : bounds_(bounds), counts_(bounds == nullptr ? 1 : bounds->size() + 1, 0.0) {}

void histogram_batch::observe(double value, std::uint64_t times) {
    if (times == 0) {
        return;
    }
    std::size_t index = 0;
    if (bounds_ != nullptr) {
        // Prometheus buckets are "less than or equal": the first bound >= value.
        index = static_cast<std::size_t>(std::lower_bound(bounds_->begin(), bounds_->end(), value) -
                                         bounds_->begin());
    }
    counts_[index] += static_cast<double>(times);
    sum_ += value * static_cast<double>(times);
    count_ += times;
}

stream_meter::stream_meter(protocol::api_kind api, std::string model, bool streamed,
                           core::time_point request_received,
                           const std::vector<double>* itl_bounds) {
    summary_.api = api;
    summary_.model = std::move(model);
    summary_.streamed = streamed;
    summary_.request_received = request_received;
    summary_.inter_token_latency = histogram_batch(itl_bounds);
}

void stream_meter::on_response_head(int status, core::time_point at) noexcept {
    summary_.status = status;
    summary_.response_head = at;
}

void stream_meter::merge_usage(const protocol::token_usage& usage) {
    // Later reports are running totals or the final figures: each field keeps its latest value,
    // and a field the server left out never erases one it gave before.
    auto& merged = summary_.reported;
    if (usage.input_tokens) {
        merged.input_tokens = usage.input_tokens;
    }
    if (usage.output_tokens) {
        merged.output_tokens = usage.output_tokens;
    }
    if (usage.reasoning_tokens) {
        merged.reasoning_tokens = usage.reasoning_tokens;
    }
    if (usage.cached_input_tokens) {
        merged.cached_input_tokens = usage.cached_input_tokens;
    }
}

void stream_meter::on_chunk(const protocol::response_chunk& chunk, core::time_point at) {
    if (chunk.error) {
        summary_.stream_error = true;
    }
    if (!chunk.finish_reason.empty() && summary_.finish_reason.empty()) {
        summary_.finish_reason = std::string(chunk.finish_reason);
    }
    std::optional<std::uint64_t> running_output;
    if (chunk.usage) {
        merge_usage(*chunk.usage);
        running_output = chunk.usage->output_tokens;
    }
    if (!summary_.streamed) {
        // A whole body arrives at once: it has tokens but no per-token timing.
        summary_.output_chars += chunk.text_chars();
        if (chunk.carries_text()) {
            summary_.counted_output_tokens += 1;
            summary_.first_token = summary_.first_token.value_or(at);
            summary_.last_token = at;
        }
        return;
    }
    if (!chunk.carries_text()) {
        if (running_output) {
            last_running_output_ = std::max(last_running_output_.value_or(0), *running_output);
        }
        return;
    }

    // k tokens arrived in this chunk: from the server's running count when it gives one,
    // otherwise one per chunk (until re-tokenization gives exact counts).
    std::uint64_t tokens = 1;
    if (running_output) {
        // Tokens already counted one per chunk are part of the total too: a server that gives
        // its total only with the last text (TGI's details) must not count them again.
        std::uint64_t previous =
            std::max(last_running_output_.value_or(0), summary_.counted_output_tokens);
        tokens = *running_output > previous ? *running_output - previous : 0;
        last_running_output_ = std::max(previous, *running_output);
    }
    if (!previous_token_ && tokens == 0) {
        // The first text is the first token, whatever a running count says.
        tokens = 1;
    }
    summary_.text_chunks += 1;
    summary_.output_chars += chunk.text_chars();
    if (!chunk.content.empty() && !summary_.first_content_token) {
        summary_.first_content_token = at;
    }
    if (tokens == 0) {
        // Text the server released without new tokens (a detokenizer hold-back): no new
        // inter-token gap, and the previous token keeps its time.
        return;
    }
    if (!previous_token_) {
        summary_.first_token = at;
        // Tokens that came together with the first one arrived after no gap.
        summary_.inter_token_latency.observe(0.0, tokens - 1);
    } else {
        double gap = core::to_seconds(at - *previous_token_);
        summary_.inter_token_latency.observe(gap / static_cast<double>(tokens), tokens);
    }
    previous_token_ = at;
    summary_.last_token = at;
    summary_.counted_output_tokens += tokens;
}

void stream_meter::on_done_marker(core::time_point /*at*/) {
    summary_.done_marker = true;
}

void stream_meter::on_parse_error(protocol::parse_error reason) {
    summary_.parse_errors += 1;
    summary_.parse_errors_by_reason[static_cast<std::size_t>(reason)] += 1;
}

request_summary stream_meter::finish(end_reason reason, core::time_point at) {
    auto& s = summary_;
    s.end = at;
    s.duration_seconds = core::to_seconds(at - s.request_received);

    switch (reason) {
        case end_reason::upstream_complete:
            s.result =
                (s.status >= 400 || s.stream_error) ? outcome::upstream_error : outcome::complete;
            break;
        case end_reason::client_cancel:
            s.result = outcome::client_cancel;
            break;
        case end_reason::upstream_truncated:
            s.result = outcome::upstream_truncated;
            break;
        case end_reason::upstream_failed:
            s.result = outcome::upstream_error;
            break;
        case end_reason::rejected:
            s.result = outcome::rejected;
            break;
    }

    s.output_tokens = s.reported.output_tokens.value_or(s.counted_output_tokens);

    if (s.streamed && s.first_token) {
        s.time_to_first_token = core::to_seconds(*s.first_token - s.request_received);
        if (s.first_content_token) {
            s.time_to_first_content_token =
                core::to_seconds(*s.first_content_token - s.request_received);
        }
        if (s.output_tokens >= 2 && s.last_token && *s.last_token > *s.first_token) {
            double decode_seconds = core::to_seconds(*s.last_token - *s.first_token);
            double steps = static_cast<double>(s.output_tokens - 1);
            s.time_per_output_token = decode_seconds / steps;
            s.decode_tokens_per_second = steps / decode_seconds;
        }
    }
    if (s.output_tokens > 0 && s.duration_seconds > 0.0 &&
        (s.result == outcome::complete || s.result == outcome::upstream_truncated ||
         s.result == outcome::client_cancel)) {
        s.output_tokens_per_second = static_cast<double>(s.output_tokens) / s.duration_seconds;
    }
    return std::move(summary_);
}

}  // namespace tokenmeter::meter
