#include "core/job_thread.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "core/thread_name.hpp"

namespace tokenmeter::core {

job_thread::job_thread(std::size_t max_queued, std::size_t max_queued_bytes, int nice,
                       std::string_view name)
    : max_queued_(max_queued),
      max_queued_bytes_(max_queued_bytes),
      nice_(nice),
      name_(name),
      thread_([this] { run(); }) {}

job_thread::~job_thread() {
    stop();
}

bool job_thread::post(std::function<void()>& job, std::size_t bytes) {
    {
        std::lock_guard lock(mutex_);
        if (stopping_ || queue_.size() >= max_queued_ ||
            bytes > max_queued_bytes_ - std::min(queued_bytes_, max_queued_bytes_)) {
            return false;
        }
        queue_.push_back({std::move(job), bytes});
        queued_bytes_ += bytes;
    }
    wake_.notify_one();
    return true;
}

void job_thread::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) {
        thread_.join();
    }
}

std::uint64_t job_thread::run_total() const {
    std::lock_guard lock(mutex_);
    return run_;
}

void job_thread::run() {
    name_this_thread(name_);
    if (nice_ != 0) {
        // Best effort: a thread that cannot change its niceness runs as it is.
        (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), nice_);
    }
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) {
            return;  // stopping, with everything queued run
        }
        queued next = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        next.job();
        next.job = nullptr;  // what it holds goes before the next job, not with the lock held
        lock.lock();
        queued_bytes_ -= next.bytes;
        ++run_;
    }
}

}  // namespace tokenmeter::core
