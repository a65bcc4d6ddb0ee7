// net/name_resolver: the upstream's host name resolved off the event loops, for the workers.
//
// Asio's own resolver answers through the scheduler's lock, which the workers' io_contexts run
// without (net/mailbox), so it refuses to start there. This one resolves on a thread of its
// own, one name at a time (as Asio does, with one getaddrinfo thread per context), and posts
// each answer back through the asking worker's mailbox. An IP literal needs none of this: the
// pool builds its endpoint once (upstream_pool).
#pragma once

#include <functional>
#include <string>
#include <thread>

#include "net/beast.hpp"

namespace tokenmeter::net {

class name_resolver {
  public:
    using results_type = tcp::resolver::results_type;
    // Runs on the thread that runs the io_context given to resolve(). It may be destroyed on the
    // resolver's thread unrun (at stop()): it must own nothing that lives on a worker.
    using reply = std::function<void(error_code, results_type)>;

    name_resolver();
    ~name_resolver();
    name_resolver(const name_resolver&) = delete;
    name_resolver& operator=(const name_resolver&) = delete;

    void start();
    // Ends the thread; resolutions not yet answered are dropped. Idempotent.
    void stop();

    // From a worker: resolves host:port, then runs `done` on `back`'s thread.
    void resolve(std::string host, std::string port, asio::io_context& back, reply done);

  private:
    asio::io_context ioc_{1};
    asio::executor_work_guard<asio::io_context::executor_type> work_;
    tcp::resolver resolver_;
    std::thread thread_;
};

}  // namespace tokenmeter::net
