// core/shared_snapshot: a loaded snapshot outlives the store that replaces it; readers on other
// threads see whole snapshots, in the order they were stored. The threaded test is also run in
// the ThreadSanitizer stage (unit.core.shared_snapshot_tsan): a holder that published without a
// happens-before edge would be reported there on the snapshot's plain fields.
#include "core/shared_snapshot.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace tokenmeter::core {
namespace {

TEST(SharedSnapshot, EmptyUntilStoredThenTheLatest) {
    shared_snapshot<const std::string> names;
    EXPECT_EQ(names.load(), nullptr);
    names.store(std::make_shared<const std::string>("first"));
    names.store(std::make_shared<const std::string>("second"));
    ASSERT_NE(names.load(), nullptr);
    EXPECT_EQ(*names.load(), "second");
}

TEST(SharedSnapshot, ALoadedSnapshotOutlivesTheStoreThatReplacesIt) {
    shared_snapshot<const std::string> names(std::make_shared<const std::string>("before"));
    auto held = names.load();
    const std::weak_ptr<const std::string> watch = held;
    names.store(std::make_shared<const std::string>("after"));
    EXPECT_EQ(*held, "before");
    EXPECT_EQ(*names.load(), "after");
    EXPECT_FALSE(watch.expired());
    // The holder kept no reference of its own to the replaced snapshot.
    held.reset();
    EXPECT_TRUE(watch.expired());
}

// A snapshot whose destructor loads from the holder that replaced it: it must run after the
// holder's lock is released (else this test deadlocks and the run times out).
struct reentrant_value {
    shared_snapshot<reentrant_value>* owner = nullptr;
    std::string* seen = nullptr;
    std::string name;
    reentrant_value(shared_snapshot<reentrant_value>* o, std::string* s, std::string n)
        : owner(o), seen(s), name(std::move(n)) {}
    reentrant_value(const reentrant_value&) = delete;
    reentrant_value& operator=(const reentrant_value&) = delete;
    reentrant_value(reentrant_value&&) = delete;
    reentrant_value& operator=(reentrant_value&&) = delete;
    ~reentrant_value() {
        if (owner == nullptr) {
            return;
        }
        if (auto now = owner->load()) {
            *seen = now->name;
        }
    }
};

TEST(SharedSnapshot, TheReplacedSnapshotIsDestroyedOutsideTheLock) {
    std::string seen;
    shared_snapshot<reentrant_value> holder;
    holder.store(std::make_shared<reentrant_value>(&holder, &seen, "old"));
    holder.store(std::make_shared<reentrant_value>(&holder, &seen, "new"));
    EXPECT_EQ(seen, "new");
    // The last one is destroyed with the holder itself: it must not load from it then.
    holder.load()->owner = nullptr;
}

// What a reload publishes: plain (non-atomic) fields written before the store. A reader must
// see every field as the writer left it.
struct table {
    std::uint64_t generation = 0;
    std::vector<std::uint64_t> entries;  // generation % 7 + 1 copies of generation
};

TEST(SharedSnapshot, ReadersOnOtherThreadsSeeWholeSnapshotsInOrder) {
    constexpr std::uint64_t generations = 20'000;
    constexpr int readers = 4;
    shared_snapshot<const table> current(std::make_shared<const table>(table{0, {0}}));
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> torn{0};
    std::atomic<std::uint64_t> backwards{0};
    std::atomic<std::uint64_t> loads{0};

    std::vector<std::thread> threads;
    threads.reserve(readers);
    for (int r = 0; r < readers; ++r) {
        threads.emplace_back([&] {
            std::uint64_t last = 0;
            std::uint64_t count = 0;
            // At least one load after the last store (done is set after it).
            for (bool finished = false; !finished;) {
                finished = done.load(std::memory_order_acquire);
                const auto snapshot = current.load();
                ++count;
                if (snapshot->generation < last) {
                    backwards.fetch_add(1, std::memory_order_relaxed);
                }
                last = snapshot->generation;
                const bool whole =
                    snapshot->entries.size() == snapshot->generation % 7 + 1 &&
                    std::all_of(snapshot->entries.begin(), snapshot->entries.end(),
                                [&](std::uint64_t e) { return e == snapshot->generation; });
                if (!whole) {
                    torn.fetch_add(1, std::memory_order_relaxed);
                }
            }
            if (last != generations) {
                backwards.fetch_add(1, std::memory_order_relaxed);  // missed the final store
            }
            loads.fetch_add(count, std::memory_order_relaxed);
        });
    }
    for (std::uint64_t g = 1; g <= generations; ++g) {
        auto next = std::make_shared<table>();
        next->generation = g;
        next->entries.assign(g % 7 + 1, g);
        current.store(std::move(next));
    }
    done.store(true, std::memory_order_release);
    for (auto& t : threads) {
        t.join();
    }
    EXPECT_EQ(torn.load(), 0U);
    EXPECT_EQ(backwards.load(), 0U);
    EXPECT_GE(loads.load(), static_cast<std::uint64_t>(readers));
    EXPECT_EQ(current.load()->generation, generations);
}

}  // namespace
}  // namespace tokenmeter::core
