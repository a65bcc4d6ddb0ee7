// net/mailbox: work handed to a worker's event loop from another thread.
//
// A worker's io_context runs without Asio's scheduler lock (app/workers: each handler run, each
// readiness event and each timer saves a lock and unlock), so asio::post from another thread
// onto it is a data race. What other threads hand a worker (accepted connections, the Redis
// store's admission answers, the usage spool's "written", the drain and the shutdown, resolved
// host names) goes through its mailbox instead: a locked queue and an eventfd the worker's
// reactor waits on.
// On its own thread the worker takes the queue and posts each task to itself, where a task that
// throws ends nothing but itself (app::run_loop). It posts at most tasks_per_turn of them before
// its reactor looks for readiness again: a burst of a thousand new connections is started a few
// at a time between the chunks of the streams already running, instead of all of them ahead of
// those chunks (tens of milliseconds of request starts in one turn of the loop).
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "net/beast.hpp"

namespace tokenmeter::net {

class mailbox final : public asio::io_context::service {
  public:
    // NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables): Asio's service key
    static asio::io_context::id id;

    // A move-only nullary callable.
    class task {
      public:
        template <typename F>
        explicit task(F f) : impl_(std::make_unique<model<F>>(std::move(f))) {}
        void operator()() { impl_->run(); }

      private:
        struct concept_t {
            virtual ~concept_t() = default;
            virtual void run() = 0;
        };
        template <typename F>
        struct model final : concept_t {
            explicit model(F&& f) : fn(std::move(f)) {}
            void run() override { fn(); }
            F fn;
        };
        std::unique_ptr<concept_t> impl_;
    };

    // Created by install() (use_service), on the thread that will run `ioc` or before any thread
    // runs it: it registers its eventfd with `ioc`'s reactor.
    explicit mailbox(asio::io_context& ioc);
    ~mailbox() override;
    mailbox(const mailbox&) = delete;
    mailbox& operator=(const mailbox&) = delete;

    // From any thread: `t` runs on the thread that runs the io_context. Tasks still queued when
    // the io_context is destroyed are destroyed unrun (as posted handlers are).
    void post(task t);

    // Tasks posted to the io_context per turn of its loop (see above).
    static constexpr std::size_t tasks_per_turn = 16;

    // Gives `ioc` a mailbox; call before any thread runs `ioc`.
    static mailbox& install(asio::io_context& ioc) { return asio::use_service<mailbox>(ioc); }
    // `ioc`'s mailbox, or null when it has none.
    static mailbox* of(asio::io_context& ioc);

  private:
    void shutdown() override;
    void arm();
    void on_ready(error_code ec);
    // Posts up to tasks_per_turn of taken_, and itself after them while more are left.
    void feed();

    asio::io_context& ioc_;
    std::mutex mutex_;
    std::vector<task> queue_;
    bool shut_down_ = false;  // under mutex_: posts after shutdown are dropped
    // Taken from queue_, not yet posted: the io_context's thread only.
    std::deque<task> taken_;
    bool feeding_ = false;  // a feed() is posted
    std::optional<asio::posix::basic_stream_descriptor<executor>> wake_;
};

// Runs `f` on the thread that runs `ioc`, from any thread: through its mailbox when it has one
// (a worker's), else asio::post (an io_context that keeps Asio's locks).
template <typename F>
void post_from_any_thread(asio::io_context& ioc, F f) {
    if (mailbox* box = mailbox::of(ioc)) {
        box->post(mailbox::task(std::move(f)));
        return;
    }
    asio::post(ioc, std::move(f));
}

}  // namespace tokenmeter::net
