// observe/observer: what a session tells the metering side about each request, and the one thing
// it may be asked to wait for. No Asio here: the relay passes spans of bytes and time points, so
// the implementation (observe/metering_observer) is unit-tested with a manual clock. A session
// moves bytes; every metering and billing decision is made behind this interface.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/time.hpp"
#include "core/trace_context.hpp"
#include "meter/outcome.hpp"
#include "protocol/types.hpp"

namespace tokenmeter::observe {

using meter::end_reason;
using meter::outcome;

// Where a request's billing entries go and when they are on disk (usage::spool_writer in the
// proxy, a fake in tests). Thread-safe.
class record_sink {
  public:
    virtual ~record_sink() = default;
    // Queues one line; returns its sequence number (never 0).
    virtual std::uint64_t append(std::string line, bool is_close) = 0;
    [[nodiscard]] virtual bool is_durable(std::uint64_t seq) const = 0;
    // Runs `done` once `seq` is on disk (or the writer gave up), on the writer's thread.
    virtual void when_durable(std::uint64_t seq, std::function<void()> done) = 0;
};

// A billing entry the response must wait for before it goes on (usage.hold_until_durable).
// Default-constructed: nothing to wait for.
class durable_wait {
  public:
    durable_wait() = default;
    durable_wait(record_sink* sink, std::uint64_t seq) noexcept : sink_(sink), seq_(seq) {}

    [[nodiscard]] bool pending() const { return sink_ != nullptr && !sink_->is_durable(seq_); }
    // Runs `done` on the writer's thread once durable; the caller hops back to its own thread.
    void then(std::function<void()> done) const { sink_->when_durable(seq_, std::move(done)); }
    [[nodiscard]] record_sink* sink() const noexcept { return sink_; }
    [[nodiscard]] std::uint64_t sequence() const noexcept { return seq_; }

  private:
    record_sink* sink_ = nullptr;
    std::uint64_t seq_ = 0;
};

// A request header by (lower-case) name; "" when absent.
using header_lookup = std::function<std::string_view(std::string_view name)>;

// What the session knows of a request when it is about to forward it.
struct request_facts {
    protocol::api_kind api = protocol::api_kind::none;
    protocol::request_info info;   // prompt_text is moved from
    std::string_view target;       // normalized origin-form target
    std::string_view method;       // as the client sent it
    std::string_view client;       // the client's IP address ("" when unknown)
    std::uint64_t body_bytes = 0;  // the request body as the client sent it
    core::time_point received{};
    header_lookup header;
    core::trace_context trace;  // the trace the upstream's traceparent carries
    bool model_cut = false;  // info.model was cut to usage::max_model_bytes (set by the observer)
    // A response the server is already giving (a tunnel's): admission is not asked (it cannot
    // be refused), and its tokens are charged to the tenant at its end.
    bool admitted_already = false;
};

// A request the proxy answered itself before it was forwarded or metered (malformed, too large
// ...). The head's fields are "" when the head could not be read.
struct unforwarded_request {
    protocol::api_kind api = protocol::api_kind::none;
    std::string_view model;
    outcome result = outcome::rejected;
    int status = 0;        // the status of the proxy's answer
    double seconds = 0.0;  // from the end of the head (or of its failed read) to the answer
    std::string_view method;
    std::string_view target;      // as the client sent it (the access log drops its query)
    std::string_view client;      // the client's IP address ("" when unknown)
    std::string_view request_id;  // the X-Request-Id header, as sent
};

// Whether a request may be forwarded; when not, the local answer to give (429).
struct admission {
    bool admitted = true;
    std::string retry_after;  // seconds, for Retry-After
    std::string message;
};

// One forwarded request, from admission to its end. Calls come from one thread, in order:
// request_sent at most once (more calls change nothing), answered_locally at most once, then
// response_head once (or never), body any number of times, seal at most once, end exactly once.
class exchange_observer {
  public:
    virtual ~exchange_observer() = default;

