#include "meter/exchange.hpp"

#include <algorithm>
#include <cctype>

#include "protocol/dialects.hpp"

namespace tokenmeter::meter {
namespace {

// Media type without parameters, lower-cased: "Text/Event-Stream; charset=utf-8" →
// "text/event-stream".
std::string media_type(std::string_view content_type) {
    auto end = content_type.find(';');
    std::string_view type = content_type.substr(0, end);
    while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) {
        type.remove_suffix(1);
    }
    while (!type.empty() && (type.front() == ' ' || type.front() == '\t')) {
        type.remove_prefix(1);
    }
    std::string out(type);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

}  // namespace

exchange::exchange(protocol::api_kind api, const protocol::request_info& request,
                   core::time_point request_received, const std::vector<double>* itl_bounds,
                   exchange_limits limits)
    : adapter_(protocol::make_adapter(api)),
      meter_(api, request.model, request.stream, request_received, itl_bounds),
      limits_(limits),
      expect_stream_(request.stream),
      prompt_parsed_(request.body_parsed) {}

void exchange::use_encoders(encoders which, input_counting policy, std::string prompt_text) {
    encoders_ = which;
    input_policy_ = policy;
    prompt_text_ = std::move(prompt_text);
    meter_.use_encoders(which);
}

void exchange::on_response_head(int status, std::string_view content_type, core::time_point at) {
    meter_.on_response_head(status, at);
    std::string type = media_type(content_type);
    if (!adapter_) {
        body_.emplace<std::monostate>();
    } else if (type == "text/event-stream") {
        body_.emplace<sse::parser>(limits_.max_sse_event_bytes);
    } else if (type == "application/x-ndjson" || type == "application/jsonl" ||
               type == "application/jsonlines" || type == "application/ndjson") {
        body_.emplace<ndjson::parser>(limits_.max_sse_event_bytes);
    } else if (type == "application/json" || (type.size() > 5 && type.ends_with("+json"))) {
        body_.emplace<std::string>();
    } else {
        body_.emplace<std::monostate>();
        if (status < 400 && expect_stream_) {
            // A streamed request answered with something that is not an event stream.
            meter_.on_parse_error(protocol::parse_error::unexpected_shape);
        }
    }
}

void exchange::on_unreadable_body() {
    if (adapter_) {
        body_.emplace<std::monostate>();
        meter_.on_parse_error(protocol::parse_error::unexpected_shape);
    }
}

void exchange::on_body(std::string_view bytes, core::time_point at) {
    last_read_ = at;
    if (auto* events = std::get_if<sse::parser>(&body_)) {
        events->feed(bytes, [this, at](const sse::event& ev) {
            adapter_->on_event(ev.type, ev.data, at, meter_);
        });
    } else if (auto* lines = std::get_if<ndjson::parser>(&body_)) {
        lines->feed(
            bytes, [this, at](std::string_view line) { adapter_->on_event({}, line, at, meter_); });
    } else if (auto* json = std::get_if<std::string>(&body_); json != nullptr && !json_overflow_) {
        if (json->size() + bytes.size() > limits_.max_buffered_response_bytes) {
            json_overflow_ = true;
            json->clear();
            json->shrink_to_fit();
            meter_.on_parse_error(protocol::parse_error::oversized_event);
            return;
        }
        json->append(bytes);
    }
}

request_summary exchange::finish(end_reason reason, core::time_point at) {
    if (auto* events = std::get_if<sse::parser>(&body_)) {
        bool clean = events->finish();
        if (!clean && reason == end_reason::upstream_complete) {
            // The body ended inside an event: forwarded as is, but it is not a well-formed stream.
            meter_.on_parse_error(protocol::parse_error::truncated_event);
        }
        for (auto n = events->stats().oversized_events; n > 0; --n) {
            meter_.on_parse_error(protocol::parse_error::oversized_event);
        }
        if (events->stats().events == 0 && events->stats().bytes > 0 &&
            meter_.current().status < 400) {
            meter_.on_parse_error(protocol::parse_error::unexpected_shape);
        }
    } else if (auto* lines = std::get_if<ndjson::parser>(&body_)) {
        // A last line without its newline is read only when the body ended normally; after a
        // cut it is most likely half an object.
        core::time_point at_end = last_read_;
        bool complete = reason == end_reason::upstream_complete;
        bool clean = lines->finish([this, at_end, complete](std::string_view line) {
            if (complete) {
                adapter_->on_event({}, line, at_end, meter_);
            }
        });
        if (!clean && reason == end_reason::upstream_complete) {
            meter_.on_parse_error(protocol::parse_error::truncated_event);
        }
        for (auto n = lines->stats().oversized_lines; n > 0; --n) {
            meter_.on_parse_error(protocol::parse_error::oversized_event);
        }
    } else if (const auto* json = std::get_if<std::string>(&body_);
               json != nullptr && !json_overflow_ && !json->empty() &&
               reason == end_reason::upstream_complete) {
        adapter_->on_body(*json, last_read_, meter_);
    }
    request_summary summary = meter_.finish(reason, at);
    const bool count_input =
        prompt_parsed_ &&
        (input_policy_ == input_counting::always ||
         (input_policy_ == input_counting::when_unreported && !summary.reported.input_tokens));
    if (count_input) {
        // An approximation: the texts alone, without the chat template's tokens.
        if (encoders_.native != nullptr) {
            summary.native_input_tokens = encoders_.native->count(prompt_text_);
        }
        if (encoders_.reference != nullptr) {
            summary.normalized_input_tokens =
                encoders_.reference == encoders_.native
                    ? summary.native_input_tokens
                    : std::optional<std::uint64_t>(encoders_.reference->count(prompt_text_));
        }
    }
    return summary;
}

std::size_t exchange::buffered_bytes() const noexcept {
    if (const auto* events = std::get_if<sse::parser>(&body_)) {
        return events->buffered_bytes();
    }
    if (const auto* lines = std::get_if<ndjson::parser>(&body_)) {
        return lines->buffered_bytes();
    }
    if (const auto* json = std::get_if<std::string>(&body_)) {
        return json->size();
    }
    return 0;
}

}  // namespace tokenmeter::meter
