#include "relay/drained_read.hpp"

#include "net/direct_io.hpp"
#include "relay/relay_buffer.hpp"

#if TOKENMETER_DRAINED_READ

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/detail/socket_ops.hpp>
#include <cerrno>
#include <utility>

namespace tokenmeter::relay {

namespace {

// basic_socket keeps its implementation (descriptor, state bits, reactor registration)
// protected. An explicit instantiation may name a private member, so this grants the one
// pointer to it the read needs, without touching Asio's headers.
using socket_impl =
    asio::detail::io_object_impl<asio::detail::reactive_socket_service<tcp>, executor>;
using socket_base = asio::basic_socket<tcp, executor>;

struct socket_impl_access {
    using type = socket_impl socket_base::*;
    friend type member_pointer(socket_impl_access);
};

template <typename Tag, typename Tag::type Member>
struct grant {
    friend typename Tag::type member_pointer(Tag) { return Member; }
};

template struct grant<socket_impl_access, &socket_base::impl_>;

}  // namespace

// ---- hangup_watch ------------------------------------------------------------------------------

hangup_watch::hangup_watch(asio::io_context& ioc) {
    const int fd = ::epoll_create1(EPOLL_CLOEXEC);
    if (fd < 0) {
        return;  // watch() says no: the relay reads as Asio does
    }
    try {
        descriptor_.emplace(ioc, fd);  // owns fd from here
        epoll_ = fd;
        arm();
    } catch (const std::exception&) {
        if (!descriptor_) {
            ::close(fd);
        }
        descriptor_.reset();
        epoll_ = -1;
    }
}

hangup_watch::~hangup_watch() {
    for (drained_read* read : reads_) {
        if (read != nullptr) {
            read->hangups_ = nullptr;
        }
    }
    // Closing the descriptor (after this) aborts the wait.
}

bool hangup_watch::watch(int fd) noexcept {
    if (epoll_ < 0 || fd < 0) {
        return false;
    }
    epoll_event event{};
    event.events = EPOLLRDHUP | EPOLLET;  // and, always, EPOLLHUP and EPOLLERR
    event.data.fd = fd;
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event) != 0 && errno != EEXIST) {
        return false;
    }
    // A new socket on this descriptor: no close seen for it yet (the watch reports one at once
    // if it came already).
    if (static_cast<std::size_t>(fd) < closed_.size()) {
        closed_[static_cast<std::size_t>(fd)] = 0;
    }
    return true;
}

void hangup_watch::attach(int fd, drained_read* read) {
    const auto index = static_cast<std::size_t>(fd);
    if (index >= reads_.size()) {
        reads_.resize(std::max<std::size_t>(index + 1, reads_.size() * 2), nullptr);
    }
    reads_[index] = read;
}

void hangup_watch::detach(int fd, const drained_read* read) noexcept {
    const auto index = static_cast<std::size_t>(fd);
    if (index < reads_.size() && reads_[index] == read) {
        reads_[index] = nullptr;
    }
}

void hangup_watch::arm() {
    // The handler touches `this` only when the wait was not aborted: the destructor closes the
    // descriptor, which aborts it.
    descriptor_->async_wait(asio::posix::stream_descriptor::wait_read, [this](error_code ec) {
        if (ec) {
            return;
        }
        try {
            on_ready();
            arm();
        } catch (const std::exception&) {
            // Out of memory: the closes seen so far are handled; the watch stops here, and reads
            // that wait for a close it would have seen end at timeouts.upstream_idle.
        }
    });
}

void hangup_watch::on_ready() {
    std::array<epoll_event, 64> events{};
    for (;;) {
        const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), 0);
        if (n <= 0) {
            break;
        }
        for (int i = 0; i < n; ++i) {
            const auto index =
                static_cast<std::size_t>(events[static_cast<std::size_t>(i)].data.fd);
            if (index >= closed_.size()) {
                closed_.resize(std::max<std::size_t>(index + 1, closed_.size() * 2), 0);
            }
            closed_[index] = 1;
            if (index < reads_.size() && reads_[index] != nullptr) {
                reads_[index]->hangup();
            }
        }
        if (static_cast<std::size_t>(n) < events.size()) {
            break;
        }
    }
}

// ---- drained_read ------------------------------------------------------------------------------

namespace {

socket_impl::implementation_type& implementation(socket_type& socket) {
    socket_base& base = socket;
    return (base.*member_pointer(socket_impl_access{})).get_implementation();
}

}  // namespace

void drained_read::begin(socket_type& socket, hangup_watch& hangups) {
    detach();
    peer_closed_ = false;
    const int fd = implementation(socket).socket_;
    if (fd == asio::detail::invalid_socket || hangups.epoll_ < 0) {
        return;
    }
    peer_closed_ = hangups.closed(fd);
    hangups.attach(fd, this);
    hangups_ = &hangups;
    fd_ = fd;
}

