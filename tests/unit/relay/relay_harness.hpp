// The relay inside the test process: a worker-like io_context running client_connection over
// loopback sockets, a test-driven upstream, and an observer that records every call. The test
// thread speaks through blocking sockets read with deadlines; the connection objects are touched
// on the io thread only, and the recorder is locked, so the two threads share nothing else.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "net/mailbox.hpp"
#include "net/name_resolver.hpp"
#include "observe/observer.hpp"
#include "relay/client_connection.hpp"
#include "relay/proxy_context.hpp"
#include "relay/upstream_pool.hpp"

namespace tokenmeter::relay::testing {

// How long any one wait may take before the test fails instead of hanging.
inline constexpr std::chrono::milliseconds patience{3000};
using deadline = std::chrono::steady_clock::time_point;

inline deadline after(std::chrono::milliseconds d) {
    return std::chrono::steady_clock::now() + d;
}

// One end of a loopback TCP connection, used with blocking calls bounded by a deadline.
class wire {
  public:
    explicit wire(int fd = -1) : fd_(fd) {}
    wire(wire&& other) noexcept
        : fd_(std::exchange(other.fd_, -1)), buffer_(std::move(other.buffer_)) {}
    wire& operator=(wire&&) = delete;
    wire(const wire&) = delete;
    ~wire() { close(); }

    static wire connect_to(std::uint16_t port) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(port);
        address.sin_addr.s_addr = htonl(0x7f000001u) /* 127.0.0.1 */;
        if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
            ADD_FAILURE() << "connect to port " << port << ": " << std::strerror(errno);
        }
        const int on = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        return wire(fd);
    }

    [[nodiscard]] int release() { return std::exchange(fd_, -1); }

    void send(std::string_view bytes) {
        while (!bytes.empty()) {
            const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
            if (n <= 0) {
                ADD_FAILURE() << "send: " << std::strerror(errno);
                return;
            }
            bytes.remove_prefix(static_cast<std::size_t>(n));
        }
    }

    // The bytes up to and including `needle`, or nullopt when the peer closed or time ran out.
    std::optional<std::string> read_until(std::string_view needle,
                                          deadline until = after(patience)) {
        for (;;) {
            if (const auto at = buffer_.find(needle); at != std::string::npos) {
                std::string taken = buffer_.substr(0, at + needle.size());
                buffer_.erase(0, at + needle.size());
                return taken;
            }
            if (fill(until) != filled::data) {
                return std::nullopt;
            }
        }
    }
    std::optional<std::string> read_exact(std::size_t n, deadline until = after(patience)) {
        while (buffer_.size() < n) {
            if (fill(until) != filled::data) {
                return std::nullopt;
            }
        }
        std::string taken = buffer_.substr(0, n);
        buffer_.erase(0, n);
        return taken;
    }
    // Whether the peer closes (FIN or reset) by the deadline; bytes before the close are kept.
    bool closed_by_peer(deadline until = after(patience)) {
        for (;;) {
            switch (fill(until)) {
                case filled::data:
                    continue;
                case filled::closed:
                    return true;
                case filled::timed_out:
                    return false;
            }
        }
    }
    // Nothing arrives (and no close) within `window`: a check of absence, so it takes a window.
    bool quiet_for(std::chrono::milliseconds window) {
        const std::size_t had = buffer_.size();
        return fill(after(window)) == filled::timed_out && buffer_.size() == had;
    }
    [[nodiscard]] const std::string& buffered() const noexcept { return buffer_; }

    void close() {
        if (fd_ >= 0) {
            ::close(std::exchange(fd_, -1));
        }
    }
    // Closes with a reset instead of a FIN.
    void reset() {
        if (fd_ >= 0) {
            const linger abort_on_close{1, 0};
            ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
            close();
        }
    }

  private:
    enum class filled { data, closed, timed_out };
    filled fill(deadline until) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            until - std::chrono::steady_clock::now());
        pollfd p{fd_, POLLIN, 0};
        if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
            return filled::timed_out;
        }
        char bytes[16 * 1024];
        const ssize_t n = ::recv(fd_, bytes, sizeof bytes, 0);
        if (n <= 0) {
            return filled::closed;
        }
        buffer_.append(bytes, static_cast<std::size_t>(n));
        return filled::data;
    }

    int fd_;
    std::string buffer_;
};

