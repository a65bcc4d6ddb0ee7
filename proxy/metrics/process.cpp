#include "metrics/process.hpp"

#include <dirent.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <sstream>
#include <string>

namespace tokenmeter::metrics {
namespace {

// Seconds since the epoch at which the machine booted (/proc/stat "btime").
double boot_time_seconds() {
    std::ifstream in("/proc/stat");
    std::string key;
    while (in >> key) {
        if (key == "btime") {
            double value = -1;
            in >> value;
            return value;
        }
        in.ignore(1 << 20, '\n');
    }
    return -1;
}

double count_open_fds() {
    DIR* dir = ::opendir("/proc/self/fd");
    if (dir == nullptr) {
        return -1;
    }
    double n = 0;
    // readdir is safe on a stream no other thread reads.
    while (const dirent* entry = ::readdir(dir)) {  // NOLINT(concurrency-mt-unsafe)
        if (entry->d_name[0] != '.') {
            n += 1;
        }
    }
    ::closedir(dir);
    return n - 1;  // the directory stream's own descriptor
}

}  // namespace

process_sample read_process_sample() {
    process_sample sample;
    std::ifstream in("/proc/self/stat");
    std::string line;
    if (std::getline(in, line)) {
        // The command name (field 2) may hold spaces and parentheses: fields after it start
        // after the last ')'.
        auto close = line.rfind(')');
        if (close != std::string::npos) {
            std::istringstream fields(line.substr(close + 2));
            std::string field;
            // Field 3 is the first here; utime is 14, stime 15, starttime 22, vsize 23, rss 24.
            std::array<double, 25> values{};
            for (int i = 3; i <= 24 && (fields >> field); ++i) {
                try {
                    values.at(i) = std::stod(field);
                } catch (...) {
                    values.at(i) = 0;
                }
            }
            const auto ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
            const auto page = static_cast<double>(::sysconf(_SC_PAGESIZE));
            if (ticks > 0) {
                sample.cpu_seconds = (values[14] + values[15]) / ticks;
                const double boot = boot_time_seconds();
                if (boot >= 0) {
                    sample.start_time_seconds = boot + values[22] / ticks;
                }
            }
            sample.virtual_bytes = values[23];
            if (page > 0) {
                sample.resident_bytes = values[24] * page;
            }
        }
    }
    sample.open_fds = count_open_fds();
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
        sample.max_fds = static_cast<double>(limit.rlim_cur);
    }
    return sample;
}

process_metrics::process_metrics(prometheus::Registry& registry)
    : cpu_(&prometheus::BuildCounter()
                .Name("process_cpu_seconds_total")
                .Help("Total user and system CPU time spent in seconds.")
                .Register(registry)
                .Add({})),
      resident_(&prometheus::BuildGauge()
                     .Name("process_resident_memory_bytes")
                     .Help("Resident memory size in bytes.")
                     .Register(registry)
                     .Add({})),
      virtual_(&prometheus::BuildGauge()
                    .Name("process_virtual_memory_bytes")
                    .Help("Virtual memory size in bytes.")
                    .Register(registry)
                    .Add({})),
      start_time_(&prometheus::BuildGauge()
                       .Name("process_start_time_seconds")
                       .Help("Start time of the process since the Unix epoch in seconds.")
                       .Register(registry)
                       .Add({})),
      open_fds_(&prometheus::BuildGauge()
                     .Name("process_open_fds")
                     .Help("Number of open file descriptors.")
                     .Register(registry)
                     .Add({})),
      max_fds_(&prometheus::BuildGauge()
                    .Name("process_max_fds")
                    .Help("Maximum number of open file descriptors (the soft limit).")
                    .Register(registry)
                    .Add({})) {
    update();
}

void process_metrics::update() {
    const process_sample sample = read_process_sample();
    std::lock_guard lock(mutex_);
    if (sample.cpu_seconds > cpu_reported_) {
        cpu_->Increment(sample.cpu_seconds - cpu_reported_);
        cpu_reported_ = sample.cpu_seconds;
    }
    auto set = [](prometheus::Gauge* gauge, double value) {
        if (value >= 0) {
            gauge->Set(value);
        }
    };
    set(resident_, sample.resident_bytes);
    set(virtual_, sample.virtual_bytes);
    set(start_time_, sample.start_time_seconds);
    set(open_fds_, sample.open_fds);
    set(max_fds_, sample.max_fds);
}

