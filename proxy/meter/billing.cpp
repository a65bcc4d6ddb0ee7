#include "meter/billing.hpp"

namespace tokenmeter::meter {
namespace {

constexpr token_count unbilled{0, token_source::unbilled};

token_count first_known(const std::optional<std::uint64_t>& reported,
                        const std::optional<std::uint64_t>& native,
                        const std::optional<std::uint64_t>& normalized) {
    if (reported) {
        return {reported, token_source::reported};
    }
    if (native) {
        return {native, token_source::native};
    }
    if (normalized) {
        return {normalized, token_source::normalized};
    }
    return {};
}

token_count reported_only(const std::optional<std::uint64_t>& reported) {
    return reported ? token_count{reported, token_source::reported} : token_count{};
}

}  // namespace

std::string_view to_string(token_source s) noexcept {
    switch (s) {
        case token_source::none:
            return "none";
        case token_source::reported:
            return "reported";
        case token_source::native:
            return "native";
        case token_source::normalized:
            return "normalized";
        case token_source::counted:
            return "counted";
        case token_source::unbilled:
            return "unbilled";
        case token_source::estimated:
            return "estimated";
    }
    return "none";
}

token_source token_source_from(std::string_view text) noexcept {
    for (auto s : {token_source::reported, token_source::native, token_source::normalized,
                   token_source::counted, token_source::unbilled, token_source::estimated}) {
        if (text == to_string(s)) {
            return s;
        }
    }
    return token_source::none;
}

billed_counts running_counts(const request_summary& s) {
    billed_counts b;
    b.served = s.upstream_received;
    b.input =
        first_known(s.reported.input_tokens, s.native_input_tokens, s.normalized_input_tokens);
    if ((b.input.source == token_source::native && s.native_input_estimated) ||
        (b.input.source == token_source::normalized && s.normalized_input_estimated)) {
        b.input.source = token_source::estimated;
    }
    b.output =
        first_known(s.reported.output_tokens, s.native_output_tokens, s.normalized_output_tokens);
    if (!b.output.value && !s.output_not_text) {
        b.output = {s.counted_output_tokens, token_source::counted};
    }
    if (s.output_not_text && b.output.source != token_source::reported) {
        // Audio out: a count of text says nothing about it; without a report it is unknown.
        b.output = {};
    }
    // A re-count of the reasoning text stands in for an unreported count only when there was
    // such text: a 0 from a tokenizer that saw none says nothing the output count does not.
    b.reasoning = reported_only(s.reported.reasoning_tokens);
    if (!b.reasoning.value) {
        const auto recounted = [](const std::optional<std::uint64_t>& n) {
            return n.value_or(0) > 0 ? n : std::nullopt;
        };
        b.reasoning = first_known(std::nullopt, recounted(s.native_reasoning_tokens),
                                  recounted(s.normalized_reasoning_tokens));
    }
    b.cached_input = reported_only(s.reported.cached_input_tokens);
    b.cache_write = reported_only(s.reported.cache_write_tokens);
    b.cache_write_1h = reported_only(s.reported.cache_write_1h_tokens);
    b.input_audio = reported_only(s.reported.input_audio_tokens);
    b.output_audio = reported_only(s.reported.output_audio_tokens);
    return b;
}

billed_counts billed(const request_summary& s, const billing_policy& policy) {
    billed_counts b = running_counts(s);
    if (!b.served || s.result == outcome::rejected) {
        b.served = false;
        b.input = unbilled;
        b.output = unbilled;
        b.reasoning = {};
        b.cached_input = {};
        b.cache_write = {};
        b.cache_write_1h = {};
        b.input_audio = {};
        b.output_audio = {};
        return b;
    }
    if (s.response_unread && b.output.source != token_source::reported) {
        // Most of the body was never read: what was counted of it is no count at all.
        b.output = {};
        if (b.reasoning.source != token_source::reported) {
            b.reasoning = {};
        }
    }
    const bool failed =
        s.result == outcome::upstream_error || s.result == outcome::upstream_truncated;
    if (failed && b.input.source != token_source::reported) {
        // Nothing reported: the prompt was counted here. It bills when the server produced
        // output for it, or when the operator bills failed requests' prompts.
        const bool produced = b.output.value.value_or(0) > 0;
        if (!produced && !policy.bill_failed_input) {
            b.input = unbilled;
        }
    }
    return b;
}

}  // namespace tokenmeter::meter
