// core/job_thread: one thread that runs queued jobs in order, for work that must not hold an I/O
// thread (the end of a request whose prompt or buffered body is large to count). The queue is
// bounded in jobs and in the bytes they hold: post() says false when either is full or the
// thread stopped, and the caller runs the job itself, so a job is never lost and memory never
// grows without bound.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace tokenmeter::core {

class job_thread {
  public:
    // nice: added to the thread's niceness (Linux schedules threads by their own), so the I/O
    // threads win the cores from it when both have work; 0 leaves it as it is. name: the
    // thread's name (core/thread_name).
    job_thread(std::size_t max_queued, std::size_t max_queued_bytes, int nice = 0,
               std::string_view name = "tm-jobs");
    job_thread(const job_thread&) = delete;
    job_thread& operator=(const job_thread&) = delete;
    job_thread(job_thread&&) = delete;
    job_thread& operator=(job_thread&&) = delete;
    ~job_thread();

    // Queues `job`, which holds `bytes` until it has run; false (and `job` untouched) when the
    // queue is full or the thread stopped. A job must not throw: what escapes it ends the
    // process (std::terminate).
    [[nodiscard]] bool post(std::function<void()>& job, std::size_t bytes);
    // Runs every job queued so far, then ends the thread; later posts are refused.
    void stop();

    [[nodiscard]] std::uint64_t run_total() const;

  private:
    void run();

    struct queued {
        std::function<void()> job;
        std::size_t bytes = 0;
    };

    const std::size_t max_queued_;
    const std::size_t max_queued_bytes_;
    const int nice_;
    const std::string name_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<queued> queue_;
    std::size_t queued_bytes_ = 0;  // of the jobs queued and the one running
    std::uint64_t run_ = 0;
    bool stopping_ = false;
    std::thread thread_;  // last: started once the members above exist
};

}  // namespace tokenmeter::core
