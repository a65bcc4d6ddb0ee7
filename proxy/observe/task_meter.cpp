#include "observe/task_meter.hpp"

#include "core/text.hpp"
#include "metrics/tasks.hpp"

namespace tokenmeter::observe {
namespace {

// Longer values are never a configured name (config checks names to 64 bytes).
constexpr std::size_t max_task_length = 64;

}  // namespace

std::optional<std::string> task_label(std::string_view value,
                                      const std::unordered_set<std::string>& allowed) {
    value = core::trim(value, core::http_whitespace);
    if (value.empty()) {
        return std::nullopt;
    }
    if (value.size() <= max_task_length) {
        std::string name(value);
        if (allowed.contains(name)) {
            return name;
        }
    }
    return std::string("other");
}

core::time_point task_done_at(const meter::request_summary& s) {
    return s.last_token ? *s.last_token : s.end;
}

task_meter::task_meter(const task_options& options, metrics::task_metrics& metrics,
                       model_label_fn model_label)
    : header_(options.header),
      allowed_(options.allowed.begin(), options.allowed.end()),
      session_header_(options.session_header),
      metrics_(metrics),
      model_label_(std::move(model_label)),
      sessions_(options.sessions) {}

task_state task_meter::begin(const header_lookup& header, std::string_view model,
                             core::time_point received) {
    task_state state;
    if (!header) {
        return state;
    }
    auto task = task_label(header(header_), allowed_);
    if (!task) {
        return state;
    }
    state.task = std::move(*task);
    state.model = std::string(model);
    if (session_header_.empty()) {
        return state;
    }
    const std::string_view id = header(session_header_);
    if (id.empty()) {
        return state;
    }
    state.session =
        sessions_.key_for(core::trim(id, core::http_whitespace), state.task, state.model);
    if (!state.session) {
        metrics_.sessions_dropped("invalid_id", 1);
        return state;
    }
    record(sessions_.begin(*state.session, received));
    return state;
}

void task_meter::end(const task_state& state, const meter::request_summary& summary,
                     const meter::billed_counts& counts) {
    if (state.task.empty()) {
        return;
    }
    // The label again now: a model the upstream served takes its label slot at the request's
    // end (metrics::model_labels), after begin() looked it up.
    const std::string model = model_label_(state.model);
    metrics_.request(model, state.task, meter::to_string(summary.result));
    const core::time_point done = task_done_at(summary);
    const meter::token_count& input = counts.input;
    const meter::token_count& output = counts.output;
    if (summary.result == meter::outcome::complete) {
        metrics_.task_done(model, state.task, core::to_seconds(done - summary.request_received),
                           input.value, output.value);
    }
    if (!state.session) {
        return;
    }
    // A request the model server never got ends its wait in the session but adds nothing.
    std::optional<session_request> counted;
    if (counts.served) {
        counted = session_request{summary.request_received, done, input.value.value_or(0),
                                  output.value.value_or(0)};
    }
    record(sessions_.end(*state.session, counted, summary.end));
}

void task_meter::sweep(core::time_point now) {
    if (!session_header_.empty()) {
        record(sessions_.sweep(now));
    }
}

void task_meter::record(const session_events& events) {
    for (const finished_session& s : events.ended) {
        metrics_.session_done(model_label_(s.model), s.task, s.duration_seconds, s.requests,
                              s.input_tokens, s.output_tokens);
    }
    metrics_.sessions_dropped("evicted", events.evicted);
    metrics_.sessions_active(events.active);
}

}  // namespace tokenmeter::observe
