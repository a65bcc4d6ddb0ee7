// outbound/redis_asio: runs a hiredis asynchronous context on an Asio io_context. hiredis asks for
// read and write interest through its ev hooks; each is one async_wait on the context's socket,
// re-armed while hiredis still wants it. hiredis owns the socket and closes it; the adapter only
// watches it, and detaches when hiredis cleans up (which may happen inside a read callback, so
// every handler holds the adapter alive and checks that it is still attached).
#pragma once

#include <hiredis/async.h>

#include <memory>

#include "net/beast.hpp"

namespace tokenmeter::outbound {

class redis_asio_adapter : public std::enable_shared_from_this<redis_asio_adapter> {
  public:
    // Attaches to `context` (sets its ev hooks). Returns null when hiredis refuses.
    static std::shared_ptr<redis_asio_adapter> attach(asio::io_context& ioc,
                                                      redisAsyncContext* context);
    redis_asio_adapter(asio::io_context& ioc, redisAsyncContext* context);
    ~redis_asio_adapter();
    redis_asio_adapter(const redis_asio_adapter&) = delete;
    redis_asio_adapter& operator=(const redis_asio_adapter&) = delete;

  private:
    using descriptor = asio::posix::basic_stream_descriptor<executor>;
    static void add_read(void* self);
    static void del_read(void* self);
    static void add_write(void* self);
    static void del_write(void* self);
    static void cleanup(void* self);

    void arm_read();
    void arm_write();
    void detach();

    redisAsyncContext* context_;
    descriptor socket_;
    bool want_read_ = false;
    bool want_write_ = false;
    bool reading_ = false;  // an async_wait for read is outstanding
    bool writing_ = false;
    // hiredis's ev.data points at this; it keeps the adapter alive until cleanup.
    std::shared_ptr<redis_asio_adapter> self_;
};

}  // namespace tokenmeter::outbound