// A loopback listening socket the test accepts from with a deadline.
class listener {
  public:
    // backlog 0: one connection waiting to be accepted fills the queue, and the kernel drops
    // the handshakes of later ones, so their connect stays pending.
    explicit listener(int backlog = 16) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(0x7f000001u) /* 127.0.0.1 */;
        socklen_t size = sizeof address;
        if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
            ::listen(fd_, backlog) != 0 ||
            ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
            ADD_FAILURE() << "listen: " << std::strerror(errno);
        }
        port_ = ntohs(address.sin_port);
    }
    listener(const listener&) = delete;
    listener& operator=(const listener&) = delete;
    ~listener() { close(); }

    [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
    // The next connection; an invalid wire (and a test failure) when none comes in time.
    wire accept(deadline until = after(patience)) {
        if (!waiting(until)) {
            ADD_FAILURE() << "no connection on port " << port_;
            return wire();
        }
        return wire(::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC));
    }
    // A connection waits to be accepted (checked now, without waiting).
    bool has_pending() { return waiting(std::chrono::steady_clock::now()); }
    // Connections to the port are refused from now on.
    void close() {
        if (fd_ >= 0) {
            ::close(std::exchange(fd_, -1));
        }
    }

  private:
    bool waiting(deadline until) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            until - std::chrono::steady_clock::now());
        pollfd p{fd_, POLLIN, 0};
        return ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, left.count()))) == 1;
    }

    int fd_;
    std::uint16_t port_ = 0;
};

// A record sink whose entries become durable only when the test says so.
class manual_sink final : public observe::record_sink {
  public:
    std::uint64_t append(std::string, bool) override {
        std::lock_guard lock(mutex_);
        return ++last_;
    }
    [[nodiscard]] bool is_durable(std::uint64_t seq) const override {
        std::lock_guard lock(mutex_);
        return seq <= durable_;
    }
    void when_durable(std::uint64_t seq, std::function<void()> done) override {
        {
            std::lock_guard lock(mutex_);
            if (seq > durable_) {
                waiting_.emplace(seq, std::move(done));
                return;
            }
        }
        done();
    }
    // Makes every entry so far durable; the waits' callbacks run here, as on a writer thread.
    void make_all_durable() {
        std::multimap<std::uint64_t, std::function<void()>> ready;
        {
            std::lock_guard lock(mutex_);
            durable_ = last_;
            ready.swap(waiting_);
        }
        for (auto& [seq, done] : ready) {
            done();
        }
    }

  private:
    mutable std::mutex mutex_;
    std::uint64_t last_ = 0;
    std::uint64_t durable_ = 0;
    std::multimap<std::uint64_t, std::function<void()>> waiting_;
};

inline std::string_view to_string(observe::end_reason reason) {
    switch (reason) {
        case observe::end_reason::upstream_complete:
            return "upstream_complete";
        case observe::end_reason::client_cancel:
            return "client_cancel";
        case observe::end_reason::upstream_truncated:
            return "upstream_truncated";
        case observe::end_reason::upstream_failed:
            return "upstream_failed";
        case observe::end_reason::rejected:
            return "rejected";
    }
    return "?";
}

// What one forwarded request told its observer: the calls in order (consecutive body calls as
// one "body"), and every body byte.
struct exchange_log {
    std::string target;
    std::string model;
    std::vector<std::string> calls;
    std::string body;
    bool ended = false;
};

// Every observer call of a rig, in order, shared by the io thread (writing) and the test thread.
class recorder {
  public:
    // What the recording observer answers; set before requests are sent.
    std::atomic<bool> hold_end{false};   // holds_end()
    std::atomic<bool> hold_seal{false};  // seal() returns a wait pending until make_all_durable
    std::atomic<bool> hold_head{false};  // response_head() likewise
    manual_sink sink;

    std::size_t begin(std::string target, std::string model) {
        std::lock_guard lock(mutex_);
        exchanges_.push_back({std::move(target), std::move(model), {}, {}, false});
        changed_.notify_all();
        return exchanges_.size() - 1;
    }
    void call(std::size_t exchange, std::string what, bool ends = false) {
        std::lock_guard lock(mutex_);
        auto& log = exchanges_.at(exchange);
        log.calls.push_back(std::move(what));
        log.ended = log.ended || ends;
        changed_.notify_all();
    }
    void body(std::size_t exchange, std::string_view bytes) {
        std::lock_guard lock(mutex_);
        auto& log = exchanges_.at(exchange);
        if (log.calls.empty() || log.calls.back() != "body") {
            log.calls.emplace_back("body");
        }
        log.body.append(bytes);
        changed_.notify_all();
    }
    void global(std::vector<std::string> recorder::*list, std::string what) {
        std::lock_guard lock(mutex_);
        (this->*list).push_back(std::move(what));
        changed_.notify_all();
    }

