// metrics/tasks: the task-time families (tasks: in the config). A task is a label from a request
// header bounded by an allowlist, so `task` is one of the configured names or "other"; `model` is
// the registry's bounded model label. Classic histograms only, one observation per request or
// per ended session.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace tokenmeter::metrics {

// Bucket boundaries (seconds) of tokenmeter_task_duration_seconds and
// tokenmeter_task_session_duration_seconds: 100 ms to 1 h.
const std::vector<double>& task_duration_bounds();

class task_metrics {
  public:
    explicit task_metrics(prometheus::Registry& registry);

    // Every request with a task, by outcome.
    void request(std::string_view model, std::string_view task, std::string_view outcome);
    // A complete request's task time and its tokens (a count that is unknown is not added).
    void task_done(std::string_view model, std::string_view task, double seconds,
                   std::optional<std::uint64_t> input_tokens,
                   std::optional<std::uint64_t> output_tokens);
    // A session that ended (idle for tasks.session_idle_expiry).
    void session_done(std::string_view model, std::string_view task, double seconds,
                      std::uint64_t requests, std::uint64_t input_tokens,
                      std::uint64_t output_tokens);
    // Sessions not tracked: reason "evicted" (tasks.max_sessions) or "invalid_id".
    void sessions_dropped(std::string_view reason, std::uint64_t count);
    void sessions_active(std::size_t count);

  private:
    prometheus::Family<prometheus::Counter>* requests_;
    prometheus::Family<prometheus::Histogram>* duration_;
    prometheus::Family<prometheus::Counter>* tokens_;
    prometheus::Family<prometheus::Histogram>* session_duration_;
    prometheus::Family<prometheus::Counter>* session_requests_;
    prometheus::Family<prometheus::Counter>* session_tokens_;
    prometheus::Family<prometheus::Counter>* dropped_;
    prometheus::Family<prometheus::Gauge>* active_;  // its one series appears with sessions
};

}  // namespace tokenmeter::metrics
