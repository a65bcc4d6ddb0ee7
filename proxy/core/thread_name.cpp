#include "core/thread_name.hpp"

#include <pthread.h>

#include <algorithm>
#include <array>

namespace tokenmeter::core {

void name_this_thread(std::string_view name) {
    std::array<char, 16> cut{};  // 15 bytes and the terminating zero
    const std::size_t n = std::min(name.size(), cut.size() - 1);
    std::copy_n(name.data(), n, cut.data());
    (void)::pthread_setname_np(::pthread_self(), cut.data());
}

std::string this_thread_name() {
    std::array<char, 16> name{};
    if (::pthread_getname_np(::pthread_self(), name.data(), name.size()) != 0) {
        return {};
    }
    return name.data();
}

}  // namespace tokenmeter::core
