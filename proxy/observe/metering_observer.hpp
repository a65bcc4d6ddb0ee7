// observe/metering_observer: the observer the proxy runs. Per request it drives the meter
// (meter::exchange with the model's tokenizers), writes the usage record's open, checkpoint and
// close entries, admits and charges the tenant, and at the end records the summary in the
// metrics and the access log. Asio-free; the per-request state is one struct.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/time.hpp"
#include "meter/billing.hpp"
#include "meter/exchange.hpp"
#include "observe/access_log.hpp"
#include "observe/finished_sink.hpp"
#include "observe/observer.hpp"
#include "usage/price.hpp"

namespace tokenmeter::metrics {
class registry;
class billing_metrics;
class status_board;
}  // namespace tokenmeter::metrics
namespace tokenmeter::tokenizer {
class catalog;
}  // namespace tokenmeter::tokenizer
namespace tokenmeter::usage {
class tenant_resolver;
class provisioned_throughput;
class id_generator;
class spool_writer;
}  // namespace tokenmeter::usage

namespace tokenmeter::observe {

class shared_limiter;
class task_meter;

struct metering_options {
    meter::exchange_limits exchange_limits{};
    meter::input_counting input_counting = meter::input_counting::when_unreported;
    // The upstream requests are forwarded to, as the access record names it (host:port).
    std::string upstream;
    // Release the response head and its end only once the open and close entries are on disk.
    bool hold_until_durable = true;
    core::duration checkpoint_interval = std::chrono::seconds(1);
    meter::billing_policy billing{};  // what failed requests bill (meter/billing)
    // Output tokens a limited tenant's request reserves at admission when it names no output
    // limit (tenants.default_output_reservation).
    std::uint64_t default_output_reservation = 512;
};

// The parts the observer uses. Null members: that part is off.
struct metering_parts {
    metrics::registry* registry = nullptr;  // required
    const tokenizer::catalog* tokenizers = nullptr;
    usage::tenant_resolver* tenants = nullptr;
    usage::provisioned_throughput* throughput = nullptr;
    usage::id_generator* ids = nullptr;
    metrics::billing_metrics* billing = nullptr;
    record_sink* records = nullptr;  // usage records on; needs ids and tenants
    // Unix time in milliseconds, read once per metered request (the record's start).
    std::function<std::int64_t()> wall_clock_ms;
    // The fleet-wide limit (tenants.shared_limits): admits and settles the tenants it covers.
    shared_limiter* shared = nullptr;
    // Token prices by model (`prices`): the cost in usage records and tokenmeter_cost_total.
    const usage::price_table* prices = nullptr;
    // The admin status page's windows (metrics.status_page): fed at each request's end.
    metrics::status_board* status = nullptr;
    // Task time (`tasks`): the task label, task time and sessions of requests with a task header.
    task_meter* tasks = nullptr;
    // The access log (log.access_log): one record per request at its end. Empty: off.
    access_writer access_log{};
    // The OTLP exporter (otel.endpoint). Null: off.
    finished_sink* otel = nullptr;
    // Runs a request's end on a thread of its own when its work is large (a long prompt to
    // count, a large JSON body to parse), so the I/O thread's other streams do not wait for it.
    // The second argument is the bytes the job holds until it has run. False (the job
    // untouched) when it cannot, and the end runs in place. Empty: always in place. The
    // proxy's is a core::job_thread.
    std::function<bool(std::function<void()>&, std::size_t)> finish_off_thread{};
};

class metering_observer final : public observer {
  public:
    metering_observer(metering_parts parts, metering_options options);

    std::unique_ptr<exchange_observer> begin(request_facts facts) override;
    // Counted in the request families; an access record when the access log is on.
    void unforwarded(const unforwarded_request& request) override;
    void upstream_error(std::string_view reason) override;
    void tunnel_parse_error(protocol::api_kind api, protocol::parse_error reason) override;

    [[nodiscard]] const metering_parts& parts() const noexcept { return parts_; }
    [[nodiscard]] const metering_options& options() const noexcept { return options_; }

  private:
    metering_parts parts_;
    metering_options options_;
};

// usage::spool_writer as a record_sink.
class spool_sink final : public record_sink {
  public:
    explicit spool_sink(usage::spool_writer& spool) noexcept : spool_(spool) {}
    std::uint64_t append(std::string line, bool is_close) override;
    [[nodiscard]] bool is_durable(std::uint64_t seq) const override;
    void when_durable(std::uint64_t seq, std::function<void()> done) override;

  private:
    usage::spool_writer& spool_;
};

}  // namespace tokenmeter::observe
