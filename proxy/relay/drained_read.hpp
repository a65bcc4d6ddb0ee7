// relay/drained_read: a read of a plain TCP socket that counts a short read as draining the
// socket, as nginx does, where Asio 1.81 counts only a read of 0 bytes. After Asio's own
// async_read_some returns data, the next one starts with a receive that finds nothing (EAGAIN)
// and only then waits: one wasted system call per forwarded chunk of a stream. This read is an
// operation of Asio's own reactor (so cancellation, close and shutdown treat it as any other
// read), performed by a receive that returns "done and exhausted" when it filled less than the
// buffer: the reactor then waits for the socket's next readiness instead of trying at once.
//
// What a short read does not cover: the peer's FIN queued behind the data, with the readiness
// that announced both already taken; the next read would wait for readiness that does not come.
// nginx learns of that FIN from EPOLLRDHUP, which Asio neither asks for nor passes on. So each
// worker has a hangup_watch: an epoll set of its own in which the upstream sockets are
// registered for EPOLLRDHUP only (data does not wake it), itself watched by the worker's
// io_context. A drained_read is attached to its socket for a whole body (begin()), so a close
// seen between two reads is remembered too: from then on every read is tried at once, and a
// read waiting in the reactor is cancelled, completes with `try_again`, and the caller reads
// again at once.
//
// Written against Boost 1.81's epoll reactor (Debian 12); elsewhere start() returns false and
// the caller reads with async_read_some.
#pragma once

#include <boost/version.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "net/beast.hpp"

#if BOOST_VERSION == 108100 && defined(BOOST_ASIO_HAS_EPOLL) && !defined(BOOST_ASIO_HAS_IO_URING)
#define TOKENMETER_DRAINED_READ 1  // NOLINT(cppcoreguidelines-macro-usage): read by #if
#include <boost/asio/detail/reactor.hpp>
#include <boost/asio/detail/reactor_op.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#else
#define TOKENMETER_DRAINED_READ 0  // NOLINT(cppcoreguidelines-macro-usage): read by #if
#endif

namespace tokenmeter::relay {

#if TOKENMETER_DRAINED_READ

class drained_read;

// The peers' closes, for the sockets of one io_context (one per worker; see above).
class hangup_watch {
  public:
    explicit hangup_watch(asio::io_context& ioc);
    hangup_watch(const hangup_watch&) = delete;
    hangup_watch& operator=(const hangup_watch&) = delete;
    ~hangup_watch();

    // Watches `fd` for its peer's close from now until it is closed. False when it cannot be.
    bool watch(int fd) noexcept;

  private:
    friend class drained_read;
    void attach(int fd, drained_read* read);
    void detach(int fd, const drained_read* read) noexcept;
    // Every attached read is alive (a read detaches itself when destroyed); the watch, when
    // destroyed first (a worker's pool goes before its io_context), lets go of them.
    void arm();
    void on_ready();
    [[nodiscard]] bool closed(int fd) const noexcept {
        const auto index = static_cast<std::size_t>(fd);
        return index < closed_.size() && closed_[index] != 0;
    }

    int epoll_ = -1;
    std::optional<asio::posix::stream_descriptor> descriptor_;  // epoll_, as Asio sees it
    std::vector<drained_read*> reads_;  // by descriptor: the drained read of its current body
    // By descriptor: the peer closed (since watch(); a close may come before the body begins).
    std::vector<std::uint8_t> closed_;
};

// One per stream, reused for each read (no allocation per read). Not copyable or movable: the
// reactor holds its address while a read is pending.
class drained_read final : private asio::detail::reactor_op {
  public:
    using completion = void (*)(void* target, error_code ec, std::size_t bytes);

    drained_read() noexcept : reactor_op(error_code(), &do_perform, &do_complete) {}
    drained_read(const drained_read&) = delete;
    drained_read& operator=(const drained_read&) = delete;
    ~drained_read() {
        detach();
        delete[] std::exchange(borrowed_, nullptr);
    }

    // A new body on `socket`, which `hangups` watches (hangup_watch::watch): the reads from
    // now on are told of its peer's close (one seen before this too).
    void begin(socket_type& socket, hangup_watch& hangups);
    // Before the socket is closed: the watch must not reach this read any more.
    void detach() noexcept;

    // Starts a read of up to `size` bytes into `data` from the socket of begin(). `on_done(
    // target, ec, n)` runs from the socket's io_context, as a handler would, with `keep` held
    // until then; `ec` is asio::error::try_again when the peer closed while the read waited
    // (read again). Returns false, having started nothing, when the socket cannot be read this
    // way (then read it as usual).
    // With `data` null, the read takes a buffer of relay_buffer_pool::buffer_size bytes (`size`
    // is that) from the thread's pool only when the socket has data, so a stream waiting for its
    // next chunk holds none; on_done's caller then owns it: take_buffer().
    bool start(socket_type& socket, char* data, std::size_t size, std::shared_ptr<void> keep,
               completion on_done, void* target);
    // The buffer a read started without one took (new char[]; the caller frees it or gives it
    // back to relay_buffer_pool), or nullptr if it took none. Call from on_done.
    [[nodiscard]] char* take_buffer() noexcept {
        if (borrowed_ == nullptr) {
            return nullptr;
        }
        data_ = nullptr;
        return std::exchange(borrowed_, nullptr);
    }

  private:
    friend class hangup_watch;
    void hangup() noexcept;
    static status do_perform(reactor_op* base);
    bool borrow() noexcept;     // data_ from the pool: false when memory ran out
    void give_back() noexcept;  // the borrowed buffer back to the pool (EAGAIN)
    static void do_complete(void* owner, asio::detail::operation* base, const error_code&,
                            std::size_t);

    int fd_ = -1;
    char* data_ = nullptr;      // where the read goes; null: a buffer is taken when data is there
    char* borrowed_ = nullptr;  // the buffer taken (then data_ too), until take_buffer()
    std::size_t size_ = 0;
    std::shared_ptr<void> keep_;
    completion done_ = nullptr;
    void* target_ = nullptr;
    asio::detail::reactor* reactor_ = nullptr;  // the socket's io_context's, found once
    asio::detail::reactor::per_descriptor_data* descriptor_data_ = nullptr;
    hangup_watch* hangups_ = nullptr;  // attached from begin() to detach()
    bool queued_ = false;              // waiting in the reactor's queue
    bool again_ = false;               // cancelled by the watch: completes with try_again
    bool peer_closed_ = false;         // the watch saw the close: read at once from now on
};

#else

class hangup_watch {
  public:
    explicit hangup_watch(asio::io_context&) {}
    bool watch(int) noexcept { return false; }
};

class drained_read {
  public:
    using completion = void (*)(void* target, error_code ec, std::size_t bytes);
    void begin(socket_type&, hangup_watch&) {}
    void detach() noexcept {}
    bool start(socket_type&, char*, std::size_t, std::shared_ptr<void>, completion, void*) {
        return false;
    }
    [[nodiscard]] char* take_buffer() noexcept { return nullptr; }
};

#endif

}  // namespace tokenmeter::relay
