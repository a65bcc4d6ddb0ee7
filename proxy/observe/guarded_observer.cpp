#include "observe/guarded_observer.hpp"

#include <spdlog/spdlog.h>

#include <exception>
#include <utility>

#include "observe/realtime_session.hpp"

namespace tokenmeter::observe {

std::string_view to_string(metering_phase phase) noexcept {
    switch (phase) {
        case metering_phase::begin:
            return "begin";
        case metering_phase::admission:
            return "admission";
        case metering_phase::request_sent:
            return "request_sent";
        case metering_phase::answered_locally:
            return "answered_locally";
        case metering_phase::response_head:
            return "response_head";
        case metering_phase::body:
            return "body";
        case metering_phase::seal:
            return "seal";
        case metering_phase::end:
            return "end";
        case metering_phase::durable_wait:
            return "durable_wait";
        case metering_phase::unforwarded:
            return "unforwarded";
        case metering_phase::upstream_error:
            return "upstream_error";
        case metering_phase::tunnel:
            return "tunnel";
    }
    return "unknown";
}

namespace {

// `done` behind a flag: the first call runs it, later ones do nothing. For a callback that must
// run exactly once whether the call it was handed to threw before or after passing it on.
std::function<void()> run_once(std::function<void()> done) {
    struct state {
        std::atomic<bool> ran{false};
        std::function<void()> done;
    };
    auto shared = std::make_shared<state>();
    shared->done = std::move(done);
    return [shared] {
        if (!shared->ran.exchange(true)) {
            shared->done();
        }
    };
}

// A request whose metering could not even begin: forwarded as it is, with nothing recorded.
class unmetered_exchange final : public exchange_observer {
  public:
    [[nodiscard]] const admission& admitted() const noexcept override { return admitted_; }
    void request_sent(core::time_point /*at*/) override {}
    void answered_locally(std::string_view /*code*/) override {}
    durable_wait response_head(int /*status*/, std::string_view /*content_type*/, bool /*has_body*/,
                               core::time_point /*at*/) override {
        return {};
    }
    void body(std::string_view /*bytes*/, core::time_point /*at*/) override {}
    [[nodiscard]] bool holds_end() const noexcept override { return false; }
    durable_wait seal(core::time_point /*at*/) override { return {}; }
    void end(end_reason /*reason*/, core::time_point /*at*/) override {}

  private:
    admission admitted_;
};

// The record sink behind a wait, guarded: a sink that throws releases the response at once.
class guarded_sink final : public record_sink {
  public:
    guarded_sink(guarded_observer& guard, record_sink& inner) noexcept
        : guard_(guard), inner_(inner) {}

    std::uint64_t append(std::string line, bool is_close) override {
        return inner_.append(std::move(line), is_close);
    }
    [[nodiscard]] bool is_durable(std::uint64_t seq) const override {
        bool durable = true;
        guard_.run(metering_phase::durable_wait, [&] { durable = inner_.is_durable(seq); });
        return durable;
    }
    void when_durable(std::uint64_t seq, std::function<void()> done) override {
        // A sink that threw may or may not have kept `done`: it runs now, and at most once.
        std::function<void()> once = run_once(std::move(done));
        if (!guard_.run(metering_phase::durable_wait, [&] { inner_.when_durable(seq, once); })) {
            once();
        }
    }

  private:
    guarded_observer& guard_;
    record_sink& inner_;
};

class guarded_exchange final : public exchange_observer {
  public:
    guarded_exchange(guarded_observer& guard, std::unique_ptr<exchange_observer> inner)
        : guard_(guard), inner_(std::move(inner)) {}

    [[nodiscard]] const admission& admitted() const noexcept override { return inner_->admitted(); }
    [[nodiscard]] bool admission_pending() const noexcept override {
        return !admission_failed_ && inner_->admission_pending();
    }
    void await_admission(std::function<void()> done) override {
        // `done` runs exactly once: by the inner observer, or here when it threw.
        std::function<void()> once = run_once(std::move(done));
        if (!guard_.run(metering_phase::admission, [&] { inner_->await_admission(once); })) {
            admission_failed_ = true;
            inner_->degrade();
            once();
        }
    }
    void request_sent(core::time_point at) override {
        if (!guard_.run(metering_phase::request_sent, [&] { inner_->request_sent(at); })) {
            inner_->degrade();
        }
    }
    void answered_locally(std::string_view code) override {
        if (!guard_.run(metering_phase::answered_locally,
                        [&] { inner_->answered_locally(code); })) {
            inner_->degrade();
        }
    }
    durable_wait response_head(int status, std::string_view content_type, bool has_body,
                               core::time_point at) override {
        durable_wait wait;
        if (!guard_.run(metering_phase::response_head, [&] {
                wait = inner_->response_head(status, content_type, has_body, at);
            })) {
            broken();
            return {};
        }
        return guarded(wait);
    }
    void unreadable_body() override {
        if (!guard_.run(metering_phase::body, [&] { inner_->unreadable_body(); })) {
            broken();
        }
    }
    void body(std::string_view bytes, core::time_point at) override {
        if (body_stopped_) {
            return;
        }
        if (!guard_.run(metering_phase::body, [&] { inner_->body(bytes, at); })) {
            broken();
        }
    }
    [[nodiscard]] bool holds_end() const noexcept override { return inner_->holds_end(); }
    durable_wait seal(core::time_point at) override {
        durable_wait wait;
        if (!guard_.run(metering_phase::seal, [&] { wait = inner_->seal(at); })) {
            inner_->degrade();
            return {};
        }
        return guarded(wait);
    }
    void end(end_reason reason, core::time_point at) override {
        if (!guard_.run(metering_phase::end, [&] { inner_->end(reason, at); })) {
            inner_->degrade();
        }
    }
    void degrade() noexcept override { inner_->degrade(); }
    void event(const protocol::response_chunk& chunk, core::time_point at) override {
        if (body_stopped_) {
            return;
        }
        if (!guard_.run(metering_phase::body, [&] { inner_->event(chunk, at); })) {
            broken();
        }
    }
    void message(std::string_view text, core::time_point at) override {
        if (body_stopped_) {
            return;
        }
        if (!guard_.run(metering_phase::body, [&] { inner_->message(text, at); })) {
            broken();
        }
    }

