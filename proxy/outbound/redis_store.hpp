// outbound/redis_store: the shared-limit store on Redis (observe::shared_store). A bounded pool of
// hiredis connections on one thread of its own; calls are pipelined on a connection (hiredis
// writes each command at once and matches replies in order), spread round-robin. Each call is
// EVALSHA of the bucket script, and EVAL once when the server answers NOSCRIPT. Every call ends
// within the timeout: a timer answers `timeout` when Redis is slow, a connection that is down
// answers `connection` at once and reconnects in the background, never blocking a worker.
#pragma once

#include <hiredis/async.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net/beast.hpp"
#include "observe/shared_limit.hpp"

namespace tokenmeter::outbound {

struct redis_settings {
    std::string host = "127.0.0.1";
    std::uint16_t port = 6379;
    std::string username;  // "" with a password: AUTH <password>
    std::string password;  // "": no AUTH; never logged
    std::chrono::milliseconds timeout{50};
    std::uint32_t connections = 2;        // the pool
    std::uint32_t max_in_flight = 1'024;  // per connection; beyond: failure `connection`
};

class redis_connection;

class redis_store final : public observe::shared_store {
  public:
    explicit redis_store(redis_settings settings);
    ~redis_store() override;
    redis_store(const redis_store&) = delete;
    redis_store& operator=(const redis_store&) = delete;

    void start();
    // Ends the thread; calls not answered yet are dropped without their callbacks.
    void stop();
    void call(const observe::shared_call& call,
              std::function<void(const observe::store_reply&)> done) override;

  private:
    redis_settings settings_;
    std::string script_sha_;
    asio::io_context ioc_{1};
    asio::executor_work_guard<asio::io_context::executor_type> work_;
    std::vector<std::shared_ptr<redis_connection>> connections_;
    std::size_t next_ = 0;  // on the store's thread only
    std::thread thread_;
    bool stopped_ = false;
};

}  // namespace tokenmeter::outbound
