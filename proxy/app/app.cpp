#include "app/app.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include "admin/admin.hpp"
#include "admin/readiness_probe.hpp"
#include "app/cpu_quota.hpp"
#include "app/drain.hpp"
#include "app/http_settings.hpp"
#include "app/metering_stack.hpp"
#include "app/reload_signal.hpp"
#include "app/shared_limits.hpp"
#include "app/spool_health.hpp"
#include "app/start_up.hpp"
#include "app/tls_watch.hpp"
#include "app/usage_parts.hpp"
#include "app/workers.hpp"
#include "core/time.hpp"
#include "metrics/registry.hpp"
#include "metrics/tls.hpp"
#include "net/listener.hpp"
#include "protocol/json_limits.hpp"
#include "relay/proxy_context.hpp"

namespace tokenmeter::app {
namespace {

// Runs `f` on each of the optional parts that is there.
template <typename F, typename... Parts>
void each_present(const F& f, Parts&... parts) {
    ((parts ? f(*parts) : void()), ...);
}

// A listener's certificate, watched and reloaded, when its section is enabled.
void open_tls_watch(std::optional<tls_watch>& slot, asio::io_context& ioc,
                    const config::tls_settings& tls, prometheus::Registry& registry,
                    const char* listener) {
    if (!tls.enabled()) {
        return;
    }
    try {
        slot.emplace(ioc, tls, registry, listener);
    } catch (const std::exception& e) {
        throw start_up_error(e.what());
    }
}

}  // namespace

// Construction in order; each part outlives the ones declared after it (the sessions a worker
// still owns at shutdown use the observer, the metrics and the spool as they are destroyed).
int run(const config::settings& settings, const reloader& reload, const metering_wrap& wrap) try {
    configure_logging(settings.log);
    // A client that hangs up mid-write costs an EPIPE on its own socket, never the process.
    std::signal(SIGPIPE, SIG_IGN);
    const std::int64_t fd_budget = open_files_budget();
    protocol::set_max_json_depth(settings.limits.max_json_depth);
    const thread_choice threads_chosen =
        settings.threads != 0
            ? thread_choice{settings.threads, "threads setting"}
            : default_threads(cgroup_cpu_quota(), std::thread::hardware_concurrency(),
                              affinity_cpus());
    const std::uint32_t threads = threads_chosen.threads;
    core::steady_clock_source clock;

    metering_stack m(settings, clock, wrap);
    auto& registry = m.registry;
    auto& observer = *m.observer;
    const relay::session_settings session_settings = session_settings_from(settings);
    relay::proxy_context context{session_settings, observer, clock};
    context.planner = &m.planner;
    context.edge.attach(&m.edge_metrics);
    relay::upstream_pool_settings pool_settings = pool_settings_from(settings);
    std::optional<metrics::upstream_tls_metrics> upstream_tls;
    if (pool_settings.tls) {
        upstream_tls.emplace(*registry.prometheus_registry(),
                             settings.upstream_tls.insecure_skip_verify);
        pool_settings.on_tls_handshake = [&upstream_tls](bool resumed) {
            upstream_tls->handshake(resumed);
        };
    }
    worker_pool workers(threads, pool_settings, context, settings.limits.max_client_connections);

    // Declared after the workers: its pending accepts hold sockets of the workers' contexts, so
    // it must be destroyed first.
    asio::io_context main_ioc{1};
    // After main_ioc (its file-watch timer lives there); connections keep the OpenSSL context
    // they were accepted with, so destroying this before the workers is safe.
    std::optional<tls_watch> tls;
    open_tls_watch(tls, main_ioc, settings.tls, *registry.prometheus_registry(), "proxy");
    if (tls) {
        context.edge.attach_tls(&tls->counters());
        workers.serve_tls(&tls->server());
    }
    // The admin listener's own certificate (admin_tls), watched and reloaded like the proxy's.
    std::optional<tls_watch> admin_tls;
    open_tls_watch(admin_tls, main_ioc, settings.admin_tls, *registry.prometheus_registry(),
                   "admin");
    net::tls_handshake_counters admin_handshakes{"admin"};
    if (admin_tls) {
        admin_handshakes.attach(&admin_tls->counters());
    }
    std::atomic<bool> upstream_ready{false};
    std::atomic<bool> spool_failing{false};
    // Set when a signal starts the shutdown: /undrain cannot take that back.
    std::atomic<bool> exiting{false};
    admin::admin_state admin_state{registry, context.draining, upstream_ready};
    admin_state.exiting = &exiting;
    admin_state.drain_token =
        configured_secret("", "", "admin_auth.token_file", settings.admin_auth.token_file);
    m.edge_metrics.set_config_loaded(
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
    admin_state.before_scrape = [&m, &context, &clock, &workers] {
        m.process_metrics.update();
        m.edge_metrics.set_draining(context.draining.load());
        const relay::upstream_pool::counts pools = workers.upstream_totals();
        m.edge_metrics.set_connections(
            static_cast<double>(context.client_connections.load(std::memory_order_relaxed)),
            pools.open, pools.idle, pools.waiting);
        m.edge_metrics.set_tunnels(
            static_cast<double>(context.tunnels.load(std::memory_order_relaxed)));
        if (m.tasks) {
            m.tasks->sweep(clock.now());
        }
    };
    admin_state.requests_in_flight = &context.requests_in_flight;
    admin_state.status = m.status ? &*m.status : nullptr;
    if (settings.usage.readyz_fail_on_spool_error) {
        admin_state.spool_failing = &spool_failing;
    }
    // Before the descriptors run out, stop taking connections (they wait in the backlog) rather
    // than fail accept() in a loop; the reserve keeps /metrics and the spool working.
    net::listener proxy_listener(
        main_ioc, "proxy", resolve_listen(main_ioc, settings.listen, "proxy"), context.edge,
        [&]() -> asio::io_context& { return workers.next(); },
        [&](net::accepted_descriptor s, asio::io_context& ioc) {
            workers.serve(std::move(s), ioc);
        },
        [&] { return context.client_connections.load(std::memory_order_relaxed) >= fd_budget; });
    admin::admin_listener admin(main_ioc, resolve_listen(main_ioc, settings.admin, "admin"),
                                admin_state, context.edge,
                                {admin_tls ? &admin_tls->server() : nullptr, &admin_handshakes});
    admin::readiness_probe probe(
        main_ioc, settings.upstream.host, std::to_string(settings.upstream.port),
        settings.readiness.probe_interval, settings.timeouts.upstream_connect, upstream_ready);
    if (pool_settings.tls) {
        // Its own context: one shared with the workers' handshakes races inside OpenSSL
        // (ThreadSanitizer, integration.upstream_tls).
        probe.use_tls(upstream_tls_context(settings.upstream_tls, false),
                      pool_settings.tls_server_name);
    }
    std::optional<spool_health> health;
    if (m.usage.spool) {
        health.emplace(main_ioc, *m.usage.spool, m.usage.shipper.get(), m.billing_metrics,
                       spool_failing, m.usage.unacknowledged_at_start);
    }
    // SIGHUP: reload what can change in place; streams are not touched.
    reload_signal hangups(main_ioc, settings, reload,
                          {&m.tenants, &registry, &m.edge_metrics, [&tls, &admin_tls, &m] {
                               each_present([](tls_watch& w) { w.reload("SIGHUP"); }, tls,
                                            admin_tls);
                               if (m.otel.exporter) {
                                   if (auto e = m.otel.exporter->reload_tls(); !e.empty()) {
                                       spdlog::error("otel exporter: {}; the CAs in use stay", e);
                                   }
                               }
                               if (m.usage.shipper) {
                                   if (auto e = m.usage.shipper->reload_tls(); !e.empty()) {
                                       spdlog::error("usage shipper: {}; the CAs in use stay", e);
                                   }
                               }
                           }});
    drain_controller drain(
        main_ioc, settings.timeouts.drain, context.draining, context.requests_in_flight,
        {[&] {
             exiting = true;
             proxy_listener.stop();
             workers.close_idle();
         },
         [&] {
             probe.stop();
             hangups.stop();
             each_present([](auto& part) { part.stop(); }, health, tls, admin_tls);
             admin.stop();
             drain.stop();
             workers.stop();
             main_ioc.stop();
         },
         [&context] { return context.tunnels.load(std::memory_order_relaxed); },
         [&workers] { workers.close_tunnels(); }});

    workers.start();
    admin.start();
    proxy_listener.start();
    hangups.start();
    each_present([](auto& part) { part.start(); }, tls, admin_tls);
    drain.start();
    probe.start();
    each_present([](auto& part) { part.start(); }, health);
    announce(settings, proxy_listener.local_endpoint(), admin.local_endpoint(), threads_chosen);

    run_loop(main_ioc, context.edge);
    workers.stop();
    // The requests the workers handed to the planning thread (each posts back to its stopped
    // worker and is dropped with it), then the ends they handed to the finishing thread, before
    // the limits and the spool stop.
    m.planner.stop();
    m.finisher.stop();
    if (m.otel.exporter) {
        m.otel.exporter->stop();
    }
    m.shared_limits.stop();
    // Last commit; sessions destroyed from here on write their close entries synchronously.
    m.usage.stop();
    // Sessions still alive are destroyed with their io_contexts after this and may log, so the
    // logger stays up; flush what is written so far.
    spdlog::default_logger()->flush();
    return 0;
} catch (const start_up_error& e) {
    return e.report();
} catch (const std::exception& e) {
    return start_up_error(e.what()).report();
}

}  // namespace tokenmeter::app
