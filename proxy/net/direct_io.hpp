// net/direct_io: the receive and send of the per-chunk path, made as plain system calls.
// glibc's recv and sendmsg are thread cancellation points: in a process with more than one
// thread, each call switches asynchronous cancellation on and back off around the system call
// (two extra function calls, tens of instructions, on every forwarded chunk). No thread of this
// process is ever cancelled, so the relay makes the same calls without the wrapper. Errors are
// returned as the wrappers return them: -1 and errno. Under ThreadSanitizer the wrappers are
// kept: it intercepts them to follow what passes between threads through sockets.
#pragma once

#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <string_view>

#if defined(__SANITIZE_THREAD__)
#define TOKENMETER_DIRECT_IO 0  // NOLINT(cppcoreguidelines-macro-usage): read by #if
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TOKENMETER_DIRECT_IO 0  // NOLINT(cppcoreguidelines-macro-usage): read by #if
#endif
#endif
#ifndef TOKENMETER_DIRECT_IO
#define TOKENMETER_DIRECT_IO 1  // NOLINT(cppcoreguidelines-macro-usage): read by #if
#endif

namespace tokenmeter::net::direct_io {

inline ssize_t recv(int fd, void* data, std::size_t size, int flags) noexcept {
#if TOKENMETER_DIRECT_IO
    return static_cast<ssize_t>(::syscall(SYS_recvfrom, fd, data, size, flags, nullptr, nullptr));
#else
    return ::recv(fd, data, size, flags);
#endif
}

inline ssize_t sendmsg(int fd, const msghdr* message, int flags) noexcept {
#if TOKENMETER_DIRECT_IO
    return static_cast<ssize_t>(::syscall(SYS_sendmsg, fd, message, flags));
#else
    return ::sendmsg(fd, message, flags);
#endif
}

// Sends all of `bytes` now if the socket takes them without blocking (no SIGPIPE); false
// otherwise (what it took stays sent). For a last word before a close.
inline bool send_all_now(int fd, std::string_view bytes) noexcept {
    while (!bytes.empty()) {
        msghdr message{};
        iovec vector{const_cast<char*>(bytes.data()), bytes.size()};  // NOLINT: iovec is not const
        message.msg_iov = &vector;
        message.msg_iovlen = 1;
        const ssize_t sent = direct_io::sendmsg(fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR) {
            continue;
        }
        if (sent <= 0) {
            return false;
        }
        bytes.remove_prefix(static_cast<std::size_t>(sent));
    }
    return true;
}

// What a socket's next byte says without taking it: one recv(MSG_PEEK | MSG_DONTWAIT), whatever
// the socket's blocking mode. Toggling Asio's non_blocking() around a peek costs two ioctls, and
// a third before the next asynchronous operation, since clearing it clears Asio's own flag too.
enum class peek_result : unsigned char { nothing_yet, data, closed, error };

inline peek_result peek(int fd) noexcept {
    char probe = 0;
    ssize_t n = 0;
    do {
        n = recv(fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
        return peek_result::data;
    }
    if (n == 0) {
        return peek_result::closed;
    }
    return errno == EAGAIN || errno == EWOULDBLOCK ? peek_result::nothing_yet : peek_result::error;
}

}  // namespace tokenmeter::net::direct_io
