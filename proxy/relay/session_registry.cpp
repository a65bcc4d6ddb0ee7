#include <vector>

#include "relay/proxy_context.hpp"

namespace tokenmeter::relay {

void session_registry::add(const std::shared_ptr<idle_closable>& session) {
    sessions_.emplace(session.get(), session);
}

void session_registry::remove(idle_closable* session) {
    sessions_.erase(session);
}

void session_registry::close_idle() {
    std::vector<std::shared_ptr<idle_closable>> alive;
    for (auto& [raw, weak] : sessions_) {
        if (auto session = weak.lock()) {
            alive.push_back(std::move(session));
        }
    }
    for (auto& session : alive) {
        session->close_if_idle();
    }
}

}  // namespace tokenmeter::relay
