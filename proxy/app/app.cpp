#include "app/app.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <iostream>
#include <list>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "app/tokenizers.hpp"
#include "core/time.hpp"
#include "http/admin.hpp"
#include "http/beast.hpp"
#include "http/headers.hpp"
#include "http/proxy_context.hpp"
#include "http/proxy_session.hpp"
#include "http/upstream_pool.hpp"
#include "metrics/registry.hpp"

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
                        share_connections, share_idle, settings.timeout.upstream_connect,
                        settings.pool.idle_keepalive, settings.pool.acquire_timeout}) {}

    session_registry sessions;  // declared first: outlives the sessions the io_context owns
    asio::io_context ioc{1};
    upstream_pool pool;
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
    std::thread thread;
};

tcp::endpoint resolve_listen(asio::io_context& ioc, const config::endpoint& endpoint) {
    tcp::resolver resolver(ioc);
    auto results =
        resolver.resolve(endpoint.host, std::to_string(endpoint.port), tcp::resolver::passive);
    return results.begin()->endpoint();
}

std::string describe(const tcp::endpoint& endpoint) {
    std::ostringstream out;
    out << endpoint;
    return out.str();
}

void configure_logging(const config::logging& log) {
    auto logger = spdlog::stderr_color_mt("tokenmeter");
    spdlog::set_default_logger(logger);
    spdlog::set_level(spdlog::level::from_str(log.level));
    if (log.format == "json") {
        spdlog::set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","msg":"%v"})",
                            spdlog::pattern_time_type::utc);
    } else {
        spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
    }
}

}  // namespace

int run(const config::settings& settings) {
    configure_logging(settings.log);

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
    metrics::registry registry(settings.metric, settings.slo);
    proxy_context context{settings, registry, clock};
    context.tokenizers = tokenizers.value.get();
    if (settings.tokens.count_input_tokens == "always") {
        context.input_counting = meter::input_counting::always;
    } else if (settings.tokens.count_input_tokens == "never") {
        context.input_counting = meter::input_counting::never;
    }
    context.exchange_limits.max_sse_event_bytes = settings.limit.max_sse_event_bytes;
    context.exchange_limits.max_buffered_response_bytes =
        settings.limit.max_buffered_response_bytes;

    // Workers are declared before the main io_context so they outlive it: a pending accept on
    // the main context owns a socket bound to a worker's context.
    std::list<worker> workers;
    asio::io_context main_ioc{1};
    std::atomic<bool> upstream_ready{false};

    tcp::acceptor acceptor(main_ioc);
    std::unique_ptr<admin_listener> admin;
    http::admin_state admin_state{registry, context.draining, upstream_ready};
    try {
        auto listen_endpoint = resolve_listen(main_ioc, settings.listen);
        acceptor.open(listen_endpoint.protocol());
        acceptor.set_option(asio::socket_base::reuse_address(true));
        acceptor.bind(listen_endpoint);
        acceptor.listen(asio::socket_base::max_listen_connections);
        admin = std::make_unique<admin_listener>(main_ioc, resolve_listen(main_ioc, settings.admin),
                                                 admin_state);
    } catch (const boost::system::system_error& e) {
        spdlog::critical("cannot listen: {}", e.what());
        std::fprintf(stderr, "tokenmeter: cannot listen: %s\n", e.what());
        return 1;
    }

    std::uint32_t share = std::max(1u, (settings.pool.max_connections + threads - 1) / threads);
    std::uint32_t idle_share =
        std::max(1u, (settings.pool.max_idle_connections + threads - 1) / threads);
    for (std::uint32_t i = 0; i < threads; ++i) {
        workers.emplace_back(settings, share, idle_share);
    }
    std::vector<worker*> ring;
    for (auto& w : workers) {
        ring.push_back(&w);
    }

    // Accept on the main thread, hand each connection to the next worker.
    std::size_t next_worker = 0;
    std::function<void()> do_accept;
    do_accept = [&] {
        worker& target = *ring[next_worker];
        next_worker = (next_worker + 1) % ring.size();
        acceptor.async_accept(target.ioc, [&, &target = target](error_code ec, socket_type socket) {
            if (ec == asio::error::operation_aborted || !acceptor.is_open()) {
                return;
            }
            if (!ec) {
                asio::post(target.ioc, [&target, &context, s = std::move(socket)]() mutable {
                    std::make_shared<proxy_session>(std::move(s), context, target.pool,
                                                    target.sessions)
                        ->start();
                });
            } else {
                spdlog::warn("accept failed: {}", ec.message());
            }
            do_accept();
        });
    };

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
                    probe_timer.expires_after(settings.ready.probe_interval);
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
                stream->expires_after(settings.timeout.upstream_connect);
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

    // Drain: stop accepting, fail /readyz, let in-flight streams finish, then stop.
    asio::signal_set signals(main_ioc, SIGTERM, SIGINT);
    asio::steady_timer drain_timer(main_ioc);
    std::chrono::steady_clock::time_point drain_deadline{};
    std::function<void()> check_drained;
    auto stop_everything = [&] {
        probe_timer.cancel();
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
                     settings.timeout.drain.count());
        context.draining = true;
        error_code ignored;
        acceptor.close(ignored);
        for (auto& w : workers) {
            asio::post(w.ioc, [&w] {
                w.sessions.close_idle();
                w.pool.close_idle();
            });
        }
        drain_deadline = std::chrono::steady_clock::now() + settings.timeout.drain;
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
        w.thread = std::thread([&w] { w.ioc.run(); });
    }
    admin->start();
    do_accept();
    probe();

    auto listen_text = describe(acceptor.local_endpoint());
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

    main_ioc.run();
    for (auto& w : workers) {
        w.guard.reset();
        w.ioc.stop();
        if (w.thread.joinable()) {
            w.thread.join();
        }
    }
    // Sessions still alive are destroyed with their io_contexts after this and may log, so the
    // logger stays up; flush what is written so far.
    spdlog::default_logger()->flush();
    return 0;
}

}  // namespace tokenmeter::app
