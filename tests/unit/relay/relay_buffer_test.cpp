// The relay buffer's size rule: grows while reads fill it, up to its cap; made small again after
// a run of small reads, and only then.
#include "relay/relay_buffer.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

using tokenmeter::relay::relay_buffer_size;

TEST(RelayBuffer, GrowsWhileReadsFillItUpToItsCap) {
    std::uint32_t small = 0;
    std::size_t capacity = relay_buffer_size::initial;
    EXPECT_EQ(relay_buffer_size::next(capacity, 0, small), capacity);  // no read yet
    EXPECT_EQ(relay_buffer_size::next(capacity, capacity - 1, small), capacity);
    std::size_t steps = 0;
    while (capacity < relay_buffer_size::max) {
        const std::size_t next = relay_buffer_size::next(capacity, capacity, small);
        ASSERT_GT(next, capacity);
        capacity = next;
        ++steps;
    }
    EXPECT_EQ(capacity, relay_buffer_size::max);
    EXPECT_EQ(steps, 5U);  // 512 B -> 2 KiB -> 8 KiB -> 32 KiB -> 128 KiB -> 256 KiB
    EXPECT_EQ(relay_buffer_size::next(capacity, capacity, small), capacity);  // capped
}

TEST(RelayBuffer, ShrinksAfterARunOfSmallReadsOnly) {
    std::uint32_t small = 0;
    const std::size_t grown =
        relay_buffer_size::next(relay_buffer_size::initial, relay_buffer_size::initial, small);
    ASSERT_GT(grown, relay_buffer_size::initial);
    // Small reads (a stream's chunks, the relay keeping up): the buffer stays until the run is
    // long enough.
    for (std::uint32_t i = 1; i < relay_buffer_size::shrink_after_small_reads; ++i) {
        ASSERT_EQ(relay_buffer_size::next(grown, 200, small), grown) << i;
    }
    // A read the first size could not have held without filling it ends the run...
    EXPECT_EQ(relay_buffer_size::next(grown, relay_buffer_size::initial, small), grown);
    EXPECT_EQ(small, 0U);
    for (std::uint32_t i = 1; i < relay_buffer_size::shrink_after_small_reads; ++i) {
        ASSERT_EQ(relay_buffer_size::next(grown, 200, small), grown) << i;
    }
    // ...and the run's last small read makes it small again.
    EXPECT_EQ(relay_buffer_size::next(grown, 200, small), relay_buffer_size::initial);
    EXPECT_EQ(small, 0U);
    // The first size never shrinks; a bulk read fills it and it grows again.
    for (int i = 0; i < 40; ++i) {
        ASSERT_EQ(relay_buffer_size::next(relay_buffer_size::initial, 10, small),
                  relay_buffer_size::initial);
    }
    EXPECT_EQ(
        relay_buffer_size::next(relay_buffer_size::initial, relay_buffer_size::initial, small),
        grown);
}

TEST(RelayBuffer, ABulkBodyKeepsItsLargeBuffer) {
    std::uint32_t small = 0;
    const std::size_t capacity = relay_buffer_size::max;
    for (int i = 0; i < 100; ++i) {
        ASSERT_EQ(relay_buffer_size::next(capacity, capacity, small), capacity);
        ASSERT_EQ(relay_buffer_size::next(capacity, capacity / 3, small), capacity);
    }
}

}  // namespace

// The pool behind reads that take their buffer only when data is there: a buffer given back is
// the next one taken, and no more than max_spare are kept.
TEST(RelayBufferPool, GivesBackWhatItWasGivenAndKeepsABoundedNumber) {
    using tokenmeter::relay::relay_buffer_pool;
    relay_buffer_pool pool;
    EXPECT_EQ(pool.spare(), 0U);
    char* first = pool.take();
    ASSERT_NE(first, nullptr);
    first[0] = 'a';
    first[relay_buffer_pool::buffer_size - 1] = 'z';  // the whole size is usable
    pool.give(first);
    EXPECT_EQ(pool.spare(), 1U);
    EXPECT_EQ(pool.take(), first);
    EXPECT_EQ(pool.spare(), 0U);
    pool.give(nullptr);
    EXPECT_EQ(pool.spare(), 0U);

    std::vector<char*> taken;
    for (std::size_t i = 0; i < relay_buffer_pool::max_spare + 10; ++i) {
        taken.push_back(pool.take());
    }
    taken.push_back(first);
    for (char* p : taken) {
        pool.give(p);  // the ones beyond max_spare are freed (ASan would see a leak otherwise)
    }
    EXPECT_EQ(pool.spare(), relay_buffer_pool::max_spare);
}