edge_metrics::edge_metrics(prometheus::Registry& registry)
    : accept_errors_(&prometheus::BuildCounter()
                          .Name("tokenmeter_accept_errors_total")
                          .Help("Failed accepts on the proxy and admin listeners, by reason "
                                "(too_many_open_files: the descriptor limit; accepting backs "
                                "off).")
                          .Register(registry)),
      refused_(&prometheus::BuildCounter()
                    .Name("tokenmeter_connections_refused_total")
                    .Help("Client connections answered 503 and closed because "
                          "limits.max_client_connections was reached.")
                    .Register(registry)
                    .Add({})),
      internal_errors_(&prometheus::BuildCounter()
                            .Name("tokenmeter_internal_errors_total")
                            .Help("Client connections ended because handling them failed inside "
                                  "the proxy (an exception); the process went on.")
                            .Register(registry)
                            .Add({})),
      draining_(&prometheus::BuildGauge()
                     .Name("tokenmeter_draining")
                     .Help("1 while the proxy is draining (GET /drain or a signal; /readyz "
                           "fails), 0 otherwise; POST /undrain sets it back to 0.")
                     .Register(registry)
                     .Add({})) {
    auto& reloads = prometheus::BuildCounter()
                        .Name("tokenmeter_config_reloads_total")
                        .Help(
                            "Configuration reloads on SIGHUP, by result (rejected: the new "
                            "file was invalid and the running configuration was kept).")
                        .Register(registry);
    reloads_ok_ = &reloads.Add({{"result", "ok"}});
    reloads_rejected_ = &reloads.Add({{"result", "rejected"}});
    for (const char* reason : {"too_many_open_files", "out_of_memory", "other"}) {
        accept_errors_->Add({{"reason", reason}});
    }
    clients_ = &prometheus::BuildGauge()
                    .Name("tokenmeter_client_connections")
                    .Help("Client connections open on the proxy listener (TLS included)")
                    .Register(registry)
                    .Add({});
    auto& upstream = prometheus::BuildGauge()
                         .Name("tokenmeter_upstream_connections")
                         .Help(
                             "Upstream connections of the workers' pools, by state (in_use "
                             "includes those still connecting)")
                         .Register(registry);
    upstream_in_use_ = &upstream.Add({{"state", "in_use"}});
    upstream_idle_ = &upstream.Add({{"state", "idle"}});
    upstream_waiting_ = &prometheus::BuildGauge()
                             .Name("tokenmeter_upstream_connection_waiters")
                             .Help(
                                 "Requests waiting for an upstream connection because the pool "
                                 "is at upstream_pool.max_connections")
                             .Register(registry)
                             .Add({});
    tunnels_ = &prometheus::BuildGauge()
                    .Name("tokenmeter_websocket_tunnels")
                    .Help(
                        "WebSocket tunnels open, and upgrades on their way to one "
                        "(websocket.max_tunnels counts them)")
                    .Register(registry)
                    .Add({});
    config_loaded_ = &prometheus::BuildGauge()
                          .Name("tokenmeter_config_last_reload_success_timestamp_seconds")
                          .Help(
                              "Unix time the running configuration was loaded: at start, then at "
                              "each accepted SIGHUP reload")
                          .Register(registry)
                          .Add({});
}

void edge_metrics::set_connections(double clients, double upstream_open, double upstream_idle,
                                   double upstream_waiting) {
    clients_->Set(clients);
    upstream_in_use_->Set(std::max(0.0, upstream_open - upstream_idle));
    upstream_idle_->Set(upstream_idle);
    upstream_waiting_->Set(upstream_waiting);
}

void edge_metrics::set_tunnels(double open) {
    tunnels_->Set(open);
}

void edge_metrics::set_config_loaded(double unix_seconds) {
    config_loaded_->Set(unix_seconds);
}

void edge_metrics::accept_error(std::string_view reason) {
    accept_errors_->Add({{"reason", std::string(reason)}}).Increment();
}

void edge_metrics::set_draining(bool draining) {
    draining_->Set(draining ? 1.0 : 0.0);
}

void edge_metrics::connection_refused() {
    refused_->Increment();
}

void edge_metrics::internal_error() {
    internal_errors_->Increment();
}

void edge_metrics::config_reload(bool ok) {
    (ok ? reloads_ok_ : reloads_rejected_)->Increment();
}

}  // namespace tokenmeter::metrics
