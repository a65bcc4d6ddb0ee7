#include "outbound/redis_connection.hpp"

#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "net/tls_client.hpp"
#include "net/tls_stream.hpp"

namespace tokenmeter::outbound {

using observe::store_failure;
using observe::store_reply;

namespace {

void log_callback_failure(const char* what) noexcept {
    try {
        spdlog::error("shared limit: a callback failed: {}", what);
    } catch (...) {
        // Nothing is left to tell it with.
    }
}

}  // namespace

pending_call::pending_call(asio::io_context& ioc, observe::shared_call c,
                           std::function<void(const store_reply&)> d, clock_type::time_point at)
    : call(std::move(c)), done(std::move(d)), started(at), timer(ioc.get_executor()) {}

void pending_call::finish(store_reply reply) noexcept {
    if (finished) {
        return;
    }
    finished = true;
    try {
        timer.cancel();
    } catch (...) {
        // The timer's own failure changes nothing: `finished` already keeps it from answering.
    }
    reply.seconds = std::chrono::duration<double>(clock_type::now() - started).count();
    try {
        done(reply);
    } catch (const std::exception& e) {
        log_callback_failure(e.what());
    } catch (...) {
        log_callback_failure("an unknown exception");
    }
    done = nullptr;
}

void pending_call::fail(store_failure failure) noexcept {
    store_reply reply;
    reply.failure = failure;
    finish(reply);
}

// One TCP (or TLS) connection's life: its socket, what is being written, and the reader of what
// comes back. Handlers hold it, so it outlives the operations still queued after a close.
struct redis_connection::link {
    link(asio::io_context& ioc, ssl::context* tls, const resp::limits& bounds, std::uint64_t n)
        : id(n), parser(bounds) {
        if (tls != nullptr) {
            secure = std::make_unique<ssl::stream<socket_type>>(ioc.get_executor(), *tls);
        } else {
            plain.emplace(ioc.get_executor());
        }
    }
    socket_type& socket() { return secure ? secure->next_layer() : *plain; }
    template <class Operation>
    void with_stream(Operation&& operation) {
        if (secure) {
            operation(*secure);
        } else {
            operation(*plain);
        }
    }

