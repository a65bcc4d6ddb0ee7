#include "outbound/redis_store.hpp"

#include <hiredis/hiredis.h>
#include <openssl/sha.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string_view>
#include <utility>

#include "outbound/redis_asio.hpp"

namespace tokenmeter::outbound {
namespace {

using observe::store_failure;
using observe::store_reply;
using clock_type = std::chrono::steady_clock;

std::string sha1_hex(std::string_view text) {
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * SHA_DIGEST_LENGTH);
    for (unsigned char byte : digest) {
        out.push_back(hex[byte >> 4]);
        out.push_back(hex[byte & 0x0f]);
    }
    return out;
}

}  // namespace

// One call from the moment a worker asked until its callback ran: answered, timed out or failed.
struct pending_call {
    pending_call(asio::io_context& ioc, observe::shared_call c,
                 std::function<void(const store_reply&)> d, clock_type::time_point at)
        : call(std::move(c)), done(std::move(d)), started(at), timer(ioc.get_executor()) {}

    void finish(store_reply reply) noexcept {
        if (finished) {
            return;
        }
        finished = true;
        timer.cancel();
        reply.seconds = std::chrono::duration<double>(clock_type::now() - started).count();
        try {
            done(reply);
        } catch (const std::exception& e) {
            spdlog::error("shared limit: a callback failed: {}", e.what());
        } catch (...) {
            spdlog::error("shared limit: a callback failed");
        }
        done = nullptr;
    }
    void fail(store_failure failure) noexcept {
        store_reply reply;
        reply.failure = failure;
        finish(reply);
    }

    observe::shared_call call;
    std::function<void(const store_reply&)> done;
    clock_type::time_point started;
    steady_timer timer;
    bool finished = false;
    bool sent_script = false;  // the EVAL fallback after NOSCRIPT was used
};

// One connection of the pool: connects, authenticates, pipelines script calls, reconnects.
// Everything runs on the store's thread.
class redis_connection : public std::enable_shared_from_this<redis_connection> {
  public:
    redis_connection(asio::io_context& ioc, const redis_settings& settings, const std::string& sha)
        : ioc_(ioc), settings_(settings), sha_(sha), retry_(ioc.get_executor()) {}

    [[nodiscard]] bool ready() const noexcept { return ready_ && context_ != nullptr; }
    [[nodiscard]] std::size_t in_flight() const noexcept { return in_flight_; }

    void connect() {
        if (closing_) {
            return;
        }
        redisAsyncContext* context =
            redisAsyncConnect(settings_.host.c_str(), static_cast<int>(settings_.port));
        if (context == nullptr || context->err != 0) {
            log_down(context != nullptr ? context->errstr : "out of memory");
            if (context != nullptr) {
                redisAsyncFree(context);
            }
            reconnect_later();
            return;
        }
        if (!redis_asio_adapter::attach(ioc_, context)) {
            redisAsyncFree(context);
            reconnect_later();
            return;
        }
        context_ = context;
        context->data = this;
        redisAsyncSetConnectCallback(context, &redis_connection::on_connect);
        redisAsyncSetDisconnectCallback(context, &redis_connection::on_disconnect);
        // hiredis has no connect timeout of its own: give up on a silent address in time.
        retry_.expires_after(
            std::max<clock_type::duration>(settings_.timeout, std::chrono::seconds(1)));
        retry_.async_wait([self = shared_from_this(), context](const error_code& ec) {
            if (!ec && self->context_ == context && !self->ready_) {
                self->context_ = nullptr;
                context->data = nullptr;
                redisAsyncFree(context);
                self->log_down("connect timed out");
                self->reconnect_later();
            }
        });
    }

