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
      sse_(limits.max_sse_event_bytes),
      ndjson_(limits.max_sse_event_bytes),
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
        mode_ = body_mode::ignore;
    } else if (type == "text/event-stream") {
        mode_ = body_mode::sse;
    } else if (type == "application/x-ndjson" || type == "application/jsonl" ||
               type == "application/jsonlines" || type == "application/ndjson") {
        mode_ = body_mode::ndjson;
    } else if (type == "application/json" || (type.size() > 5 && type.ends_with("+json"))) {
        mode_ = body_mode::json;
    } else {
        mode_ = body_mode::ignore;
        if (status < 400 && expect_stream_) {
            // A streamed request answered with something that is not an event stream.
            meter_.on_parse_error(protocol::parse_error::unexpected_shape);
        }
    }
}

void exchange::on_body(std::string_view bytes, core::time_point at) {
    last_read_ = at;
    switch (mode_) {
        case body_mode::sse:
            sse_.feed(bytes, [this, at](const sse::event& ev) {
                adapter_->on_event(ev.type, ev.data, at, meter_);
            });
            break;
        case body_mode::ndjson:
            ndjson_.feed(bytes, [this, at](std::string_view line) {
                adapter_->on_event({}, line, at, meter_);
            });
            break;
        case body_mode::json:
            if (json_overflow_) {
                break;
            }
            if (json_body_.size() + bytes.size() > limits_.max_buffered_response_bytes) {
                json_overflow_ = true;
                json_body_.clear();
                json_body_.shrink_to_fit();
                meter_.on_parse_error(protocol::parse_error::oversized_event);
                break;
            }
            json_body_.append(bytes);
            break;
        case body_mode::ignore:
            break;
    }
}

request_summary exchange::finish(end_reason reason, core::time_point at) {
    if (mode_ == body_mode::sse) {
        bool clean = sse_.finish();
        if (!clean && reason == end_reason::upstream_complete) {
            // The body ended inside an event: forwarded as is, but it is not a well-formed stream.
            meter_.on_parse_error(protocol::parse_error::truncated_event);
        }
        for (auto n = sse_.stats().oversized_events; n > 0; --n) {
            meter_.on_parse_error(protocol::parse_error::oversized_event);
        }
        if (sse_.stats().events == 0 && sse_.stats().bytes > 0 && meter_.current().status < 400) {
            meter_.on_parse_error(protocol::parse_error::unexpected_shape);
        }
    } else if (mode_ == body_mode::ndjson) {
        // A last line without its newline is read only when the body ended normally; after a
        // cut it is most likely half an object.
        core::time_point at_end = last_read_;
        bool complete = reason == end_reason::upstream_complete;
        bool clean = ndjson_.finish([this, at_end, complete](std::string_view line) {
            if (complete) {
                adapter_->on_event({}, line, at_end, meter_);
            }
        });
        if (!clean && reason == end_reason::upstream_complete) {
            meter_.on_parse_error(protocol::parse_error::truncated_event);
        }
        for (auto n = ndjson_.stats().oversized_lines; n > 0; --n) {
            meter_.on_parse_error(protocol::parse_error::oversized_event);
        }
    } else if (mode_ == body_mode::json && !json_overflow_ && !json_body_.empty() &&
               reason == end_reason::upstream_complete) {
        adapter_->on_body(json_body_, last_read_, meter_);
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
    return sse_.buffered_bytes() + ndjson_.buffered_bytes() + json_body_.size();
}

}  // namespace tokenmeter::meter
