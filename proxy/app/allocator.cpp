#include "app/allocator.hpp"

#include <dlfcn.h>
#include <malloc.h>

#include <mutex>

namespace tokenmeter::app {
namespace {

// mimalloc's own entry points, when it is in the process: looked up instead of called by name,
// so this file does not make anything that links it depend on mimalloc.
using mi_version_fn = int (*)();
using mi_collect_fn = void (*)(bool);
using mi_option_get_fn = long (*)(int);
using mi_option_set_fn = void (*)(int, long);
// mi_option_decommit_delay in mimalloc 2.0 (MIMALLOC_RESET_DELAY; mi_option_purge_delay, the
// same slot, from 2.1): milliseconds before freed pages are handed back.
constexpr int mi_option_decommit_delay = 15;
constexpr int mi_version_with_that_slot = 200;

template <class Fn>
Fn lookup(const char* name) {
    // POSIX allows converting dlsym's object pointer to a function pointer.
    return reinterpret_cast<Fn>(::dlsym(RTLD_DEFAULT, name));
}

int mimalloc_version() {
    auto version = lookup<mi_version_fn>("mi_version");
    return version != nullptr ? version() : 0;  // 209 for 2.0.9
}

}  // namespace

std::string allocator_name() {
    if (const int v = mimalloc_version(); v != 0) {
        return "mimalloc " + std::to_string(v / 100) + "." + std::to_string(v / 10 % 10) + "." +
               std::to_string(v % 10);
    }
    if (lookup<void (*)()>("__asan_init") != nullptr ||
        lookup<void (*)()>("__tsan_init") != nullptr) {
        return "sanitizer allocator";  // a TOKENMETER_SANITIZE(_THREAD) build
    }
    return "glibc malloc";
}

void release_free_memory() {
    if (auto collect = lookup<mi_collect_fn>("mi_collect")) {
        collect(true);
    }
    ::malloc_trim(0);
}

void release_thread_memory() noexcept {
    // Looked up once: a worker's idle trim calls it every few seconds at most.
    static const auto collect = lookup<mi_collect_fn>("mi_collect");
    static const auto get = lookup<mi_option_get_fn>("mi_option_get");
    static const auto set = lookup<mi_option_set_fn>("mi_option_set");
    if (collect == nullptr) {
        return;
    }
    // mimalloc hands freed pages back after its delay, but only when the thread's heap is used
    // again: an idle worker's never go. With the delay at 0 for a moment, a collect on this
    // thread gives them back now. One thread at a time, so the delay put back is the configured
    // one (the option is the process'), not another trim's 0.
    static std::mutex one_at_a_time;
    const std::lock_guard lock(one_at_a_time);
    const bool delay_known =
        get != nullptr && set != nullptr && mimalloc_version() >= mi_version_with_that_slot;
    const long saved = delay_known ? get(mi_option_decommit_delay) : -1;
    if (delay_known) {
        set(mi_option_decommit_delay, 0);
    }
    collect(true);
    if (delay_known) {
        set(mi_option_decommit_delay, saved);
    }
}

prompt_release::prompt_release() {
    auto get = lookup<mi_option_get_fn>("mi_option_get");
    auto set = lookup<mi_option_set_fn>("mi_option_set");
    if (get != nullptr && set != nullptr && mimalloc_version() >= mi_version_with_that_slot) {
        saved_delay_ = get(mi_option_decommit_delay);
        set(mi_option_decommit_delay, 0);
    }
}

prompt_release::~prompt_release() {
    if (saved_delay_ >= 0) {
        lookup<mi_option_set_fn>("mi_option_set")(mi_option_decommit_delay, saved_delay_);
    }
    release_free_memory();
}

}  // namespace tokenmeter::app