    void send(const std::shared_ptr<pending_call>& call) {
        if (!ready() || in_flight_ >= settings_.max_in_flight) {
            call->fail(store_failure::connection);
            return;
        }
        const std::vector<std::string> args = observe::script_arguments(call->call);
        std::vector<const char*> argv;
        std::vector<std::size_t> lengths;
        const std::string_view script = observe::shared_limit_script();
        argv.push_back(call->sent_script ? "EVAL" : "EVALSHA");
        if (call->sent_script) {
            argv.push_back(script.data());
            lengths = {4, script.size()};
        } else {
            argv.push_back(sha_.c_str());
            lengths = {7, sha_.size()};
        }
        argv.push_back("1");
        lengths.push_back(1);
        argv.push_back(call->call.key.c_str());
        lengths.push_back(call->call.key.size());
        for (const auto& a : args) {
            argv.push_back(a.c_str());
            lengths.push_back(a.size());
        }
        auto* holder = new std::shared_ptr<pending_call>(call);
        if (redisAsyncCommandArgv(context_, &redis_connection::on_reply, holder,
                                  static_cast<int>(argv.size()), argv.data(),
                                  lengths.data()) != REDIS_OK) {
            delete holder;
            call->fail(store_failure::connection);
            return;
        }
        ++in_flight_;
    }

    void close() {
        closing_ = true;
        retry_.cancel();
        if (context_ != nullptr) {
            redisAsyncContext* context = std::exchange(context_, nullptr);
            // Pending replies are called back with no reply: each call fails `connection`.
            redisAsyncFree(context);
        }
        ready_ = false;
    }

  private:
    static redis_connection* of(const redisAsyncContext* context) {
        return static_cast<redis_connection*>(context->data);
    }

    static void on_connect(const redisAsyncContext* context, int status) {
        redis_connection* self = of(context);
        if (self == nullptr) {
            return;
        }
        if (status != REDIS_OK) {
            // hiredis frees the context after this callback.
            self->context_ = nullptr;
            self->log_down(context->errstr);
            self->reconnect_later();
            return;
        }
        self->retry_.cancel();
        self->backoff_ = initial_backoff;
        if (self->down_logged_) {
            spdlog::info("shared limit: Redis at {}:{} reachable again", self->settings_.host,
                         self->settings_.port);
            self->down_logged_ = false;
        }
        if (!self->settings_.password.empty()) {
            self->authenticate();
        }
        // Commands sent from now on are pipelined behind AUTH.
        self->ready_ = true;
    }

    static void on_disconnect(const redisAsyncContext* context, int /*status*/) {
        redis_connection* self = of(context);
        if (self == nullptr) {
            return;
        }
        self->context_ = nullptr;
        self->ready_ = false;
        if (!self->closing_) {
            self->log_down(context->errstr != nullptr && context->err != 0 ? context->errstr
                                                                           : "connection closed");
            self->reconnect_later();
        }
    }

    void authenticate() {
        std::vector<const char*> argv{"AUTH"};
        std::vector<std::size_t> lengths{4};
        if (!settings_.username.empty()) {
            argv.push_back(settings_.username.c_str());
            lengths.push_back(settings_.username.size());
        }
        argv.push_back(settings_.password.c_str());
        lengths.push_back(settings_.password.size());
        redisAsyncCommandArgv(context_, &redis_connection::on_auth, nullptr,
                              static_cast<int>(argv.size()), argv.data(), lengths.data());
    }

    static void on_auth(redisAsyncContext* context, void* raw, void* /*privdata*/) {
        auto* reply = static_cast<redisReply*>(raw);
        redis_connection* self = of(context);
        if (reply == nullptr || self == nullptr || reply->type != REDIS_REPLY_ERROR) {
            return;
        }
        // The server's words only (never the password): e.g. WRONGPASS.
        spdlog::warn("shared limit: Redis refused AUTH: {}",
                     std::string_view(reply->str, reply->len));
        self->ready_ = false;
        redisAsyncDisconnect(context);
    }

