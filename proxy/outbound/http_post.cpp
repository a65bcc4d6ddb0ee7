#include "outbound/http_post.hpp"

#include <optional>
#include <stdexcept>

#include "core/text.hpp"
#include "net/beast.hpp"
#include "net/tls_client.hpp"
#include "net/tls_stream.hpp"

namespace tokenmeter::outbound {

namespace {

// A receiver's head is a few hundred bytes; the body limit is the sender's (post_options).
constexpr std::uint32_t max_response_head = 16 * 1024;
// Retry-After beyond an hour is read as an hour: a hostile peer cannot park the sender.
constexpr std::int64_t max_retry_after_seconds = 3600;

// The start of an error answer for the log: one line, printable, and without the header values
// sent, should the peer echo the request back.
std::string excerpt(std::string_view body, const header_list& secrets) {
    std::string out(body.substr(0, 200));
    for (char& ch : out) {
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) {
            ch = ' ';
        }
    }
    const auto mask = [&out](std::string_view secret, const std::string& shown) {
        if (secret.empty()) {
            return;
        }
        for (auto at = out.find(secret); at != std::string::npos; at = out.find(secret, at)) {
            out.replace(at, secret.size(), shown);
        }
    };
    for (const auto& [name, value] : secrets) {
        // The credential of "Bearer <token>" is masked alone, wherever it comes back; then
        // whatever else a header carried.
        if (const auto space = value.find(' '); space != std::string::npos) {
            mask(std::string_view(value).substr(space + 1), "[token]");
        }
        mask(value, "[" + name + "]");
    }
    return out;
}

// Retry-After in its delay-seconds form; an HTTP date or anything else counts as absent.
std::int64_t retry_after(std::string_view value) {
    value = core::trim(value, core::http_whitespace);
    if (value.empty() || value.size() > 10) {
        return -1;
    }
    std::int64_t seconds = 0;
    for (char ch : value) {
        if (ch < '0' || ch > '9') {
            return -1;
        }
        seconds = seconds * 10 + (ch - '0');
    }
    return std::min(seconds, max_retry_after_seconds);
}

}  // namespace

std::string_view to_string(post_failure f) {
    switch (f) {
        case post_failure::connect:
            return "connect";
        case post_failure::tls:
            return "tls";
        case post_failure::timeout:
            return "timeout";
        case post_failure::unauthorized:
            return "unauthorized";
        case post_failure::status:
            return "status";
        case post_failure::protocol:
            break;
    }
    return "protocol";
}

// One connection, plain or TLS, with the io_context that drives it: the posting thread runs
// each operation to completion, bounded by request_timeout on the TCP stream.
struct http_poster::connection {
    explicit connection(std::size_t buffer_limit) : buffer(buffer_limit) {}
    asio::io_context ioc;
    std::shared_ptr<ssl::context> context;  // outlives tls
    std::optional<tcp_stream> plain;
    std::optional<net::tls_stream> tls;
    beast::flat_buffer buffer;

    tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
    void run() {
        ioc.run();
        ioc.restart();
    }
};

http_poster::http_poster(post_options options) : options_(std::move(options)) {
    if (auto error = reload_tls(); !error.empty()) {
        throw std::runtime_error(error);
    }
}

http_poster::~http_poster() = default;

std::string http_poster::reload_tls() {
    if (options_.target.scheme != "https") {
        return {};
    }
    auto loaded = net::load_tls_client_context({options_.ca_file, options_.ca_file_key});
    if (!loaded.context) {
        return loaded.error;
    }
    std::lock_guard lock(mutex_);
    tls_context_ = std::move(loaded.context);
    return {};
}

