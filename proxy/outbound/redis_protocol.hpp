// outbound/redis_protocol: what the Redis client says and how it reads the answers, without I/O:
// the commands (AUTH, the readiness probe, the bucket script), what a reply to each means, the
// one word of a server's error that may be logged, and the reconnect backoff. The connection
// (outbound/redis_connection) only moves these bytes; every decision here is unit-tested.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

#include "observe/shared_limit.hpp"
#include "outbound/resp.hpp"

namespace tokenmeter::outbound {

// AUTH <password>, or AUTH <username> <password> for an ACL user.
std::string auth_command(std::string_view username, std::string_view password);
// PING <token>: a Redis answers with the token itself. A connection is in step with its server
// once the token comes back as the answer to this command; a reply sent before anyone asked
// (a greeting) shows up as a wrong answer here instead of as the answer to a call.
std::string probe_command(std::string_view token);
// EVALSHA <sha> 1 <key> <args...> <tag>, or EVAL <script> ... once the server said NOSCRIPT.
// The script answers with `tag` as its last member: a reply that carries another call's tag
// (a command answered twice, so every reply after it is one call late) is seen at once.
std::string script_command(const observe::shared_call& call, std::string_view sha, bool with_script,
                           std::string_view tag);

enum class auth_verdict : std::uint8_t { accepted, refused, wrong_type };
auth_verdict read_auth_reply(const resp::value& reply) noexcept;

// The probe's answer: the token, or an error (an ACL user may be denied PING; one answer per
// command still holds). Anything else means the replies are not in step with the commands.
bool probe_in_step(const resp::value& reply, std::string_view token) noexcept;

struct script_outcome {
    observe::store_reply reply;  // failure `script` for an error, `reply` for a wrong shape
    bool noscript = false;       // the script is not cached yet: send it with EVAL
    bool out_of_step = false;    // the reply is the script's, with another call's tag
};
// The reply to the call sent with `tag`.
script_outcome read_script_outcome(const resp::value& reply, std::string_view tag) noexcept;

// The code an error reply starts with (WRONGPASS, NOAUTH, ERR) when its first word is a plain
// uppercase word of at most 32 letters; "" otherwise. The rest of a server's text may echo what
// was sent (a password) and is never logged.
std::string_view error_code_word(std::string_view error_text) noexcept;

// Exponential backoff with full jitter: the n-th wait is uniform in [0, min(cap, initial * 2^n)],
// so many proxies that lost one Redis do not come back in step.
class reconnect_backoff {
  public:
    reconnect_backoff(std::chrono::milliseconds initial, std::chrono::milliseconds cap,
                      std::uint64_t seed);
    std::chrono::milliseconds next();
    // The ceiling the next wait is drawn under.
    [[nodiscard]] std::chrono::milliseconds ceiling() const noexcept;
    void reset() noexcept { attempts_ = 0; }
    [[nodiscard]] std::uint32_t attempts() const noexcept { return attempts_; }

  private:
    std::chrono::milliseconds initial_;
    std::chrono::milliseconds cap_;
    std::uint32_t attempts_ = 0;
    std::mt19937_64 random_;
};

}  // namespace tokenmeter::outbound