    static void on_reply(redisAsyncContext* context, void* raw, void* privdata) {
        std::unique_ptr<std::shared_ptr<pending_call>> holder(
            static_cast<std::shared_ptr<pending_call>*>(privdata));
        const std::shared_ptr<pending_call>& call = *holder;
        redis_connection* self = of(context);
        if (self != nullptr) {
            --self->in_flight_;
        }
        auto* reply = static_cast<redisReply*>(raw);
        if (reply == nullptr) {
            call->fail(store_failure::connection);
            return;
        }
        if (call->finished) {
            return;  // answered too late: the timeout already decided
        }
        if (reply->type == REDIS_REPLY_ERROR) {
            const std::string_view text(reply->str, reply->len);
            if (text.starts_with("NOSCRIPT") && !call->sent_script && self != nullptr) {
                call->sent_script = true;
                self->send(call);
                return;
            }
            spdlog::debug("shared limit: script error: {}", text);
            call->fail(store_failure::script);
            return;
        }
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
            reply->element[0]->type != REDIS_REPLY_INTEGER ||
            reply->element[1]->type != REDIS_REPLY_STRING) {
            call->fail(store_failure::reply);
            return;
        }
        call->finish(observe::read_script_reply(
            reply->element[0]->integer,
            std::string_view(reply->element[1]->str, reply->element[1]->len)));
    }

    void log_down(const char* why) {
        if (!down_logged_) {
            spdlog::warn(
                "shared limit: Redis at {}:{} unreachable ({}); the local bucket decides "
                "until it is back",
                settings_.host, settings_.port, why != nullptr ? why : "unknown");
            down_logged_ = true;
        }
    }

    void reconnect_later() {
        ready_ = false;
        if (closing_) {
            return;
        }
        retry_.expires_after(backoff_);
        backoff_ = std::min(backoff_ * 2, max_backoff);
        retry_.async_wait([self = shared_from_this()](const error_code& ec) {
            if (!ec && self->context_ == nullptr) {
                self->connect();
            }
        });
    }

    static constexpr std::chrono::milliseconds initial_backoff{100};
    static constexpr std::chrono::milliseconds max_backoff{2'000};

    asio::io_context& ioc_;
    const redis_settings& settings_;
    const std::string& sha_;
    steady_timer retry_;  // reconnect backoff, or the connect deadline
    redisAsyncContext* context_ = nullptr;
    bool ready_ = false;
    bool closing_ = false;
    bool down_logged_ = false;
    std::size_t in_flight_ = 0;
    std::chrono::milliseconds backoff_ = initial_backoff;
};

redis_store::redis_store(redis_settings settings)
    : settings_(std::move(settings)),
      script_sha_(sha1_hex(observe::shared_limit_script())),
      work_(asio::make_work_guard(ioc_)) {
    for (std::uint32_t i = 0; i < std::max<std::uint32_t>(1, settings_.connections); ++i) {
        connections_.push_back(std::make_shared<redis_connection>(ioc_, settings_, script_sha_));
    }
}

redis_store::~redis_store() {
    stop();
}

void redis_store::start() {
    asio::post(ioc_, [this] {
        for (auto& c : connections_) {
            c->connect();
        }
    });
    thread_ = std::thread([this] {
        try {
            ioc_.run();
        } catch (const std::exception& e) {
            spdlog::error("shared limit: the Redis thread stopped: {}", e.what());
        }
    });
}

void redis_store::stop() {
    if (stopped_) {
        return;
    }
    stopped_ = true;
    if (thread_.joinable()) {
        asio::post(ioc_, [this] {
            for (auto& c : connections_) {
                c->close();
            }
            work_.reset();
            ioc_.stop();
        });
        thread_.join();
    }
}

void redis_store::call(const observe::shared_call& call,
                       std::function<void(const store_reply&)> done) {
    auto pending = std::make_shared<pending_call>(ioc_, call, std::move(done), clock_type::now());
    asio::post(ioc_, [this, pending] {
        pending->timer.expires_at(pending->started + settings_.timeout);
        pending->timer.async_wait([pending](const error_code& ec) {
            if (!ec) {
                pending->fail(store_failure::timeout);
            }
        });
        // Round-robin over the connections that are up; none up: fail at once.
        for (std::size_t tried = 0; tried < connections_.size(); ++tried) {
            auto& c = connections_[next_++ % connections_.size()];
            if (c->ready() && c->in_flight() < settings_.max_in_flight) {
                c->send(pending);
                return;
            }
        }
        pending->fail(store_failure::connection);
    });
}

}  // namespace tokenmeter::outbound
