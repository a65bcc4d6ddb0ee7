#include "outbound/redis_protocol.hpp"

#include <algorithm>
#include <vector>

namespace tokenmeter::outbound {

std::string auth_command(std::string_view username, std::string_view password) {
    std::string out;
    if (username.empty()) {
        resp::append_command(out, {"AUTH", password});
    } else {
        resp::append_command(out, {"AUTH", username, password});
    }
    return out;
}

std::string probe_command(std::string_view token) {
    std::string out;
    resp::append_command(out, {"PING", token});
    return out;
}

std::string script_command(const observe::shared_call& call, std::string_view sha, bool with_script,
                           std::string_view tag) {
    const std::vector<std::string> args = observe::script_arguments(call);
    std::vector<std::string_view> argv;
    argv.reserve(5 + args.size());
    argv.emplace_back(with_script ? "EVAL" : "EVALSHA");
    argv.push_back(with_script ? observe::shared_limit_script() : sha);
    argv.emplace_back("1");
    argv.emplace_back(call.key);
    for (const std::string& a : args) {
        argv.emplace_back(a);
    }
    argv.push_back(tag);
    std::string out;
    resp::append_command(out, argv);
    return out;
}

auth_verdict read_auth_reply(const resp::value& reply) noexcept {
    if (reply.type == resp::kind::simple && reply.text == "OK") {
        return auth_verdict::accepted;
    }
    return reply.type == resp::kind::error ? auth_verdict::refused : auth_verdict::wrong_type;
}

bool probe_in_step(const resp::value& reply, std::string_view token) noexcept {
    return reply.type == resp::kind::error ||
           (reply.type == resp::kind::bulk && reply.text == token);
}

script_outcome read_script_outcome(const resp::value& reply, std::string_view tag) noexcept {
    script_outcome out;
    if (reply.type == resp::kind::error) {
        out.noscript = error_code_word(reply.text) == "NOSCRIPT";
        out.reply.failure = observe::store_failure::script;
        return out;
    }
    if (reply.type != resp::kind::array || reply.members.size() != 3 ||
        reply.members[0].type != resp::kind::integer || reply.members[1].type != resp::kind::bulk ||
        reply.members[2].type != resp::kind::bulk) {
        out.reply.failure = observe::store_failure::reply;
        return out;
    }
    if (reply.members[2].text != tag) {
        out.reply.failure = observe::store_failure::reply;
        out.out_of_step = true;
        return out;
    }
    out.reply = observe::read_script_reply(reply.members[0].integer, reply.members[1].text);
    return out;
}

std::string_view error_code_word(std::string_view error_text) noexcept {
    const std::string_view word = error_text.substr(0, error_text.find(' '));
    const bool plain =
        !word.empty() && word.size() <= 32 &&
        std::all_of(word.begin(), word.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
    return plain ? word : std::string_view{};
}

reconnect_backoff::reconnect_backoff(std::chrono::milliseconds initial,
                                     std::chrono::milliseconds cap, std::uint64_t seed)
    : initial_(std::max(initial, std::chrono::milliseconds(1))),
      cap_(std::max(cap, initial_)),
      random_(seed) {}

std::chrono::milliseconds reconnect_backoff::ceiling() const noexcept {
    // Doubling stops at the cap; the shift never goes past it.
    std::chrono::milliseconds c = initial_;
    for (std::uint32_t i = 0; i < attempts_ && c < cap_; ++i) {
        c *= 2;
    }
    return std::min(c, cap_);
}

std::chrono::milliseconds reconnect_backoff::next() {
    const std::chrono::milliseconds c = ceiling();
    if (c < cap_) {
        ++attempts_;
    }
    std::uniform_int_distribution<std::int64_t> pick(0, c.count());
    return std::chrono::milliseconds(pick(random_));
}

}  // namespace tokenmeter::outbound
