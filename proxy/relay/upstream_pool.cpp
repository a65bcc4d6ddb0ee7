#include "relay/upstream_pool.hpp"

#include <charconv>
#include <utility>

#include "net/direct_io.hpp"

namespace tokenmeter::relay {
namespace {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-virtual-dtor"
// One static instance, never deleted through the base (Boost's error_category destructor is
// protected and non-virtual).
// NOLINTNEXTLINE(cppcoreguidelines-virtual-class-destructor)
class pool_category_impl final : public boost::system::error_category {
  public:
    const char* name() const noexcept override { return "tokenmeter.upstream_pool"; }
    std::string message(int ev) const override {
        switch (static_cast<pool_errc>(ev)) {
            case pool_errc::exhausted:
                return "no upstream connection became free in time";
            case pool_errc::shutting_down:
                return "upstream pool is shutting down";
        }
        return "unknown upstream pool error";
    }
};
// One static instance, never deleted through the base (Boost's error_category destructor is
// protected and non-virtual).
// NOLINTNEXTLINE(cppcoreguidelines-virtual-class-destructor)
class upstream_category_impl final : public boost::system::error_category {
  public:
    const char* name() const noexcept override { return "tokenmeter.upstream"; }
    std::string message(int ev) const override {
        switch (static_cast<upstream_errc>(ev)) {
            case upstream_errc::switched_protocols:
                return "the upstream answered 101 Switching Protocols, which the proxy never asks "
                       "for";
            case upstream_errc::too_many_interim:
                return "the upstream sent too many interim (1xx) responses";
        }
        return "unknown upstream error";
    }
};
#pragma GCC diagnostic pop

// An idle keep-alive connection the server has closed reads as EOF (or has unexpected bytes).
bool looks_alive(upstream_connection& connection) {
    auto& socket = connection.stream.socket();
    if (!socket.is_open()) {
        return false;
    }
    // Nothing to read yet is the only healthy answer: EOF means the server closed it, and
    // bytes before a request was sent mean the connection is out of step.
    return net::direct_io::peek(socket.native_handle()) == net::direct_io::peek_result::nothing_yet;
}

}  // namespace

const boost::system::error_category& upstream_category() noexcept {
    static const upstream_category_impl category;
    return category;
}

const boost::system::error_category& pool_category() noexcept {
    static const pool_category_impl category;
    return category;
}

upstream_pool::upstream_pool(asio::io_context& ioc, upstream_pool_settings settings,
                             net::name_resolver& names)
    : ioc_(ioc), settings_(std::move(settings)), names_(names), hangups_(ioc) {
    error_code ec;
    const asio::ip::address address = asio::ip::make_address(settings_.host, ec);
    std::uint16_t port = 0;
    const auto* first = settings_.port.data();
    const auto* last = first + settings_.port.size();
    const auto parsed = std::from_chars(first, last, port);
    if (!ec && parsed.ec == std::errc() && parsed.ptr == last) {
        literal_ = tcp::resolver::results_type::create(tcp::endpoint(address, port), settings_.host,
                                                       settings_.port);
    }
}

upstream_ptr upstream_pool::take_idle() {
    auto now = std::chrono::steady_clock::now();
    while (!idle_.empty()) {
        upstream_ptr connection = std::move(idle_.back());
        idle_.pop_back();
        if (now - connection->idle_since < settings_.idle_keepalive && looks_alive(*connection)) {
            return connection;
        }
        error_code ignored;
        connection->stream.socket().close(ignored);
        --open_;
    }
    return nullptr;
}

void upstream_pool::acquire(bool allow_reuse, acquire_handler handler) {
    const publish_on_exit published{*this};
    if (allow_reuse) {
        if (upstream_ptr connection = take_idle()) {
            asio::post(ioc_, [h = std::move(handler), c = std::move(connection)]() mutable {
                h({}, std::move(c), true, {});
            });
            return;
        }
    }
    if (at_cap() && !idle_.empty()) {
        // Make room by closing an idle connection rather than making the caller wait.
        error_code ignored;
        idle_.front()->stream.socket().close(ignored);
        idle_.pop_front();
        --open_;
    }
    if (!at_cap()) {
        ++open_;
        connect(std::move(handler));
        return;
    }
    auto w = std::make_shared<waiter>(waiter{allow_reuse, std::move(handler),
                                             std::make_shared<steady_timer>(ioc_.get_executor())});
    w->timer->expires_after(settings_.acquire_timeout);
    w->timer->async_wait([this, weak = std::weak_ptr<waiter>(w)](error_code ec) {
        auto self = weak.lock();
        if (ec || !self || !self->handler) {
            return;
        }
        std::erase(waiters_, self);
        publish();
        auto h = std::move(self->handler);
        h(make_error_code(pool_errc::exhausted), nullptr, false, {});
    });
    waiters_.push_back(std::move(w));
}

void upstream_pool::fail_connect(acquire_handler& handler, error_code ec, std::string detail) {
    const publish_on_exit published{*this};
    --open_;
    auto h = std::move(handler);
    h(ec, nullptr, false, std::move(detail));
    serve_waiters();
}

void upstream_pool::connect(acquire_handler handler) {
    auto connection = std::make_unique<upstream_connection>(ioc_, settings_.tls.get());
    if (literal_) {
        connect_to(*literal_, std::move(handler), std::move(connection));
        return;
    }
    // The answer comes back on this thread by number: what it would otherwise carry (the
    // handler, the connection) stays here, off the resolver's thread.
    const std::uint64_t number = next_resolution_++;
    resolving_.emplace(number, resolving{std::move(handler), std::move(connection)});
    names_.resolve(settings_.host, settings_.port, ioc_,
                   [this, number](error_code ec, const tcp::resolver::results_type& results) {
                       auto found = resolving_.find(number);
                       if (found == resolving_.end()) {
                           return;
                       }
                       resolving waiting = std::move(found->second);
                       resolving_.erase(found);
                       if (ec) {
                           fail_connect(waiting.handler, ec);
                           return;
                       }
                       connect_to(results, std::move(waiting.handler),
                                  std::move(waiting.connection));
                   });
}

void upstream_pool::connect_to(const tcp::resolver::results_type& endpoints,
                               acquire_handler handler, upstream_ptr connection) {
    auto* raw = connection.get();
    // One deadline for the TCP connect and the TLS handshake.
    raw->stream.expires_after(settings_.connect_timeout);
    raw->stream.lowest().async_connect(
        endpoints, [this, h = std::move(handler), c = std::move(connection)](
                       error_code connect_ec, const tcp::endpoint&) mutable {
            if (connect_ec) {
                fail_connect(h, connect_ec);
                return;
            }
            error_code ignored;
            c->stream.socket().set_option(tcp::no_delay(true), ignored);
            if (c->stream.tls() != nullptr) {
                handshake(std::move(c), std::move(h));
                return;
            }
            c->stream.expires_never();
            h({}, std::move(c), false, {});
        });
}

void upstream_pool::handshake(upstream_ptr connection, acquire_handler handler) {
    net::tls_stream& tls = *connection->stream.tls();
    std::string error;
    if (!net::prepare_tls_client(tls.native_handle(), settings_.tls_server_name, error)) {
        fail_connect(handler, make_error_code(ssl::error::unspecified_system_error), error);
        return;
    }
    sessions_.attach(tls.native_handle());
    tls.async_handshake(
        ssl::stream_base::client,
        [this, h = std::move(handler), c = std::move(connection)](error_code ec) mutable {
            SSL* ssl = c->stream.tls()->native_handle();
            if (ec) {
                // A session the server no longer takes is not offered again.
                sessions_.forget();
                fail_connect(h, ec, net::describe_tls_client_error(ec, ssl));
                return;
            }
            if (settings_.on_tls_handshake) {
                settings_.on_tls_handshake(SSL_session_reused(ssl) == 1);
            }
            c->stream.expires_never();
            h({}, std::move(c), false, {});
        });
}

void upstream_pool::release(upstream_ptr connection, bool reusable) {
    if (!connection) {
        return;
    }
    const auto now = std::chrono::steady_clock::now();
    // The oldest idle connection, when it has outlived idle_keepalive, goes now: one looked at
    // per release keeps the idle list to what recent traffic used, with no timer of its own.
    if (!idle_.empty() && now - idle_.front()->idle_since >= settings_.idle_keepalive) {
        error_code ignored;
        idle_.front()->stream.socket().close(ignored);
        idle_.pop_front();
        --open_;
    }
    if (reusable && connection->stream.socket().is_open() && connection->buffer.size() == 0 &&
        (settings_.max_idle == 0 || idle_.size() < settings_.max_idle)) {
        connection->stream.expires_never();
        connection->idle_since = now;
        idle_.push_back(std::move(connection));
    } else {
        error_code ignored;
        connection->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
        connection->stream.socket().close(ignored);
        --open_;
    }
    serve_waiters();
}

void upstream_pool::serve_waiters() {
    const publish_on_exit published{*this};
    while (!waiters_.empty()) {
        auto w = waiters_.front();
        if (!w->handler) {
            waiters_.pop_front();
            continue;
        }
        upstream_ptr connection = w->allow_reuse ? take_idle() : nullptr;
        if (!connection && at_cap()) {
            return;
        }
        waiters_.pop_front();
        w->timer->cancel();
        auto handler = std::move(w->handler);
        if (connection) {
            asio::post(ioc_, [h = std::move(handler), c = std::move(connection)]() mutable {
                h({}, std::move(c), true, {});
            });
        } else {
            ++open_;
            connect(std::move(handler));
        }
    }
}

void upstream_pool::close_idle() {
    const publish_on_exit published{*this};
    for (auto& connection : idle_) {
        error_code ignored;
        connection->stream.socket().close(ignored);
        --open_;
    }
    idle_.clear();
}

}  // namespace tokenmeter::relay
