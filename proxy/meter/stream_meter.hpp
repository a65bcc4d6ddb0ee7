// meter/stream_meter: the per-request state machine that turns stamped chunks into the latency
// and throughput figures users feel (TTFT, ITL, TPOT, TPS). Time comes in as data; memory per
// request is constant whatever the output length.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.hpp"
#include "meter/outcome.hpp"
#include "meter/summary.hpp"
#include "meter/token_counter.hpp"
#include "protocol/types.hpp"

namespace tokenmeter::meter {

class stream_meter final : public protocol::chunk_sink {
  public:
    stream_meter(protocol::api_kind api, std::string model, bool streamed,
                 core::time_point request_received, const std::vector<double>* itl_bounds);

    // The model server has the whole request: it is served (meter/billing).
    void on_request_sent() noexcept { summary_.upstream_received = true; }
    // The proxy answered the request itself, with this JSON error code.
    void on_local_answer(std::string_view code) { summary_.local_answer.assign(code); }
    // The response's output is not text (request_info::countable_output).
    void output_is_not_text() noexcept { summary_.output_not_text = true; }
    void on_response_head(int status, core::time_point at) noexcept;
    void on_chunk(const protocol::response_chunk& chunk, core::time_point at) override;
    void on_done_marker(core::time_point at) override;
    void on_parse_error(protocol::parse_error reason) override;

    // Closes the request and computes the derived figures. Call once.
    request_summary finish(end_reason reason, core::time_point at);

    // Re-tokenizes the text with these tokenizers (call before the first chunk).
    void use_encoders(encoders which);

    [[nodiscard]] const request_summary& current() const noexcept { return summary_; }

  private:
    void merge_usage(const protocol::token_usage& usage);
    // k tokens complete at `at`: k observations of the gap since the previous token, split k ways.
    void observe_tokens(core::time_point at, std::uint64_t k);
    // Tokens with the same completion time are one group: merged before they are observed.
    void add_tokens(core::time_point at, std::uint64_t k);
    void flush_tokens();
    // ITL comes from the re-tokenizer unless the server gives running counts and no native
    // tokenizer is configured (a server's own running count beats a foreign tokenizer).
    [[nodiscard]] bool timing_from_counter() const noexcept {
        return counter_ && (counter_->timing_is_native() || !running_usage_timing_);
    }

    request_summary summary_;
    std::optional<core::time_point> previous_token_;
    std::optional<std::uint64_t> last_running_output_;
    std::optional<token_counter> counter_;
    core::time_point group_at_{};
    std::uint64_t group_tokens_ = 0;
    bool running_usage_timing_ = false;
};

}  // namespace tokenmeter::meter
