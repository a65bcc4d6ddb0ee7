#include "outbound/usage_shipper.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

#include "core/secret_file.hpp"
#include "core/thread_name.hpp"
#include "usage/cloudevents.hpp"
#include "usage/spool.hpp"

namespace tokenmeter::outbound {

usage_shipper::usage_shipper(std::filesystem::path dir, shipper_options sink)
    : dir_(std::move(dir)),
      sink_(std::move(sink)),
      poster_(post_options{sink_.target, sink_.request_timeout, sink_.ca_file, sink_.ca_file_key,
                           64 * 1024}) {}

usage_shipper::~usage_shipper() {
    stop();
}

void usage_shipper::start() {
    thread_ = std::thread([this] {
        core::name_this_thread("tm-shipper");
        run();
    });
}

void usage_shipper::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) {
        thread_.join();
    }
}

void usage_shipper::wake() {
    {
        std::lock_guard lock(mutex_);
        woken_ = true;
    }
    wake_.notify_all();
}

void usage_shipper::sleep_for(std::chrono::milliseconds d) {
    std::unique_lock lock(mutex_);
    wake_.wait_for(lock, d, [&] { return stopping_ || woken_; });
    woken_ = false;
}

// The sink's answer is read whole but bounded (post_options): a billing API acknowledges in a
// few bytes. The token is sent, never logged: the poster masks it out of any error text.
post_result usage_shipper::post(const std::string& body) {
    header_list headers;
    if (!sink_.token.empty()) {
        headers.emplace_back("Authorization", "Bearer " + sink_.token);
    }
    return poster_.post("", usage::cloudevents_batch_content_type, headers, body);
}

void usage_shipper::refresh_token() {
    if (sink_.token_file.empty()) {
        return;
    }
    std::string why;
    if (auto token = core::read_secret_file(sink_.token_file, why)) {
        sink_.token = std::move(*token);
        token_warned_ = false;
    } else if (!token_warned_) {
        token_warned_ = true;
        spdlog::warn("usage shipper: usage.sink.token_file: {}; the last token read stays in use",
                     why);
    }
}

void usage_shipper::run() {
    usage::cursor position = usage::read_cursor(dir_).value_or(usage::cursor{});
    auto backoff = sink_.backoff_initial;
    std::mt19937_64 rng(std::random_device{}());
    std::uniform_real_distribution<double> jitter(0.5, 1.5);
    std::uint64_t failures_in_a_row = 0;
    ship_failure last_failure = ship_failure::protocol;
    for (;;) {
        {
            std::lock_guard lock(mutex_);
            if (stopping_) {
                break;
            }
        }
        auto batch = usage::read_batch(dir_, position, sink_.batch_size);
        if (batch.records.empty()) {
            oldest_ = 0;
            if (!(batch.next == position)) {
                position = batch.next;
                usage::write_cursor(dir_, position);
            }
            sleep_for(std::chrono::seconds(1));
            continue;
        }
        oldest_ = batch.records.front().end_unix_ms;
        refresh_token();
        const post_result sent = post(usage::encode_cloudevents_batch(batch.records, sink_.source));
        if (sent.status / 100 == 2) {
            // The records are acknowledged only once the cursor is on disk; a crash before that
            // re-sends them, and the sink dedupes by id.
            position = batch.next;
            if (!usage::write_cursor(dir_, position)) {
                spdlog::error(
                    "usage shipper: cannot write the cursor in {}; records may be sent "
                    "again after a restart",
                    dir_.string());
            }
            acknowledged_ += batch.records.size();
            if (failures_in_a_row > 0) {
                spdlog::info("usage shipper: sink {} accepts again after {} failed attempts",
                             sink_.url, failures_in_a_row);
            }
            failures_in_a_row = 0;
            backoff = sink_.backoff_initial;
            continue;
        }
        errors_[static_cast<std::size_t>(sent.failure)] += 1;
        failures_in_a_row += 1;
        // The first failure, a new reason, and then every tenth, so a long outage does not flood
        // the log.
        if (failures_in_a_row == 1 || sent.failure != last_failure || failures_in_a_row % 10 == 0) {
            spdlog::warn(
                "usage shipper: sink {} did not accept {} records ({}: {}); attempt {}, "
                "retrying with backoff",
                sink_.url, batch.records.size(), to_string(sent.failure), sent.error,
                failures_in_a_row);
        }
        last_failure = sent.failure;
        auto wait = std::chrono::milliseconds(
            static_cast<std::int64_t>(static_cast<double>(backoff.count()) * jitter(rng)));
        {
            std::unique_lock lock(mutex_);
            wake_.wait_for(lock, wait, [&] { return stopping_; });
        }
        backoff = std::min(backoff * 2, sink_.backoff_max);
    }
}

}  // namespace tokenmeter::outbound
