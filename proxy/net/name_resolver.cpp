#include "net/name_resolver.hpp"

#include <spdlog/spdlog.h>

#include <utility>

#include "core/thread_name.hpp"
#include "net/mailbox.hpp"

namespace tokenmeter::net {

name_resolver::name_resolver() : work_(asio::make_work_guard(ioc_)), resolver_(ioc_) {}

name_resolver::~name_resolver() {
    try {
        stop();
    } catch (const std::exception& e) {
        // The post or the join failed: the thread is still joinable, and std::thread's own
        // destructor ends the process, as it must with a thread left running on this object.
        spdlog::critical("upstream name resolver: cannot stop its thread: {}", e.what());
    }
}

void name_resolver::start() {
    if (thread_.joinable()) {
        return;
    }
    thread_ = std::thread([this] {
        core::name_this_thread("tm-resolver");
        for (;;) {
            try {
                ioc_.run();
                return;
            } catch (const std::exception& e) {
                spdlog::error("upstream name resolver: {}", e.what());
            }
        }
    });
}

void name_resolver::stop() {
    if (!thread_.joinable()) {
        return;
    }
    asio::post(ioc_, [this] {
        work_.reset();
        ioc_.stop();
    });
    thread_.join();
}

void name_resolver::resolve(std::string host, std::string port, asio::io_context& back,
                            reply done) {
    asio::post(ioc_, [this, host = std::move(host), port = std::move(port), &back,
                      done = std::move(done)]() mutable {
        error_code ec;
        // Blocking, on this thread only: getaddrinfo (bounded by the system resolver's own
        // timeouts, as Asio's asynchronous resolve is).
        results_type results = resolver_.resolve(host, port, ec);
        post_from_any_thread(back, [done = std::move(done), ec, results = std::move(results)] {
            done(ec, results);
        });
    });
}

}  // namespace tokenmeter::net
