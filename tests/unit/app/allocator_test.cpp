// Unit tests for app/allocator. The test binaries link the system allocator (only the proxy
// binary links mimalloc), so here it must be found as glibc's; the proxy's own start-up line is
// checked against the binary's libraries in tests/integration/allocator.test.mjs.
#include "app/allocator.hpp"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <memory>
#include <vector>

namespace tokenmeter::app {
namespace {

TEST(Allocator, NamesTheAllocatorInTheProcess) {
    const bool mimalloc_loaded = ::dlsym(RTLD_DEFAULT, "mi_version") != nullptr;
    const bool sanitized = ::dlsym(RTLD_DEFAULT, "__asan_init") != nullptr ||
                           ::dlsym(RTLD_DEFAULT, "__tsan_init") != nullptr;
    const std::string name = allocator_name();
    if (mimalloc_loaded) {  // an LD_PRELOAD of mimalloc
        EXPECT_EQ(name.rfind("mimalloc ", 0), 0U) << name;
    } else if (sanitized) {
        EXPECT_EQ(name, "sanitizer allocator");
    } else {
        EXPECT_EQ(name, "glibc malloc");
    }
}

TEST(Allocator, ReleasingFreeMemoryKeepsLiveBlocksIntact) {
    // Many small blocks (below any mmap threshold), half of them freed, then the free memory
    // handed back: what is still allocated must be untouched.
    std::vector<std::unique_ptr<char[]>> blocks;
    for (int i = 0; i < 4096; ++i) {
        blocks.emplace_back(new char[1024]);
        std::fill_n(blocks.back().get(), 1024, static_cast<char>(i));
    }
    for (std::size_t i = 0; i < blocks.size(); i += 2) {
        blocks[i].reset();
    }
    release_free_memory();
    for (std::size_t i = 1; i < blocks.size(); i += 2) {
        ASSERT_EQ(blocks[i][0], static_cast<char>(i));
        ASSERT_EQ(blocks[i][1023], static_cast<char>(i));
    }
}

}  // namespace
}  // namespace tokenmeter::app
