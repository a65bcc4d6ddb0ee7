#include "meter/exchange.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>

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
      prompt_parsed_(request.body_parsed && request.countable_input),
      prompt_token_ids_(request.prompt_token_ids) {
    if (!request.countable_output) {
        meter_.output_is_not_text();
    }
}

void exchange::use_encoders(encoders which, input_counting policy, std::string prompt_text) {
    encoders_ = which;
    input_policy_ = policy;
    prompt_text_ = std::move(prompt_text);
    meter_.use_encoders(which);
}

void exchange::on_response_head(int status, std::string_view content_type, core::time_point at) {
    meter_.on_response_head(status, at);
    std::string type = media_type(content_type);
    if (!adapter_ || content_type == message_framing) {
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
        body_unread_ = true;
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
    } else if (auto* json = std::get_if<std::string>(&body_); json != nullptr) {
        if (!json_overflow_ && json->size() + bytes.size() > limits_.max_buffered_response_bytes) {
            // Too large to read whole: only its tail is kept from here, where a JSON body's
            // usage report sits (read at the end).
            json_overflow_ = true;
            meter_.on_parse_error(protocol::parse_error::oversized_event);
        }
        json->append(bytes);
        if (json_overflow_ && json->size() > 2 * response_tail_bytes) {
            json->erase(0, json->size() - response_tail_bytes);
            json->shrink_to_fit();
        }
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
               json != nullptr && !json->empty() && reason == end_reason::upstream_complete) {
        if (json_overflow_) {
            read_usage_in_tail(*json);
        } else {
            adapter_->on_body(*json, last_read_, meter_);
        }
    }
    request_summary summary = meter_.finish(reason, at);
    summary.response_unread = json_overflow_ || body_unread_;
    // A prompt the model server never got is not counted: it bills nothing (meter/billing).
    const bool count_input =
        prompt_parsed_ && summary.upstream_received &&
        (input_policy_ == input_counting::always ||
         (input_policy_ == input_counting::when_unreported && !summary.reported.input_tokens));
    if (count_input) {
        // An approximation: the texts alone, without the chat template's tokens.
        // Bounded by bytes whatever the prompt's shape: past the budget, an estimate.
        const std::size_t budget = limits_.max_prompt_count_bytes;
        // Token ids the request gave are tokens as they are, whichever tokenizer counts the text.
        const auto with_ids = [this](std::uint64_t tokens) {
            std::uint64_t total = 0;
            return __builtin_add_overflow(tokens, prompt_token_ids_, &total)
                       ? std::numeric_limits<std::uint64_t>::max()
                       : total;
        };
        if (encoders_.native != nullptr) {
            const auto n = encoders_.native->count_bounded(prompt_text_, budget);
            summary.native_input_tokens = with_ids(n.tokens);
            summary.native_input_estimated = !n.exact;
        }
        if (encoders_.reference != nullptr) {
            if (encoders_.reference == encoders_.native) {
                summary.normalized_input_tokens = summary.native_input_tokens;
                summary.normalized_input_estimated = summary.native_input_estimated;
            } else {
                const auto n = encoders_.reference->count_bounded(prompt_text_, budget);
                summary.normalized_input_tokens = with_ids(n.tokens);
                summary.normalized_input_estimated = !n.exact;
            }
        }
    }
    return summary;
}

namespace {

// Passes on only the usage of what the adapter reads: text, markers and parse errors of a
// document made up from a body's tail say nothing about the response.
class usage_only_sink final : public protocol::chunk_sink {
  public:
    explicit usage_only_sink(protocol::chunk_sink& meter) : meter_(meter) {}
    void on_chunk(const protocol::response_chunk& chunk, core::time_point at) override {
        if (chunk.usage) {
            protocol::response_chunk usage;
            usage.usage = chunk.usage;
            meter_.on_chunk(usage, at);
            found = true;
        }
    }
    void on_done_marker(core::time_point /*at*/) override {}
    void on_parse_error(protocol::parse_error /*reason*/) override {}
    bool found = false;

  private:
    protocol::chunk_sink& meter_;
};

// Where `key` last appears as a member name in `text` (the name, its quotes, then a colon).
std::optional<std::size_t> last_member(std::string_view text, std::string_view key) {
    for (std::size_t at = text.rfind(key); at != std::string_view::npos && at > 0;
         at = text.rfind(key, at - 1)) {
        std::size_t next = at + key.size();
        while (next < text.size() && (text[next] == ' ' || text[next] == '\t' ||
                                      text[next] == '\n' || text[next] == '\r')) {
            ++next;
        }
        if (next < text.size() && text[next] == ':') {
            return at;
        }
        if (at == 0) {
            break;
        }
    }
    return std::nullopt;
}

}  // namespace

void exchange::read_usage_in_tail(std::string_view tail) {
    // Every dialect with a JSON body puts its usage report last among the root's members:
    // "usage" (OpenAI, Responses, Anthropic) or "usageMetadata" (Gemini). From there to the end
    // the tail is the rest of the root object, so an opening brace before it makes a document
    // the adapter reads as it would the whole body (the Responses reader also wants the root's
    // "object"). Other dialects' counts are spread through the body: not found, unknown.
    std::optional<std::size_t> from;
    for (std::string_view key :
         {std::string_view("\"usage\""), std::string_view("\"usageMetadata\"")}) {
        if (auto at = last_member(tail, key); at && (!from || *at < *from)) {
            from = at;
        }
    }
    if (!from) {
        return;
    }
    std::string document = meter_.current().api == protocol::api_kind::openai_responses
                               ? R"({"object":"response",)"
                               : "{";
    document.append(tail.substr(*from));
    usage_only_sink usage(meter_);
    adapter_->on_body(document, last_read_, usage);
}

std::size_t exchange::finish_cost_bytes() const noexcept {
    std::size_t cost = 0;
    if (const auto* json = std::get_if<std::string>(&body_)) {
        cost += json->size();
    }
    const request_summary& now = meter_.current();
    const bool may_count =
        prompt_parsed_ && now.upstream_received &&
        (input_policy_ == input_counting::always ||
         (input_policy_ == input_counting::when_unreported && !now.reported.input_tokens));
    if (may_count) {
        const std::size_t prompt = std::min(prompt_text_.size(), limits_.max_prompt_count_bytes);
        const std::size_t tokenizers =
            (encoders_.native != nullptr ? 1U : 0U) +
            (encoders_.reference != nullptr && encoders_.reference != encoders_.native ? 1U : 0U);
        cost += prompt * tokenizers;
    }
    return cost;
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
