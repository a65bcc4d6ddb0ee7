#include "observe/metering_observer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "metrics/billing.hpp"
#include "metrics/registry.hpp"
#include "metrics/status_board.hpp"
#include "observe/guarded_observer.hpp"
#include "observe/shared_limit.hpp"
#include "observe/task_meter.hpp"
#include "tokenizer/catalog.hpp"
#include "usage/record.hpp"
#include "usage/spool.hpp"
#include "usage/tenant.hpp"
#include "usage/throughput.hpp"

namespace tokenmeter::observe {
namespace {

// The client's own request id, kept only when it is short plain text.
std::string client_request_id(std::string_view value) {
    if (value.empty() || value.size() > 128) {
        return {};
    }
    for (char c : value) {
        auto u = static_cast<unsigned char>(c);
        if (u < 0x21 || u > 0x7e || c == '"' || c == '\\') {
            return {};
        }
    }
    return std::string(value);
}

// What only the access record needs of a request, copied at its start (the request's own
// strings are gone by its end); made only when the access log is on.
struct access_facts {
    std::string method;
    std::string path;
    std::string client;
    std::string request_id;
    std::uint64_t bytes_in = 0;
    std::uint64_t bytes_out = 0;  // response body bytes shown to body()
    bool answered_locally = false;
};

// Everything one request's metering holds, in one place.
struct request_state {
    protocol::api_kind api = protocol::api_kind::none;
    core::time_point received{};
    std::string tenant;  // "" when the request is not metered per tenant
    // The open entry of the usage record being written: null when records are off, id "" once
    // it was closed. Made only then, as are the task and a refusal below: most requests have
    // none of them, and every open stream would carry about 400 bytes of empty strings.
    std::unique_ptr<usage::open_info> open;
    std::uint64_t open_seq = 0;
    std::uint64_t close_seq = 0;
    std::int64_t wall_start_ms = 0;
    core::time_point last_checkpoint{};
    // Finished before its last bytes were sent; made only then (a summary is about 600 bytes,
    // which every open request would carry inline).
    std::unique_ptr<meter::request_summary> sealed;
    std::unique_ptr<admission> admit;  // null: admitted (a refusal is made by admit_tenant)
    // What admission reserves for a limited tenant (the prompt estimate and the output limit),
    // and what it did take from the bucket (local) or charge to the store (shared): settled to
    // the real count at the end (`shared` below: the store's).
    std::uint64_t estimate = 0;
    std::uint64_t reserved = 0;            // local bucket only
    std::unique_ptr<task_state> task;      // null when the request has none
    std::unique_ptr<access_facts> access;  // null when the access log is off
    // The byte-sized fields together, so that they share their padding.
    core::trace_context trace;    // what the upstream's traceparent carried
    bool bucket_charged = false;  // the tenant's tokens are in its bucket (charge_bucket)
    bool stream_counted = false;
    bool shared = false;    // admitted and settled by the fleet-wide store
    bool degraded = false;  // a metering call failed: marked in the record
};

// The end of a request whose finishing reads many bytes (a long prompt to count, a large JSON
// body to parse) runs on the finishing thread (metering_parts::finish_off_thread), not on the
// I/O thread whose other streams would wait for it. Below this many bytes it runs in place.
constexpr std::size_t inline_finish_bytes = std::size_t{64} * 1024;

// A seal finished on the finishing thread: the close entry the response's end waits for does not
// exist until the job has written it, so the wait the relay gets is this one. It is over once
// the job ran and its close entry (if any) is on disk. An end() that comes while the job runs
// (the client hung up) is left to the job, which runs it after the seal.
class deferred_seal final : public record_sink {
  public:
    explicit deferred_seal(record_sink* records) noexcept : records_(records) {}

