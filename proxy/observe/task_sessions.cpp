#include "observe/task_sessions.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>

namespace tokenmeter::observe {
namespace {

bool plausible_id(std::string_view id) {
    if (id.empty() || id.size() > task_sessions::max_id_length) {
        return false;
    }
    // Visible ASCII only: no spaces, controls or bytes of other encodings.
    return std::ranges::all_of(id, [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u >= 0x21 && u <= 0x7e;
    });
}

}  // namespace

std::size_t task_sessions::key_hash::operator()(const session_key& k) const noexcept {
    // The digest is already uniform; the labels only separate the rare same id in two tasks.
    auto h = static_cast<std::size_t>(k.id_digest[0]);
    h ^= std::hash<std::string>{}(k.task) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h ^= std::hash<std::string>{}(k.model) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

task_sessions::task_sessions(task_session_options options) : options_(options) {
    if (options_.max_sessions == 0) {
        options_.max_sessions = 1;
    }
    if (RAND_bytes(hash_key_.data(), static_cast<int>(hash_key_.size())) != 1) {
        // Without the system's generator the hash is still one-way; only its key is weaker.
        std::random_device random;
        for (auto& byte : hash_key_) {
            byte = static_cast<unsigned char>(random());
        }
    }
}

std::optional<session_key> task_sessions::key_for(std::string_view id, std::string_view task,
                                                  std::string_view model) const {
    if (!plausible_id(id)) {
        return std::nullopt;
    }
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int length = 0;
    HMAC(EVP_sha256(), hash_key_.data(), static_cast<int>(hash_key_.size()),
         reinterpret_cast<const unsigned char*>(id.data()), id.size(), digest.data(), &length);
    session_key key;
    std::memcpy(key.id_digest.data(), digest.data(), sizeof(key.id_digest));
    key.task = std::string(task);
    key.model = std::string(model);
    return key;
}

session_events task_sessions::begin(const session_key& key, core::time_point at) {
    session_events events;
    std::lock_guard lock(mutex_);
    const auto it = find_or_add(key, at, events);
    it->in_flight += 1;
    touch(it, at);
    events.active = sessions_.size();
    return events;
}

session_events task_sessions::end(const session_key& key,
                                  const std::optional<session_request>& counted,
                                  core::time_point now) {
    session_events events;
    std::lock_guard lock(mutex_);
    // Evicted while the request ran (a full table): the request starts a session of its own.
    const bool known = index_.contains(key);
    if (known || counted) {
        const auto it = find_or_add(key, counted ? counted->start : now, events);
        if (known && it->in_flight > 0) {
            it->in_flight -= 1;
        }
        if (counted) {
            if (it->requests == 0 || counted->start < it->first_start) {
                it->first_start = counted->start;
            }
            if (it->requests == 0 || counted->done > it->last_done) {
                it->last_done = counted->done;
            }
            it->requests += 1;
            it->input_tokens += counted->input_tokens;
            it->output_tokens += counted->output_tokens;
        }
        touch(it, now);
    }
    sweep_locked(now, events);
    events.active = sessions_.size();
    return events;
}

session_events task_sessions::sweep(core::time_point now) {
    session_events events;
    std::lock_guard lock(mutex_);
    sweep_locked(now, events);
    events.active = sessions_.size();
    return events;
}

std::size_t task_sessions::size() const {
    std::lock_guard lock(mutex_);
    return sessions_.size();
}

task_sessions::lru_list::iterator task_sessions::find_or_add(const session_key& key,
                                                             core::time_point at,
                                                             session_events& events) {
    if (const auto found = index_.find(key); found != index_.end()) {
        return found->second;
    }
    while (sessions_.size() >= options_.max_sessions) {
        // The least recently active session goes, unobserved: its figures would be partial.
        index_.erase(sessions_.front().key);
        sessions_.pop_front();
        events.evicted += 1;
    }
    entry e;
    e.key = key;
    e.first_start = at;
    e.last_done = at;
    e.last_activity = at;
    sessions_.push_back(std::move(e));
    const auto it = std::prev(sessions_.end());
    index_.emplace(key, it);
    return it;
}

void task_sessions::touch(lru_list::iterator it, core::time_point at) {
    if (at > it->last_activity) {
        it->last_activity = at;
    }
    sessions_.splice(sessions_.end(), sessions_, it);
}

// The list is ordered by last activity, so the sweep stops at the first session that is not idle
// long enough; it only steps over sessions with a request still running (those never end here).
void task_sessions::sweep_locked(core::time_point now, session_events& events) {
    for (auto it = sessions_.begin(); it != sessions_.end();) {
        if (now - it->last_activity < options_.idle_expiry) {
            break;
        }
        if (it->in_flight > 0) {
            ++it;
            continue;
        }
        if (it->requests > 0) {
            finished_session done;
            done.task = it->key.task;
            done.model = it->key.model;
            done.duration_seconds = core::to_seconds(it->last_done - it->first_start);
            done.requests = it->requests;
            done.input_tokens = it->input_tokens;
            done.output_tokens = it->output_tokens;
            events.ended.push_back(std::move(done));
        }
        index_.erase(it->key);
        it = sessions_.erase(it);
    }
}

}  // namespace tokenmeter::observe
