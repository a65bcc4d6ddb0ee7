// protocol/chunk_builder: the text and usage an adapter collects while walking one event, kept
// in buffers reused from event to event (one builder per thread), then handed to the sink as one
// response_chunk.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "protocol/types.hpp"

namespace tokenmeter::protocol {

struct chunk_builder {
    std::string content;
    std::string reasoning;
    std::string tool_arguments;
    std::string finish_reason;
    std::string model;
    std::optional<token_usage> usage;
    bool error = false;

    void reset() {
        content.clear();
        reasoning.clear();
        tool_arguments.clear();
        finish_reason.clear();
        model.clear();
        usage.reset();
        error = false;
    }

    token_usage& usage_ref() {
        if (!usage) {
            usage.emplace();
        }
        return *usage;
    }

    // The model a response names: the first one in the event, at most max_model_bytes of it.
    static constexpr std::size_t max_model_bytes = 256;
    void set_model(std::string_view name) {
        if (model.empty()) {
            model.assign(name.substr(0, max_model_bytes));
        }
    }

    void set_finish(std::string_view reason) {
        if (finish_reason.empty()) {
            finish_reason.assign(reason);
        }
    }

    // The calling thread's builder. An adapter fills one event's chunk, hands it to its sink
    // and is done with it, so a stream need not keep its own buffers from event to event (four
    // strings and what they grew to, in every open stream). No adapter decodes inside another's
    // sink, so one per thread serves them all.
    static chunk_builder& for_thread() {
        thread_local chunk_builder builder;
        return builder;
    }

    // The chunk; views into this builder, valid until the next reset().
    [[nodiscard]] response_chunk chunk() const {
        response_chunk out;
        out.content = content;
        out.reasoning = reasoning;
        out.tool_arguments = tool_arguments;
        out.finish_reason = finish_reason;
        out.model = model;
        out.usage = usage;
        out.error = error;
        out.role_only = !out.carries_text();
        return out;
    }
};

}  // namespace tokenmeter::protocol