    std::uint64_t append(std::string /*line*/, bool /*is_close*/) override { return 0; }
    [[nodiscard]] bool is_durable(std::uint64_t /*seq*/) const override {
        std::uint64_t close = 0;
        {
            std::lock_guard lock(mutex_);
            if (!sealed_) {
                return false;
            }
            close = close_seq_;
        }
        return close == 0 || records_ == nullptr || records_->is_durable(close);
    }
    void when_durable(std::uint64_t /*seq*/, std::function<void()> done) override {
        std::uint64_t close = 0;
        {
            std::lock_guard lock(mutex_);
            if (!sealed_) {
                waiter_ = std::move(done);
                return;
            }
            close = close_seq_;
        }
        forward(close, std::move(done));
    }

    // From end(): false when the seal is done (end runs now), true when the job will run it.
    bool defer_end(end_reason reason, core::time_point at) {
        std::lock_guard lock(mutex_);
        if (sealed_) {
            return false;
        }
        pending_end_ = {reason, at};
        return true;
    }
    // From the job, once the seal's work is done (close_seq 0: no close entry was written).
    // Returns the end to run next, if one was deferred; the waiter goes on to the close entry.
    std::optional<std::pair<end_reason, core::time_point>> sealed(std::uint64_t close_seq) {
        std::function<void()> waiter;
        std::optional<std::pair<end_reason, core::time_point>> end;
        {
            std::lock_guard lock(mutex_);
            sealed_ = true;
            close_seq_ = close_seq;
            waiter = std::move(waiter_);
            end = pending_end_;
        }
        if (waiter) {
            forward(close_seq, std::move(waiter));
        }
        return end;
    }

  private:
    void forward(std::uint64_t close, std::function<void()> done) {
        if (close != 0 && records_ != nullptr) {
            records_->when_durable(close, std::move(done));
        } else {
            done();
        }
    }

