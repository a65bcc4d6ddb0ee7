// metrics/tls: what the TLS listeners export. Handshakes by whether the session was resumed,
// failed handshakes by reason, certificate reloads, and the serving certificate's expiry (so an
// alert can fire before a rotation that did not happen).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tokenmeter::metrics {

// Every reason net::classify_handshake_error gives: each listener's series start at 0.
inline constexpr std::array<std::string_view, 9> handshake_error_reasons{"protocol_version",
                                                                         "no_shared_cipher",
                                                                         "no_client_certificate",
                                                                         "bad_client_certificate",
                                                                         "no_application_protocol",
                                                                         "plaintext_http",
                                                                         "timeout",
                                                                         "closed",
                                                                         "other"};

class tls_metrics {
  public:
    // listener: "proxy" or "admin".
    tls_metrics(prometheus::Registry& registry, const std::string& listener);

    void handshake(bool resumed);
    // reason: a word from net/tls_server's classification (protocol_version, no_shared_cipher,
    // no_client_certificate, bad_client_certificate, no_application_protocol, plaintext_http,
    // timeout, closed, other).
    void handshake_error(std::string_view reason);
    void reload(bool ok);
    void certificate_not_after(std::int64_t unix_seconds);

  private:
    std::string listener_;
    prometheus::Counter* new_sessions_;
    prometheus::Counter* resumed_sessions_;
    prometheus::Family<prometheus::Counter>* errors_;
    prometheus::Counter* reloads_ok_;
    prometheus::Counter* reloads_rejected_;
    prometheus::Gauge* not_after_;
};

// What the proxy's TLS to an https:// upstream exports: handshakes by whether the worker's
// earlier session was resumed, and whether verification is off (an alert can catch a forgotten
// test setting). Failures are counted by tokenmeter_upstream_errors_total{reason="tls"}.
class upstream_tls_metrics {
  public:
    upstream_tls_metrics(prometheus::Registry& registry, bool insecure_skip_verify);
    void handshake(bool resumed);

  private:
    prometheus::Counter* new_sessions_;
    prometheus::Counter* resumed_sessions_;
};

}  // namespace tokenmeter::metrics
