#include "observe/realtime_session.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "meter/exchange.hpp"
#include "protocol/dialects.hpp"
#include "protocol/realtime.hpp"

namespace tokenmeter::observe {
namespace {

using protocol::realtime_event;
using protocol::realtime_event_type;

// The status a response in a tunnel is recorded with: the upgrade's 101 said nothing about it,
// and it was served unless its response.done says otherwise.
constexpr int tunnel_response_status = 200;

// What every request a tunnel's session begins shares: the upgrade's target, client, headers
// (tenant, credentials) and trace, and a request id of its own ("<x-request-id>:<n>").
class tunnel_requests {
  public:
    tunnel_requests(observer& responses, const tunnel_facts& facts)
        : responses_(responses),
          api_(facts.api),
          target_(facts.target),
          client_(facts.client),
          headers_(facts.headers),
          trace_(facts.trace) {
        for (const auto& [name, value] : headers_) {
            if (name == "x-request-id") {
                request_id_ = value;
                break;
            }
        }
    }

    // One request, asked for at `start` and answered from `at`. Admission cannot refuse what
    // the server is already giving (admitted_already): the tenant is charged at its end.
    std::unique_ptr<exchange_observer> begin(protocol::api_kind api, protocol::request_info info,
                                             core::time_point start, core::time_point at) {
        ++requests_;
        std::string request_id;
        if (!request_id_.empty()) {
            request_id = request_id_ + ":" + std::to_string(requests_);
        }
        request_facts facts;
        facts.api = api;
        facts.info = std::move(info);
        facts.info.stream = true;
        facts.target = target_;
        facts.method = "GET";
        facts.client = client_;
        facts.received = start;
        facts.trace = trace_;
        facts.admitted_already = true;
        facts.header = [this, request_id](std::string_view name) -> std::string_view {
            if (name == "x-request-id") {
                return request_id;
            }
            for (const auto& [field, value] : headers_) {
                if (field == name) {
                    return value;
                }
            }
            return {};
        };
        std::unique_ptr<exchange_observer> exchange = responses_.begin(std::move(facts));
        exchange->request_sent(start);
        (void)exchange->response_head(tunnel_response_status, meter::message_framing, true, at);
        return exchange;
    }

    // The event `text` is, or null (counted as a parse error): valid until the next read.
    const realtime_event* read(std::string_view text, bool from_client, core::time_point at) {
        last_at_ = std::max(last_at_, at);
        protocol::parse_error problem = protocol::parse_error::invalid_json;
        const realtime_event* event = reader_.read(text, from_client, problem);
        if (event == nullptr) {
            parse_error(problem);
        }
        return event;
    }

    void parse_error(protocol::parse_error reason) { responses_.tunnel_parse_error(api_, reason); }
    [[nodiscard]] std::string_view target() const noexcept { return target_; }
    // The time of the latest message: a session dropped without its end ends there.
    [[nodiscard]] core::time_point last_at() const noexcept { return last_at_; }

    // How a request still open when the tunnel ends, ends: a cut stream, by the client's hang-up
    // or the upstream's (a close mid-response included).
    [[nodiscard]] static end_reason cut(end_reason tunnel_end) noexcept {
        return tunnel_end == end_reason::client_cancel ? end_reason::client_cancel
                                                       : end_reason::upstream_truncated;
    }

  private:
    observer& responses_;
    protocol::api_kind api_;
    std::string target_;
    std::string client_;
    std::vector<std::pair<std::string, std::string>> headers_;
    core::trace_context trace_;
    std::string request_id_;
    std::uint64_t requests_ = 0;
    protocol::realtime_reader reader_;
    core::time_point last_at_{};
};

class realtime_session final : public tunnel_observer {
  public:
    realtime_session(observer& responses, const tunnel_facts& facts)
        : requests_(responses, facts), model_(protocol::model_from_query(facts.target)) {}

    realtime_session(const realtime_session&) = delete;
    realtime_session& operator=(const realtime_session&) = delete;
    realtime_session(realtime_session&&) = delete;
    realtime_session& operator=(realtime_session&&) = delete;

    ~realtime_session() override {
        // A session dropped without end() (the proxy shutting down) still closes its records.
        end(end_reason::upstream_truncated, requests_.last_at());
    }

