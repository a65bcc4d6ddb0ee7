#include "app/app.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <list>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "app/module_options.hpp"
#include "app/reload_signal.hpp"
#include "app/tokenizers.hpp"
#include "config/reload.hpp"
#include "core/time.hpp"
#include "http/admin.hpp"
#include "http/beast.hpp"
#include "http/headers.hpp"
#include "http/listener.hpp"
#include "http/proxy_context.hpp"
#include "http/proxy_session.hpp"
#include "http/upstream_pool.hpp"
#include "http/usage_shipper.hpp"
#include "metrics/billing.hpp"
#include "metrics/process.hpp"
#include "metrics/registry.hpp"
#include "metrics/tokenizer_info.hpp"
#include "protocol/json_limits.hpp"
#include "usage/record.hpp"
#include "usage/spool.hpp"
#include "usage/tenant.hpp"
#include "usage/throughput.hpp"

namespace tokenmeter::app {
namespace {

using namespace tokenmeter::http;

// One io_context per thread: a connection lives on one worker, with its own upstream pool,
// so nothing on the per-chunk path takes a lock.
struct worker {
    worker(const config::settings& settings, std::uint32_t share_connections,
           std::uint32_t share_idle)
        : pool(ioc, upstream_pool_settings{
                        settings.upstream.host, std::to_string(settings.upstream.port),
                        share_connections, share_idle, settings.timeouts.upstream_connect,
                        settings.upstream_pool.idle_keepalive,
                        settings.upstream_pool.acquire_timeout}) {}

    session_registry sessions;  // declared first: outlives the sessions the io_context owns
    asio::io_context ioc{1};
    upstream_pool pool;
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
    std::thread thread;
};

tcp::endpoint resolve_listen(asio::io_context& ioc, const config::endpoint& endpoint,
                             const char* what) {
    tcp::resolver resolver(ioc);
    error_code ec;
    auto results =
        resolver.resolve(endpoint.host, std::to_string(endpoint.port), tcp::resolver::passive, ec);
    if (ec || results.empty()) {
        throw std::runtime_error(std::string("cannot resolve the ") + what + " address " +
                                 endpoint.host + ":" + std::to_string(endpoint.port) + ": " +
                                 (ec ? ec.message() : std::string("no address")));
    }
    return results.begin()->endpoint();
}

// The last line of defence: a handler that throws past every guard ends nothing but itself.
// Asio lets run() be called again after an exception without restart().
void run_loop(asio::io_context& ioc, http::edge_counters& edge) {
    for (;;) {
        try {
            ioc.run();
            return;
        } catch (const std::exception& e) {
            edge.internal_error(e.what());
        } catch (...) {
            edge.internal_error("unknown exception");
        }
    }
}

// Descriptors kept back from client connections (two each: client and upstream) for the admin
// listener, the usage spool, tokenizer files and the readiness probe.
constexpr std::uint64_t reserved_descriptors = 64;

std::int64_t client_connection_budget(std::uint64_t open_files_limit) {
    if (open_files_limit <= 2 * reserved_descriptors) {
        return 8;
    }
    const std::uint64_t budget = (open_files_limit - reserved_descriptors) / 2;
    return static_cast<std::int64_t>(std::min<std::uint64_t>(budget, 1u << 30));
}

std::string describe(const tcp::endpoint& endpoint) {
    std::ostringstream out;
    out << endpoint;
    return out.str();
}

void configure_logging(const config::log_settings& log) {
    auto logger = spdlog::stderr_color_mt("tokenmeter");
    spdlog::set_default_logger(logger);
    spdlog::set_level(spdlog::level::from_str(std::string(config::to_string(log.level))));
    if (log.format == config::log_format::json) {
        spdlog::set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","msg":"%v"})",
                            spdlog::pattern_time_type::utc);
    } else {
        spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
    }
}

}  // namespace

