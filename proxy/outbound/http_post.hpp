// outbound/http_post: a small blocking HTTP/1.1 client for the outbound senders (the usage
// shipper, the OTLP exporter). One kept-alive connection, plain or TLS with verification, each
// operation bounded by a timeout on the TCP stream, and the reply read whole but bounded: the
// other end is as hostile as any client. Runs on the caller's thread, never on an I/O worker.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "net/endpoint.hpp"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace tokenmeter::outbound {

// Why a post was not acknowledged (the reason label of the senders' error counters).
enum class post_failure : std::uint8_t {
    connect,       // name resolution or TCP connect failed
    tls,           // handshake failed: certificate, host name, protocol
    timeout,       // no answer within the request timeout
    unauthorized,  // 401 or 403: the credential was refused
    status,        // any other non-2xx answer
    protocol,      // the connection broke or the answer was not HTTP/1.1 within bounds
};
inline constexpr std::size_t post_failure_count = 6;
std::string_view to_string(post_failure f);

struct post_options {
    net::upstream_address target;  // scheme "https": TLS with verification
    std::chrono::milliseconds request_timeout{10'000};
    std::string ca_file;  // https: PEM CAs instead of the system bundle
    std::string ca_file_key;
    std::uint32_t max_response_body = 64 * 1024;
};

using header_list = std::vector<std::pair<std::string, std::string>>;

struct post_result {
    int status = 0;  // 0: no answer
    post_failure failure = post_failure::protocol;
    std::string error;   // for the log: one printable line, never a header value sent
    bool stale = false;  // a kept-alive connection the peer had closed
    // Retry-After of the answer in seconds (delay-seconds form only); -1 when absent.
    std::int64_t retry_after_seconds = -1;
};

class http_poster {
  public:
    // Throws std::runtime_error naming ca_file_key when https's CA file does not load.
    explicit http_poster(post_options options);
    ~http_poster();
    http_poster(const http_poster&) = delete;
    http_poster& operator=(const http_poster&) = delete;

    // POSTs `body` to base_path + `path`. A kept-alive connection the peer closed while idle is
    // reconnected once. The header values are masked out of any error text.
    post_result post(std::string_view path, std::string_view content_type,
                     const header_list& headers, const std::string& body);
    // Loads the CA file again for the next connection: "" when it loaded (or there is no TLS),
    // else the error naming the key; the CAs in use stay. Callable from any thread.
    std::string reload_tls();

  private:
    struct connection;
    post_result post_once(std::string_view path, std::string_view content_type,
                          const header_list& headers, const std::string& body);
    bool connect(post_result& out);

    post_options options_;
    std::mutex mutex_;
    std::shared_ptr<boost::asio::ssl::context> tls_context_;  // under mutex_; null for http
    std::unique_ptr<connection> connection_;                  // the posting thread's only
};

}  // namespace tokenmeter::outbound
