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

histogram_batch::histogram_batch(const std::vector<double>* bounds) : bounds_(bounds) {}

void histogram_batch::observe(double value, std::uint64_t times) {
    if (times == 0) {
        return;
    }
    std::size_t index = 0;
    if (bounds_ != nullptr) {
        // Prometheus buckets are "less than or equal": the first bound >= value. Gaps between
        // tokens cluster, so the bucket of the last value is tried first.
        const std::vector<double>& b = *bounds_;
        const std::size_t last = last_index_;
        if (last <= b.size() && (last == b.size() || value <= b[last]) &&
            (last == 0 || value > b[last - 1])) {
            index = last;
        } else {
            index =
                static_cast<std::size_t>(std::lower_bound(b.begin(), b.end(), value) - b.begin());
            last_index_ = index;
        }
    }
    const auto last = static_cast<float>(value);
    if (last_slot_ < buckets_.size() && buckets_[last_slot_].index == index) {
        buckets_[last_slot_].count += times;
        buckets_[last_slot_].last = last;
    } else {
        const auto slot = std::lower_bound(
            buckets_.begin(), buckets_.end(), index,
            [](const bucket& b, std::size_t i) { return std::size_t{b.index} < i; });
        if (slot != buckets_.end() && std::size_t{slot->index} == index) {
            slot->count += times;
            slot->last = last;
            last_slot_ = static_cast<std::size_t>(slot - buckets_.begin());
        } else {
            const auto at = slot - buckets_.begin();
            if (buckets_.empty()) {
                buckets_.reserve(8);  // a steady stream's gaps fall in a handful of buckets
            }
            buckets_.insert(buckets_.begin() + at,
                            bucket{static_cast<std::uint32_t>(index), last, times});
            last_slot_ = static_cast<std::size_t>(at);
        }
    }
    sum_ += value * static_cast<double>(times);
    count_ += times;
}

std::vector<double> histogram_batch::bucket_increments() const {
    std::vector<double> out(bounds_ == nullptr ? 1 : bounds_->size() + 1, 0.0);
    for (const bucket& b : buckets_) {
        out[b.index] = static_cast<double>(b.count);
    }
    return out;
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
    if (usage.cache_write_tokens) {
        merged.cache_write_tokens = usage.cache_write_tokens;
    }
    if (usage.cache_write_1h_tokens) {
        merged.cache_write_1h_tokens = usage.cache_write_1h_tokens;
    }
    if (usage.input_audio_tokens) {
        merged.input_audio_tokens = usage.input_audio_tokens;
    }
    if (usage.output_audio_tokens) {
        merged.output_audio_tokens = usage.output_audio_tokens;
    }
    if (usage.audio_seconds) {
        merged.audio_seconds = usage.audio_seconds;
    }
}

void stream_meter::use_encoders(encoders which) {
    if (which.any()) {
        counter_.emplace(which);
    } else {
        counter_.reset();
    }
}

void stream_meter::observe_tokens(core::time_point at, std::uint64_t k) {
    if (k == 0) {
        return;
    }
    if (!previous_token_) {
        // Tokens that came together with the first one arrived after no gap.
        summary_.inter_token_latency.observe(0.0, k - 1);
        previous_token_ = at;
        return;
    }
    double gap = at > *previous_token_ ? core::to_seconds(at - *previous_token_) : 0.0;
    summary_.inter_token_latency.observe(gap / static_cast<double>(k), k);
    previous_token_ = std::max(*previous_token_, at);
}

void stream_meter::add_tokens(core::time_point at, std::uint64_t k) {
    if (group_tokens_ > 0 && at != group_at_) {
        flush_tokens();
    }
    group_at_ = at;
    group_tokens_ += k;
}

void stream_meter::flush_tokens() {
    if (group_tokens_ > 0) {
        observe_tokens(group_at_, group_tokens_);
        group_tokens_ = 0;
    }
}

