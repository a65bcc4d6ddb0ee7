// load_runner: drives concurrent keep-alive HTTP/1.1 connections that each send streamed chat
// completions one after another, and measures what a client sees: TTFT, chunk gaps and, when the
// simulator stamps its chunks, how long each chunk took from the simulator's socket to ours.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loopback_url.hpp"
#include "sample_set.hpp"

namespace tokenmeter::load {

inline constexpr double max_duration_seconds = 600;

struct load_options {
    loopback_url target;
    // An https:// target: the PEM file of the CA its certificate must chain to (empty: the
    // system's trust store). The certificate must also name the target's address.
    std::string ca_file;
    std::string path = "/v1/chat/completions";
    std::size_t concurrency = 8;
    std::optional<std::uint64_t> requests = 200;  // empty: until the duration ends
    double duration_seconds = max_duration_seconds;
    std::vector<std::string> models{"sim-model"};
    std::optional<std::uint32_t> output_tokens;
    std::optional<std::uint32_t> time_to_first_token_ms;
    std::optional<std::uint32_t> inter_token_latency_ms;
    std::optional<std::uint32_t> tokens_per_chunk;
    bool stamp = false;
    std::vector<std::pair<std::string, std::string>> extra_headers;  // sent after the x-sim-* ones
    // Per read, not per request: a long stream is fine as long as bytes keep coming.
    double idle_timeout_seconds = 60;
    // When set, kept equal to the number of requests written and not yet finished, so another
    // thread can sample the proxy while a known number of streams is open.
    std::atomic<std::size_t>* open_streams = nullptr;
};

struct model_result {
    std::uint64_t ok = 0;
    std::uint64_t failed = 0;
    sample_set time_to_first_token_seconds{100'000};
};

struct load_result {
    std::uint64_t requests_ok = 0;
    std::uint64_t requests_failed = 0;
    std::uint64_t requests_cancelled = 0;  // still running when the duration ended
    std::map<int, std::uint64_t> status_counts;
    std::map<std::string, std::uint64_t> errors;  // error text -> how often
    std::map<std::string, model_result> models;
    std::uint64_t content_chunks = 0;
    std::uint64_t sse_events = 0;  // data: lines, including [DONE] and usage-only chunks
    std::uint64_t body_bytes = 0;
    std::uint64_t completion_tokens = 0;  // from usage, when the server reports it
    std::uint64_t unstamped_chunks = 0;   // content chunks without sim_sent_ns in a --stamp run
    std::size_t peak_open_streams = 0;
    double wall_seconds = 0;
    sample_set time_to_first_token_seconds;
    sample_set chunk_gap_seconds;         // between consecutive content chunks of one response
    sample_set delivery_latency_seconds;  // receive time - sim_sent_ns, --stamp only
    // The same split by the chunk's place in its stream: a burst of new streams delays the first
    // chunks of each (they wait behind the requests still being started), not the rest.
    static constexpr std::uint64_t first_chunks = 10;
    sample_set delivery_first_chunks_seconds;  // each stream's first first_chunks content chunks
    sample_set delivery_later_chunks_seconds;  // the chunks after those
    sample_set request_duration_seconds;
};

// Runs on the calling thread until the requests are done or the duration is over.
load_result run_load(const load_options& options);

}  // namespace tokenmeter::load
