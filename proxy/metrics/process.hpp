// metrics/process: the process_* series every Prometheus exporter has (read from /proc at each
// scrape), and the edge's own counters: accept errors, connections refused at the connection
// limit, connections ended by an internal error, and configuration reloads.
#pragma once

#include <cstdint>
#include <mutex>
#include <string_view>

namespace prometheus {
class Registry;
class Counter;
class Gauge;
template <typename T>
class Family;
}  // namespace prometheus

namespace tokenmeter::metrics {

// What one reading of /proc/self gives; absent values stay negative.
struct process_sample {
    double cpu_seconds = -1;
    double resident_bytes = -1;
    double virtual_bytes = -1;
    double start_time_seconds = -1;  // since the Unix epoch
    double open_fds = -1;
    double max_fds = -1;
};

// Reads the current process' figures (Linux /proc; elsewhere everything stays absent).
process_sample read_process_sample();

class process_metrics {
  public:
    explicit process_metrics(prometheus::Registry& registry);
    // Called before each scrape; cheap (a few small /proc reads).
    void update();

  private:
    std::mutex mutex_;
    double cpu_reported_ = 0;
    prometheus::Counter* cpu_;
    prometheus::Gauge* resident_;
    prometheus::Gauge* virtual_;
    prometheus::Gauge* start_time_;
    prometheus::Gauge* open_fds_;
    prometheus::Gauge* max_fds_;
};

class edge_metrics {
  public:
    explicit edge_metrics(prometheus::Registry& registry);

    // reason: too_many_open_files | out_of_memory | other
    void accept_error(std::string_view reason);
    // A client connection refused because limits.max_client_connections was reached.
    void connection_refused();
    // A client connection ended because handling it threw (the process went on).
    void internal_error();
    // result: ok | rejected
    void config_reload(bool ok);
    // 1 while /readyz fails for a drain (by /drain or a signal), 0 otherwise.
    void set_draining(bool draining);
    // At each scrape: open client connections, and the upstream connections of every worker's
    // pool (open includes idle and connecting) with the requests waiting for one.
    void set_connections(double clients, double upstream_open, double upstream_idle,
                         double upstream_waiting);
    // At each scrape: WebSocket tunnels open, and upgrades on their way to one.
    void set_tunnels(double open);
    // The Unix time of the last configuration that loaded: at start, then each accepted reload.
    void set_config_loaded(double unix_seconds);

  private:
    prometheus::Family<prometheus::Counter>* accept_errors_;
    prometheus::Counter* refused_;
    prometheus::Counter* internal_errors_;
    prometheus::Counter* reloads_ok_ = nullptr;
    prometheus::Counter* reloads_rejected_ = nullptr;
    prometheus::Gauge* draining_;
    prometheus::Gauge* clients_ = nullptr;
    prometheus::Gauge* upstream_in_use_ = nullptr;
    prometheus::Gauge* upstream_idle_ = nullptr;
    prometheus::Gauge* upstream_waiting_ = nullptr;
    prometheus::Gauge* tunnels_ = nullptr;
    prometheus::Gauge* config_loaded_ = nullptr;
};

}  // namespace tokenmeter::metrics
