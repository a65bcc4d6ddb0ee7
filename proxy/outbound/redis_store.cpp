#include "outbound/redis_store.hpp"

#include <openssl/sha.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <random>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/thread_name.hpp"
#include "outbound/redis_connection.hpp"

namespace tokenmeter::outbound {
namespace {

std::string sha1_hex(std::string_view text) {
    std::array<unsigned char, SHA_DIGEST_LENGTH> digest{};
    SHA1(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest.data());
    static constexpr std::string_view hex = "0123456789abcdef";
    std::string out;
    out.reserve(std::size_t{2} * SHA_DIGEST_LENGTH);
    for (unsigned char byte : digest) {
        out.push_back(hex[byte >> 4]);
        out.push_back(hex[byte & 0x0f]);
    }
    return out;
}

}  // namespace

struct redis_store::state {
    explicit state(redis_settings s)
        : settings(std::move(s)),
          script_sha(sha1_hex(observe::shared_limit_script())),
          work(asio::make_work_guard(ioc)) {
        std::random_device entropy;
        for (std::uint32_t i = 0; i < std::max<std::uint32_t>(1, settings.connections); ++i) {
            const std::uint64_t seed = (std::uint64_t{entropy()} << 32) ^ entropy();
            connections.push_back(
                std::make_shared<redis_connection>(ioc, settings, script_sha, seed));
        }
    }

    // On the store's thread: a connection that is up, round-robin, or the call fails at once.
    void route(const std::shared_ptr<pending_call>& pending) {
        for (std::size_t tried = 0; tried < connections.size(); ++tried) {
            auto& c = connections[next++ % connections.size()];
            if (c->ready() && c->in_flight() < settings.max_in_flight) {
                c->send(pending);
                return;
            }
        }
        pending->fail(observe::store_failure::connection);
    }

    void run() {
        // A handler that throws must not end the thread: every later call would go unanswered.
        for (;;) {
            try {
                ioc.run();
                return;
            } catch (const std::exception& e) {
                spdlog::error("shared limit: the Redis thread caught: {}", e.what());
            } catch (...) {
                spdlog::error("shared limit: the Redis thread caught an unknown exception");
            }
        }
    }

    redis_settings settings;
    std::string script_sha;
    asio::io_context ioc{1};
    asio::executor_work_guard<asio::io_context::executor_type> work;
    std::vector<std::shared_ptr<redis_connection>> connections;
    std::size_t next = 0;  // on the store's thread only
    std::thread thread;
    bool stopped = false;
};

redis_store::redis_store(redis_settings settings)
    : state_(std::make_unique<state>(std::move(settings))) {}

redis_store::~redis_store() {
    try {
        stop();
    } catch (const std::exception& e) {
        spdlog::error("shared limit: stopping the Redis thread failed: {}", e.what());
    }
}

void redis_store::start() {
    state& s = *state_;
    asio::post(s.ioc, [&s] {
        for (auto& c : s.connections) {
            c->connect();
        }
    });
    s.thread = std::thread([&s] {
        core::name_this_thread("tm-redis");
        s.run();
    });
}

void redis_store::stop() {
    state& s = *state_;
    if (s.stopped) {
        return;
    }
    s.stopped = true;
    if (s.thread.joinable()) {
        asio::post(s.ioc, [&s] {
            for (auto& c : s.connections) {
                c->close();
            }
            s.work.reset();
            s.ioc.stop();
        });
        s.thread.join();
    }
}

void redis_store::call(const observe::shared_call& call,
                       std::function<void(const observe::store_reply&)> done) {
    state& s = *state_;
    auto pending = std::make_shared<pending_call>(s.ioc, call, std::move(done),
                                                  pending_call::clock_type::now());
    asio::post(s.ioc, [&s, pending] {
        pending->timer.expires_at(pending->started + s.settings.timeout);
        pending->timer.async_wait([pending](const error_code& ec) {
            if (ec) {
                return;
            }
            pending->fail(observe::store_failure::timeout);
            // An answer that is late may never come: the connection it was sent on goes.
            if (auto c = pending->connection.lock()) {
                c->timed_out(pending->link_id);
            }
        });
        s.route(pending);
    });
}

}  // namespace tokenmeter::outbound
