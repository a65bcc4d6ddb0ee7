#include "metrics/tasks.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace tokenmeter::metrics {

const std::vector<double>& task_duration_bounds() {
    static const std::vector<double> bounds{0.1, 0.25, 0.5, 1,   2.5, 5,    10,   20,
                                            30,  60,   120, 300, 600, 1200, 1800, 3600};
    return bounds;
}

task_metrics::task_metrics(prometheus::Registry& registry) {
    using prometheus::BuildCounter;
    using prometheus::BuildGauge;
    using prometheus::BuildHistogram;
    requests_ = &BuildCounter()
                     .Name("tokenmeter_task_requests_total")
                     .Help("Requests with a task header, by model, task and outcome")
                     .Register(registry);
    duration_ = &BuildHistogram()
                     .Name("tokenmeter_task_duration_seconds")
                     .Help(
                         "Per complete request with a task: request head received to its last "
                         "output token (to the end of the response when it had none)")
                     .Register(registry);
    tokens_ = &BuildCounter()
                   .Name("tokenmeter_task_tokens_total")
                   .Help(
                       "Input and output tokens of the complete requests with a task (the "
                       "requests of tokenmeter_task_duration_seconds), billed counts")
                   .Register(registry);
    session_duration_ = &BuildHistogram()
                             .Name("tokenmeter_task_session_duration_seconds")
                             .Help(
                                 "Per ended session (same session id, task and model): first "
                                 "request received to the last token of its last request")
                             .Register(registry);
    session_requests_ = &BuildCounter()
                             .Name("tokenmeter_task_session_requests_total")
                             .Help("Requests of the ended sessions")
                             .Register(registry);
    session_tokens_ = &BuildCounter()
                           .Name("tokenmeter_task_session_tokens_total")
                           .Help("Input and output tokens of the ended sessions")
                           .Register(registry);
    dropped_ = &BuildCounter()
                    .Name("tokenmeter_task_sessions_dropped_total")
                    .Help(
                        "Sessions not observed: evicted (tasks.max_sessions reached) or a "
                        "session id that is empty, too long or not visible ASCII (invalid_id)")
                    .Register(registry);
    active_ = &BuildGauge()
                   .Name("tokenmeter_task_sessions_active")
                   .Help("Sessions held now (with a request in flight or idle, not yet ended)")
                   .Register(registry);
}

void task_metrics::request(std::string_view model, std::string_view task,
                           std::string_view outcome) {
    requests_
        ->Add({{"model", std::string(model)},
               {"task", std::string(task)},
               {"outcome", std::string(outcome)}})
        .Increment();
}

void task_metrics::task_done(std::string_view model, std::string_view task, double seconds,
                             std::optional<std::uint64_t> input_tokens,
                             std::optional<std::uint64_t> output_tokens) {
    const prometheus::Labels labels{{"model", std::string(model)}, {"task", std::string(task)}};
    duration_->Add(labels, task_duration_bounds()).Observe(seconds);
    const auto add = [&](const char* type, std::optional<std::uint64_t> n) {
        if (n) {
            prometheus::Labels typed = labels;
            typed.emplace("type", type);
            tokens_->Add(typed).Increment(static_cast<double>(*n));
        }
    };
    add("input", input_tokens);
    add("output", output_tokens);
}

void task_metrics::session_done(std::string_view model, std::string_view task, double seconds,
                                std::uint64_t requests, std::uint64_t input_tokens,
                                std::uint64_t output_tokens) {
    const prometheus::Labels labels{{"model", std::string(model)}, {"task", std::string(task)}};
    session_duration_->Add(labels, task_duration_bounds()).Observe(seconds);
    session_requests_->Add(labels).Increment(static_cast<double>(requests));
    prometheus::Labels typed = labels;
    typed["type"] = "input";
    session_tokens_->Add(typed).Increment(static_cast<double>(input_tokens));
    typed["type"] = "output";
    session_tokens_->Add(typed).Increment(static_cast<double>(output_tokens));
}

void task_metrics::sessions_dropped(std::string_view reason, std::uint64_t count) {
    if (count > 0) {
        dropped_->Add({{"reason", std::string(reason)}}).Increment(static_cast<double>(count));
    }
}

void task_metrics::sessions_active(std::size_t count) {
    active_->Add({}).Set(static_cast<double>(count));
}

}  // namespace tokenmeter::metrics