    // Waits (bounded) until `ready` holds of the exchanges; false when it did not in time.
    bool wait_until(const std::function<bool(const std::vector<exchange_log>&)>& ready) {
        std::unique_lock lock(mutex_);
        return changed_.wait_for(lock, patience, [&] { return ready(exchanges_); });
    }
    bool wait_exchanges(std::size_t count) {
        return wait_until([count](const auto& all) { return all.size() >= count; });
    }
    // The log of exchange `i` once it ended (a failure and what was seen, if it did not).
    exchange_log ended(std::size_t i) {
        const bool done =
            wait_until([i](const auto& all) { return all.size() > i && all[i].ended; });
        EXPECT_TRUE(done) << "exchange " << i << " did not end";
        return snapshot(i);
    }
    bool wait_call(std::size_t i, std::string_view what) {
        return wait_until([i, what](const auto& all) {
            return all.size() > i &&
                   std::find(all[i].calls.begin(), all[i].calls.end(), what) != all[i].calls.end();
        });
    }
    exchange_log snapshot(std::size_t i) {
        std::lock_guard lock(mutex_);
        return i < exchanges_.size() ? exchanges_[i] : exchange_log{};
    }
    std::size_t exchange_count() {
        std::lock_guard lock(mutex_);
        return exchanges_.size();
    }
    std::vector<std::string> upstream_errors_seen() {
        std::lock_guard lock(mutex_);
        return upstream_errors;
    }
    std::vector<std::string> unforwarded_seen() {
        std::lock_guard lock(mutex_);
        return unforwarded;
    }

    std::vector<std::string> upstream_errors;  // guarded by mutex_ (through global())
    std::vector<std::string> unforwarded;      // guarded by mutex_ (through global())

  private:
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<exchange_log> exchanges_;
};

class recording_exchange final : public observe::exchange_observer {
  public:
    recording_exchange(recorder& log, std::size_t index) : log_(log), index_(index) {}
    [[nodiscard]] const observe::admission& admitted() const noexcept override { return admitted_; }
    // Recorded once: the interface lets later calls change nothing, and the relay makes one
    // after the write and another at the head on a fresh connection.
    void request_sent(core::time_point) override {
        if (!std::exchange(sent_, true)) {
            log_.call(index_, "request_sent");
        }
    }
    void answered_locally(std::string_view code) override {
        log_.call(index_, "answered_locally " + std::string(code));
    }
    observe::durable_wait response_head(int status, std::string_view content_type, bool has_body,
                                        core::time_point) override {
        log_.call(index_, "response_head " + std::to_string(status) + " " +
                              std::string(content_type) + (has_body ? "" : " (no body)"));
        return log_.hold_head ? observe::durable_wait(&log_.sink, log_.sink.append("open", false))
                              : observe::durable_wait();
    }
    void unreadable_body() override { log_.call(index_, "unreadable_body"); }
    void body(std::string_view bytes, core::time_point) override {
        if (!bytes.empty()) {
            log_.body(index_, bytes);
        }
    }
    [[nodiscard]] bool holds_end() const noexcept override { return log_.hold_end; }
    observe::durable_wait seal(core::time_point) override {
        log_.call(index_, "seal");
        return log_.hold_seal ? observe::durable_wait(&log_.sink, log_.sink.append("close", true))
                              : observe::durable_wait();
    }
    void end(observe::end_reason reason, core::time_point) override {
        log_.call(index_, "end " + std::string(to_string(reason)), true);
    }

  private:
    recorder& log_;
    std::size_t index_;
    observe::admission admitted_{};
    bool sent_ = false;
};

class recording_observer final : public observe::observer {
  public:
    explicit recording_observer(recorder& log) : log_(log) {}
    std::unique_ptr<observe::exchange_observer> begin(observe::request_facts facts) override {
        const std::size_t index = log_.begin(std::string(facts.target), facts.info.model);
        return std::make_unique<recording_exchange>(log_, index);
    }
    void unforwarded(const observe::unforwarded_request& request) override {
        log_.global(&recorder::unforwarded,
                    std::to_string(request.status) + " " + std::string(request.model));
    }
    void upstream_error(std::string_view reason) override {
        log_.global(&recorder::upstream_errors, std::string(reason));
    }

  private:
    recorder& log_;
};

// One worker's worth of the proxy (as app/workers builds it) on a thread of its own, pointed at
// a loopback upstream the test plays.
class relay_rig {
  public:
    using tuning = std::function<void(session_settings&, upstream_pool_settings&)>;

    explicit relay_rig(const tuning& tune = {}) {
        settings_.upstream = {"http", "127.0.0.1", upstream.port(), ""};
        settings_.upstream_idle = patience;
        settings_.client_write = patience;
        pool_settings_.host = "127.0.0.1";
        pool_settings_.port = std::to_string(upstream.port());
        pool_settings_.connect_timeout = patience;
        pool_settings_.acquire_timeout = patience;
        if (tune) {
            tune(settings_, pool_settings_);
        }
        net::mailbox::install(ioc_);
        pool_.emplace(ioc_, pool_settings_, resolver_);
        guard_.emplace(ioc_.get_executor());
        thread_ = std::thread([this] { ioc_.run(); });
    }
    relay_rig(const relay_rig&) = delete;
    relay_rig& operator=(const relay_rig&) = delete;