    void message(bool from_client, std::string_view text, core::time_point at) override {
        const realtime_event* event = requests_.read(text, from_client, at);
        if (event == nullptr) {
            return;
        }
        switch (event->type) {
            case realtime_event_type::session_update:
            case realtime_event_type::session_state:
                if (!event->model.empty()) {
                    model_ = event->model;
                }
                if (!event->transcription_model.empty()) {
                    transcription_model_ = event->transcription_model;
                }
                return;
            case realtime_event_type::response_create:
            case realtime_event_type::input_committed:
                // The clock of the next response starts at the first ask it answers.
                if (!pending_start_) {
                    pending_start_ = at;
                }
                if (!event->item_id.empty()) {
                    committed(event->item_id, at);
                }
                return;
            case realtime_event_type::transcription_delta:
            case realtime_event_type::transcription_completed:
            case realtime_event_type::transcription_failed:
                transcription(*event, at);
                return;
            case realtime_event_type::response_created:
                (void)find_or_open(event->response_id, at);
                return;
            case realtime_event_type::text_delta:
            case realtime_event_type::tool_delta:
            case realtime_event_type::audio_delta:
                delta(*event, at);
                return;
            case realtime_event_type::response_done:
                done(*event, at);
                return;
            case realtime_event_type::error:
            case realtime_event_type::response_finished:
            case realtime_event_type::other:
                return;
        }
    }

    void unreadable(protocol::parse_error reason) override { requests_.parse_error(reason); }

    void end(end_reason reason, core::time_point at) override {
        if (ended_) {
            return;
        }
        ended_ = true;
        for (auto& open : open_) {
            open.exchange->end(tunnel_requests::cut(reason), std::max(at, requests_.last_at()));
        }
        open_.clear();
    }

  private:
    struct open_response {
        std::string id;  // a response's id, or "item:" and the item a transcription is of
        std::unique_ptr<exchange_observer> exchange;
        bool text_seen = false;  // a delta carried text
    };

    open_response* find(const std::string& id) {
        auto found = std::ranges::find(open_, id, &open_response::id);
        return found != open_.end() ? &*found : nullptr;
    }

    exchange_observer* find_or_open(const std::string& id, core::time_point at) {
        if (open_response* found = find(id)) {
            return found->exchange.get();
        }
        const core::time_point start = pending_start_.value_or(at);
        pending_start_.reset();
        open_response* opened = open(id, protocol::api_kind::openai_realtime, model_, start, at);
        return opened != nullptr ? opened->exchange.get() : nullptr;
    }

    // A committed input (the client's commit, or the server's committed with its item): the
    // clock of its transcription. The last few are kept.
    void committed(const std::string& item, core::time_point at) {
        if (commits_.size() >= max_open_realtime_responses) {
            commits_.erase(commits_.begin());
        }
        commits_.emplace_back(item, at);
    }

    void transcription(const realtime_event& event, core::time_point at) {
        const std::string id = "item:" + event.item_id;
        open_response* unit = find(id);
        if (unit == nullptr) {
            core::time_point start = at;
            auto commit = std::ranges::find(commits_, event.item_id,
                                            &std::pair<std::string, core::time_point>::first);
            if (commit != commits_.end()) {
                start = commit->second;
                commits_.erase(commit);
            }
            unit = open(id, protocol::api_kind::openai_realtime_transcription,
                        transcription_model_.empty() ? model_ : transcription_model_, start, at);
            if (unit == nullptr) {
                return;
            }
        }
        protocol::response_chunk chunk;
        if (event.type == realtime_event_type::transcription_delta) {
            chunk.content = event.delta;
            unit->text_seen = unit->text_seen || !event.delta.empty();
            chunk.role_only = !chunk.carries_text();
            unit->exchange->event(chunk, at);
            return;
        }
        // A transcription given whole (no deltas: whisper-1) is its text once.
        if (!unit->text_seen) {
            chunk.content = event.transcript;
        }
        chunk.usage = event.usage;
        chunk.error = event.type == realtime_event_type::transcription_failed;
        chunk.role_only = !chunk.carries_text();
        unit->exchange->event(chunk, at);
        unit->exchange->end(end_reason::upstream_complete, at);
        std::erase_if(open_, [&](const open_response& r) { return r.id == id; });
    }

    open_response* open(const std::string& id, protocol::api_kind api, const std::string& model,
                        core::time_point start, core::time_point at) {
        if (open_.size() >= max_open_realtime_responses) {
            requests_.parse_error(protocol::parse_error::unexpected_shape);
            return nullptr;
        }
        protocol::request_info info;
        info.model = model;
        // The input is the server's to count (audio, and the conversation it keeps): no text
        // of a request body stands for it.
        info.countable_input = false;
        open_.push_back({id, requests_.begin(api, std::move(info), start, at)});
        return &open_.back();
    }