  private:
    // The meter's state after a throw is not to be trusted with more bytes: the record is
    // marked and closed with what was counted before.
    void broken() noexcept {
        body_stopped_ = true;
        inner_->degrade();
    }
    durable_wait guarded(const durable_wait& wait) {
        if (wait.sink() == nullptr) {
            return wait;
        }
        if (!sink_ || sink_inner_ != wait.sink()) {
            sink_inner_ = wait.sink();
            sink_ = std::make_unique<guarded_sink>(guard_, *wait.sink());
        }
        return {sink_.get(), wait.sequence()};
    }

    guarded_observer& guard_;
    std::unique_ptr<exchange_observer> inner_;
    std::unique_ptr<guarded_sink> sink_;  // made for the first wait
    record_sink* sink_inner_ = nullptr;
    bool body_stopped_ = false;
    bool admission_failed_ = false;
};

// A tunnel's metering: after a throw its state is not to be trusted with more messages; its
// end still closes the responses it holds.
class guarded_tunnel final : public tunnel_observer {
  public:
    guarded_tunnel(guarded_observer& guard, std::unique_ptr<tunnel_observer> inner)
        : guard_(guard), inner_(std::move(inner)) {}

    void message(bool from_client, std::string_view text, core::time_point at) override {
        if (stopped_) {
            return;
        }
        if (!guard_.run(metering_phase::tunnel, [&] { inner_->message(from_client, text, at); })) {
            stopped_ = true;
        }
    }
    void unreadable(protocol::parse_error reason) override {
        guard_.run(metering_phase::tunnel, [&] { inner_->unreadable(reason); });
    }
    void end(end_reason reason, core::time_point at) override {
        guard_.run(metering_phase::tunnel, [&] { inner_->end(reason, at); });
    }

  private:
    guarded_observer& guard_;
    std::unique_ptr<tunnel_observer> inner_;
    bool stopped_ = false;
};

}  // namespace

guarded_observer::guarded_observer(observer& inner, std::function<void(metering_phase)> count)
    : inner_(inner), count_(std::move(count)) {}

std::unique_ptr<exchange_observer> guarded_observer::begin(request_facts facts) {
    std::unique_ptr<exchange_observer> inner;
    if (!run(metering_phase::begin, [&] { inner = inner_.begin(std::move(facts)); }) || !inner) {
        return std::make_unique<unmetered_exchange>();
    }
    return std::make_unique<guarded_exchange>(*this, std::move(inner));
}

void guarded_observer::unforwarded(const unforwarded_request& request) {
    run(metering_phase::unforwarded, [&] { inner_.unforwarded(request); });
}

void guarded_observer::upstream_error(std::string_view reason) {
    run(metering_phase::upstream_error, [&] { inner_.upstream_error(reason); });
}

std::unique_ptr<tunnel_observer> guarded_observer::begin_tunnel(const tunnel_facts& facts) {
    std::unique_ptr<tunnel_observer> session;
    if (facts.api == protocol::api_kind::none ||
        !run(metering_phase::tunnel, [&] { session = make_realtime_session(*this, facts); }) ||
        !session) {
        return nullptr;
    }
    return std::make_unique<guarded_tunnel>(*this, std::move(session));
}

void guarded_observer::tunnel_parse_error(protocol::api_kind api, protocol::parse_error reason) {
    run(metering_phase::tunnel, [&] { inner_.tunnel_parse_error(api, reason); });
}

void guarded_observer::failed(metering_phase phase, const char* what) noexcept {
    try {
        if (count_) {
            count_(phase);
        }
    } catch (...) {
        // Counting failed as well: the log line below still says what happened.
    }
    auto& logged = logged_[static_cast<std::size_t>(phase)];
    if (!logged.exchange(true, std::memory_order_relaxed)) {
        try {
            spdlog::error(
                "metering failed in {}: {}; the response goes on unchanged and the request's "
                "usage record, if open, is marked degraded (logged once per phase; "
                "tokenmeter_metering_failures_total counts each)",
                to_string(phase), what);
        } catch (...) {
        }
    }
}

}  // namespace tokenmeter::observe