    ~relay_rig() {
        // Held waits end, and every connection closes once its sockets are gone; then the loop
        // ends. Bounded: a connection that never closes fails the test, it does not hang it.
        log.sink.make_all_durable();
        const auto until = after(std::chrono::milliseconds(5000));
        while (context_.client_connections.load() > 0 && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        EXPECT_EQ(context_.client_connections.load(), 0) << "a client connection is still open";
        net::post_from_any_thread(ioc_, [this] {
            guard_.reset();
            ioc_.stop();
        });
        thread_.join();
    }

    // Requests with a large metered body are planned on `planner` (as app/ sets it); call before
    // the first client. The planner must outlive the rig.
    void plan_on(core::job_thread& planner) { context_.planner = &planner; }

    // A client connected to a new client_connection served on the rig's thread.
    wire client() {
        wire ours = wire::connect_to(front_.port());
        wire theirs = front_.accept();
        const int fd = theirs.release();
        context_.client_connections.fetch_add(1);
        net::post_from_any_thread(ioc_, [this, fd] {
            socket_type accepted(ioc_);
            error_code ec;
            accepted.assign(tcp::v4(), fd, ec);
            if (ec) {
                ::close(fd);
                context_.client_connections.fetch_sub(1);
                return;
            }
            std::make_shared<client_connection<tcp_stream>>(tcp_stream(std::move(accepted)),
                                                            context_, *pool_, sessions_)
                ->start();
        });
        return ours;
    }

    listener upstream;  // the model server, played by the test
    recorder log;

  private:
    listener front_;  // where test clients connect before their socket is handed to the rig
    session_settings settings_;
    upstream_pool_settings pool_settings_;
    core::steady_clock_source clock_;
    recording_observer observer_{log};
    proxy_context context_{settings_, observer_, clock_};
    net::name_resolver resolver_;  // unused with an IP literal, but the pool takes one
    session_registry sessions_;    // before the io_context: outlives the connections it owns
    asio::io_context ioc_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE};
    std::optional<upstream_pool> pool_;
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard_;
    std::thread thread_;
};

// ---- HTTP on the test's side ---------------------------------------------------------------

inline std::string lower(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

// A header field's value in a head ("" when absent).
inline std::string field(std::string_view head, std::string_view name) {
    const std::string wanted = "\r\n" + lower(name) + ":";
    const std::string all = lower(head);
    const auto at = all.find(wanted);
    if (at == std::string::npos) {
        return {};
    }
    auto start = at + wanted.size();
    const auto end = head.find("\r\n", start);
    while (start < end && head[start] == ' ') {
        ++start;
    }
    return std::string(head.substr(start, end - start));
}

inline int status_of(std::string_view head) {
    return head.size() >= 12 ? std::stoi(std::string(head.substr(9, 3))) : 0;
}

// A request as the proxy forwards it: its head and, by Content-Length, its body.
inline std::optional<std::string> read_request(wire& from) {
    auto head = from.read_until("\r\n\r\n");
    if (!head) {
        return std::nullopt;
    }
    const std::string length = field(*head, "content-length");
    auto body = from.read_exact(length.empty() ? 0 : std::stoul(length));
    return body ? *head + *body : std::optional<std::string>();
}

inline std::string chunk(std::string_view data) {
    char size[20];
    const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    return std::string(size, static_cast<std::size_t>(n)) + std::string(data) + "\r\n";
}

// Chunked payload read until `bytes` of it came, or the final chunk; nullopt on a close or a
// timeout. `finished` tells whether the final chunk was read.
inline std::optional<std::string> read_chunked(wire& from, std::size_t bytes,
                                               bool* finished = nullptr) {
    std::string payload;
    if (finished != nullptr) {
        *finished = false;
    }
    while (payload.size() < bytes) {
        auto line = from.read_until("\r\n");
        if (!line) {
            return std::nullopt;
        }
        const std::size_t size = std::stoul(*line, nullptr, 16);
        if (size == 0) {
            if (!from.read_until("\r\n")) {
                return std::nullopt;
            }
            if (finished != nullptr) {
                *finished = true;
            }
            return payload;
        }
        auto data = from.read_exact(size + 2);
        if (!data) {
            return std::nullopt;
        }
        payload += data->substr(0, size);
    }
    return payload;
}

// The final chunk comes next.
inline bool read_final_chunk(wire& from) {
    bool finished = false;
    auto rest = read_chunked(from, 1, &finished);
    return rest && rest->empty() && finished;
}

inline std::string post(std::string_view target, std::string_view body, int version = 11) {
    return "POST " + std::string(target) + " HTTP/1." + std::to_string(version % 10) +
           "\r\nHost: proxy.test\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

}  // namespace tokenmeter::relay::testing
