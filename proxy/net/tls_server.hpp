// net/tls_server: the listener's TLS configuration. Builds an OpenSSL server context from PEM
// files with Mozilla's "intermediate" profile (TLS 1.2 and 1.3, ECDHE with AES-GCM or
// ChaCha20-Poly1305, X25519/P-256/P-384), ALPN http/1.1 only, session resumption, and optional
// client certificates (mTLS). The context in use is swapped whole when the files change or on
// SIGHUP: connections keep the context they were accepted with (OpenSSL counts its references),
// new handshakes get the new one, and a new file that does not load leaves the old context in
// place.
#pragma once

#include <atomic>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/shared_snapshot.hpp"

namespace tokenmeter::net {

enum class client_auth : std::uint8_t { none, optional, require };
enum class tls_version : std::uint8_t { v1_2, v1_3 };

struct tls_server_options {
    std::string cert_file;       // PEM: the certificate, then its chain
    std::string key_file;        // PEM private key
    std::string client_ca_file;  // PEM CAs that client certificates must chain to; "" = none
    client_auth clients = client_auth::none;
    tls_version min_version = tls_version::v1_2;
    // Which config section these came from ("tls", "admin_tls"): errors name its keys.
    std::string key_prefix = "tls";
};

// A context built from the files, or the reason it could not be, naming the config key.
struct tls_load_result {
    std::shared_ptr<boost::asio::ssl::context> context;
    std::string error;  // "tls.cert_file: cannot read /x.pem: No such file or directory"
    // The leaf certificate's notAfter (Unix seconds), for the expiry gauge.
    std::int64_t not_after_unix = 0;
};

tls_load_result load_tls_server_context(const tls_server_options& options);

// The files' identity (device, inode, size, modification time, after symlinks): a Kubernetes
// secret rotation swaps a symlink, so the target's identity changes even when the name does not.
struct tls_files_stamp {
    std::string text;
    bool operator==(const tls_files_stamp&) const = default;
};
tls_files_stamp stamp_tls_files(const tls_server_options& options);

// The context new connections get. Thread-safe: reload runs on the main thread while workers
// accept.
class tls_server {
  public:
    // Throws std::runtime_error with the load error (start-up: a bad file stops the proxy).
    explicit tls_server(tls_server_options options);

    [[nodiscard]] std::shared_ptr<boost::asio::ssl::context> current() const {
        return context_.load();
    }
    // Loads the files again. Returns "" when the new context is in use, else the error (the old
    // context stays).
    std::string reload();
    // Reloads when the files' identity changed since the last load; nullopt when unchanged.
    std::optional<std::string> reload_if_changed();
    [[nodiscard]] std::int64_t not_after_unix() const {
        return not_after_.load(std::memory_order_relaxed);
    }
    [[nodiscard]] const tls_server_options& options() const noexcept { return options_; }

  private:
    tls_server_options options_;
    core::shared_snapshot<boost::asio::ssl::context> context_;
    std::atomic<std::int64_t> not_after_{0};
    tls_files_stamp stamp_;
};

}  // namespace tokenmeter::net
