// net/tls_client: the proxy's outgoing TLS (the usage sink and https upstreams). Builds a
// verifying OpenSSL client context (TLS 1.2 minimum, ALPN http/1.1, the system CA bundle or a
// PEM CA file, optionally a client certificate) and prepares each connection: SNI set to the
// host, the certificate checked against the host name (or IP address). Verification is off only
// when the options say insecure_skip_verify (upstream_tls.insecure_skip_verify, for tests).
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "net/beast.hpp"

namespace tokenmeter::net {

struct tls_client_options {
    std::string ca_file;  // PEM CAs trusted instead of the system bundle; "" = system bundle
    // The config key ca_file came from ("usage.sink.ca_file"): errors name it.
    std::string ca_file_key = "ca_file";
    // A client certificate (PEM with its chain) and key, for servers that ask; errors name the
    // keys given here.
    std::string cert_file{};
    std::string cert_file_key = "cert_file";
    std::string key_file{};
    std::string key_file_key = "key_file";
    bool insecure_skip_verify = false;
};

// A context, or the reason it could not be built ("usage.sink.ca_file: cannot read /x: ...").
struct tls_client_load_result {
    std::shared_ptr<boost::asio::ssl::context> context;
    std::string error;
};

tls_client_load_result load_tls_client_context(const tls_client_options& options);

// Sets SNI (host names only, as RFC 6066 asks) and the name the peer's certificate must carry
// on a connection made from a load_tls_client_context context. False with `error` set when
// OpenSSL refuses (an unusable host name).
bool prepare_tls_client(SSL* ssl, const std::string& host, std::string& error);

// A failed client handshake or TLS read in words, with the certificate verdict when that was
// the cause ("certificate verify failed: Hostname mismatch").
std::string describe_tls_client_error(const error_code& ec, SSL* ssl);

// Client-side session resumption without a lock: each event loop keeps the sessions its server
// gave it (a TLS 1.3 ticket arrives after the handshake, so OpenSSL hands it over through a
// callback) and offers one on the next connection. A TLS 1.3 ticket is offered once (RFC 8446
// §C.4; a server may keep single-use tickets), so a few are kept; a TLS 1.2 session may be
// offered again. One per thread; never shared.
class tls_session_cache {
  public:
    static constexpr std::size_t max_sessions = 8;

    tls_session_cache() = default;
    tls_session_cache(const tls_session_cache&) = delete;
    tls_session_cache& operator=(const tls_session_cache&) = delete;
    ~tls_session_cache();

    // Before the handshake: offer a kept session, and keep what this connection is given
    // (during the handshake, or with its first read for a TLS 1.3 ticket). The cache must
    // outlive every read on `ssl`: it belongs to the event loop the connection runs on.
    void attach(SSL* ssl);
    // A failed handshake: offer none of the kept sessions again.
    void forget();
    [[nodiscard]] std::size_t size() const noexcept { return sessions_.size(); }
    // Turns on the callback that feeds every cache (once per context, before connections).
    static void enable(SSL_CTX* ctx);

  private:
    static int on_new_session(SSL* ssl, SSL_SESSION* session);
    std::vector<SSL_SESSION*> sessions_;  // oldest first; each holds one reference
};

}  // namespace tokenmeter::net
