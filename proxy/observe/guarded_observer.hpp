// observe/guarded_observer: the observer sessions are handed. It wraps the metering observer and
// catches whatever a call into it throws, so that a failure inside metering never reaches the
// relay: the failure is counted by phase (tokenmeter_metering_failures_total), logged once per
// phase, the request's usage record is marked degraded, and the session gets the answer that
// lets the bytes go on (admitted, nothing to wait for).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "observe/observer.hpp"

namespace tokenmeter::observe {

// Where in a request metering failed: the observer call that threw.
enum class metering_phase : std::uint8_t {
    begin,             // observer::begin (the request is then not metered at all)
    admission,         // exchange_observer::await_admission
    request_sent,      // exchange_observer::request_sent (the request then bills as unserved)
    answered_locally,  // exchange_observer::answered_locally
    response_head,     // exchange_observer::response_head
    body,              // exchange_observer::body (later bodies of the request are not shown to it)
    seal,              // exchange_observer::seal
    end,               // exchange_observer::end
    durable_wait,      // record_sink::is_durable / when_durable (the response is not held then)
    unforwarded,       // observer::unforwarded
    upstream_error,    // observer::upstream_error
    tunnel,            // a tunnel's metering (observer::begin_tunnel, tunnel_observer): the rest
                       // of the tunnel's messages are not metered
};
inline constexpr std::size_t metering_phase_count = 12;
[[nodiscard]] std::string_view to_string(metering_phase phase) noexcept;

class guarded_observer final : public observer {
  public:
    // count: called for every failure (metrics::registry::metering_failure in the proxy); it
    // may throw too, which is swallowed.
    guarded_observer(observer& inner, std::function<void(metering_phase)> count);

    std::unique_ptr<exchange_observer> begin(request_facts facts) override;
    void unforwarded(const unforwarded_request& request) override;
    void upstream_error(std::string_view reason) override;
    // The session's metering (observe/realtime_session), its responses begun through this
    // guard, itself guarded: a throw stops the tunnel's metering, never its bytes.
    std::unique_ptr<tunnel_observer> begin_tunnel(const tunnel_facts& facts) override;
    void tunnel_parse_error(protocol::api_kind api, protocol::parse_error reason) override;

    // Runs `call`; true when it returned, false when it threw (the failure reported).
    template <typename Call>
    bool run(metering_phase phase, Call&& call) noexcept {
        try {
            call();
            return true;
        } catch (const std::exception& e) {
            failed(phase, e.what());
        } catch (...) {
            failed(phase, "unknown exception");
        }
        return false;
    }

  private:
    void failed(metering_phase phase, const char* what) noexcept;

    observer& inner_;
    std::function<void(metering_phase)> count_;
    std::array<std::atomic<bool>, metering_phase_count> logged_{};
};

}  // namespace tokenmeter::observe