    [[nodiscard]] virtual const admission& admitted() const noexcept = 0;
    // Whether admission is still being decided elsewhere (a fleet-wide limit's store). Then the
    // session calls await_admission once and reads admitted() only after `done` ran; `done` runs
    // exactly once, on any thread (the session posts back to its own), within the store's
    // timeout.
    [[nodiscard]] virtual bool admission_pending() const noexcept { return false; }
    virtual void await_admission(std::function<void()> done) {
        auto now = std::move(done);
        now();
    }
    // The model server has the whole request (its write completed): from here the request is
    // served, and bills by meter/billing's rule. A request that never gets here bills nothing.
    virtual void request_sent(core::time_point at) = 0;
    // The proxy answers the request itself; `code` is the JSON error code the client gets
    // (local_failure), the reason its usage record gives.
    virtual void answered_locally(std::string_view code) = 0;
    // The response head as the client will get it; has_body: a body follows. The returned wait
    // is the request's open entry: no byte may reach the client before it is durable.
    virtual durable_wait response_head(int status, std::string_view content_type, bool has_body,
                                       core::time_point at) = 0;
    // After response_head: the body carries a content coding the meter does not decode (the
    // upstream applied one although identity was asked for).
    virtual void unreadable_body() {}
    // A span of response bytes as read from the upstream, after it was handed to the client.
    virtual void body(std::string_view bytes, core::time_point at) = 0;
    // Whether the end of the response waits for the close entry (call seal before the last
    // bytes are written).
    [[nodiscard]] virtual bool holds_end() const noexcept = 0;
    // The response is complete from the upstream: the record is closed now, before the last
    // bytes go out; the returned wait is its close entry.
    virtual durable_wait seal(core::time_point at) = 0;
    // The request is over, for `reason`. After seal, the sealed record stands.
    virtual void end(end_reason reason, core::time_point at) = 0;
    // A call into this request's metering failed (observe/guarded_observer): its usage record,
    // when not yet closed, is marked degraded.
    virtual void degrade() noexcept {}
    // A decoded piece of a response that comes as messages rather than a body (a response in a
    // WebSocket tunnel, observe/realtime_session), after its message was forwarded. Instead of
    // body(): the exchange reads no bytes of its own.
    virtual void event(const protocol::response_chunk& /*chunk*/, core::time_point /*at*/) {}
    // Likewise one whole event for the request's dialect adapter to read (the Responses API's
    // WebSocket mode: the events of its SSE form, one message each).
    virtual void message(std::string_view /*text*/, core::time_point /*at*/) {}
};

// What the session knows of a WebSocket upgrade whose tunnel is metered.
struct tunnel_facts {
    protocol::api_kind api = protocol::api_kind::none;  // none: the tunnel is not metered
    std::string_view target;                            // normalized origin-form target
    std::string_view client;                            // the client's IP address
    // The upgrade request's header fields, names lower-case: the session keeps them for the
    // records of its responses (tenant, X-Request-Id), as the request's own would be read.
    std::vector<std::pair<std::string, std::string>> headers;
    core::trace_context trace;
};

// The metering of one tunnel's messages (observe/realtime_session): each whole text message,
// after it was forwarded, in the order each direction forwarded them. Calls come from one
// thread; end exactly once.
class tunnel_observer {
  public:
    tunnel_observer() = default;
    tunnel_observer(const tunnel_observer&) = delete;
    tunnel_observer& operator=(const tunnel_observer&) = delete;
    tunnel_observer(tunnel_observer&&) = delete;
    tunnel_observer& operator=(tunnel_observer&&) = delete;
    virtual ~tunnel_observer() = default;

    virtual void message(bool from_client, std::string_view text, core::time_point at) = 0;
    // A text message that was forwarded but could not be kept to be read.
    virtual void unreadable(protocol::parse_error reason) = 0;
    // The tunnel is closed, for `reason`: a response still open ends as a cut stream.
    virtual void end(end_reason reason, core::time_point at) = 0;
};

// The process-wide side: one per proxy, shared by every worker thread. Sessions are handed a
// guarded_observer (observe/guarded_observer) around the metering one, so no call from the relay
// can throw.
class observer {
  public:
    virtual ~observer() = default;
    // A request the session is about to forward (admitted() says whether it may).
    virtual std::unique_ptr<exchange_observer> begin(request_facts facts) = 0;
    // A request answered locally before it was forwarded (malformed, too large ...).
    virtual void unforwarded(const unforwarded_request& request) = 0;
    // An upstream failure, by its metric label (relay/local_failure).
    virtual void upstream_error(std::string_view reason) = 0;
    // The metering of a WebSocket upgrade's tunnel; null when its API is none (the tunnel's
    // messages are then never read). Asked before the upgrade is forwarded; a tunnel that is
    // never opened (the upstream refused) drops it unused.
    virtual std::unique_ptr<tunnel_observer> begin_tunnel(const tunnel_facts& /*facts*/) {
        return nullptr;
    }
    // A message of a metered tunnel the meter could not read (forwarded unchanged): counted in
    // tokenmeter_parse_errors_total.
    virtual void tunnel_parse_error(protocol::api_kind /*api*/, protocol::parse_error /*reason*/) {}
};

}  // namespace tokenmeter::observe
