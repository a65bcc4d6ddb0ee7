// tests/faults: an observer that wraps another and throws in one phase of every request, after
// the wrapped call (before it for begin and end). Test code only: the unit test of the guard and
// the tokenmeter-faults binary inject it; the proxy itself never contains it.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "observe/guarded_observer.hpp"
#include "observe/observer.hpp"

namespace tokenmeter::faults {

using observe::admission;
using observe::durable_wait;
using observe::end_reason;
using observe::exchange_observer;
using observe::metering_phase;
using observe::observer;
using observe::outcome;
using observe::request_facts;

class throwing_observer final : public observer {
  public:
    throwing_observer(observer& inner, metering_phase phase) : inner_(inner), phase_(phase) {}

    std::unique_ptr<exchange_observer> begin(request_facts facts) override {
        throw_in(metering_phase::begin);
        return std::make_unique<exchange>(*this, inner_.begin(std::move(facts)));
    }
    void unforwarded(const observe::unforwarded_request& request) override {
        inner_.unforwarded(request);
        throw_in(metering_phase::unforwarded);
    }
    void upstream_error(std::string_view reason) override {
        inner_.upstream_error(reason);
        throw_in(metering_phase::upstream_error);
    }

  private:
    void throw_in(metering_phase phase) const {
        if (phase == phase_) {
            throw std::runtime_error("injected failure in " + std::string(to_string(phase)));
        }
    }

    class exchange final : public exchange_observer {
      public:
        exchange(throwing_observer& owner, std::unique_ptr<exchange_observer> inner)
            : owner_(owner), inner_(std::move(inner)) {}
        [[nodiscard]] const admission& admitted() const noexcept override {
            return inner_->admitted();
        }
        [[nodiscard]] bool admission_pending() const noexcept override {
            return owner_.phase_ == metering_phase::admission || inner_->admission_pending();
        }
        void await_admission(std::function<void()> done) override {
            owner_.throw_in(metering_phase::admission);
            inner_->await_admission(std::move(done));
        }
        void request_sent(core::time_point at) override {
            inner_->request_sent(at);
            owner_.throw_in(metering_phase::request_sent);
        }
        void answered_locally(std::string_view code) override {
            inner_->answered_locally(code);
            owner_.throw_in(metering_phase::answered_locally);
        }
        durable_wait response_head(int status, std::string_view content_type, bool has_body,
                                   core::time_point at) override {
            auto wait = inner_->response_head(status, content_type, has_body, at);
            owner_.throw_in(metering_phase::response_head);
            return wait;
        }
        void body(std::string_view bytes, core::time_point at) override {
            inner_->body(bytes, at);
            owner_.throw_in(metering_phase::body);
        }
        [[nodiscard]] bool holds_end() const noexcept override { return inner_->holds_end(); }
        durable_wait seal(core::time_point at) override {
            auto wait = inner_->seal(at);
            owner_.throw_in(metering_phase::seal);
            return wait;
        }
        void end(end_reason reason, core::time_point at) override {
            owner_.throw_in(metering_phase::end);
            inner_->end(reason, at);
        }
        void degrade() noexcept override { inner_->degrade(); }

      private:
        throwing_observer& owner_;
        std::unique_ptr<exchange_observer> inner_;
    };

    observer& inner_;
    metering_phase phase_;
};

}  // namespace tokenmeter::faults