    std::uint64_t id;
    std::optional<socket_type> plain;
    std::unique_ptr<ssl::stream<socket_type>> secure;
    resp::parser parser;
    std::array<char, 16'384> buffer{};
    std::string queued;   // commands written after the write in progress
    std::string writing;  // the write in progress
    bool write_busy = false;
    bool script_error_logged = false;
};

redis_connection::redis_connection(asio::io_context& ioc, const redis_settings& settings,
                                   const std::string& sha, std::uint64_t seed)
    : ioc_(ioc),
      settings_(settings),
      sha_(sha),
      resolver_(ioc.get_executor()),
      deadline_(ioc.get_executor()),
      retry_(ioc.get_executor()),
      backoff_(settings.reconnect_initial, settings.reconnect_max, seed),
      random_(seed ^ 0x9e3779b97f4a7c15ULL) {}

redis_connection::~redis_connection() = default;

bool redis_connection::ready() const noexcept {
    return phase_ == phase::ready && link_ != nullptr;
}

std::string redis_connection::where() const {
    return settings_.host + ":" + std::to_string(settings_.port);
}

void redis_connection::connect() {
    if (closing_ || link_) {
        return;
    }
    resp::limits bounds;
    bounds.max_reply_bytes = settings_.max_reply_bytes;
    bounds.max_elements = settings_.max_reply_elements;
    auto l = std::make_shared<link>(ioc_, settings_.tls.get(), bounds, next_link_id_++);
    link_ = l;
    phase_ = phase::connecting;
    answered_ = false;
    deadline_.expires_after(std::max(settings_.connect_timeout, settings_.timeout));
    deadline_.async_wait([self = shared_from_this(), l](const error_code& ec) {
        if (!ec && self->link_ == l && self->phase_ != phase::ready) {
            self->drop("no answer within the connect timeout", close_kind::fault);
        }
    });
    resolver_.async_resolve(
        settings_.host, std::to_string(settings_.port),
        [self = shared_from_this(), l](const error_code& ec,
                                       const asio::ip::basic_resolver_results<tcp>& endpoints) {
            self->on_resolved(l, ec, endpoints);
        });
}

void redis_connection::on_resolved(const std::shared_ptr<link>& l, const error_code& ec,
                                   const asio::ip::basic_resolver_results<tcp>& endpoints) {
    if (link_ != l) {
        return;
    }
    if (ec) {
        drop("cannot resolve " + settings_.host + ": " + ec.message(), close_kind::fault);
        return;
    }
    asio::async_connect(l->socket(), endpoints,
                        [self = shared_from_this(), l](const error_code& e, const tcp::endpoint&) {
                            self->on_connected(l, e);
                        });
}

void redis_connection::on_connected(const std::shared_ptr<link>& l, const error_code& ec) {
    if (link_ != l) {
        return;
    }
    if (ec) {
        drop("connect failed: " + ec.message(), close_kind::fault);
        return;
    }
    error_code ignored;
    l->socket().set_option(tcp::no_delay(true), ignored);
    if (!l->secure) {
        start_session(l);
        return;
    }
    SSL* ssl = l->secure->native_handle();
    // The shared client context offers ALPN http/1.1; Redis speaks none.
    SSL_set_alpn_protos(ssl, nullptr, 0);
    std::string error;
    if (!net::prepare_tls_client(
            ssl, settings_.server_name.empty() ? settings_.host : settings_.server_name, error)) {
        drop("TLS: " + error, close_kind::fault);
        return;
    }
    l->secure->async_handshake(
        ssl::stream_base::client, [self = shared_from_this(), l](const error_code& e) {
            if (self->link_ != l) {
                return;
            }
            if (e) {
                self->drop("TLS handshake failed: " +
                               net::describe_tls_client_error(e, l->secure->native_handle()),
                           close_kind::fault);
                return;
            }
            self->start_session(l);
        });
}

void redis_connection::start_session(const std::shared_ptr<link>& l) {
    phase_ = phase::probing;
    read(l);
    if (!settings_.password.empty()) {
        waiting_.push_back({nullptr, waiting::what::auth});
        write(l, auth_command(settings_.username, settings_.password));
    }
    static constexpr std::string_view hex = "0123456789abcdef";
    probe_token_.assign(16, '0');
    for (char& c : probe_token_) {
        c = hex[random_() & 0x0f];
    }
    waiting_.push_back({nullptr, waiting::what::probe});
    write(l, probe_command(probe_token_));
}

void redis_connection::read(const std::shared_ptr<link>& l) {
    l->with_stream([&](auto& stream) {
        stream.async_read_some(asio::buffer(l->buffer),
                               [self = shared_from_this(), l](const error_code& ec, std::size_t n) {
                                   self->on_read(l, ec, n);
                               });
    });
}

void redis_connection::on_read(const std::shared_ptr<link>& l, const error_code& ec,
                               std::size_t n) {
    if (link_ != l) {
        return;
    }
    if (ec) {
        drop(ec == asio::error::eof ? std::string("the server closed the connection")
                                    : "read failed: " + ec.message(),
             close_kind::fault);
        return;
    }
    try {
        std::string_view bytes(l->buffer.data(), n);
        while (!bytes.empty() && link_ == l) {
            bytes.remove_prefix(l->parser.feed(bytes));
            if (l->parser.has_reply()) {
                on_reply(l, l->parser.take_reply());
            } else if (l->parser.error() != resp::parse_error::none) {
                drop("a reply broke the protocol: " +
                         std::string(resp::to_string(l->parser.error())),
                     close_kind::violation);
                return;
            }
        }
    } catch (const std::exception& e) {
        // Out of memory while reading a reply within the bounds: this connection goes.
        drop(std::string("reading a reply failed: ") + e.what(), close_kind::violation);
        return;
    }
    if (link_ == l) {
        read(l);
    }
}

void redis_connection::on_reply(const std::shared_ptr<link>& l, const resp::value& reply) {
    if (waiting_.empty()) {
        // What it said is not logged: only that it was said.
        drop("a reply nobody asked for (" + std::string(resp::to_string(reply.type)) + ")",
             close_kind::violation);
        return;
    }
    const waiting w = std::move(waiting_.front());
    waiting_.pop_front();
    switch (w.kind) {
        case waiting::what::auth:
            switch (read_auth_reply(reply)) {
                case auth_verdict::accepted:
                    return;
                case auth_verdict::refused: {
                    // Only the code: the rest of the server's text may echo the password.
                    const std::string_view code = error_code_word(reply.text);
                    if (!down_logged_) {
                        spdlog::warn(
                            "shared limit: Redis at {} refused AUTH ({}); check username and "
                            "password_env/password_file; retrying with backoff",
                            where(),
                            code.empty() ? std::string_view("an error without a code") : code);
                        down_logged_ = true;
                    }
                    drop("AUTH refused", close_kind::fault);
                    return;
                }
                case auth_verdict::wrong_type:
                    drop("an answer to AUTH that is neither OK nor an error",
                         close_kind::violation);
                    return;
            }
            return;
        case waiting::what::probe:
            if (!probe_in_step(reply, probe_token_)) {
                drop("replies out of step with the commands (a reply nobody asked for)",
                     close_kind::violation);
                return;
            }
            phase_ = phase::ready;
            deadline_.cancel();
            if (down_logged_) {
                spdlog::info("shared limit: Redis at {} reachable again{}", where(),
                             l->secure ? " (TLS)" : "");
                down_logged_ = false;
            } else {
                spdlog::debug("shared limit: connected to Redis at {}{}", where(),
                              l->secure ? " (TLS)" : "");
            }
            return;
        case waiting::what::call:
            on_call_reply(l, w.call, reply);
            return;
    }
}

void redis_connection::on_call_reply(const std::shared_ptr<link>& l,
                                     const std::shared_ptr<pending_call>& call,
                                     const resp::value& reply) {
    const script_outcome outcome = read_script_outcome(reply, call->tag);
    if (outcome.out_of_step) {
        // Another call's answer: the server answered some command twice, and every reply from
        // here on would be one call late. This call fails; the connection goes.
        call->finish(outcome.reply);
        drop("replies out of step with the commands (a reply carrying another call's tag)",
             close_kind::violation);
        return;
    }
    if (!call->finished) {
        answered_ = true;
    }
    if (outcome.noscript && !call->sent_script && !call->finished) {
        call->sent_script = true;
        send(call);
        return;
    }
    if (reply.type == resp::kind::error && !l->script_error_logged) {
        const std::string_view code = error_code_word(reply.text);
        spdlog::warn("shared limit: Redis at {} answered the bucket script with an error ({})",
                     where(), code.empty() ? std::string_view("without a code") : code);
        l->script_error_logged = true;
    }
    call->finish(outcome.reply);
}

void redis_connection::send(const std::shared_ptr<pending_call>& call) {
    if (!ready() || waiting_.size() >= settings_.max_in_flight) {
        call->fail(store_failure::connection);
        return;
    }
    call->connection = weak_from_this();
    call->link_id = link_->id;
    call->tag = std::to_string(++tags_sent_);
    waiting_.push_back({call, waiting::what::call});
    write(link_, script_command(call->call, sha_, call->sent_script, call->tag));
}

void redis_connection::write(const std::shared_ptr<link>& l, std::string_view bytes) {
    l->queued += bytes;
    flush(l);
}

void redis_connection::flush(const std::shared_ptr<link>& l) {
    if (l->write_busy || l->queued.empty()) {
        return;
    }
    l->writing.clear();
    l->writing.swap(l->queued);
    l->write_busy = true;
    l->with_stream([&](auto& stream) {
        asio::async_write(stream, asio::buffer(l->writing),
                          [self = shared_from_this(), l](const error_code& ec, std::size_t) {
                              l->write_busy = false;
                              if (self->link_ != l) {
                                  return;
                              }
                              if (ec) {
                                  self->drop("write failed: " + ec.message(), close_kind::fault);
                                  return;
                              }
                              self->flush(l);
                          });
    });
}

void redis_connection::timed_out(std::uint64_t link_id) {
    if (link_ && link_->id == link_id) {
        drop("a call got no answer within the timeout", close_kind::fault);
    }
}

void redis_connection::drop(std::string_view why, close_kind kind) {
    const std::shared_ptr<link> l = std::exchange(link_, nullptr);
    if (!l) {
        return;
    }
    error_code ignored;
    l->socket().close(ignored);
    resolver_.cancel();
    deadline_.cancel();
    phase_ = phase::down;
    // Only a connection that answered a call in time, lost for a reason that is not the
    // server's broken promise, starts the backoff over.
    if (answered_ && kind == close_kind::fault) {
        backoff_.reset();
    }
    answered_ = false;
    log_down(why);
    std::deque<waiting> orphans;
    orphans.swap(waiting_);
    for (const waiting& w : orphans) {
        if (w.call) {
            w.call->fail(store_failure::connection);
        }
    }
    if (!closing_) {
        reconnect_later();
    }
}

void redis_connection::reconnect_later() {
    const std::chrono::milliseconds wait = backoff_.next();
    spdlog::debug("shared limit: reconnecting to Redis at {} in {} ms", where(), wait.count());
    retry_.expires_after(wait);
    retry_.async_wait([self = shared_from_this()](const error_code& ec) {
        if (!ec && !self->closing_ && !self->link_) {
            self->connect();
        }
    });
}

void redis_connection::log_down(std::string_view why) {
    if (closing_) {
        return;
    }
    if (!down_logged_) {
        spdlog::warn(
            "shared limit: Redis at {} unavailable ({}); on_error decides until it is back",
            where(), why);
        down_logged_ = true;
        return;
    }
    spdlog::debug("shared limit: Redis at {}: {}", where(), why);
}

void redis_connection::close() {
    closing_ = true;
    retry_.cancel();
    drop("closing", close_kind::fault);
}

}  // namespace tokenmeter::outbound
