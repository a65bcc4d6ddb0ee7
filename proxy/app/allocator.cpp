#include "app/allocator.hpp"

#include <dlfcn.h>
#include <malloc.h>

namespace tokenmeter::app {
namespace {

// mimalloc's own entry points, when it is in the process: looked up instead of called by name,
// so this file does not make anything that links it depend on mimalloc.
using mi_version_fn = int (*)();
using mi_collect_fn = void (*)(bool);

template <class Fn>
Fn lookup(const char* name) {
    // POSIX allows converting dlsym's object pointer to a function pointer.
    return reinterpret_cast<Fn>(::dlsym(RTLD_DEFAULT, name));
}

}  // namespace

std::string allocator_name() {
    if (auto version = lookup<mi_version_fn>("mi_version")) {
        const int v = version();  // 209 for 2.0.9
        return "mimalloc " + std::to_string(v / 100) + "." + std::to_string(v / 10 % 10) + "." +
               std::to_string(v % 10);
    }
    if (lookup<void (*)()>("__asan_init") != nullptr || lookup<void (*)()>("__tsan_init") != nullptr) {
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

}  // namespace tokenmeter::app
