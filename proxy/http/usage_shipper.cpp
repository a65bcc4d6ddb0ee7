#include "http/usage_shipper.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

#include "http/beast.hpp"
#include "usage/cloudevents.hpp"
#include "usage/spool.hpp"

namespace tokenmeter::http {

usage_shipper::usage_shipper(std::filesystem::path dir, shipper_options sink)
    : dir_(std::move(dir)),
      sink_(std::move(sink)) {}

usage_shipper::~usage_shipper() {
    stop();
}

void usage_shipper::start() {
    thread_ = std::thread([this] { run(); });
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

int usage_shipper::post(const std::string& body, std::string& error) {
    asio::io_context ioc;
    beast::tcp_stream stream(ioc);
    error_code ec;
    tcp::resolver name_resolver(ioc);
    auto endpoints = name_resolver.resolve(target_.host, std::to_string(target_.port), ec);
    if (ec) {
        error = "resolve: " + ec.message();
        return 0;
    }
    auto run = [&] {
        ioc.run();
        ioc.restart();
    };
    stream.expires_after(sink_.request_timeout);
    stream.async_connect(endpoints, [&](error_code e, const tcp::endpoint&) { ec = e; });
    run();
    if (ec) {
        error = "connect: " + ec.message();
        return 0;
    }
    bhttp::request<bhttp::string_body> request{
        bhttp::verb::post, target_.base_path.empty() ? "/" : target_.base_path, 11};
    request.set(bhttp::field::host, target_.host + ":" + std::to_string(target_.port));
    request.set(bhttp::field::content_type, std::string(usage::cloudevents_batch_content_type));
    request.set(bhttp::field::user_agent, "tokenmeter");
    request.keep_alive(false);
    request.body() = body;
    request.prepare_payload();
    stream.expires_after(sink_.request_timeout);
    bhttp::async_write(stream, request, [&](error_code e, std::size_t) { ec = e; });
    run();
    if (ec) {
        error = "write: " + ec.message();
        return 0;
    }
    beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> response;
    stream.expires_after(sink_.request_timeout);
    bhttp::async_read(stream, buffer, response, [&](error_code e, std::size_t) { ec = e; });
    run();
    if (ec) {
        error = "read: " + ec.message();
        return 0;
    }
    error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    if (response.result_int() / 100 != 2) {
        error =
            "HTTP " + std::to_string(response.result_int()) + ": " + response.body().substr(0, 200);
    }
    return static_cast<int>(response.result_int());
}

void usage_shipper::run() {
    usage::cursor position = usage::read_cursor(dir_).value_or(usage::cursor{});
    auto backoff = sink_.backoff_initial;
    std::mt19937_64 rng(std::random_device{}());
    std::uniform_real_distribution<double> jitter(0.5, 1.5);
    std::uint64_t failures_in_a_row = 0;
    for (;;) {
        {
            std::lock_guard lock(mutex_);
            if (stopping_) {
                return;
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
        std::string error;
        int status = post(usage::encode_cloudevents_batch(batch.records, sink_.source), error);
        if (status / 100 == 2) {
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
        errors_ += 1;
        failures_in_a_row += 1;
        // The first failure and then every tenth, so a long outage does not flood the log.
        if (failures_in_a_row == 1 || failures_in_a_row % 10 == 0) {
            spdlog::warn(
                "usage shipper: sink {} did not accept {} records ({}); attempt {}, "
                "retrying with backoff",
                sink_.url, batch.records.size(), error, failures_in_a_row);
        }
        auto wait = std::chrono::milliseconds(
            static_cast<std::int64_t>(static_cast<double>(backoff.count()) * jitter(rng)));
        {
            std::unique_lock lock(mutex_);
            wake_.wait_for(lock, wait, [&] { return stopping_; });
        }
        backoff = std::min(backoff * 2, sink_.backoff_max);
    }
}

}  // namespace tokenmeter::http