void stream_meter::on_chunk(const protocol::response_chunk& chunk, core::time_point at) {
    if (chunk.error) {
        summary_.stream_error = true;
    }
    if (!chunk.finish_reason.empty() && summary_.finish_reason.empty()) {
        summary_.finish_reason = std::string(chunk.finish_reason);
    }
    if (!chunk.model.empty() && summary_.response_model.empty()) {
        summary_.response_model = std::string(chunk.model);
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
            if (counter_) {
                counter_->feed(chunk, at, [](core::time_point, std::uint64_t) {});
            }
        }
        return;
    }
    if (chunk.audio && !summary_.first_token) {
        // Generated audio is output the user hears: its first piece is the first token.
        summary_.first_token = at;
    }
    if (!chunk.carries_text()) {
        if (running_output) {
            last_running_output_ = std::max(last_running_output_.value_or(0), *running_output);
        }
        return;
    }

    summary_.text_chunks += 1;
    summary_.output_chars += chunk.text_chars();
    if (!summary_.first_token) {
        // The first token is visible to the user as soon as its first text arrives.
        summary_.first_token = at;
    }
    if (!chunk.content.empty() && !summary_.first_content_token) {
        summary_.first_content_token = at;
    }

    // k tokens arrived in this chunk: from the server's running count when it gives one,
    // otherwise one per chunk.
    std::uint64_t tokens = 1;
    if (running_output) {
        // Tokens already counted one per chunk are part of the total too: a server that gives
        // its total only with the last text (TGI's details) must not count them again.
        std::uint64_t previous =
            std::max(last_running_output_.value_or(0), summary_.counted_output_tokens);
        tokens = *running_output > previous ? *running_output - previous : 0;
        last_running_output_ = std::max(previous, *running_output);
        if (!counter_ || !counter_->timing_is_native()) {
            running_usage_timing_ = true;
        }
    }
    if (summary_.counted_output_tokens == 0 && tokens == 0) {
        // The first text is the first token, whatever a running count says.
        tokens = 1;
    }
    summary_.counted_output_tokens += tokens;

    if (counter_) {
        const bool timed = timing_from_counter();
        counter_->feed(chunk, at, [this, timed](core::time_point done, std::uint64_t k) {
            if (timed) {
                add_tokens(done, k);
            }
        });
    }
    if (timing_from_counter()) {
        summary_.last_token = at;
    } else if (tokens > 0) {
        // Text the server released without new tokens (a detokenizer hold-back) adds no gap,
        // and the previous token keeps its time.
        add_tokens(at, tokens);
        summary_.last_token = at;
    }
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

    if (counter_) {
        const bool timed = s.streamed && timing_from_counter();
        counter_->finish([this, timed](core::time_point done, std::uint64_t k) {
            if (timed) {
                add_tokens(done, k);
            }
        });
        flush_tokens();
        s.native_output_tokens = counter_->native_output();
        s.native_reasoning_tokens = counter_->native_reasoning();
        s.normalized_output_tokens = counter_->normalized_output();
        s.normalized_reasoning_tokens = counter_->normalized_reasoning();
    }

    flush_tokens();
    // Best known output count: what the server says, else our own count of its tokens.
    s.output_tokens = s.reported.output_tokens.value_or(s.native_output_tokens.value_or(
        s.normalized_output_tokens.value_or(s.counted_output_tokens)));

    // The count the timing figures divide by: the model's own tokens where known (a native
    // tokenizer, or the server's report), else the reference tokenizer's, else one per chunk.
    std::uint64_t timing_tokens = s.counted_output_tokens;
    s.timing_token_source = "chunks";
    if (s.native_output_tokens) {
        timing_tokens = *s.native_output_tokens;
        s.timing_token_source = "native";
    } else if (s.reported.output_tokens) {
        timing_tokens = *s.reported.output_tokens;
        s.timing_token_source = "reported";
    } else if (s.normalized_output_tokens) {
        timing_tokens = *s.normalized_output_tokens;
        s.timing_token_source = "normalized";
    }

    if (s.streamed && s.first_token) {
        s.time_to_first_token = core::to_seconds(*s.first_token - s.request_received);
        if (s.first_content_token) {
            s.time_to_first_content_token =
                core::to_seconds(*s.first_content_token - s.request_received);
        }
        if (timing_tokens >= 2 && s.last_token && *s.last_token > *s.first_token) {
            double decode_seconds = core::to_seconds(*s.last_token - *s.first_token);
            const auto steps = static_cast<double>(timing_tokens - 1);
            s.time_per_output_token = decode_seconds / steps;
            s.decode_tokens_per_second = steps / decode_seconds;
        }
    }
    const bool produced = s.result == outcome::complete ||
                          s.result == outcome::upstream_truncated ||
                          s.result == outcome::client_cancel;
    if (produced && timing_tokens > 0 && s.duration_seconds > 0.0) {
        s.output_tokens_per_second = static_cast<double>(timing_tokens) / s.duration_seconds;
    }
    if (produced && s.normalized_output_tokens && *s.normalized_output_tokens > 0 &&
        s.duration_seconds > 0.0) {
        s.normalized_output_tokens_per_second =
            static_cast<double>(*s.normalized_output_tokens) / s.duration_seconds;
    }
    return std::move(summary_);
}

}  // namespace tokenmeter::meter
