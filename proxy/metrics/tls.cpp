#include "metrics/tls.hpp"

namespace tokenmeter::metrics {
namespace {

prometheus::Family<prometheus::Counter>& handshakes_family(prometheus::Registry& registry) {
    return prometheus::BuildCounter()
        .Name("tokenmeter_tls_handshakes_total")
        .Help(
            "Completed TLS handshakes on a listener; session=resumed when the client resumed "
            "an earlier session (ticket or cache), else new.")
        .Register(registry);
}

prometheus::Family<prometheus::Counter>& reloads_family(prometheus::Registry& registry) {
    return prometheus::BuildCounter()
        .Name("tokenmeter_tls_certificate_reloads_total")
        .Help(
            "Certificate reloads (SIGHUP or changed files); result=rejected keeps the previous "
            "certificate in use.")
        .Register(registry);
}

}  // namespace

tls_metrics::tls_metrics(prometheus::Registry& registry, const std::string& listener)
    : listener_(listener),
      new_sessions_(&handshakes_family(registry).Add({{"listener", listener}, {"session", "new"}})),
      resumed_sessions_(
          &handshakes_family(registry).Add({{"listener", listener}, {"session", "resumed"}})),
      errors_(&prometheus::BuildCounter()
                   .Name("tokenmeter_tls_handshake_errors_total")
                   .Help("TLS handshakes that failed on a listener, by reason; the connection "
                         "was closed.")
                   .Register(registry)),
      reloads_ok_(&reloads_family(registry).Add({{"listener", listener}, {"result", "ok"}})),
      reloads_rejected_(
          &reloads_family(registry).Add({{"listener", listener}, {"result", "rejected"}})),
      not_after_(&prometheus::BuildGauge()
                      .Name("tokenmeter_tls_certificate_not_after_seconds")
                      .Help("The notAfter time (Unix seconds) of the certificate a listener "
                            "serves.")
                      .Register(registry)
                      .Add({{"listener", listener}})) {}

void tls_metrics::handshake(bool resumed) {
    (resumed ? resumed_sessions_ : new_sessions_)->Increment();
}

void tls_metrics::handshake_error(std::string_view reason) {
    errors_->Add({{"listener", listener_}, {"reason", std::string(reason)}}).Increment();
}

void tls_metrics::reload(bool ok) {
    (ok ? reloads_ok_ : reloads_rejected_)->Increment();
}

void tls_metrics::certificate_not_after(std::int64_t unix_seconds) {
    not_after_->Set(static_cast<double>(unix_seconds));
}

}  // namespace tokenmeter::metrics
