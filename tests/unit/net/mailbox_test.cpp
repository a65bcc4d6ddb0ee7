// net/mailbox and net/name_resolver: work handed to an io_context that runs without Asio's
// locks (BOOST_ASIO_CONCURRENCY_HINT_UNSAFE, as the workers' do) from other threads.
#include "net/mailbox.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "net/name_resolver.hpp"

namespace tokenmeter::net {
namespace {

using namespace std::chrono_literals;

// An unlocked io_context with a mailbox, run by a thread of its own until stop().
struct unlocked_worker {
    unlocked_worker() {
        mailbox::install(ioc);
        thread = std::thread([this] {
            for (;;) {
                try {
                    ioc.run();
                    return;
                } catch (const std::runtime_error&) {
                    ++thrown;  // a task threw: the loop goes on, as app::run_loop does
                }
            }
        });
    }
    ~unlocked_worker() { stop(); }
    void stop() {
        if (thread.joinable()) {
            post_from_any_thread(ioc, [this] {
                guard.reset();
                ioc.stop();
            });
            thread.join();
        }
    }
    asio::io_context ioc{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE};
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard{
        ioc.get_executor()};
    std::atomic<int> thrown{0};
    std::thread thread;
};

template <typename Predicate>
bool eventually(Predicate done, std::chrono::milliseconds limit = 5s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!done()) {
        if (std::chrono::steady_clock::now() > until) {
            return false;
        }
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

TEST(Mailbox, TasksFromManyThreadsRunOnTheContextsThreadInOrderPerSender) {
    unlocked_worker worker;
    const auto worker_id = worker.thread.get_id();
    constexpr int senders = 4;
    constexpr int per_sender = 2000;
    // Touched only on the worker's thread: no lock, so ThreadSanitizer would see a post that
    // bypassed the mailbox's ordering.
    std::vector<int> last(senders, -1);
    int out_of_order = 0;
    int ran = 0;
    std::thread::id ran_on;
    std::vector<std::thread> threads;
    for (int s = 0; s < senders; ++s) {
        threads.emplace_back([&, s] {
            for (int i = 0; i < per_sender; ++i) {
                post_from_any_thread(worker.ioc, [&, s, i] {
                    ran_on = std::this_thread::get_id();
                    if (i != last[s] + 1) {
                        ++out_of_order;
                    }
                    last[s] = i;
                    ++ran;
                });
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    std::atomic<bool> done{false};
    int seen = 0;
    int disorder = -1;
    std::thread::id where;
    post_from_any_thread(worker.ioc, [&] {
        seen = ran;
        disorder = out_of_order;
        where = ran_on;
        done = true;
    });
    ASSERT_TRUE(eventually([&] { return done.load(); }));
    worker.stop();
    EXPECT_EQ(seen, senders * per_sender);
    EXPECT_EQ(disorder, 0);
    EXPECT_EQ(where, worker_id);
}

TEST(Mailbox, ABurstOfTasksLetsReadinessEventsRunBetweenTurns) {
    asio::io_context ioc{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE};
    mailbox::install(ioc);
    constexpr int burst = 100;
    std::vector<int> order;  // each task's index; -1 for the timer
    auto record = [&](int what) {
        order.push_back(what);
        if (order.size() == burst + 1) {
            ioc.stop();  // the mailbox's wait would keep run_for going
        }
    };
    asio::steady_timer due(ioc);
    for (int i = 0; i < burst; ++i) {
        post_from_any_thread(ioc, [&, i] {
            record(i);
            if (i == 0) {
                // Expired at once: its completion comes from the reactor's next look.
                due.expires_after(std::chrono::seconds(0));
                due.async_wait([&](error_code) { record(-1); });
            }
        });
    }
    ioc.run_for(5s);
    ASSERT_EQ(order.size(), static_cast<std::size_t>(burst + 1));
    const auto timer_at = std::find(order.begin(), order.end(), -1) - order.begin();
    // Before: the whole burst ran ahead of it. Now it runs after a turn or two of tasks.
    EXPECT_LE(timer_at, static_cast<std::ptrdiff_t>(2 * mailbox::tasks_per_turn));
    order.erase(order.begin() + timer_at);
    for (int i = 0; i < burst; ++i) {
        EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
    }
}

TEST(Mailbox, ATaskThatThrowsEndsOnlyItself) {
    unlocked_worker worker;
    std::atomic<int> ran{0};
    post_from_any_thread(worker.ioc, [] { throw std::runtime_error("task"); });
    post_from_any_thread(worker.ioc, [&] { ++ran; });
    ASSERT_TRUE(eventually([&] { return ran.load() == 1; }));
    // The mailbox is armed still: later posts run too.
    post_from_any_thread(worker.ioc, [&] { ++ran; });
    ASSERT_TRUE(eventually([&] { return ran.load() == 2; }));
    EXPECT_EQ(worker.thrown.load(), 1);
}

TEST(Mailbox, TasksLeftAtDestructionAreDestroyedUnrun) {
    auto owned = std::make_shared<int>(7);
    bool ran = false;
    {
        asio::io_context ioc{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE};
        mailbox::install(ioc);
        post_from_any_thread(ioc, [owned, &ran] { ran = true; });
        EXPECT_EQ(owned.use_count(), 2);
    }  // never run
    EXPECT_FALSE(ran);
    EXPECT_EQ(owned.use_count(), 1);
}

TEST(Mailbox, AContextWithoutOneGetsAPlainPost) {
    asio::io_context ioc;  // keeps Asio's locks
    EXPECT_EQ(mailbox::of(ioc), nullptr);
    bool ran = false;
    std::thread poster([&] { post_from_any_thread(ioc, [&] { ran = true; }); });
    poster.join();
    ioc.run();
    EXPECT_TRUE(ran);
}

TEST(NameResolver, AnswersOnTheAskingContextsThread) {
    unlocked_worker worker;
    name_resolver resolver;
    resolver.start();
    std::atomic<bool> done{false};
    error_code got;
    std::size_t endpoints = 0;
    bool loopback = false;
    bool on_worker = false;
    const auto worker_id = worker.thread.get_id();
    resolver.resolve("localhost", "8080", worker.ioc,
                     [&](error_code ec, const name_resolver::results_type& results) {
                         on_worker = std::this_thread::get_id() == worker_id;
                         got = ec;
                         for (const auto& entry : results) {
                             ++endpoints;
                             loopback = loopback || entry.endpoint().address().is_loopback();
                             EXPECT_EQ(entry.endpoint().port(), 8080);
                         }
                         done = true;
                     });
    ASSERT_TRUE(eventually([&] { return done.load(); }));
    EXPECT_FALSE(got) << got.message();
    EXPECT_GE(endpoints, 1u);
    EXPECT_TRUE(loopback);
    EXPECT_TRUE(on_worker);
}

TEST(NameResolver, AnUnknownNameIsAnError) {
    unlocked_worker worker;
    name_resolver resolver;
    resolver.start();
    std::atomic<bool> done{false};
    error_code got;
    // .invalid never resolves (RFC 6761), and needs no network to say so.
    resolver.resolve("tokenmeter-test.invalid", "80", worker.ioc,
                     [&](error_code ec, const name_resolver::results_type&) {
                         got = ec;
                         done = true;
                     });
    ASSERT_TRUE(eventually([&] { return done.load(); }, 30s));
    EXPECT_TRUE(got);
}

TEST(NameResolver, AfterStopNothingIsAnsweredAndStopIsIdempotent) {
    unlocked_worker worker;
    auto owned = std::make_shared<int>(1);
    std::atomic<bool> answered{false};
    {
        name_resolver resolver;
        resolver.stop();  // never started
        resolver.start();
        resolver.stop();
        resolver.resolve("localhost", "80", worker.ioc,
                         [owned, &answered](error_code, const name_resolver::results_type&) {
                             answered = true;
                         });
        resolver.stop();
        EXPECT_EQ(owned.use_count(), 2);  // held, unrun
    }
    EXPECT_EQ(owned.use_count(), 1);  // dropped with the resolver
    std::atomic<bool> flushed{false};
    post_from_any_thread(worker.ioc, [&] { flushed = true; });
    ASSERT_TRUE(eventually([&] { return flushed.load(); }));
    EXPECT_FALSE(answered.load());
}

}  // namespace
}  // namespace tokenmeter::net
