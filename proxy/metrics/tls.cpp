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
                      .Add({{"listener", listener}})) {
    for (const std::string_view reason : handshake_error_reasons) {
        errors_->Add({{"listener", listener_}, {"reason", std::string(reason)}});
    }
}

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

namespace {

prometheus::Family<prometheus::Counter>& upstream_handshakes_family(
    prometheus::Registry& registry) {
    return prometheus::BuildCounter()
        .Name("tokenmeter_upstream_tls_handshakes_total")
        .Help(
            "Completed TLS handshakes with the https:// upstream; session=resumed when an "
            "earlier session of the same worker was reused, else new.")
        .Register(registry);
}

}  // namespace

upstream_tls_metrics::upstream_tls_metrics(prometheus::Registry& registry,
                                           bool insecure_skip_verify)
    : new_sessions_(&upstream_handshakes_family(registry).Add({{"session", "new"}})),
      resumed_sessions_(&upstream_handshakes_family(registry).Add({{"session", "resumed"}})) {
    prometheus::BuildGauge()
        .Name("tokenmeter_upstream_tls_insecure_skip_verify")
        .Help(
            "1 when upstream_tls.insecure_skip_verify is set: the upstream's certificate is not "
            "verified.")
        .Register(registry)
        .Add({})
        .Set(insecure_skip_verify ? 1.0 : 0.0);
}

void upstream_tls_metrics::handshake(bool resumed) {
    (resumed ? resumed_sessions_ : new_sessions_)->Increment();
}

}  // namespace tokenmeter::metrics
