// The status page's document against the request ends it shares a lock with. A board holding 32
// models, each with an SLO and requests in every slot of the last hour (the page's worst case
// at the default label bound); then one thread ends requests (status_board::record, what every
// worker does once per request) while another builds /status.json (snapshot) over and over.
// Prints the time to build the document and how long a request end waited, with and without the
// page being built beside it.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "core/time.hpp"
#include "metrics/billing.hpp"
#include "metrics/registry.hpp"
#include "metrics/status_board.hpp"

namespace {

using namespace std::chrono_literals;
using namespace tokenmeter;
using steady = std::chrono::steady_clock;

constexpr int models = 32;

meter::request_summary request(const std::string& model, core::time_point end,
                               const metrics::registry& reg, int i) {
    meter::request_summary s;
    s.api = protocol::api_kind::openai_chat_completions;
    s.model = model;
    s.upstream_received = true;
    s.status = 200;
    s.streamed = true;
    s.end = end;
    s.time_to_first_token = 0.05 + 0.001 * (i % 200);
    s.time_per_output_token = 0.01 + 0.0001 * (i % 50);
    s.inter_token_latency = meter::histogram_batch(&reg.inter_token_latency_bounds());
    s.inter_token_latency.observe(*s.time_per_output_token, 20);
    s.reported.output_tokens = 21;
    s.reported.input_tokens = 100;
    return s;
}

double micros(steady::duration d) {
    return std::chrono::duration<double, std::micro>(d).count();
}

struct waits {
    double p50 = 0, p99 = 0, max = 0;
    std::size_t count = 0;
};

// Request ends on one thread for `length`, each timed.
waits end_requests(metrics::status_board& board, const metrics::registry& reg,
                   const core::manual_clock& clock, steady::duration length) {
    std::vector<double> took;
    const auto stop = steady::now() + length;
    for (int i = 0; steady::now() < stop; ++i) {
        const meter::request_summary s =
            request("model-" + std::to_string(i % models), clock.now(), reg, i);
        const auto start = steady::now();
        board.record(s, "");
        took.push_back(micros(steady::now() - start));
        std::this_thread::sleep_for(20us);
    }
    std::sort(took.begin(), took.end());
    return {took[took.size() / 2], took[took.size() * 99 / 100], took.back(), took.size()};
}

}  // namespace

int main() {
    core::manual_clock clock{core::time_point{} + 1000h};
    metrics::slo_options slo;
    for (int m = 0; m < models; ++m) {
        slo.models["model-" + std::to_string(m)] =
            metrics::slo_target{200ms, 30ms, 0.99, metrics::preset_availability};
    }
    metrics::registry_options options;
    options.max_models = models;
    options.fine_inter_token_latency = true;
    metrics::registry reg(options, slo);
    metrics::billing_metrics billing(reg, metrics::billing_options{});
    metrics::status_board board(
        reg, &billing, clock, [] { return std::int64_t{1'700'000'000'000}; },
        metrics::status_options{});

    // An hour of 10 s slots, four requests per model in each.
    int n = 0;
    for (int slot = 0; slot < 360; ++slot) {
        for (int m = 0; m < models; ++m) {
            for (int k = 0; k < 4; ++k) {
                board.record(request("model-" + std::to_string(m), clock.now(), reg, n++), "");
            }
        }
        clock.advance(10s);
    }

    std::vector<double> builds;
    std::size_t bytes = 0;
    for (int i = 0; i < 21; ++i) {
        const auto start = steady::now();
        bytes = board.snapshot_text().size();
        builds.push_back(micros(steady::now() - start));
    }
    std::sort(builds.begin(), builds.end());
    std::printf("status.json with %d models: %zu bytes, built in %.2f ms (median of 21)\n", models,
                bytes, builds[10] / 1000);

    const waits quiet = end_requests(board, reg, clock, 1s);
    std::atomic<bool> building{true};
    std::atomic<int> documents{0};
    std::thread page([&] {
        while (building.load()) {
            (void)board.snapshot_text();
            documents.fetch_add(1);
        }
    });
    const waits busy = end_requests(board, reg, clock, 2s);
    building.store(false);
    page.join();
    std::printf(
        "request end alone:              p50 %.1f us, p99 %.1f us, max %.1f us (%zu ends)\n",
        quiet.p50, quiet.p99, quiet.max, quiet.count);
    std::printf(
        "beside the page being built:    p50 %.1f us, p99 %.1f us, max %.1f us (%zu ends, "
        "%d documents)\n",
        busy.p50, busy.p99, busy.max, busy.count, documents.load());
    return 0;
}
