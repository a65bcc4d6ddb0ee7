// core::job_thread: jobs run in order on one thread other than the caller's, the queue is
// bounded (a refused job stays with the caller), and stop() runs everything queued before it.
#include "core/job_thread.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_name.hpp"

namespace tokenmeter::core {
namespace {

TEST(JobThread, RunsJobsInOrderOnItsOwnThread) {
    std::mutex mutex;
    std::vector<int> order;
    std::thread::id ran_on;
    {
        job_thread jobs(64, 1 << 20);
        for (int i = 0; i < 50; ++i) {
            std::function<void()> job = [&, i] {
                std::lock_guard lock(mutex);
                order.push_back(i);
                ran_on = std::this_thread::get_id();
            };
            ASSERT_TRUE(jobs.post(job, 10));
        }
        jobs.stop();
        EXPECT_EQ(jobs.run_total(), 50u);
    }
    ASSERT_EQ(order.size(), 50u);
    for (int i = 0; i < 50; ++i) {
        EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
    }
    EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(JobThread, ItsThreadCarriesTheGivenNameCutToFifteenBytes) {
    std::string seen;
    {
        job_thread jobs(4, 1 << 20, 0, "tm-planner");
        std::function<void()> job = [&] { seen = this_thread_name(); };
        ASSERT_TRUE(jobs.post(job, 1));
        jobs.stop();
    }
    EXPECT_EQ(seen, "tm-planner");
    {
        job_thread jobs(4, 1 << 20, 0, "a-name-longer-than-fifteen-bytes");
        std::function<void()> job = [&] { seen = this_thread_name(); };
        ASSERT_TRUE(jobs.post(job, 1));
        jobs.stop();
    }
    EXPECT_EQ(seen, "a-name-longer-t");
}

TEST(JobThread, AFullQueueRefusesAndTheCallerKeepsTheJob) {
    job_thread jobs(2, 1000);
    // The first job holds the thread until released, so the queue behind it fills.
    std::mutex mutex;
    std::condition_variable changed;
    bool started = false;
    bool release = false;
    std::function<void()> blocker = [&] {
        std::unique_lock lock(mutex);
        started = true;
        changed.notify_all();
        changed.wait(lock, [&] { return release; });
    };
    ASSERT_TRUE(jobs.post(blocker, 0));
    {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return started; });
    }
    std::atomic<int> ran{0};
    std::function<void()> a = [&] { ++ran; };
    std::function<void()> b = [&] { ++ran; };
    std::function<void()> c = [&] { ran += 100; };
    EXPECT_TRUE(jobs.post(a, 10));
    EXPECT_TRUE(jobs.post(b, 10));
    EXPECT_FALSE(jobs.post(c, 10)) << "two queued: the third is refused";
    ASSERT_TRUE(c) << "a refused job is left with the caller";
    c();
    {
        std::lock_guard lock(mutex);
        release = true;
    }
    changed.notify_all();
    jobs.stop();
    EXPECT_EQ(ran.load(), 102);
    std::function<void()> late = [&] { ran += 1000; };
    EXPECT_FALSE(jobs.post(late, 0)) << "stopped";
    EXPECT_EQ(ran.load(), 102);
}

TEST(JobThread, TheBytesQueuedAreBounded) {
    job_thread jobs(100, 1000);
    std::mutex mutex;
    std::condition_variable changed;
    bool release = false;
    std::function<void()> blocker = [&] {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return release; });
    };
    ASSERT_TRUE(jobs.post(blocker, 600)) << "the running job's bytes count until it is done";
    std::atomic<int> ran{0};
    std::function<void()> small = [&] { ++ran; };
    std::function<void()> big = [&] { ++ran; };
    EXPECT_TRUE(jobs.post(small, 400));
    EXPECT_FALSE(jobs.post(big, 1)) << "1,000 bytes held: nothing more";
    {
        std::lock_guard lock(mutex);
        release = true;
    }
    changed.notify_all();
    jobs.stop();
    EXPECT_EQ(ran.load(), 1);
}

}  // namespace
}  // namespace tokenmeter::core
