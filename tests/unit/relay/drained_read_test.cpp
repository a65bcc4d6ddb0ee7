// relay/drained_read: reads that count a short read as draining the socket, and the hangup watch
// that finds a close queued behind the last bytes. Real sockets on loopback.
#include "relay/drained_read.hpp"

#include <gtest/gtest.h>
#include <poll.h>

#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "relay/relay_buffer.hpp"

namespace tokenmeter::relay {
namespace {

#if TOKENMETER_DRAINED_READ

using namespace std::chrono_literals;

// A connected pair on loopback: `ours` is read with drained_read, `peer` writes and closes.
struct socket_pair {
    explicit socket_pair(asio::io_context& ioc) : ours(ioc), peer(ioc) {
        tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
        ours.connect(acceptor.local_endpoint());
        acceptor.accept(peer);
    }
    socket_type ours;
    socket_type peer;
};

// What the reads returned, in order; a read that ends with try_again is started again at once,
// as the relay does.
struct reader {
    reader(socket_type& s, hangup_watch& w) : socket(s), watch(w) {}
    struct result {
        error_code ec;
        std::string bytes;
    };
    socket_type& socket;
    hangup_watch& watch;
    drained_read read;
    std::array<char, 64> buffer{};
    std::vector<result> results;
    int restarts = 0;
    bool read_on = true;  // start the next read after each one with data