bool http_poster::connect(post_result& out) {
    const net::upstream_address& target = options_.target;
    auto c = std::make_unique<connection>(max_response_head + options_.max_response_body);
    error_code ec;
    tcp::resolver name_resolver(c->ioc);
    auto endpoints = name_resolver.resolve(target.host, std::to_string(target.port), ec);
    if (ec) {
        out.failure = post_failure::connect;
        out.error = "resolve " + target.host + ": " + ec.message();
        return false;
    }
    if (target.scheme == "https") {
        {
            std::lock_guard lock(mutex_);
            c->context = tls_context_;
        }
        c->tls.emplace(c->ioc, *c->context);
    } else {
        c->plain.emplace(c->ioc);
    }
    c->lowest().expires_after(options_.request_timeout);
    c->lowest().async_connect(endpoints, [&](error_code e, const tcp::endpoint&) { ec = e; });
    c->run();
    if (ec) {
        out.failure = ec == beast::error::timeout ? post_failure::timeout : post_failure::connect;
        out.error = "connect: " + ec.message();
        return false;
    }
    if (c->tls) {
        if (!net::prepare_tls_client(c->tls->native_handle(), target.host, out.error)) {
            out.failure = post_failure::tls;
            return false;
        }
        c->lowest().expires_after(options_.request_timeout);
        c->tls->async_handshake(ssl::stream_base::client, [&](error_code e) { ec = e; });
        c->run();
        if (ec) {
            out.failure = ec == beast::error::timeout ? post_failure::timeout : post_failure::tls;
            out.error =
                "TLS handshake: " + net::describe_tls_client_error(ec, c->tls->native_handle());
            return false;
        }
    }
    connection_ = std::move(c);
    return true;
}

post_result http_poster::post_once(std::string_view path, std::string_view content_type,
                                   const header_list& headers, const std::string& body) {
    post_result out;
    const net::upstream_address& target = options_.target;
    const bool reused = connection_ != nullptr;
    if (!reused && !connect(out)) {
        return out;
    }
    connection& c = *connection_;
    std::string request_target = target.base_path;
    request_target.append(path);
    if (request_target.empty()) {
        request_target = "/";
    }
    bhttp::request<bhttp::string_body> request{bhttp::verb::post, request_target, 11};
    const bool default_port = target.port == (target.scheme == "https" ? 443 : 80);
    request.set(bhttp::field::host,
                default_port ? target.host : target.host + ":" + std::to_string(target.port));
    request.set(bhttp::field::content_type, content_type);
    request.set(bhttp::field::user_agent, "tokenmeter");
    for (const auto& [name, value] : headers) {
        request.set(name, value);
    }
    request.keep_alive(true);
    request.body() = body;
    request.prepare_payload();

    bhttp::response_parser<bhttp::string_body> parser;
    parser.header_limit(max_response_head);
    parser.body_limit(options_.max_response_body);
    error_code ec;
    bool written = false;
    auto exchange = [&](auto& stream) {
        c.lowest().expires_after(options_.request_timeout);
        bhttp::async_write(stream, request, [&](error_code e, std::size_t) { ec = e; });
        c.run();
        if (ec) {
            return;
        }
        written = true;
        c.lowest().expires_after(options_.request_timeout);
        bhttp::async_read(stream, c.buffer, parser, [&](error_code e, std::size_t) { ec = e; });
        c.run();
    };
    if (c.tls) {
        exchange(*c.tls);
    } else {
        exchange(*c.plain);
    }
    if (ec) {
        // A kept-alive connection the peer closed while idle breaks before any answer.
        out.stale = reused && !parser.got_some() && ec != beast::error::timeout;
        out.failure = ec == beast::error::timeout ? post_failure::timeout : post_failure::protocol;
        out.error = (written ? "read: " : "write: ") + ec.message();
        connection_.reset();
        return out;
    }
    const auto& response = parser.get();
    out.status = static_cast<int>(response.result_int());
    if (auto it = response.find(bhttp::field::retry_after); it != response.end()) {
        out.retry_after_seconds = retry_after(it->value());
    }
    if (!response.keep_alive()) {
        connection_.reset();
    }
    if (out.status / 100 != 2) {
        out.failure = out.status == 401 || out.status == 403 ? post_failure::unauthorized
                                                             : post_failure::status;
        out.error = "HTTP " + std::to_string(out.status) + ": " + excerpt(response.body(), headers);
    }
    return out;
}

post_result http_poster::post(std::string_view path, std::string_view content_type,
                              const header_list& headers, const std::string& body) {
    post_result out = post_once(path, content_type, headers, body);
    if (out.status == 0 && out.stale) {
        out = post_once(path, content_type, headers, body);
    }
    return out;
}

}  // namespace tokenmeter::outbound