    record_sink* records_;
    mutable std::mutex mutex_;
    bool sealed_ = false;
    std::uint64_t close_seq_ = 0;
    std::function<void()> waiter_;
    std::optional<std::pair<end_reason, core::time_point>> pending_end_;
};

// A shared-limit admission, written by the store's thread before the session is called back.
struct admission_slot {
    std::atomic<bool> decided{false};  // set last (release); read before admit (acquire)
    bool admitted = false;
    admission admit;
};

// The tokens admission reserves before the output exists: the prompt, re-tokenized with the
// model's tokenizer when one is loaded, else about four bytes per token of its text, and the
// token ids it gives as they are; and the output limit the request names, else the configured
// default.
std::uint64_t reservation_for(const tokenizer::encoder* native, const protocol::request_info& info,
                              std::uint64_t default_output, std::size_t count_budget) {
    std::uint64_t prompt = 0;
    if (native != nullptr && !info.prompt_text.empty()) {
        prompt = native->count_bounded(info.prompt_text, count_budget).tokens;
    } else {
        const std::uint64_t chars =
            std::max<std::uint64_t>(info.prompt_chars, info.prompt_text.size());
        prompt = (chars + 3) / 4;
    }
    if (__builtin_add_overflow(prompt, info.prompt_token_ids, &prompt)) {
        return std::numeric_limits<std::uint64_t>::max();
    }
    const std::uint64_t output = info.max_output_tokens.value_or(default_output);
    std::uint64_t total = 0;
    return __builtin_add_overflow(prompt, output, &total)
               ? std::numeric_limits<std::uint64_t>::max()
               : total;
}

class metering_exchange final : public exchange_observer,
                                public std::enable_shared_from_this<metering_exchange> {
  public:
    metering_exchange(const metering_parts& parts, const metering_options& options,
                      request_facts& facts)
        : parts_(parts),
          options_(options),
          exchange_(facts.api, facts.info, facts.received,
                    &parts.registry->inter_token_latency_bounds(), options.exchange_limits) {
        state_.api = facts.api;
        state_.received = facts.received;
        state_.trace = facts.trace;
        if (parts_.access_log) {
            state_.access = std::make_unique<access_facts>(
                access_facts{std::string(facts.method),
                             std::string(facts.target.substr(0, facts.target.find('?'))),
                             std::string(facts.client),
                             client_request_id(facts.header("x-request-id")), facts.body_bytes});
        }
        open_record(facts);
        const tokenizer::selection chosen = parts_.tokenizers != nullptr
                                                ? parts_.tokenizers->for_model(facts.info.model)
                                                : tokenizer::selection{};
        const bool ask = !facts.admitted_already;
        if (parts_.shared != nullptr && !state_.tenant.empty() &&
            parts_.shared->covers(state_.tenant)) {
            state_.shared = true;
            slot_ = std::make_shared<admission_slot>();
            if (ask) {
                state_.estimate =
                    reservation_for(chosen.native, facts.info, options_.default_output_reservation,
                                    reservation_count_bytes());
            } else {
                // Nothing reserved: its whole count is settled with the store at its end.
                slot_->admitted = true;
                slot_->decided.store(true, std::memory_order_release);
            }
        } else if (ask && parts_.throughput != nullptr && !state_.tenant.empty() &&
                   parts_.throughput->limits(state_.tenant)) {
            state_.estimate =
                reservation_for(chosen.native, facts.info, options_.default_output_reservation,
                                reservation_count_bytes());
        }
        if (parts_.tokenizers != nullptr && facts.api != protocol::api_kind::none) {
            exchange_.use_encoders({chosen.native, chosen.reference}, options_.input_counting,
                                   std::move(facts.info.prompt_text));
        }
        if (ask) {
            admit_tenant();
        }
        if (parts_.tasks != nullptr && facts.api != protocol::api_kind::none) {
            task_state task = parts_.tasks->begin(facts.header, facts.info.model, facts.received);
            if (!task.task.empty()) {
                state_.task = std::make_unique<task_state>(std::move(task));
            }
        }
    }

    [[nodiscard]] const admission& admitted() const noexcept override {
        static const admission admitted_here;
        if (slot_) {
            return slot_->admit;
        }
        return state_.admit ? *state_.admit : admitted_here;
    }
    [[nodiscard]] bool admission_pending() const noexcept override {
        return slot_ && !slot_->decided.load(std::memory_order_acquire);
    }
    void await_admission(std::function<void()> done) override {
        if (!admission_pending()) {
            done();
            return;
        }
        auto* billing = parts_.billing;
        auto* status = parts_.status;
        parts_.shared->admit(state_.tenant, state_.estimate, state_.received,
                             [slot = slot_, tenant = state_.tenant, billing, status,
                              done = std::move(done)](const shared_decision& decision) {
                                 slot->admit = refusal_or_admission(
                                     decision.admission, tenant, decision.shared, billing, status);
                                 slot->admitted = decision.admission.admitted;
                                 slot->decided.store(true, std::memory_order_release);
                                 done();
                             });
    }

    void request_sent(core::time_point /*at*/) override { exchange_.on_request_sent(); }
    void answered_locally(std::string_view code) override {
        exchange_.on_local_answer(code);
        if (state_.access) {
            state_.access->answered_locally = true;
        }
    }

    durable_wait response_head(int status, std::string_view content_type, bool has_body,
                               core::time_point at) override {
        exchange_.on_response_head(status, content_type, at);
        if (has_body && !state_.stream_counted) {
            state_.stream_counted = true;
            parts_.registry->stream_opened();
        }
        return hold(state_.open_seq);
    }
    void unreadable_body() override { exchange_.on_unreadable_body(); }

    void body(std::string_view bytes, core::time_point at) override {
        if (state_.access) {
            state_.access->bytes_out += bytes.size();
        }
        if (state_.api == protocol::api_kind::none || bytes.empty()) {
            return;
        }
        exchange_.on_body(bytes, at);
        maybe_checkpoint(at);
    }

    void event(const protocol::response_chunk& chunk, core::time_point at) override {
        if (state_.api == protocol::api_kind::none) {
            return;
        }
        exchange_.on_event(chunk, at);
        maybe_checkpoint(at);
    }

    void message(std::string_view text, core::time_point at) override {
        if (state_.access) {
            state_.access->bytes_out += text.size();
        }
        if (state_.api == protocol::api_kind::none) {
            return;
        }
        exchange_.on_message(text, at);
        maybe_checkpoint(at);
    }

    void degrade() noexcept override { degraded_.store(true, std::memory_order_relaxed); }

    [[nodiscard]] bool holds_end() const noexcept override {
        return holding() && !state_.sealed && !deferred_ && writing_record();
    }

    durable_wait seal(core::time_point at) override {
        if (state_.sealed || deferred_) {
            return {};
        }
        if (finishes_off_thread()) {
            deferred_ = std::make_shared<deferred_seal>(parts_.records);
            std::function<void()> job = [self = shared_from_this(), deferred = deferred_, at] {
                self->seal_off_thread(*deferred, at);
            };
            if (queue_end(job)) {
                return {deferred_.get(), 1};
            }
            deferred_.reset();
        }
        seal_now(at);
        return hold(state_.close_seq);
    }

    void end(end_reason reason, core::time_point at) override {
        if (deferred_ && deferred_->defer_end(reason, at)) {
            return;  // the seal's job runs it
        }
        if (!state_.sealed && finishes_off_thread()) {
            std::function<void()> job = [self = shared_from_this(), reason, at] {
                self->run_off_thread(metering_phase::end, [&] { self->end_now(reason, at); });
            };
            if (queue_end(job)) {
                return;
            }
        }
        end_now(reason, at);
    }

  private:
    // The prompt bytes admission counts before the request goes on (on the I/O thread, so few):
    // the rest of a longer prompt is estimated at the same tokens per byte. The end settles the
    // bucket with the request's real count.
    [[nodiscard]] std::size_t reservation_count_bytes() const noexcept {
        return std::min(options_.exchange_limits.max_prompt_count_bytes, inline_finish_bytes);
    }

    // Hands `job` to the finishing thread; false (counted) when its queue is full.
    bool queue_end(std::function<void()>& job) {
        const bool queued = parts_.finish_off_thread(job, exchange_.retained_bytes());
        parts_.registry->finishing_thread_end(queued);
        return queued;
    }

    // Whether the end's work is large enough to leave the I/O thread (inline_finish_bytes).
    [[nodiscard]] bool finishes_off_thread() const noexcept {
        return parts_.finish_off_thread && exchange_.finish_cost_bytes() > inline_finish_bytes;
    }

    // On the finishing thread: what a failure there costs is what it would cost in the guard
    // (observe/guarded_observer): counted by phase, the record marked degraded.
    template <typename Work>
    void run_off_thread(metering_phase phase, Work&& work) noexcept {
        try {
            work();
        } catch (const std::exception& e) {
            failed_off_thread(phase, e.what());
        } catch (...) {
            failed_off_thread(phase, "unknown exception");
        }
    }
    void failed_off_thread(metering_phase phase, const char* what) noexcept {
        degraded_.store(true, std::memory_order_relaxed);
        try {
            spdlog::error("metering failed in {} on the finishing thread: {}", to_string(phase),
                          what);
            parts_.registry->metering_failure(to_string(phase));
        } catch (...) {  // NOLINT(bugprone-empty-catch): the failure is already in the record
        }
    }

    void seal_off_thread(deferred_seal& deferred, core::time_point at) noexcept {
        run_off_thread(metering_phase::seal, [&] { seal_now(at); });
        // Whether or not the seal's work succeeded, the response's end is released.
        std::optional<std::pair<end_reason, core::time_point>> end;
        run_off_thread(metering_phase::durable_wait, [&] {
            end = deferred.sealed(state_.sealed ? hold(state_.close_seq).sequence() : 0);
        });
        if (end) {
            run_off_thread(metering_phase::end, [&] { end_now(end->first, end->second); });
        }
    }

    void seal_now(core::time_point at) {
        state_.sealed = std::make_unique<meter::request_summary>(
            exchange_.finish(meter::end_reason::upstream_complete, at));
        const meter::billed_counts counts = meter::billed(*state_.sealed, options_.billing);
        write_close(*state_.sealed, counts);
        // The bucket too, before the client can see the end: its next request meets the debt
        // this one left, even on another worker.
        charge_bucket(*state_.sealed, counts);
    }

    void end_now(end_reason reason, core::time_point at) {
        const bool was_sealed = state_.sealed != nullptr;
        auto summary = was_sealed ? std::move(*state_.sealed) : exchange_.finish(reason, at);
        state_.sealed.reset();
        // Every count below (record, metrics, tenant, status page, tasks) is this one reading.
        const meter::billed_counts counts = meter::billed(summary, options_.billing);
        if (!was_sealed) {
            write_close(summary, counts);
        }
        if (state_.stream_counted) {
            state_.stream_counted = false;
            parts_.registry->stream_closed();
        }
        if (summary.parse_errors > 0) {
            spdlog::debug("{} parse errors in response for model {}", summary.parse_errors,
                          summary.model);
        }
        // The registry first: a model the upstream served takes its label slot there, and the
        // tenant counters, then the status page, find it.
        if (state_.trace.valid() && state_.trace.sampled()) {
            // A sampled request leaves its trace as the exemplar of the buckets it lands in.
            const metrics::exemplar_source trace{state_.trace.trace, state_.trace.span,
                                                 parts_.wall_clock_ms()};
            parts_.registry->record(summary, counts, &trace);
        } else {
            parts_.registry->record(summary, counts);
        }
        record_tenant(summary, counts);
        if (parts_.status != nullptr) {
            parts_.status->record(summary, counts, state_.tenant);
        }
        if (parts_.tasks != nullptr && state_.task) {
            parts_.tasks->end(*state_.task, summary, counts);
        }
        if (state_.access) {
            write_access(summary, counts);
        }
        if (parts_.otel != nullptr && summary.api != protocol::api_kind::none) {
            parts_.otel->finished(summary, counts, state_.trace);
        }
    }

    // Whether the request went on to the upstream (a tenant refusal did not).
    [[nodiscard]] bool forwarded() const noexcept {
        if (slot_) {
            return slot_->decided.load(std::memory_order_acquire) && slot_->admitted;
        }
        return !state_.admit;
    }

    void write_access(const meter::request_summary& summary, const meter::billed_counts& counts) {
        const access_facts& facts = *state_.access;
        access_entry entry;
        entry.method = facts.method;
        entry.path = facts.path;
        entry.status = summary.status;
        entry.outcome = meter::to_string(summary.result);
        if (summary.api != protocol::api_kind::none) {
            entry.api = protocol::to_string(summary.api);
        }
        entry.model = summary.model;
        entry.tenant = state_.tenant;
        entry.request_id = facts.request_id;
        if (state_.trace.valid()) {
            entry.trace_id = state_.trace.trace;
            entry.span_id = state_.trace.span;
        }
        entry.client = facts.client;
        if (forwarded()) {
            entry.upstream = options_.upstream;
        }
        entry.time_to_first_token = summary.time_to_first_token;
        entry.duration_seconds = summary.duration_seconds;
        entry.input_tokens = counts.input.value;
        entry.output_tokens = counts.output.value;
        entry.bytes_in = facts.bytes_in;
        if (!facts.answered_locally) {
            entry.bytes_out = facts.bytes_out;
        }
        parts_.access_log(entry);
    }

    // A usage record's open entry was written and its close was not.
    [[nodiscard]] bool writing_record() const noexcept {
        return state_.open && !state_.open->id.empty();
    }
    [[nodiscard]] bool holding() const noexcept {
        return parts_.records != nullptr && options_.hold_until_durable;
    }
    [[nodiscard]] durable_wait hold(std::uint64_t seq) const noexcept {
        if (!holding() || seq == 0) {
            return {};
        }
        return {parts_.records, seq};
    }
    [[nodiscard]] std::int64_t wall_ms(core::time_point t) const noexcept {
        return state_.wall_start_ms +
               std::chrono::duration_cast<std::chrono::milliseconds>(t - state_.received).count();
    }

    void open_record(const request_facts& facts) {
        if (facts.api == protocol::api_kind::none || parts_.tenants == nullptr) {
            return;
        }
        usage::tenant_headers headers;
        if (parts_.tenants->source() == usage::tenant_source::header) {
            headers.tenant = facts.header(parts_.tenants->header_name());
        }
        headers.authorization = facts.header("authorization");
        headers.x_api_key = facts.header("x-api-key");
        state_.tenant = parts_.tenants->resolve(headers);
        if (parts_.records == nullptr || parts_.ids == nullptr) {
            return;
        }
        // The one wall-clock reading per request; every later time is this plus steady time.
        state_.wall_start_ms = parts_.wall_clock_ms();
        state_.open = std::make_unique<usage::open_info>();
        auto& open = *state_.open;
        open.id = parts_.ids->next();
        open.tenant = state_.tenant;
        open.model = facts.info.model;
        open.model_cut = facts.model_cut;
        open.api = std::string(protocol::to_string(facts.api));
        open.route = std::string(facts.target.substr(0, facts.target.find('?')));
        open.request_id = client_request_id(facts.header("x-request-id"));
        if (facts.trace.valid()) {
            open.trace_id = core::to_hex(facts.trace.trace);
            open.span_id = core::to_hex(facts.trace.span);
        }
        open.start_unix_ms = state_.wall_start_ms;
        open.streamed = facts.info.stream;
        state_.open_seq = parts_.records->append(usage::encode_open(open), false);
        state_.last_checkpoint = facts.received;
    }

    void admit_tenant() {
        if (parts_.throughput == nullptr || state_.tenant.empty() || state_.shared) {
            return;
        }
        const usage::admission bucket =
            parts_.throughput->admit(state_.tenant, state_.estimate, state_.received);
        state_.reserved = bucket.reserved;
        admission decided =
            refusal_or_admission(bucket, state_.tenant, true, parts_.billing, parts_.status);
        if (!decided.admitted) {
            state_.admit = std::make_unique<admission>(std::move(decided));
        }
    }

    // The session's view of a bucket's decision (a refusal counted per tenant).
    static admission refusal_or_admission(const usage::admission& decision,
                                          const std::string& tenant, bool shared,
                                          metrics::billing_metrics* billing,
                                          metrics::status_board* status) {
        admission result;
        if (decision.admitted) {
            return result;
        }
        auto seconds =
            std::max(1LL, static_cast<long long>(std::ceil(decision.retry_after_seconds)));
        result.admitted = false;
        result.retry_after = std::to_string(seconds);
        result.message = shared ? "tenant " + tenant +
                                      " is over its provisioned tokens per second; retry after " +
                                      result.retry_after + " s"
                                : "tenant " + tenant +
                                      " is over its provisioned tokens per second, or the shared "
                                      "limit store is unavailable; retry after " +
                                      result.retry_after + " s";
        if (billing != nullptr) {
            billing->rate_limited(tenant);
        }
        if (status != nullptr) {
            status->rate_limited(tenant);
        }
        return result;
    }

    void maybe_checkpoint(core::time_point now) {
        if (parts_.records == nullptr || !writing_record() ||
            now - state_.last_checkpoint < options_.checkpoint_interval) {
            return;
        }
        state_.last_checkpoint = now;
        parts_.records->append(usage::encode_checkpoint(usage::make_checkpoint(
                                   state_.open->id, exchange_.current(), wall_ms(now))),
                               false);
    }

    void write_close(const meter::request_summary& summary, const meter::billed_counts& counts) {
        if (parts_.records == nullptr || !writing_record()) {
            return;
        }
        usage::usage_record record =
            usage::make_record(*state_.open, summary, counts, wall_ms(summary.end));
        record.degraded = degraded_.load(std::memory_order_relaxed);
        if (parts_.prices != nullptr) {
            usage::apply_price(record, *parts_.prices);
        }
        state_.close_seq = parts_.records->append(usage::encode_close(record), true);
        state_.open->id.clear();
    }

    // The tenant's tokens into its bucket, once: at seal() when the end is held, else at end().
    void charge_bucket(const meter::request_summary& summary, const meter::billed_counts& counts) {
        if (state_.bucket_charged || state_.tenant.empty() ||
            summary.api == protocol::api_kind::none) {
            return;
        }
        state_.bucket_charged = true;
        const std::uint64_t input = counts.input.value.value_or(0);
        const std::uint64_t output = counts.output.value.value_or(0);
        if (state_.shared) {
            // Settled only once admitted (a refusal charged nothing); a request whose admission
            // never came back (the proxy shutting down) is left to the estimate.
            if (slot_->decided.load(std::memory_order_acquire) && slot_->admitted) {
                parts_.shared->settle(
                    state_.tenant,
                    static_cast<double>(input + output) - static_cast<double>(state_.estimate),
                    summary.end);
            }
        } else if (parts_.throughput != nullptr && state_.reserved > 0) {
            // Settled: what it used, less what admission reserved (given back when it used less).
            parts_.throughput->adjust(
                state_.tenant,
                static_cast<double>(input + output) - static_cast<double>(state_.reserved),
                summary.end);
        } else if (parts_.throughput != nullptr) {
            parts_.throughput->charge(state_.tenant, input + output, summary.end);
        }
    }

    void record_tenant(const meter::request_summary& summary, const meter::billed_counts& counts) {
        if (state_.tenant.empty() || summary.api == protocol::api_kind::none) {
            return;
        }
        // The bucket first: once the tenant's counters show this request, the next request of
        // the tenant meets the debt it left.
        charge_bucket(summary, counts);
        if (parts_.billing != nullptr) {
            // tenant_usage holds views: the label must outlive it.
            const std::string model_label = parts_.registry->model_label(summary.model);
            metrics::tenant_usage u;
            u.tenant = state_.tenant;
            u.model_label = model_label;
            u.outcome = meter::to_string(summary.result);
            u.input_tokens = counts.input.value.value_or(0);
            u.output_tokens = counts.output.value.value_or(0);
            u.reasoning_tokens = counts.reasoning.value.value_or(0);
            u.cached_input_tokens = counts.cached_input.value.value_or(0);
            u.cache_write_tokens = counts.cache_write.value.value_or(0);
            u.served = counts.served && summary.status >= 200 && summary.status < 300;
            usage::usage_record priced;
            if (parts_.prices != nullptr) {
                // The same counts and rules as the usage record's cost.
                priced = usage::make_record({}, summary, counts, 0);
                priced.model = summary.model;
                usage::apply_price(priced, *parts_.prices);
                u.cost_picos = priced.cost_picos;
                u.currency = priced.currency;
            }
            parts_.billing->record(u);
        }
    }

    const metering_parts& parts_;
    const metering_options& options_;
    meter::exchange exchange_;
    request_state state_;
    std::shared_ptr<admission_slot> slot_;     // set when the shared limit decides admission
    std::atomic<bool> degraded_{false};        // a metering call failed: marked in the record
    std::shared_ptr<deferred_seal> deferred_;  // set when the seal runs on the finishing thread
};

// What the session holds: the request's metering is shared with a job on the finishing thread
// while one runs, so the session may let go of it first.
class exchange_handle final : public exchange_observer {
  public:
    explicit exchange_handle(std::shared_ptr<metering_exchange> exchange) noexcept
        : x_(std::move(exchange)) {}

