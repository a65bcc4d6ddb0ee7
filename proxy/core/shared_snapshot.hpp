// core/shared_snapshot: a value that a reload replaces whole while other threads read it. A
// reader takes a shared_ptr copy and keeps that snapshot for as long as it needs it; a later
// store never changes what it holds.
//
// Why not std::atomic<std::shared_ptr<T>>: libstdc++ 12's load releases its internal lock with
// relaxed order, so ThreadSanitizer sees no happens-before between a store and a later load and
// reports the snapshot's contents as a race. A std::mutex is modelled exactly, and the readers
// here load once per request or connection (never per chunk), so the lock is held only for the
// copy of one shared_ptr.
#pragma once

#include <memory>
#include <mutex>
#include <utility>

namespace tokenmeter::core {

template <typename T>
class shared_snapshot {
  public:
    shared_snapshot() = default;
    explicit shared_snapshot(std::shared_ptr<T> initial) : current_(std::move(initial)) {}

    shared_snapshot(const shared_snapshot&) = delete;
    shared_snapshot& operator=(const shared_snapshot&) = delete;
    shared_snapshot(shared_snapshot&&) = delete;
    shared_snapshot& operator=(shared_snapshot&&) = delete;
    ~shared_snapshot() = default;

    // The snapshot in use now (null only when none was ever stored).
    [[nodiscard]] std::shared_ptr<T> load() const {
        const std::lock_guard lock(mutex_);
        return current_;
    }

    // Makes `next` the snapshot later loads get. The one it replaces is released after the lock:
    // when this was its last owner, its destructor (an SSL context, a table) runs unlocked.
    void store(std::shared_ptr<T> next) {
        {
            const std::lock_guard lock(mutex_);
            current_.swap(next);
        }
        next.reset();
    }

  private:
    mutable std::mutex mutex_;
    std::shared_ptr<T> current_;
};

}  // namespace tokenmeter::core
