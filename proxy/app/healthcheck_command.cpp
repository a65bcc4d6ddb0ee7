// app/healthcheck_command: see healthcheck_command.hpp.
#include "app/healthcheck_command.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <system_error>

#include "app/flags.hpp"
#include "config/config.hpp"

namespace tokenmeter::app {
namespace {

using clock_type = std::chrono::steady_clock;

constexpr const char* healthcheck_usage =
    R"(usage: tokenmeter healthcheck [--admin HOST:PORT] [--config FILE] [--ready] [--timeout T]

GETs /healthz (with --ready: /readyz) from a running tokenmeter's admin listener and exits 0 when
it answers 200, 1 otherwise: for a container HEALTHCHECK. The address is --admin, else the admin
of --config FILE, else 127.0.0.1:9090; an unspecified address (0.0.0.0, [::]) is probed on
loopback. --timeout (default 2s) bounds the whole probe. Plain HTTP only: with admin_tls on, use
an HTTPS client.
)";

int unhealthy(const std::string& message) {
    std::fprintf(stderr, "tokenmeter healthcheck: %s\n", message.c_str());
    return 1;
}

// Closes the socket on every return path.
class socket_holder {
  public:
    explicit socket_holder(int fd) : fd_(fd) {}
    socket_holder(const socket_holder&) = delete;
    socket_holder& operator=(const socket_holder&) = delete;
    ~socket_holder() {
        if (fd_ >= 0) {
            ::close(fd_);
        }
    }
    [[nodiscard]] int get() const { return fd_; }

  private:
    int fd_;
};

// Waits until `fd` is ready for `events` or the deadline passes; false on timeout or error.
bool wait_for(int fd, short events, clock_type::time_point deadline) {
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
        if (left.count() <= 0) {
            return false;
        }
        pollfd p{fd, events, 0};
        const int n = ::poll(&p, 1, static_cast<int>(left.count()));
        if (n > 0) {
            return true;
        }
        if (n < 0 && errno != EINTR) {
            return false;
        }
    }
}

// One non-blocking connect to the first address of `target` that accepts; -1 with `why` set.
int connect_to(const config::endpoint& target, clock_type::time_point deadline, std::string& why) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(target.port);
    if (const int rc = ::getaddrinfo(target.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
        why = "cannot resolve " + target.host + ": " + ::gai_strerror(rc);
        return -1;
    }
    why = "no address for " + target.host;
    int connected = -1;
    for (const addrinfo* a = found; a != nullptr && connected < 0; a = a->ai_next) {
        const int fd =
            ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            why = std::string("socket: ") + std::generic_category().message(errno);
            continue;
        }
        int error = 0;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            error = errno;
            if (error == EINPROGRESS) {
                socklen_t len = sizeof error;
                error = wait_for(fd, POLLOUT, deadline) &&
                                ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0
                            ? error
                            : ETIMEDOUT;
            }
        }
        if (error == 0) {
            connected = fd;
        } else {
            why = "cannot connect to " + config::to_string(target) + ": " +
                  std::generic_category().message(error);
            ::close(fd);
        }
    }
    ::freeaddrinfo(found);
    return connected;
}

}  // namespace

config::endpoint probe_address(const config::endpoint& admin) {
    config::endpoint out = admin;
    if (out.host == "0.0.0.0" || out.host.empty()) {
        out.host = "127.0.0.1";
    } else if (out.host == "::" || out.host == "0:0:0:0:0:0:0:0") {
        out.host = "::1";
    }
    return out;
}

std::optional<int> response_status(const std::string& head) {
    // "HTTP/1.x SSS" at least; the reason phrase may be empty.
    constexpr std::string_view prefix = "HTTP/1.";
    if (head.size() < prefix.size() + 5 || head.compare(0, prefix.size(), prefix) != 0 ||
        head[prefix.size() + 1] != ' ') {
        return std::nullopt;
    }
    int status = 0;
    for (std::size_t i = prefix.size() + 2; i < prefix.size() + 5; ++i) {
        if (head[i] < '0' || head[i] > '9') {
            return std::nullopt;
        }
        status = status * 10 + (head[i] - '0');
    }
    if (head.size() > prefix.size() + 5 && head[prefix.size() + 5] != ' ' &&
        head[prefix.size() + 5] != '\r') {
        return std::nullopt;
    }
    return status;
}