int run(const config::settings& settings, const reloader& reload) {
    configure_logging(settings.log);
    // A client that hangs up mid-write costs an EPIPE on its own socket, never the process.
    std::signal(SIGPIPE, SIG_IGN);
    const auto [files_before, files_after] = raise_open_files_limit();
    spdlog::info("open-files limit: {} (soft limit was {}); at most {} client connections at once",
                 files_after, files_before, client_connection_budget(files_after));
    protocol::set_max_json_depth(settings.limits.max_json_depth);

    std::uint32_t threads = settings.threads != 0
                                ? settings.threads
                                : std::max(1u, std::thread::hardware_concurrency());
    core::steady_clock_source clock;
    auto tokenizers = load_tokenizers(settings);
    for (const auto& warning : tokenizers.warnings) {
        spdlog::warn("{}", warning);
    }
    if (!tokenizers.value) {
        for (const auto& e : tokenizers.errors) {
            spdlog::critical("{}: {}", e.key, e.message);
            std::fprintf(stderr, "tokenmeter: %s: %s\n", e.key.c_str(), e.message.c_str());
        }
        return 1;
    }
    for (const auto& line : describe_tokenizers(*tokenizers.value)) {
        spdlog::info("{}", line);
    }
    metrics::registry registry(registry_options(settings), slo_options(settings));
    metrics::register_tokenizer_info(*registry.prometheus_registry(),
                                     tokenizers.value->entries());
    proxy_context context{settings, registry, clock};
    metrics::process_metrics process_metrics(*registry.prometheus_registry());
    metrics::edge_metrics edge_metrics(*registry.prometheus_registry());
    context.edge.attach(&edge_metrics);
    context.tokenizers = tokenizers.value.get();
    context.input_counting = input_counting(settings);
    context.exchange_limits.max_sse_event_bytes = settings.limits.max_sse_event_bytes;
    context.exchange_limits.max_buffered_response_bytes =
        settings.limits.max_buffered_response_bytes;

    // Tenants and usage records. Declared before the workers: sessions use them until the last
    // one is destroyed, and a session destroyed at shutdown still writes its close entry.
    std::string secret_error;
    const std::string tenant_secret =
        usage::load_tenant_secret(tenant_options(settings), secret_error);
    if (!secret_error.empty()) {
        spdlog::critical("{}", secret_error);
        std::fprintf(stderr, "tokenmeter: %s\n", secret_error.c_str());
        return 1;
    }
    usage::tenant_resolver tenants(tenant_options(settings), tenant_secret);
    usage::provisioned_throughput throughput(throughput_options(settings));
    usage::id_generator ids;
    metrics::billing_metrics billing_metrics(registry, billing_options(settings));
    context.billing.tenants = &tenants;
    context.billing.throughput = &throughput;
    context.billing.ids = &ids;
    context.billing.metrics = &billing_metrics;
    std::atomic<bool> spool_failing{false};
    std::uint64_t unacknowledged_at_start = 0;
    std::unique_ptr<usage_shipper> shipper;  // before the spool: the spool's commits wake it
    std::unique_ptr<usage::spool_writer> spool;
    const auto& usage_settings = settings.usage;
    if (!usage_settings.spool_dir.empty()) {
        // A file-size limit must fail the write (EFBIG, counted and retried), not kill the
        // process with SIGXFSZ in the middle of everyone's streams.
        std::signal(SIGXFSZ, SIG_IGN);
        try {
            spool = std::make_unique<usage::spool_writer>(
                usage::spool_options{usage_settings.spool_dir, usage_settings.fsync_interval,
                                     usage_settings.segment_bytes,
                                     usage_settings.max_pending_bytes},
                [](const std::string& message) { spdlog::error("{}", message); });
        } catch (const std::exception& e) {
            spdlog::critical("{}", e.what());
            std::fprintf(stderr, "tokenmeter: %s\n", e.what());
            return 1;
        }
        const std::filesystem::path dir(usage_settings.spool_dir);
        if (!usage_settings.sink.url.empty()) {
            unacknowledged_at_start =
                usage::count_records_after(dir, usage::read_cursor(dir).value_or(usage::cursor{}));
        }
        // Every stream a previous process left open (it was killed) becomes a record now,
        // before any new traffic, with the same id and its last checkpointed counts.
        // Only segments since the last completed recovery can hold unclosed opens.
        auto recovery = usage::find_unclosed(dir, usage::read_recovery_mark(dir).value_or(0));
        for (const auto& record : recovery.recovered) {
            spool->append(usage::encode_close(record), true);
        }
        if (!spool->flush()) {
            spdlog::error(
                "usage spool: the {} recovered records could not be written yet; "
                "they stay queued and are retried",
                recovery.recovered.size());
        } else if (!usage::write_recovery_mark(dir, spool->first_segment())) {
            spdlog::warn(
                "usage spool: cannot write the recovery mark in {}; the next start "
                "reads more segments than needed",
                usage_settings.spool_dir);
        }
        spdlog::info(
            "usage spool {}: {} segment(s), {} record(s), {} recovered as crash_recovered, {} "
            "malformed line(s), {} cut tail(s)",
            usage_settings.spool_dir, recovery.segments, recovery.records,
            recovery.recovered.size(), recovery.counts.malformed, recovery.counts.partial_tail);
        context.billing.spool = spool.get();
        context.billing.hold_until_durable = usage_settings.hold_until_durable;
        context.billing.checkpoint_interval = usage_settings.checkpoint_interval;
        if (!usage_settings.sink.url.empty()) {
            shipper = std::make_unique<usage_shipper>(dir, usage_settings.sink);
            spool->set_on_commit([s = shipper.get()] { s->wake(); });
            shipper->start();
        }
    }

    // Workers are declared before the main io_context so they outlive it: a pending accept on
    // the main context owns a socket bound to a worker's context.
    std::list<worker> workers;
    asio::io_context main_ioc{1};
    std::atomic<bool> upstream_ready{false};

    std::unique_ptr<listener> proxy_listener;
    std::unique_ptr<admin_listener> admin;
    http::admin_state admin_state{registry, context.draining, upstream_ready};
    admin_state.before_scrape = [&process_metrics] { process_metrics.update(); };
    admin_state.requests_in_flight = &context.requests_in_flight;
    if (usage_settings.readyz_fail_on_spool_error) {
        admin_state.spool_failing = &spool_failing;
    }
    std::vector<worker*> ring;
    std::size_t next_worker = 0;
    const std::int64_t fd_budget = client_connection_budget(files_after);
    const std::int64_t max_clients = settings.limits.max_client_connections;
    // Accept on the main thread, hand each connection to the next worker.
    auto pick = [&]() -> asio::io_context& {
        worker& target = *ring[next_worker];
        next_worker = (next_worker + 1) % ring.size();
        return target.ioc;
    };
    auto accepted = [&](socket_type socket, asio::io_context& ioc) {
        worker* target = nullptr;
        for (worker* w : ring) {
            if (&w->ioc == &ioc) {
                target = w;
            }
        }
        if (max_clients > 0 &&
            context.client_connections.load(std::memory_order_relaxed) >= max_clients) {
            context.edge.connection_refused();
            asio::post(ioc, [s = std::move(socket)]() mutable {
                refuse_connection(std::move(s), "too_many_connections",
                                  "the proxy is at limits.max_client_connections; retry shortly");
            });
            return;
        }
        // Counted here, not when the worker gets to it, so the limits above see it at once.
        context.client_connections.fetch_add(1, std::memory_order_relaxed);
        asio::post(ioc, [target, &context, s = std::move(socket)]() mutable {
            std::make_shared<proxy_session>(std::move(s), context, target->pool, target->sessions)
                ->start();
        });
    };
    // Before the descriptors run out, stop taking connections (they wait in the backlog) rather
    // than fail accept() in a loop; the reserve keeps /metrics and the spool working.
    auto at_capacity = [&] {
        return context.client_connections.load(std::memory_order_relaxed) >= fd_budget;
    };
    try {
        proxy_listener = std::make_unique<listener>(
            main_ioc, "proxy", resolve_listen(main_ioc, settings.listen, "proxy"), context.edge,
            pick, accepted, at_capacity);
        admin = std::make_unique<admin_listener>(
            main_ioc, resolve_listen(main_ioc, settings.admin, "admin"), admin_state, context.edge);
    } catch (const std::exception& e) {
        spdlog::critical("{}", e.what());
        std::fprintf(stderr, "tokenmeter: %s\n", e.what());
        return 1;
    }

    std::uint32_t share =
        std::max(1u, (settings.upstream_pool.max_connections + threads - 1) / threads);
    std::uint32_t idle_share =
        std::max(1u, (settings.upstream_pool.max_idle_connections + threads - 1) / threads);
    for (std::uint32_t i = 0; i < threads; ++i) {
        workers.emplace_back(settings, share, idle_share);
    }
    for (auto& w : workers) {
        ring.push_back(&w);
    }

    // Readiness: can a TCP connection to the upstream be opened?
    asio::steady_timer probe_timer(main_ioc);
    std::function<void()> probe;
    probe = [&] {
        auto stream = std::make_shared<beast::tcp_stream>(main_ioc);
        auto resolver = std::make_shared<tcp::resolver>(main_ioc);
        resolver->async_resolve(
            settings.upstream.host, std::to_string(settings.upstream.port),
            [&, stream, resolver](error_code ec, tcp::resolver::results_type results) {
                auto rearm = [&] {
                    probe_timer.expires_after(settings.readiness.probe_interval);
                    probe_timer.async_wait([&](error_code wait_ec) {
                        if (!wait_ec) {
                            probe();
                        }
                    });
                };
                if (ec) {
                    upstream_ready = false;
                    rearm();
                    return;
                }
                stream->expires_after(settings.timeouts.upstream_connect);
                stream->async_connect(
                    results, [&, stream, rearm](error_code connect_ec, const tcp::endpoint&) {
                        bool ready = !connect_ec;
                        if (ready != upstream_ready.load()) {
                            spdlog::info("upstream {} {}", ready ? "reachable" : "unreachable",
                                         connect_ec ? connect_ec.message() : "");
                        }
                        upstream_ready = ready;
                        error_code ignored;
                        stream->socket().close(ignored);
                        rearm();
                    });
            });
    };

    // Usage spool and shipper health into the gauges (and /readyz), twice a second.
    asio::steady_timer usage_timer(main_ioc);
    std::uint64_t spool_errors_seen = 0;
    std::uint64_t ship_errors_seen = 0;
    std::function<void()> update_usage;
    update_usage = [&] {
        if (!spool) {
            return;
        }
        auto stats = spool->stats();
        billing_metrics.add_spool_errors(stats.errors - spool_errors_seen);
        spool_errors_seen = stats.errors;
        spool_failing = stats.failing;
        std::uint64_t pending = 0;
        double oldest_age = 0;
        if (shipper) {
            std::uint64_t written = unacknowledged_at_start + stats.closes_durable;
            std::uint64_t acked = shipper->acknowledged();
            pending = written > acked ? written - acked : 0;
            billing_metrics.add_ship_errors(shipper->errors() - ship_errors_seen);
            ship_errors_seen = shipper->errors();
            auto oldest = shipper->oldest_unacknowledged_ms();
            if (pending > 0 && oldest > 0) {
                auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
                oldest_age = std::max<double>(0.0, static_cast<double>(now_ms - oldest) / 1000.0);
            }
        } else {
            pending = stats.appended - stats.durable;
            if (stats.pending_bytes > 0) {
                oldest_age = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                           stats.oldest_pending)
                                 .count();
            }
        }
        billing_metrics.set_spool(pending, oldest_age);
        usage_timer.expires_after(std::chrono::milliseconds(500));
        usage_timer.async_wait([&](error_code ec) {
            if (!ec) {
                update_usage();
            }
        });
    };

    // SIGHUP: reload what can change in place; streams are not touched.
    reload_signal hangups(main_ioc, settings, reload, {&tenants, &registry, &edge_metrics});

    // Drain: stop accepting, fail /readyz, let in-flight streams finish, then stop.
    asio::signal_set signals(main_ioc, SIGTERM, SIGINT);
    asio::steady_timer drain_timer(main_ioc);
    std::chrono::steady_clock::time_point drain_deadline{};
    std::function<void()> check_drained;
    auto stop_everything = [&] {
        probe_timer.cancel();
        usage_timer.cancel();
        hangups.stop();
        admin->stop();
        for (auto& w : workers) {
            w.guard.reset();
            w.ioc.stop();
        }
        main_ioc.stop();
    };
    check_drained = [&] {
        auto in_flight = context.requests_in_flight.load();
        if (in_flight == 0) {
            spdlog::info("drained; exiting");
            stop_everything();
            return;
        }
        if (std::chrono::steady_clock::now() >= drain_deadline) {
            spdlog::warn("drain timeout with {} requests in flight; exiting", in_flight);
            stop_everything();
            return;
        }
        drain_timer.expires_after(std::chrono::milliseconds(20));
        drain_timer.async_wait([&](error_code ec) {
            if (!ec) {
                check_drained();
            }
        });
    };
    signals.async_wait([&](error_code ec, int signal_number) {
        if (ec) {
            return;
        }
        spdlog::info("signal {}: draining (up to {} ms)", signal_number,
                     settings.timeouts.drain.count());
        context.draining = true;
        proxy_listener->stop();
        for (auto& w : workers) {
            asio::post(w.ioc, [&w] {
                w.sessions.close_idle();
                w.pool.close_idle();
            });
        }
        drain_deadline = std::chrono::steady_clock::now() + settings.timeouts.drain;
        // A second signal cuts the drain short.
        signals.async_wait([&](error_code second_ec, int) {
            if (!second_ec) {
                spdlog::warn("second signal: exiting now");
                stop_everything();
            }
        });
        check_drained();
    });

    for (auto& w : workers) {
        w.guard.emplace(w.ioc.get_executor());
        w.thread = std::thread([&w, &context] { run_loop(w.ioc, context.edge); });
    }
    admin->start();
    proxy_listener->start();
    hangups.start();
    probe();
    update_usage();

    auto listen_text = describe(proxy_listener->local_endpoint());
    auto admin_text = describe(admin->local_endpoint());
    std::string upstream_text =
        "http://" + upstream_host_header(settings.upstream) + settings.upstream.base_path;
    std::printf("tokenmeter listening: proxy=%s admin=%s upstream=%s\n", listen_text.c_str(),
                admin_text.c_str(), upstream_text.c_str());
    std::fflush(stdout);
    spdlog::info(
        "proxy on {}, admin on {} (/metrics /healthz /readyz), upstream {}, {} worker "
        "thread(s)",
        listen_text, admin_text, upstream_text, threads);

    run_loop(main_ioc, context.edge);
    for (auto& w : workers) {
        w.guard.reset();
        w.ioc.stop();
        if (w.thread.joinable()) {
            w.thread.join();
        }
    }
    // Last commit; sessions destroyed from here on write their close entries synchronously.
    if (spool) {
        spool->stop();
    }
    if (shipper) {
        shipper->stop();
    }
    // Sessions still alive are destroyed with their io_contexts after this and may log, so the
    // logger stays up; flush what is written so far.
    spdlog::default_logger()->flush();
    return 0;
}

}  // namespace tokenmeter::app
