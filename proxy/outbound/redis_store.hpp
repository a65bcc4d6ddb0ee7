// outbound/redis_store: the shared-limit store on Redis (observe::shared_store). A bounded pool
// of connections (outbound/redis_connection) on one thread of its own; calls are pipelined on a
// connection and spread round-robin over the connections that are up. Each call is EVALSHA of
// the bucket script, and EVAL once when the server answers NOSCRIPT. Every call ends within the
// timeout: a timer answers `timeout` when Redis is slow (and closes that connection), a
// connection that is down answers `connection` at once and reconnects in the background, never
// blocking a worker.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "observe/shared_limit.hpp"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace tokenmeter::outbound {

struct redis_settings {
    std::string host = "127.0.0.1";
    std::uint16_t port = 6379;
    // rediss://: a verifying client context (net::load_tls_client_context); null: plain TCP.
    std::shared_ptr<boost::asio::ssl::context> tls;
    std::string server_name;  // TLS: SNI and the name the certificate must carry; "": host
    std::string username;     // "" with a password: AUTH <password>
    std::string password;     // "": no AUTH; never logged
    std::chrono::milliseconds timeout{50};
    std::uint32_t connections = 2;              // the pool
    std::uint32_t max_in_flight = 1'024;        // per connection; beyond: failure `connection`
    std::uint64_t max_reply_bytes = 1'048'576;  // one reply (1 MiB); more closes the connection
    std::uint32_t max_reply_elements = 1'024;   // array members in one reply
    // Reconnect waits: exponential with full jitter from `reconnect_initial` up to
    // `reconnect_max`, back to the start once a connection has answered a call.
    std::chrono::milliseconds reconnect_initial{100};
    std::chrono::milliseconds reconnect_max{10'000};
    // Resolving, connecting, TLS and AUTH together; at least this long, or `timeout` if longer.
    std::chrono::milliseconds connect_timeout{1'000};
};

class redis_store final : public observe::shared_store {
  public:
    explicit redis_store(redis_settings settings);
    ~redis_store() override;
    redis_store(const redis_store&) = delete;
    redis_store& operator=(const redis_store&) = delete;

    void start();
    // Ends the thread. Calls sent and not answered yet fail `connection`; calls not yet taken
    // up by the thread are dropped without their callbacks.
    void stop();
    void call(const observe::shared_call& call,
              std::function<void(const observe::store_reply&)> done) override;

  private:
    struct state;
    std::unique_ptr<state> state_;
};

}  // namespace tokenmeter::outbound
