#include <vector>

#include "relay/proxy_context.hpp"

namespace tokenmeter::relay {

void session_registry::add(const std::shared_ptr<idle_closable>& session) {
    sessions_.emplace(session.get(), session);
}

void session_registry::remove(idle_closable* session) {
    sessions_.erase(session);
}

namespace {

std::vector<std::shared_ptr<idle_closable>> alive_sessions(
    const std::unordered_map<idle_closable*, std::weak_ptr<idle_closable>>& sessions) {
    std::vector<std::shared_ptr<idle_closable>> alive;
    for (const auto& [raw, weak] : sessions) {
        if (auto session = weak.lock()) {
            alive.push_back(std::move(session));
        }
    }
    return alive;
}

}  // namespace

void session_registry::close_idle() {
    for (auto& session : alive_sessions(sessions_)) {
        session->close_if_idle();
    }
}

void session_registry::close_tunnels() {
    for (auto& session : alive_sessions(sessions_)) {
        session->close_tunnel();
    }
}

}  // namespace tokenmeter::relay
