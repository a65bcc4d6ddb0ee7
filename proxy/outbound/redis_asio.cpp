#include "outbound/redis_asio.hpp"

namespace tokenmeter::outbound {

std::shared_ptr<redis_asio_adapter> redis_asio_adapter::attach(asio::io_context& ioc,
                                                               redisAsyncContext* context) {
    if (context == nullptr || context->ev.data != nullptr) {
        return nullptr;
    }
    auto adapter = std::make_shared<redis_asio_adapter>(ioc, context);
    adapter->self_ = adapter;
    context->ev.data = adapter.get();
    context->ev.addRead = &redis_asio_adapter::add_read;
    context->ev.delRead = &redis_asio_adapter::del_read;
    context->ev.addWrite = &redis_asio_adapter::add_write;
    context->ev.delWrite = &redis_asio_adapter::del_write;
    context->ev.cleanup = &redis_asio_adapter::cleanup;
    return adapter;
}

redis_asio_adapter::redis_asio_adapter(asio::io_context& ioc, redisAsyncContext* context)
    : context_(context), socket_(ioc.get_executor(), context->c.fd) {}

redis_asio_adapter::~redis_asio_adapter() {
    if (socket_.is_open()) {
        // hiredis closes the descriptor itself.
        (void)socket_.release();
    }
}

void redis_asio_adapter::add_read(void* self) {
    auto* a = static_cast<redis_asio_adapter*>(self);
    a->want_read_ = true;
    a->arm_read();
}

void redis_asio_adapter::del_read(void* self) {
    static_cast<redis_asio_adapter*>(self)->want_read_ = false;
}

void redis_asio_adapter::add_write(void* self) {
    auto* a = static_cast<redis_asio_adapter*>(self);
    a->want_write_ = true;
    a->arm_write();
}

void redis_asio_adapter::del_write(void* self) {
    static_cast<redis_asio_adapter*>(self)->want_write_ = false;
}

void redis_asio_adapter::cleanup(void* self) {
    static_cast<redis_asio_adapter*>(self)->detach();
}

void redis_asio_adapter::detach() {
    want_read_ = false;
    want_write_ = false;
    if (context_ != nullptr) {
        context_->ev.data = nullptr;
        context_ = nullptr;
    }
    if (socket_.is_open()) {
        // Cancels the outstanding waits; hiredis closes the descriptor after this returns.
        (void)socket_.release();
    }
    // The outstanding handlers (if any) hold their own references.
    self_.reset();
}

void redis_asio_adapter::arm_read() {
    if (reading_ || context_ == nullptr) {
        return;
    }
    reading_ = true;
    socket_.async_wait(descriptor::wait_read, [self = shared_from_this()](const error_code& ec) {
        self->reading_ = false;
        if (ec || self->context_ == nullptr || !self->want_read_) {
            return;
        }
        redisAsyncHandleRead(self->context_);
        // The read may have ended the connection (detach) or not.
        if (self->context_ != nullptr && self->want_read_) {
            self->arm_read();
        }
    });
}

void redis_asio_adapter::arm_write() {
    if (writing_ || context_ == nullptr) {
        return;
    }
    writing_ = true;
    socket_.async_wait(descriptor::wait_write, [self = shared_from_this()](const error_code& ec) {
        self->writing_ = false;
        if (ec || self->context_ == nullptr || !self->want_write_) {
            return;
        }
        redisAsyncHandleWrite(self->context_);
        if (self->context_ != nullptr && self->want_write_) {
            self->arm_write();
        }
    });
}

}  // namespace tokenmeter::outbound