void drained_read::detach() noexcept {
    if (hangups_ != nullptr) {
        hangups_->detach(fd_, this);
        hangups_ = nullptr;
    }
}

bool drained_read::start(socket_type& socket, char* data, std::size_t size,
                         std::shared_ptr<void> keep, completion on_done, void* target) {
    auto& impl = implementation(socket);
    if (keep_ != nullptr || size == 0 || hangups_ == nullptr || impl.socket_ != fd_) {
        return false;
    }
    namespace ops = asio::detail::socket_ops;
    if ((impl.state_ & (ops::user_set_non_blocking | ops::internal_non_blocking)) == 0) {
        error_code ec;
        if (!ops::set_internal_non_blocking(impl.socket_, impl.state_, true, ec)) {
            return false;
        }
    }
    if (reactor_ == nullptr) {
        reactor_ = &asio::use_service<asio::detail::reactor>(socket.get_executor().context());
    }
    descriptor_data_ = &impl.reactor_data_;
    if (borrowed_ != nullptr) {
        // A buffer an earlier read took and nobody took over: back to the pool.
        relay_buffer_pool::for_thread().give(std::exchange(borrowed_, nullptr));
    }
    data_ = data;
    size_ = data != nullptr ? size : relay_buffer_pool::buffer_size;
    keep_ = std::move(keep);
    done_ = on_done;
    target_ = target;
    ec_ = error_code();
    bytes_transferred_ = 0;
    cancellation_key_ = this;
    if (peer_closed_ && do_perform(this) != not_done) {
        // After the close every read is tried at once: no readiness may come for it.
        reactor_->post_immediate_completion(this, /*is_continuation=*/true);
        return true;
    }
    queued_ = true;  // cleared by do_perform when the reactor completes the read
    reactor_->start_op(asio::detail::reactor::read_op, fd_, impl.reactor_data_, this,
                       /*is_continuation=*/true, /*allow_speculative=*/true);
    return true;
}

void drained_read::hangup() noexcept {
    peer_closed_ = true;
    if (queued_) {
        // Waiting for readiness that the close may not bring: out of the queue, and the caller
        // reads again (try_again).
        queued_ = false;
        again_ = true;
        reactor_->cancel_ops_by_key(fd_, *descriptor_data_, asio::detail::reactor::read_op, this);
    }
}

asio::detail::reactor_op::status drained_read::do_perform(reactor_op* base) {
    // Asio hands back the operation it was given as its base: this object.
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-static-cast-downcast)
    auto* self = static_cast<drained_read*>(base);
    if (self->data_ == nullptr && !self->borrow()) {
        self->queued_ = false;
        self->ec_ = asio::error::no_memory;
        return done;
    }
    for (;;) {
        const ssize_t n = net::direct_io::recv(self->fd_, self->data_, self->size_, MSG_DONTWAIT);
        if (n > 0) {
            self->queued_ = false;
            self->bytes_transferred_ = static_cast<std::size_t>(n);
            // Less than asked for: the kernel had no more. Wait for the next readiness rather
            // than try again at the next start.
            return static_cast<std::size_t>(n) < self->size_ ? done_and_exhausted : done;
        }
        if (n == 0) {
            self->queued_ = false;
            self->ec_ = asio::error::eof;
            return done;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (self->borrowed_ != nullptr) {
                self->give_back();
            }
            return not_done;
        }
        self->queued_ = false;
        self->ec_ = error_code(errno, asio::error::get_system_category());
        return done;
    }
}

// The socket is ready (or tried at once): now the read needs somewhere to go. Most often it
// finds a chunk, and the buffer goes back to the pool when the exchange reads next; on EAGAIN it
// goes back at once. Out of line: the read itself stays lean.
__attribute__((noinline)) bool drained_read::borrow() noexcept {
    data_ = relay_buffer_pool::for_thread().take();
    borrowed_ = data_;
    return data_ != nullptr;
}

__attribute__((noinline)) void drained_read::give_back() noexcept {
    relay_buffer_pool::for_thread().give(std::exchange(borrowed_, nullptr));
    data_ = nullptr;
}

void drained_read::do_complete(void* owner, asio::detail::operation* base, const error_code&,
                               std::size_t) {
    // Asio hands back the operation it was given as its base: this object.
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-static-cast-downcast)
    auto* self = static_cast<drained_read*>(base);
    self->queued_ = false;
    self->again_ = self->again_ && owner != nullptr;
    // Released when this returns: the last reference may own this operation.
    auto keep = std::move(self->keep_);
    if (owner == nullptr) {
        delete[] self->take_buffer();
        return;  // the io_context is being destroyed
    }
    const error_code ec =
        std::exchange(self->again_, false) ? error_code(asio::error::try_again) : self->ec_;
    self->done_(self->target_, ec, self->bytes_transferred_);
}

}  // namespace tokenmeter::relay

#endif
