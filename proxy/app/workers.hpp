// app/workers: the worker threads. One io_context per thread; a connection lives on one worker
// with that worker's own upstream pool, so nothing on the per-chunk path takes a lock. The
// acceptor (main thread) hands each connection to the next worker in turn, through the worker's
// mailbox (net/mailbox), as everything else that reaches a worker from another thread does.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <thread>
#include <vector>

#include "net/beast.hpp"
#include "net/listener.hpp"
#include "net/name_resolver.hpp"
#include "relay/proxy_context.hpp"
#include "relay/upstream_pool.hpp"

namespace tokenmeter::net {
class tls_server;
}  // namespace tokenmeter::net

namespace tokenmeter::app {

class worker_pool {
  public:
    // `pool` is the whole process's upstream pool; each worker gets its share of the caps.
    worker_pool(std::uint32_t threads, const relay::upstream_pool_settings& pool,
                relay::proxy_context& context, std::int64_t max_client_connections);
    // From now on every client handshakes TLS with `tls`'s current context (before start()).
    void serve_tls(const net::tls_server* tls) noexcept { tls_ = tls; }
    worker_pool(const worker_pool&) = delete;
    worker_pool& operator=(const worker_pool&) = delete;
    ~worker_pool();

    // The io_context that gets the next connection (round robin; called on the acceptor).
    asio::io_context& next();
    // Serves an accepted connection on `ioc` (one of next()'s), or refuses it with 503 when
    // limits.max_client_connections is reached.
    void serve(net::accepted_descriptor handed, asio::io_context& ioc);
    void start();
    // Drain: closes the connections waiting for a request and the idle upstream connections.
    void close_idle();
    // The end of the drain window: every WebSocket tunnel is closed with 1001 (Going Away).
    void close_tunnels();
    // Stops the event loops (in-flight work is abandoned) and joins the threads. Idempotent.
    void stop();
    // The workers' upstream pools, summed as each last published its sizes (any thread).
    [[nodiscard]] relay::upstream_pool::counts upstream_totals() const noexcept;

  private:
    struct worker {
        worker(const relay::upstream_pool_settings& settings, net::name_resolver& names)
            : pool(ioc, settings, names) {}
        relay::session_registry sessions;  // declared first: outlives the sessions ioc owns
        // No locks in Asio at all: not in the scheduler (each handler run, each trip through
        // the reactor), not in the reactor's I/O (its per-socket operation queues), not in its
        // registrations and timers. Everything of this context is registered, armed, used and
        // closed on its thread only: the acceptor hands each connection over as a bare
        // descriptor that this thread registers (serve()); when the acceptor registered it here
        // itself, ThreadSanitizer found a real race on the reactor's pooled per-socket state.
        // Other threads reach this context only through its mailbox (net/mailbox), installed
        // before the thread starts; Asio's resolver, which answers through the scheduler's lock,
        // is replaced by the pool's name_resolver.
        asio::io_context ioc{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE};
        relay::upstream_pool pool;
        // The idle trim: armed and run on the worker's thread (see arm_idle_trim).
        steady_timer trim{ioc};
        std::uint64_t started_at_tick = 0;  // worker_activity::started at the last tick
        bool trimmed = false;               // trimmed since its last request
        std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
        std::thread thread;
    };

    // Every idle_trim_interval, on the worker's thread: a worker that began no request since the
    // last tick and has none in flight gives back what it keeps between requests (the
    // tokenizer's piece memo, spare relay buffers, its allocator heap's free pages), once per
    // idle spell. A burst leaves each worker's heap large; on a node with many workers that is
    // most of the process' memory.
    static constexpr std::chrono::seconds idle_trim_interval{5};
    static void arm_idle_trim(worker& w);

    // Host names for every worker's pool; stopped before the workers (its answers go to their
    // mailboxes), so declared before them and stopped explicitly.
    net::name_resolver resolver_;
    relay::proxy_context& context_;
    std::int64_t max_clients_;
    const net::tls_server* tls_ = nullptr;
    std::list<worker> workers_;
    std::vector<worker*> ring_;
    std::size_t next_ = 0;
    bool stopped_ = false;
};

// Runs `ioc` until it stops. A handler that throws past every guard ends nothing but itself:
// it is counted, and run() is called again.
void run_loop(asio::io_context& ioc, net::edge_counters& edge);

}  // namespace tokenmeter::app