int healthcheck_command(const std::vector<std::string>& args) {
    std::optional<std::string> admin_text;
    std::string config_path;
    std::string path = "/healthz";
    std::chrono::milliseconds timeout{2'000};
    const parsed_flags flags =
        parse_flags(args, {{"admin", true}, {"config", true}, {"timeout", true}, {"ready"}});
    if (!flags.ok()) {
        std::fputs(healthcheck_usage, stderr);
        return unhealthy(flags.error);
    }
    if (flags.has("help")) {
        std::fputs(healthcheck_usage, stdout);
        return 0;
    }
    admin_text = flags.value("admin");
    config_path = flags.value("config").value_or("");
    if (flags.has("ready")) {
        path = "/readyz";
    }
    if (const auto text = flags.value("timeout")) {
        const auto t = config::parse_duration(*text);
        if (!t || t->count() <= 0) {
            return unhealthy("--timeout: expected a duration like 2s, got '" + *text + "'");
        }
        timeout = *t;
    }
    config::endpoint admin = config::default_settings().admin;
    if (!config_path.empty()) {
        const auto loaded = config::load_file(config_path);
        if (!loaded.ok()) {
            return unhealthy(config_path + ": " + config::to_string(loaded.errors.front()));
        }
        if (loaded.value.admin_tls.enabled() && !admin_text) {
            return unhealthy(config_path +
                             ": admin_tls is on and this probe speaks plain HTTP; use an HTTPS "
                             "client");
        }
        admin = loaded.value.admin;
    }
    if (admin_text) {
        const auto parsed = config::parse_endpoint(*admin_text);
        if (!parsed) {
            return unhealthy("--admin: expected HOST:PORT, got '" + *admin_text + "'");
        }
        admin = *parsed;
    }
    const config::endpoint target = probe_address(admin);
    const auto deadline = clock_type::now() + timeout;
    std::string why;
    const socket_holder fd(connect_to(target, deadline, why));
    if (fd.get() < 0) {
        return unhealthy(why);
    }
    const std::string request =
        "GET " + path + " HTTP/1.1\r\nHost: " + config::to_string(target) +
        "\r\nUser-Agent: tokenmeter-healthcheck\r\nConnection: close\r\n\r\n";
    std::size_t sent = 0;
    while (sent < request.size()) {
        if (!wait_for(fd.get(), POLLOUT, deadline)) {
            return unhealthy("timed out sending to " + config::to_string(target));
        }
        const ssize_t n =
            ::send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            return unhealthy(std::string("send: ") + std::generic_category().message(errno));
        }
        sent += n > 0 ? static_cast<std::size_t>(n) : 0;
    }
    // The status line is all the probe reads.
    std::string head;
    std::array<char, 512> buffer{};
    while (head.find("\r\n") == std::string::npos && head.size() < 4096) {
        if (!wait_for(fd.get(), POLLIN, deadline)) {
            return unhealthy("no answer from " + config::to_string(target) + path + " within " +
                             std::to_string(timeout.count()) + " ms");
        }
        const ssize_t n = ::recv(fd.get(), buffer.data(), buffer.size(), 0);
        if (n == 0) {
            break;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) {
                continue;
            }
            return unhealthy(std::string("recv: ") + std::generic_category().message(errno));
        }
        head.append(buffer.data(), static_cast<std::size_t>(n));
    }
    const auto status = response_status(head);
    if (!status) {
        return unhealthy(config::to_string(target) + path + " did not answer with HTTP");
    }
    if (*status != 200) {
        return unhealthy(config::to_string(target) + path + " answered " + std::to_string(*status));
    }
    std::printf("%s%s: 200\n", config::to_string(target).c_str(), path.c_str());
    return 0;
}

}  // namespace tokenmeter::app