    bool start() {
        return read.start(socket, buffer.data(), buffer.size(), std::make_shared<int>(0),
                          &reader::done, this);
    }
    static void done(void* self, error_code ec, std::size_t n) {
        auto* r = static_cast<reader*>(self);
        if (ec == asio::error::try_again) {
            ++r->restarts;
            ASSERT_TRUE(r->start());
            return;
        }
        r->results.push_back({ec, std::string(r->buffer.data(), n)});
        if (!ec && r->read_on) {
            ASSERT_TRUE(r->start());
        }
    }
};

// An io_context, its hangup watch and a pair whose `ours` is watched and read, its body begun.
struct rig {
    rig() {
        EXPECT_TRUE(watch.watch(pair.ours.native_handle()));
        r.read.begin(pair.ours, watch);
    }
    asio::io_context ioc;
    hangup_watch watch{ioc};
    socket_pair pair{ioc};
    reader r{pair.ours, watch};
};

// Waits (bounded) until the kernel holds the peer's close behind whatever bytes came first on
// `socket`: the state the tests below need before the event loop looks.
bool peer_close_queued(socket_type& socket) {
    pollfd watch{socket.native_handle(), POLLIN | POLLRDHUP, 0};
    return ::poll(&watch, 1, 5000) == 1 && (watch.revents & POLLRDHUP) != 0;
}

void run_until(asio::io_context& ioc, const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
        ioc.run_for(10ms);
        ioc.restart();
    }
}

TEST(DrainedRead, ReadsWhatArrivesReadByRead) {
    rig t;
    auto [ioc, pair, r] = std::tie(t.ioc, t.pair, t.r);
    ASSERT_TRUE(r.start());
    asio::write(pair.peer, asio::buffer(std::string("first")));
    run_until(ioc, [&] { return r.results.size() >= 1; });
    // The socket is drained now: the next read waits for the next bytes.
    ioc.run_for(20ms);
    ioc.restart();
    ASSERT_EQ(r.results.size(), 1u);
    asio::write(pair.peer, asio::buffer(std::string("second")));
    run_until(ioc, [&] { return r.results.size() >= 2; });
    ASSERT_EQ(r.results.size(), 2u);
    EXPECT_EQ(r.results[0].bytes, "first");
    EXPECT_EQ(r.results[1].bytes, "second");
    // A close while a read waits ends it (through the socket's readiness or the watch's,
    // whichever the reactor sees first).
    pair.peer.shutdown(tcp::socket::shutdown_send);
    run_until(ioc, [&] { return r.results.size() >= 3; });
    ASSERT_EQ(r.results.size(), 3u);
    EXPECT_EQ(r.results[2].ec, asio::error::eof);
    EXPECT_LE(r.restarts, 1);
}

TEST(DrainedRead, ACloseQueuedBehindTheLastBytesIsSeen) {
    // The bytes and the close arrive while no read is pending, and the event loop takes their
    // readiness (as when the relay waits for a slow client): the next read takes the bytes (less
    // than its buffer, so the socket counts as drained) and no readiness is left for the close.
    // Without the hangup watch the read after it would wait for ever.
    for (int round = 0; round < 10; ++round) {
        rig t;
        auto [ioc, pair, r] = std::tie(t.ioc, t.pair, t.r);
        asio::write(pair.peer, asio::buffer(std::string("last bytes")));
        pair.peer.shutdown(tcp::socket::shutdown_send);
        ASSERT_TRUE(peer_close_queued(pair.ours));
        ioc.poll();  // the event loop takes the readiness of the bytes and the close
        ioc.restart();
        ASSERT_TRUE(r.start());
        run_until(ioc, [&] { return r.results.size() >= 2; });
        ASSERT_EQ(r.results.size(), 2u) << "round " << round;
        EXPECT_EQ(r.results[0].bytes, "last bytes");
        EXPECT_FALSE(r.results[0].ec);
        EXPECT_EQ(r.results[1].ec, asio::error::eof);
    }
}

TEST(DrainedRead, ACloseSeenBeforeTheBodyBeginsIsRemembered) {
    // The next response on a kept connection: its bytes and the close arrive, and the watch
    // sees the close, before the relay begins the body. The body is longer than the read buffer,
    // so it takes several reads, the last of them short.
    for (int round = 0; round < 5; ++round) {
        rig t;
        auto [ioc, pair, r] = std::tie(t.ioc, t.pair, t.r);
        const std::string body(1000, 'b');
        asio::write(pair.peer, asio::buffer(body));
        pair.peer.shutdown(tcp::socket::shutdown_send);
        ASSERT_TRUE(peer_close_queued(pair.ours));
        ioc.poll();  // the event loop takes the readiness of the bytes and the close
        ioc.restart();
        r.read.begin(pair.ours, t.watch);  // a new body on the same connection
        ASSERT_TRUE(r.start());
        run_until(ioc, [&] { return !r.results.empty() && r.results.back().ec; });
        ASSERT_FALSE(r.results.empty());
        EXPECT_EQ(r.results.back().ec, asio::error::eof) << "round " << round;
        std::string all;
        for (const auto& result : r.results) {
            all += result.bytes;
        }
        EXPECT_EQ(all, body);
    }
}

TEST(DrainedRead, ACloseWhileAReadWaitsEndsIt) {
    // A read waits in the reactor; the peer's close comes: the read completes with try_again
    // or end of stream, whichever readiness the reactor sees first, and the next read ends it.
    for (int round = 0; round < 10; ++round) {
        rig t;
        auto [ioc, pair, r] = std::tie(t.ioc, t.pair, t.r);
        ASSERT_TRUE(r.start());
        ioc.run_for(5ms);
        ioc.restart();
        asio::write(pair.peer, asio::buffer(std::string("bytes")));
        pair.peer.shutdown(tcp::socket::shutdown_send);
        run_until(ioc, [&] { return !r.results.empty() && r.results.back().ec; });
        ASSERT_FALSE(r.results.empty());
        EXPECT_EQ(r.results.back().ec, asio::error::eof);
        std::string all;
        for (const auto& result : r.results) {
            all += result.bytes;
        }
        EXPECT_EQ(all, "bytes");
    }
}

TEST(DrainedRead, NotStartedWithoutBegin) {
    asio::io_context ioc;
    hangup_watch watch(ioc);
    socket_pair pair(ioc);
    reader r(pair.ours, watch);
    EXPECT_FALSE(r.start());
}

TEST(DrainedRead, ClosingOurSocketCancelsTheRead) {
    rig t;
    auto [ioc, pair, r] = std::tie(t.ioc, t.pair, t.r);
    ASSERT_TRUE(r.start());
    ioc.run_for(10ms);
    ioc.restart();
    r.read.detach();
    pair.ours.close();
    run_until(ioc, [&] { return !r.results.empty(); });
    ASSERT_EQ(r.results.size(), 1u);
    EXPECT_EQ(r.results[0].ec, asio::error::operation_aborted);
    // A closed socket is not read this way.
    EXPECT_FALSE(r.start());
}

TEST(DrainedRead, AnIoContextDestroyedWithAReadPendingReleasesWhatTheReadHeld) {
    std::weak_ptr<int> held;
    drained_read read;
    std::array<char, 16> buffer{};
    {
        asio::io_context ioc;
        hangup_watch watch(ioc);
        socket_pair pair(ioc);
        ASSERT_TRUE(watch.watch(pair.ours.native_handle()));
        auto keep = std::make_shared<int>(1);
        held = keep;
        read.begin(pair.ours, watch);
        ASSERT_TRUE(read.start(
            pair.ours, buffer.data(), buffer.size(), std::move(keep),
            [](void*, error_code, std::size_t) { FAIL() << "no handler runs at destruction"; },
            nullptr));
        ioc.run_for(10ms);
        EXPECT_FALSE(held.expired());
        // Destroyed in the order a worker's are: the sockets, the watch, then the io_context.
    }
    EXPECT_TRUE(held.expired());
}

// Started without a buffer (the relay's reads of its first size), a read holds none while it
// waits: it takes one from the thread's pool when the bytes are there, and the caller owns it.
TEST(DrainedRead, AReadWithoutABufferTakesOneOnlyWhenDataIsThere) {
    rig t;
    auto [ioc, pair, r] = std::tie(t.ioc, t.pair, t.r);
    relay_buffer_pool& pool = relay_buffer_pool::for_thread();
    pool.give(pool.take());  // at least one spare, so taking one shows in spare()
    const std::size_t spares = pool.spare();
    struct lender {
        drained_read* read = nullptr;
        char* taken = nullptr;
        std::size_t bytes = 0;
        error_code ec;
        int calls = 0;
        static void done(void* self, error_code ec, std::size_t n) {
            auto* l = static_cast<lender*>(self);
            l->taken = l->read->take_buffer();
            l->bytes = n;
            l->ec = ec;
            ++l->calls;
        }
    } l;
    l.read = &r.read;
    ASSERT_TRUE(r.read.start(pair.ours, nullptr, relay_buffer_pool::buffer_size,
                             std::make_shared<int>(0), &lender::done, &l));
    ioc.run_for(20ms);
    ioc.restart();
    EXPECT_EQ(l.calls, 0);
    EXPECT_EQ(pool.spare(), spares);  // waiting, it holds no buffer
    asio::write(pair.peer, asio::buffer(std::string("chunk")));
    run_until(ioc, [&] { return l.calls > 0; });
    ASSERT_EQ(l.calls, 1);
    EXPECT_FALSE(l.ec);
    ASSERT_NE(l.taken, nullptr);
    EXPECT_EQ(std::string(l.taken, l.bytes), "chunk");
    EXPECT_EQ(pool.spare(), spares - 1);
    EXPECT_EQ(r.read.take_buffer(), nullptr);  // handed over once
    pool.give(l.taken);
    EXPECT_EQ(pool.spare(), spares);
}

TEST(DrainedRead, OneReadAtATime) {
    rig t;
    auto [ioc, pair, r] = std::tie(t.ioc, t.pair, t.r);
    ASSERT_TRUE(r.start());
    EXPECT_FALSE(r.start());  // still pending
    r.read_on = false;
    asio::write(pair.peer, asio::buffer(std::string("x")));
    run_until(ioc, [&] { return !r.results.empty(); });
    EXPECT_TRUE(r.start());
    r.read.detach();
    pair.ours.close();
    run_until(ioc, [&] { return r.results.size() >= 2; });
}

#else

TEST(DrainedRead, NotAvailableWithThisAsio) {
    asio::io_context ioc;
    hangup_watch watch(ioc);
    EXPECT_FALSE(watch.watch(0));
}

#endif

}  // namespace
}  // namespace tokenmeter::relay
