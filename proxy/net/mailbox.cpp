#include "net/mailbox.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace tokenmeter::net {

// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables): Asio's service key
asio::io_context::id mailbox::id;

mailbox::mailbox(asio::io_context& ioc) : asio::io_context::service(ioc), ioc_(ioc) {
    const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) {
        throw std::system_error(errno, std::generic_category(), "eventfd for a worker's mailbox");
    }
    wake_.emplace(ioc.get_executor(), fd);  // owns fd from here (closed with it)
    arm();
}

mailbox::~mailbox() = default;

mailbox* mailbox::of(asio::io_context& ioc) {
    return asio::has_service<mailbox>(ioc) ? &asio::use_service<mailbox>(ioc) : nullptr;
}

void mailbox::post(task t) {
    bool was_empty = false;
    {
        std::lock_guard lock(mutex_);
        if (shut_down_) {
            return;  // destroyed here, unrun, as a handler posted to a destroyed context
        }
        was_empty = queue_.empty();
        queue_.push_back(std::move(t));
    }
    // One wake-up per batch: a non-empty queue has its wake-up pending already (the worker reads
    // the eventfd before it takes the queue, so none is lost between the two).
    if (was_empty) {
        const std::uint64_t one = 1;
        ssize_t written = 0;
        do {
            written = ::write(wake_->native_handle(), &one, sizeof one);
        } while (written < 0 && errno == EINTR);
        // EAGAIN only at a counter near 2^64: the worker has a wake-up pending then anyway.
    }
}

void mailbox::arm() {
    wake_->async_wait(asio::posix::descriptor_base::wait_read,
                      [this](error_code ec) { on_ready(ec); });
}

void mailbox::on_ready(error_code ec) {
    if (ec == asio::error::operation_aborted || !wake_ || !wake_->is_open()) {
        return;
    }
    std::uint64_t count = 0;
    ssize_t got = 0;
    do {
        got = ::read(wake_->native_handle(), &count, sizeof count);
    } while (got < 0 && errno == EINTR);
    std::vector<task> batch;
    {
        std::lock_guard lock(mutex_);
        batch.swap(queue_);
    }
    // Armed again before the tasks run: a task that throws must not leave the mailbox deaf.
    arm();
    for (auto& t : batch) {
        taken_.push_back(std::move(t));
    }
    if (!feeding_) {
        feed();
    }
}

void mailbox::feed() {
    // On this thread: the post needs no lock, and each task is a handler of its own. Posted
    // from a handler, they queue behind the reactor's next look for readiness, and so does the
    // next feed: the events that look finds run between this turn's tasks and the next.
    for (std::size_t i = 0; i < tasks_per_turn && !taken_.empty(); ++i) {
        asio::post(ioc_, std::move(taken_.front()));
        taken_.pop_front();
    }
    feeding_ = !taken_.empty();
    if (feeding_) {
        asio::post(ioc_, [this] { feed(); });
    }
}

void mailbox::shutdown() {
    std::vector<task> dropped;
    {
        std::lock_guard lock(mutex_);
        shut_down_ = true;
        dropped.swap(queue_);
    }
    dropped.clear();
    taken_.clear();
    error_code ignored;
    wake_->close(ignored);
}

}  // namespace tokenmeter::net
