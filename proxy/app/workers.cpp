#include "app/workers.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "app/allocator.hpp"
#include "core/thread_name.hpp"
#include "net/listener.hpp"
#include "net/mailbox.hpp"
#include "net/tls_server.hpp"
#include "relay/client_connection.hpp"
#include "relay/relay_buffer.hpp"
#include "relay/worker_activity.hpp"
#include "tokenizer/tokenizer.hpp"

namespace tokenmeter::app {

worker_pool::worker_pool(std::uint32_t threads, const relay::upstream_pool_settings& pool,
                         relay::proxy_context& context, std::int64_t max_client_connections)
    : context_(context), max_clients_(max_client_connections) {
    threads = std::max(1u, threads);
    relay::upstream_pool_settings share = pool;
    // 0 stays 0 (no cap): each worker then opens what its requests need.
    share.max_connections = pool.max_connections == 0
                                ? 0
                                : std::max(1u, (pool.max_connections + threads - 1) / threads);
    share.max_idle = pool.max_idle == 0 ? 0 : std::max(1u, (pool.max_idle + threads - 1) / threads);
    for (std::uint32_t i = 0; i < threads; ++i) {
        worker& w = workers_.emplace_back(share, resolver_);
        // Before any thread runs it: the mailbox registers its eventfd with the reactor.
        net::mailbox::install(w.ioc);
        ring_.push_back(&w);
    }
}

worker_pool::~worker_pool() {
    try {
        stop();
    } catch (const std::exception& e) {
        // A worker thread that cannot be joined is still running on this object: std::thread's
        // destructor ends the process, as it must.
        spdlog::critical("workers: cannot stop: {}", e.what());
    }
}

relay::upstream_pool::counts worker_pool::upstream_totals() const noexcept {
    relay::upstream_pool::counts total;
    for (const worker& w : workers_) {
        const relay::upstream_pool::counts one = w.pool.published();
        total.open += one.open;
        total.idle += one.idle;
        total.waiting += one.waiting;
    }
    return total;
}

asio::io_context& worker_pool::next() {
    worker& target = *ring_[next_];
    next_ = (next_ + 1) % ring_.size();
    return target.ioc;
}

void worker_pool::serve(net::accepted_descriptor handed, asio::io_context& ioc) {
    auto found =
        std::find_if(ring_.begin(), ring_.end(), [&](worker* w) { return &w->ioc == &ioc; });
    if (found == ring_.end()) {
        return;  // not one of ours: the descriptor closes
    }
    worker* target = *found;
    // The descriptor joins the worker's reactor on the worker's thread: the workers' reactors
    // take no per-socket locks (see worker::ioc).
    if (max_clients_ > 0 &&
        context_.client_connections.load(std::memory_order_relaxed) >= max_clients_) {
        context_.edge.connection_refused();
        net::post_from_any_thread(ioc, [&ioc, h = std::move(handed)]() mutable {
            if (auto s = h.take(ioc)) {
                net::refuse_connection(
                    std::move(*s), "too_many_connections",
                    "the proxy is at limits.max_client_connections; retry shortly");
            }
        });
        return;
    }
    // Counted here, not when the worker gets to it, so the limit above sees it at once.
    context_.client_connections.fetch_add(1, std::memory_order_relaxed);
    // A descriptor the worker cannot take is no connection: uncounted again there.
    if (tls_ != nullptr) {
        // The context current now; a certificate reload after this affects later connections.
        net::post_from_any_thread(
            ioc, [target, this, h = std::move(handed), tls = tls_->current()]() mutable {
                auto s = h.take(target->ioc);
                if (!s) {
                    context_.client_connections.fetch_sub(1, std::memory_order_relaxed);
                    return;
                }
                std::make_shared<relay::client_connection<net::tls_stream>>(
                    net::tls_stream(std::move(*s), *tls), context_, target->pool, target->sessions)
                    ->start();
            });
        return;
    }
    net::post_from_any_thread(ioc, [target, this, h = std::move(handed)]() mutable {
        auto s = h.take(target->ioc);
        if (!s) {
            context_.client_connections.fetch_sub(1, std::memory_order_relaxed);
            return;
        }
        std::make_shared<relay::client_connection<tcp_stream>>(tcp_stream(std::move(*s)), context_,
                                                               target->pool, target->sessions)
            ->start();
    });
}

void worker_pool::start() {
    resolver_.start();
    std::size_t index = 0;
    for (auto& w : workers_) {
        w.guard.emplace(w.ioc.get_executor());
        w.thread = std::thread([&w, this, index] {
            core::name_this_thread("tm-worker-" + std::to_string(index));
            arm_idle_trim(w);
            run_loop(w.ioc, context_.edge);
        });
        ++index;
    }
}

void worker_pool::arm_idle_trim(worker& w) {
    w.trim.expires_after(idle_trim_interval);
    w.trim.async_wait([&w](error_code ec) {
        if (ec) {
            return;
        }
        const relay::worker_activity& activity = relay::worker_activity::for_thread();
        const bool idle = activity.in_flight == 0 && activity.started == w.started_at_tick;
        w.started_at_tick = activity.started;
        if (!idle) {
            w.trimmed = false;
        } else if (!w.trimmed) {
            w.trimmed = true;
            tokenizer::release_thread_caches();
            relay::relay_buffer_pool::for_thread().release_spares();
            release_thread_memory();
            spdlog::debug("worker idle: its caches and free heap pages given back");
        }
        arm_idle_trim(w);
    });
}

void worker_pool::close_idle() {
    for (auto& w : workers_) {
        net::post_from_any_thread(w.ioc, [&w] {
            w.sessions.close_idle();
            w.pool.close_idle();
        });
    }
}

void worker_pool::close_tunnels() {
    for (auto& w : workers_) {
        net::post_from_any_thread(w.ioc, [&w] { w.sessions.close_tunnels(); });
    }
}

void worker_pool::stop() {
    if (stopped_) {
        return;
    }
    stopped_ = true;
    // First the resolver, which answers into the workers' mailboxes.
    resolver_.stop();
    for (auto& w : workers_) {
        // On the worker's own thread: its io_context takes no lock (see worker::ioc).
        net::post_from_any_thread(w.ioc, [&w] {
            w.guard.reset();
            w.ioc.stop();
        });
    }
    for (auto& w : workers_) {
        if (w.thread.joinable()) {
            w.thread.join();
        }
    }
}

void run_loop(asio::io_context& ioc, net::edge_counters& edge) {
    // Asio lets run() be called again after an exception without restart().
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

}  // namespace tokenmeter::app