    void delta(const realtime_event& event, core::time_point at) {
        exchange_observer* exchange = find_or_open(event.response_id, at);
        if (exchange == nullptr) {
            return;
        }
        protocol::response_chunk chunk;
        if (event.type == realtime_event_type::text_delta) {
            chunk.content = event.delta;
        } else if (event.type == realtime_event_type::tool_delta) {
            chunk.tool_arguments = event.delta;
        } else {
            chunk.audio = true;
        }
        chunk.role_only = !chunk.carries_text();
        exchange->event(chunk, at);
    }

    void done(const realtime_event& event, core::time_point at) {
        exchange_observer* exchange = find_or_open(event.response_id, at);
        if (exchange == nullptr) {
            return;
        }
        protocol::response_chunk chunk;
        chunk.usage = event.usage;
        chunk.finish_reason = event.status;
        chunk.error = event.status == "failed";
        chunk.role_only = true;
        exchange->event(chunk, at);
        exchange->end(
            event.status == "cancelled" ? end_reason::client_cancel : end_reason::upstream_complete,
            at);
        std::erase_if(open_, [&](const open_response& r) { return r.exchange.get() == exchange; });
    }

    tunnel_requests requests_;
    std::string model_;
    std::string transcription_model_;
    std::vector<std::pair<std::string, core::time_point>> commits_;
    std::vector<open_response> open_;
    std::optional<core::time_point> pending_start_;
    bool ended_ = false;
};

// The Responses API's WebSocket mode (/v1/responses): each response.create the client sends is
// one request, read as its POST body would be (model, input, output limit), and the server's
// events that follow, the ones its SSE form carries, are its stream, up to response.completed
// (or .failed, .incomplete, or an error). One response at a time; asks sent ahead wait their
// turn (at most max_open_realtime_responses of them).
class responses_session final : public tunnel_observer {
  public:
    responses_session(observer& responses, const tunnel_facts& facts)
        : requests_(responses, facts) {}

    responses_session(const responses_session&) = delete;
    responses_session& operator=(const responses_session&) = delete;
    responses_session(responses_session&&) = delete;
    responses_session& operator=(responses_session&&) = delete;

    ~responses_session() override { end(end_reason::upstream_truncated, requests_.last_at()); }

    void message(bool from_client, std::string_view text, core::time_point at) override {
        const realtime_event* event = requests_.read(text, from_client, at);
        if (event == nullptr) {
            return;
        }
        if (from_client) {
            if (event->type != realtime_event_type::response_create) {
                return;
            }
            if (asked_.size() >= max_open_realtime_responses) {
                requests_.parse_error(protocol::parse_error::unexpected_shape);
                return;
            }
            asked_.push_back({protocol::parse_request(protocol::api_kind::openai_responses,
                                                      requests_.target(), text),
                              at});
            return;
        }
        if (!current_) {
            if (asked_.empty()) {
                return;  // nothing asked for (a stray event): no response to bill it to
            }
            current_ = requests_.begin(protocol::api_kind::openai_responses,
                                       std::move(asked_.front().info), asked_.front().at, at);
            asked_.erase(asked_.begin());
        }
        current_->message(text, at);
        if (event->type == realtime_event_type::response_finished ||
            event->type == realtime_event_type::error) {
            current_->end(end_reason::upstream_complete, at);
            current_.reset();
        }
    }

    void unreadable(protocol::parse_error reason) override { requests_.parse_error(reason); }

    void end(end_reason reason, core::time_point at) override {
        if (current_) {
            current_->end(tunnel_requests::cut(reason), std::max(at, requests_.last_at()));
            current_.reset();
        }
        asked_.clear();  // never answered: never served, nothing billed
    }

  private:
    struct ask {
        protocol::request_info info;
        core::time_point at;
    };

    tunnel_requests requests_;
    std::vector<ask> asked_;
    std::unique_ptr<exchange_observer> current_;
};

}  // namespace

std::unique_ptr<tunnel_observer> make_realtime_session(observer& responses,
                                                       const tunnel_facts& facts) {
    switch (facts.api) {
        case protocol::api_kind::openai_realtime:
            return std::make_unique<realtime_session>(responses, facts);
        case protocol::api_kind::openai_responses:
            return std::make_unique<responses_session>(responses, facts);
        default:
            return nullptr;
    }
}

}  // namespace tokenmeter::observe