    [[nodiscard]] const admission& admitted() const noexcept override { return x_->admitted(); }
    [[nodiscard]] bool admission_pending() const noexcept override {
        return x_->admission_pending();
    }
    void await_admission(std::function<void()> done) override {
        x_->await_admission(std::move(done));
    }
    void request_sent(core::time_point at) override { x_->request_sent(at); }
    void answered_locally(std::string_view code) override { x_->answered_locally(code); }
    durable_wait response_head(int status, std::string_view content_type, bool has_body,
                               core::time_point at) override {
        return x_->response_head(status, content_type, has_body, at);
    }
    void unreadable_body() override { x_->unreadable_body(); }
    void body(std::string_view bytes, core::time_point at) override { x_->body(bytes, at); }
    [[nodiscard]] bool holds_end() const noexcept override { return x_->holds_end(); }
    durable_wait seal(core::time_point at) override { return x_->seal(at); }
    void end(end_reason reason, core::time_point at) override { x_->end(reason, at); }
    void degrade() noexcept override { x_->degrade(); }
    void event(const protocol::response_chunk& chunk, core::time_point at) override {
        x_->event(chunk, at);
    }
    void message(std::string_view text, core::time_point at) override { x_->message(text, at); }

  private:
    std::shared_ptr<metering_exchange> x_;
};

}  // namespace

metering_observer::metering_observer(metering_parts parts, metering_options options)
    : parts_(std::move(parts)), options_(std::move(options)) {
    if (!parts_.wall_clock_ms) {
        parts_.wall_clock_ms = [] {
            return std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                .count();
        };
    }
}

std::unique_ptr<exchange_observer> metering_observer::begin(request_facts facts) {
    // The name every record, label and CloudEvent of the request carries: bounded first.
    facts.model_cut = usage::cut_model_name(facts.info.model);
    return std::make_unique<exchange_handle>(
        std::make_shared<metering_exchange>(parts_, options_, facts));
}

void metering_observer::unforwarded(const unforwarded_request& request) {
    parts_.registry->record_unforwarded(request.api, request.model, request.result, request.status,
                                        request.seconds);
    if (!parts_.access_log) {
        return;
    }
    std::string model(request.model);
    (void)usage::cut_model_name(model);
    const std::string request_id = client_request_id(request.request_id);
    access_entry entry;
    entry.method = request.method;
    entry.path = request.target.substr(0, request.target.find('?'));
    entry.status = request.status;
    entry.outcome = meter::to_string(request.result);
    if (request.api != protocol::api_kind::none) {
        entry.api = protocol::to_string(request.api);
    }
    entry.model = model;
    entry.request_id = request_id;
    entry.client = request.client;
    entry.duration_seconds = request.seconds;
    // Not served, so nothing is billed (meter::billed's rule for a request the server never got).
    entry.input_tokens = 0;
    entry.output_tokens = 0;
    parts_.access_log(entry);
}

void metering_observer::tunnel_parse_error(protocol::api_kind api, protocol::parse_error reason) {
    parts_.registry->parse_errors(api, reason, 1);
}

void metering_observer::upstream_error(std::string_view reason) {
    parts_.registry->upstream_error(reason);
    if (parts_.status != nullptr) {
        parts_.status->upstream_error(reason);
    }
}

std::uint64_t spool_sink::append(std::string line, bool is_close) {
    return spool_.append(std::move(line), is_close);
}

bool spool_sink::is_durable(std::uint64_t seq) const {
    return spool_.is_durable(seq);
}

void spool_sink::when_durable(std::uint64_t seq, std::function<void()> done) {
    spool_.when_durable(seq, [done = std::move(done)](bool /*ok*/) { done(); });
}

}  // namespace tokenmeter::observe
