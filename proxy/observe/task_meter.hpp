// observe/task_meter: task time (tasks: in the config). At a request's start it reads the task
// header (bounded by the allowlist: a configured name, else "other"; no header, no task) and the
// session header; at its end it records the task time and tokens, and adds the request to its
// session (observe/task_sessions). Header values are the client's: never logged, never a label
// unless they equal a configured name, session ids only hashed.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/time.hpp"
#include "meter/billing.hpp"
#include "meter/stream_meter.hpp"
#include "observe/observer.hpp"
#include "observe/task_sessions.hpp"

namespace tokenmeter::metrics {
class task_metrics;
}  // namespace tokenmeter::metrics

namespace tokenmeter::observe {

struct task_options {
    std::string header = "x-tokenmeter-task";  // lower-case
    std::vector<std::string> allowed;          // the label values; anything else is "other"
    std::string session_header;                // lower-case; "": no sessions
    task_session_options sessions;
};

// A request's task, decided when it begins.
struct task_state {
    std::string task;  // "": the request has no task (no header, or an empty one)
    // The request's model name (bounded by the observer), not yet its label: a model takes its
    // label slot only when the upstream has served it, so the label is looked up at the end.
    std::string model;
    std::optional<session_key> session;
};

// The task label of a header value: nullopt when there is none (absent, or only blanks); the
// value itself when it is one of `allowed`; otherwise "other".
std::optional<std::string> task_label(std::string_view value,
                                      const std::unordered_set<std::string>& allowed);

// When a request finished its task: its last token, or the end of its response without one.
core::time_point task_done_at(const meter::request_summary& s);

// The bounded `model` label of a model name, as the request's other metrics carry it.
using model_label_fn = std::function<std::string(std::string_view model)>;

class task_meter {
  public:
    task_meter(const task_options& options, metrics::task_metrics& metrics,
               model_label_fn model_label);

    // Reads the task and session headers. The model label is looked up at the end (end(), and
    // when a session ends), only for a request with a task.
    task_state begin(const header_lookup& header, std::string_view model,
                     core::time_point received);
    // counts: what meter::billed chose for the request (the same as its usage record).
    void end(const task_state& state, const meter::request_summary& summary,
             const meter::billed_counts& counts);
    // Ends the sessions idle for the expiry at `now` (the admin listener calls it before each
    // scrape, so a scrape sees every session that has ended by then).
    void sweep(core::time_point now);

  private:
    void record(const session_events& events);

    std::string header_;
    std::unordered_set<std::string> allowed_;
    std::string session_header_;
    metrics::task_metrics& metrics_;
    model_label_fn model_label_;
    task_sessions sessions_;
};

}  // namespace tokenmeter::observe
