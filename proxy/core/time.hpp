// core/time: the time points the data plane passes around, and the clocks that make them.
// The core never reads a clock: relay/ stamps each read once and hands the time down as data.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace tokenmeter::core {

using duration = std::chrono::nanoseconds;
using time_point = std::chrono::time_point<std::chrono::steady_clock, duration>;

inline double to_seconds(duration d) {
    return std::chrono::duration<double>(d).count();
}

class clock {
  public:
    virtual ~clock() = default;
    [[nodiscard]] virtual time_point now() const noexcept = 0;
};

class steady_clock_source final : public clock {
  public:
    [[nodiscard]] time_point now() const noexcept override {
        return std::chrono::time_point_cast<duration>(std::chrono::steady_clock::now());
    }
};

// For tests: time moves only when told to.
class manual_clock final : public clock {
  public:
    explicit manual_clock(time_point start = time_point{})
        : now_ns_(start.time_since_epoch().count()) {}
    [[nodiscard]] time_point now() const noexcept override {
        return time_point{duration{now_ns_.load(std::memory_order_relaxed)}};
    }
    void advance(duration d) noexcept { now_ns_.fetch_add(d.count(), std::memory_order_relaxed); }
    void set(time_point t) noexcept {
        now_ns_.store(t.time_since_epoch().count(), std::memory_order_relaxed);
    }

  private:
    std::atomic<std::int64_t> now_ns_;
};

}  // namespace tokenmeter::core
