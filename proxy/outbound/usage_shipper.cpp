#include "outbound/usage_shipper.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <random>
#include <stdexcept>

#include "core/secret_file.hpp"
#include "net/beast.hpp"
#include "net/tls_client.hpp"
#include "net/tls_stream.hpp"
#include "usage/cloudevents.hpp"
#include "usage/spool.hpp"

namespace tokenmeter::outbound {

usage_shipper::usage_shipper(std::filesystem::path dir, shipper_options sink)
    : dir_(std::move(dir)), sink_(std::move(sink)) {
    if (auto error = reload_tls(); !error.empty()) {
        throw std::runtime_error(error);
    }
}

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

namespace {

// The sink's answer is read whole but bounded: a billing API acknowledges in a few bytes.
constexpr std::uint32_t max_response_head = 16 * 1024;
constexpr std::uint64_t max_response_body = 64ull * 1024;

// The start of an error answer for the log: one line, printable, and without the token should
// the sink echo the request back.
std::string excerpt(std::string_view body, const std::string& token) {
    std::string out(body.substr(0, 200));
    for (char& ch : out) {
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) {
            ch = ' ';
        }
    }
    if (!token.empty()) {
        for (auto at = out.find(token); at != std::string::npos; at = out.find(token, at)) {
            out.replace(at, token.size(), "[token]");
        }
    }
    return out;
}

}  // namespace

std::string_view to_string(ship_failure f) {
    switch (f) {
        case ship_failure::connect:
            return "connect";
        case ship_failure::tls:
            return "tls";
        case ship_failure::timeout:
            return "timeout";
        case ship_failure::unauthorized:
            return "unauthorized";
        case ship_failure::status:
            return "status";
        case ship_failure::protocol:
            break;
    }
    return "protocol";
}

// One connection to the sink, plain or TLS, with the io_context that drives it: the shipper's
// thread runs each operation to completion, bounded by request_timeout on the TCP stream.
struct usage_shipper::connection {
    asio::io_context ioc;
    std::shared_ptr<ssl::context> context;  // outlives tls
    std::optional<tcp_stream> plain;
    std::optional<net::tls_stream> tls;
    beast::flat_buffer buffer{max_response_head + max_response_body};

    tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
    void run() {
        ioc.run();
        ioc.restart();
    }
};

bool usage_shipper::connect(outcome& out) {
    auto c = std::make_unique<connection>();
    error_code ec;
    tcp::resolver name_resolver(c->ioc);
    auto endpoints = name_resolver.resolve(target_.host, std::to_string(target_.port), ec);
    if (ec) {
        out.failure = ship_failure::connect;
        out.error = "resolve " + target_.host + ": " + ec.message();
        return false;
    }
    if (target_.scheme == "https") {
        {
            std::lock_guard lock(mutex_);
            c->context = tls_context_;
        }
        c->tls.emplace(c->ioc, *c->context);
    } else {
        c->plain.emplace(c->ioc);
    }
    c->lowest().expires_after(sink_.request_timeout);
    c->lowest().async_connect(endpoints, [&](error_code e, const tcp::endpoint&) { ec = e; });
    c->run();
    if (ec) {
        out.failure = ec == beast::error::timeout ? ship_failure::timeout : ship_failure::connect;
        out.error = "connect: " + ec.message();
        return false;
    }
    if (c->tls) {
        if (!net::prepare_tls_client(c->tls->native_handle(), target_.host, out.error)) {
            out.failure = ship_failure::tls;
            return false;
        }
        c->lowest().expires_after(sink_.request_timeout);
        c->tls->async_handshake(ssl::stream_base::client, [&](error_code e) { ec = e; });
        c->run();
        if (ec) {
            out.failure = ec == beast::error::timeout ? ship_failure::timeout : ship_failure::tls;
            out.error =
                "TLS handshake: " + net::describe_tls_client_error(ec, c->tls->native_handle());
            return false;
        }
    }
    connection_ = std::move(c);
    return true;
}

usage_shipper::outcome usage_shipper::post_once(const std::string& body) {
    outcome out;
    const bool reused = connection_ != nullptr;
    if (!reused && !connect(out)) {
        return out;
    }
    connection& c = *connection_;
    bhttp::request<bhttp::string_body> request{
        bhttp::verb::post, target_.base_path.empty() ? "/" : target_.base_path, 11};
    const bool default_port = target_.port == (target_.scheme == "https" ? 443 : 80);
    request.set(bhttp::field::host,
                default_port ? target_.host : target_.host + ":" + std::to_string(target_.port));
    request.set(bhttp::field::content_type, std::string(usage::cloudevents_batch_content_type));
    request.set(bhttp::field::user_agent, "tokenmeter");
    if (!sink_.token.empty()) {
        request.set(bhttp::field::authorization, "Bearer " + sink_.token);
    }
    request.keep_alive(true);
    request.body() = body;
    request.prepare_payload();

    bhttp::response_parser<bhttp::string_body> parser;
    parser.header_limit(max_response_head);
    parser.body_limit(max_response_body);
    error_code ec;
    bool written = false;
    auto exchange = [&](auto& stream) {
        c.lowest().expires_after(sink_.request_timeout);
        bhttp::async_write(stream, request, [&](error_code e, std::size_t) { ec = e; });
        c.run();
        if (ec) {
            return;
        }
        written = true;
        c.lowest().expires_after(sink_.request_timeout);
        bhttp::async_read(stream, c.buffer, parser, [&](error_code e, std::size_t) { ec = e; });
        c.run();
    };
    if (c.tls) {
        exchange(*c.tls);
    } else {
        exchange(*c.plain);
    }
    if (ec) {
        // A kept-alive connection the sink closed while idle breaks before any answer.
        out.stale = reused && !parser.got_some() && ec != beast::error::timeout;
        out.failure = ec == beast::error::timeout ? ship_failure::timeout : ship_failure::protocol;
        out.error = (written ? "read: " : "write: ") + ec.message();
        connection_.reset();
        return out;
    }
    const auto& response = parser.get();
    out.status = static_cast<int>(response.result_int());
    if (!response.keep_alive()) {
        connection_.reset();
    }
    if (out.status / 100 != 2) {
        out.failure = out.status == 401 || out.status == 403 ? ship_failure::unauthorized
                                                             : ship_failure::status;
        out.error =
            "HTTP " + std::to_string(out.status) + ": " + excerpt(response.body(), sink_.token);
    }
    return out;
}

usage_shipper::outcome usage_shipper::post(const std::string& body) {
    outcome out = post_once(body);
    if (out.status == 0 && out.stale) {
        out = post_once(body);
    }
    return out;
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

std::string usage_shipper::reload_tls() {
    if (target_.scheme != "https") {
        return {};
    }
    auto loaded = net::load_tls_client_context({sink_.ca_file, sink_.ca_file_key});
    if (!loaded.context) {
        return loaded.error;
    }
    std::lock_guard lock(mutex_);
    tls_context_ = std::move(loaded.context);
    return {};
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
        const outcome sent = post(usage::encode_cloudevents_batch(batch.records, sink_.source));
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
    connection_.reset();
}

}  // namespace tokenmeter::outbound
