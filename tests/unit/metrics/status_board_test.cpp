// The status page's document (/status.json): windows that expire with the manual clock,
// quantiles from the sketch within its bound, tokens per second, SLO ratios and burn rates, the
// 15-minute series (points that move with the clock and agree with the windows), top tenants,
// recent upstream errors, and every list bounded.
#include "metrics/status_board.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metrics/billing.hpp"
#include "metrics/registry.hpp"

namespace tokenmeter::metrics {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

registry_options fine_options(std::uint32_t max_models = 32) {
    registry_options o;
    o.max_models = max_models;
    o.fine_inter_token_latency = true;
    return o;
}

struct board_fixture {
    explicit board_fixture(registry_options options = fine_options(), slo_options slo = {},
                           std::uint32_t max_tenants = 100)
        : metrics(options, slo),
          billing(metrics, billing_options{{}, max_tenants, true, {}}),
          board(
              metrics, &billing, clock, [this] { return wall_ms; }, status_options{}) {}

    // A streamed request that ended now: TTFT, TPOT and `tokens` gaps of `itl` seconds.
    meter::request_summary request(std::string model, double ttft, double itl = 0.01,
                                   std::uint64_t tokens = 10) {
        meter::request_summary s;
        s.api = protocol::api_kind::openai_chat_completions;
        s.model = std::move(model);
        s.upstream_received = true;
        s.status = 200;
        s.streamed = true;
        s.end = clock.now();
        s.time_to_first_token = ttft;
        s.time_per_output_token = itl;
        s.inter_token_latency = meter::histogram_batch(&metrics.inter_token_latency_bounds());
        s.inter_token_latency.observe(itl, tokens - 1);
        s.reported.output_tokens = tokens;
        s.reported.input_tokens = 5;
        s.native_output_tokens = tokens + 1;
        s.normalized_output_tokens = tokens + 2;
        return s;
    }

    core::manual_clock clock{core::time_point{} + 1000h};
    std::int64_t wall_ms = 1'700'000'000'000;
    registry metrics;
    billing_metrics billing;
    status_board board;
};

const json& model_named(const json& doc, const std::string& name) {
    for (const auto& m : doc["models"]) {
        if (m["model"] == name) {
            return m;
        }
    }
    static const json none;
    ADD_FAILURE() << "no model " << name << " in " << doc.dump();
    return none;
}

TEST(StatusBoard, EmptyDocumentHasItsShape) {
    board_fixture f;
    const json doc = f.board.snapshot();
    EXPECT_EQ(doc["version"], 1);
    EXPECT_EQ(doc["sequence"], 1);
    EXPECT_EQ(doc["generated_at_unix_ms"], f.wall_ms);
    EXPECT_EQ(doc["streams_active"], 0);
    EXPECT_TRUE(doc["models"].empty());
    EXPECT_TRUE(doc["tenants"]["by_tokens"].empty());
    EXPECT_TRUE(doc["upstream_errors"]["recent"].empty());
    EXPECT_NEAR(doc["relative_error"].get<double>(), quantile_sketch::relative_error(), 1e-12);
    EXPECT_EQ(f.board.snapshot()["sequence"], 2);
    // Text form: one JSON object that parses back.
    EXPECT_EQ(json::parse(f.board.snapshot_text())["version"], 1);
}

TEST(StatusBoard, WindowsExpireWithTheClock) {
    board_fixture f;
    f.board.record(f.request("m", 0.2), "");
    const auto requests = [&](const char* window) {
        return model_named(f.board.snapshot(), "m")["latency"][window]["requests"].get<int>();
    };
    f.clock.advance(30s);
    EXPECT_EQ(requests("1m"), 1);
    EXPECT_EQ(requests("5m"), 1);
    EXPECT_EQ(requests("15m"), 1);
    f.clock.advance(61s);  // 91 s later: out of the last minute
    EXPECT_EQ(requests("1m"), 0);
    EXPECT_EQ(requests("5m"), 1);
    f.clock.advance(5min);
    EXPECT_EQ(requests("5m"), 0);
    EXPECT_EQ(requests("15m"), 1);
    const json m = model_named(f.board.snapshot(), "m");
    EXPECT_TRUE(m["latency"]["1m"]["ttft"]["p50"].is_null());
    EXPECT_NEAR(m["latency"]["15m"]["ttft"]["p50"].get<double>(), 0.2,
                0.2 * quantile_sketch::relative_error() * (1 + 1e-9));
    f.clock.advance(10min);
    EXPECT_EQ(requests("15m"), 0);
}

TEST(StatusBoard, QuantilesWithinTheBound) {
    board_fixture f;
    // TTFT 1..200 ms; ITL 5 ms for half the requests' gaps, 50 ms for the other half.
    for (int i = 1; i <= 200; ++i) {
        f.board.record(f.request("m", i / 1000.0, i % 2 == 0 ? 0.005 : 0.05, 11), "");
    }
    const json m = model_named(f.board.snapshot(), "m");
    const json& w = m["latency"]["1m"];
    EXPECT_EQ(w["requests"], 200);
    const double e = quantile_sketch::relative_error() * (1 + 1e-9);
    // Rank floor(q * 199): 99 -> 100 ms, 197 -> 198 ms.
    EXPECT_NEAR(w["ttft"]["p50"].get<double>(), 0.100, 0.100 * e);
    EXPECT_NEAR(w["ttft"]["p99"].get<double>(), 0.198, 0.198 * e);
    EXPECT_EQ(w["itl"]["count"], 2000);
    EXPECT_NEAR(w["itl"]["p50"].get<double>(), 0.005, 0.005 * e);
    EXPECT_NEAR(w["itl"]["p99"].get<double>(), 0.05, 0.05 * e);
    EXPECT_NEAR(w["tpot"]["p99"].get<double>(), 0.05, 0.05 * e);
}

TEST(StatusBoard, ZeroGapsCountAsZero) {
    board_fixture f;
    auto s = f.request("m", 0.1, 0.02, 2);
    s.inter_token_latency.observe(0.0, 8);  // tokens that came in one chunk
    f.board.record(s, "");
    const json w = model_named(f.board.snapshot(), "m")["latency"]["1m"];
    EXPECT_EQ(w["itl"]["count"], 9);
    EXPECT_EQ(w["itl"]["p50"], 0.0);
}

TEST(StatusBoard, TokensPerSecondBySource) {
    board_fixture f;
    f.clock.advance(120s);  // a full minute since start
    f.board.record(f.request("m", 0.1, 0.01, 60), "");
    f.board.record(f.request("m", 0.1, 0.01, 60), "");
    const json doc = f.board.snapshot();
    const json& t = model_named(doc, "m")["throughput"]["1m"];
    EXPECT_EQ(t["output_tokens"]["reported"], 120);
    EXPECT_EQ(t["output_tokens"]["native"], 122);
    EXPECT_EQ(t["output_tokens"]["normalized"], 124);
    const double seconds = t["seconds"].get<double>();
    EXPECT_GE(seconds, 50.0);  // 5 whole slots and the current one, just begun
    EXPECT_LE(seconds, 60.0);
    EXPECT_DOUBLE_EQ(t["tokens_per_second"]["reported"].get<double>(), 120 / seconds);
    EXPECT_DOUBLE_EQ(t["tokens_per_second"]["normalized"].get<double>(), 124 / seconds);
    // Just after start the window is as long as the uptime, not a minute.
    board_fixture fresh;
    fresh.clock.advance(2s);
    fresh.board.record(fresh.request("m", 0.1, 0.01, 10), "");
    const json fresh_doc = fresh.board.snapshot();
    const json& ft = model_named(fresh_doc, "m")["throughput"]["15m"];
    EXPECT_DOUBLE_EQ(ft["seconds"].get<double>(), 2.0);
    EXPECT_DOUBLE_EQ(ft["tokens_per_second"]["reported"].get<double>(), 5.0);
}

TEST(StatusBoard, SloGoodRatioAndBurnRate) {
    slo_options slo;
    slo.models["m"] = slo_target{100ms, 20ms, 0.9, std::nullopt};
    board_fixture f(fine_options(), slo);
    // 8 good TTFTs, 2 bad; every TPOT good.
    for (int i = 0; i < 10; ++i) {
        f.board.record(f.request("m", i < 8 ? 0.05 : 0.5, 0.01), "");
    }
    json s = model_named(f.board.snapshot(), "m")["slo"];
    EXPECT_DOUBLE_EQ(s["objective"].get<double>(), 0.9);
    EXPECT_DOUBLE_EQ(s["ttft_target_seconds"].get<double>(), 0.1);
    EXPECT_EQ(s["ttft"]["5m"]["good"], 8);
    EXPECT_EQ(s["ttft"]["5m"]["bad"], 2);
    EXPECT_DOUBLE_EQ(s["ttft"]["5m"]["good_ratio"].get<double>(), 0.8);
    EXPECT_NEAR(s["ttft"]["5m"]["burn_rate"].get<double>(), 2.0, 1e-9);  // 20 % bad / 10 % budget
    EXPECT_DOUBLE_EQ(s["tpot"]["1h"]["good_ratio"].get<double>(), 1.0);
    EXPECT_DOUBLE_EQ(s["tpot"]["1h"]["burn_rate"].get<double>(), 0.0);
    // 20 minutes later: gone from 5 m, still in 1 h; after the hour, gone.
    f.clock.advance(20min);
    s = model_named(f.board.snapshot(), "m")["slo"];
    EXPECT_EQ(s["ttft"]["5m"]["good"], 0);
    EXPECT_TRUE(s["ttft"]["5m"]["good_ratio"].is_null());
    EXPECT_EQ(s["ttft"]["1h"]["bad"], 2);
    f.clock.advance(41min);
    s = model_named(f.board.snapshot(), "m")["slo"];
    EXPECT_EQ(s["ttft"]["1h"]["good"], 0);
    // A model without an SLO has an empty object.
    f.board.record(f.request("n", 0.1), "");
    EXPECT_TRUE(model_named(f.board.snapshot(), "n")["slo"].empty());
}

TEST(StatusBoard, AvailabilityGoodRatioAndBurnRate) {
    slo_options slo;
    slo.models["m"].availability = 0.99;
    board_fixture f(fine_options(), slo);
    for (int i = 0; i < 9; ++i) {
        f.board.record(f.request("m", 0.05), "");
    }
    meter::request_summary down = f.request("m", 0.05);
    down.time_to_first_token.reset();
    down.result = meter::outcome::upstream_error;
    down.status = 502;
    f.board.record(down, "");
    meter::request_summary cancelled = f.request("m", 0.05);
    cancelled.result = meter::outcome::client_cancel;
    f.board.record(cancelled, "");  // left out
    const json s = model_named(f.board.snapshot(), "m")["slo"];
    EXPECT_DOUBLE_EQ(s["availability_objective"].get<double>(), 0.99);
    EXPECT_EQ(s["availability"]["5m"]["good"], 9);
    EXPECT_EQ(s["availability"]["5m"]["bad"], 1);
    EXPECT_NEAR(s["availability"]["1h"]["burn_rate"].get<double>(), 10.0, 1e-9);  // 10 % / 1 %
    // No latency target: no latency fields.
    EXPECT_FALSE(s.contains("objective")) << s.dump();
    EXPECT_FALSE(s.contains("ttft")) << s.dump();
}

// The series of a model: each array has one value per point, oldest first.
std::vector<json> points(const json& model, const std::string& metric, const std::string& key) {
    return model["series"][metric][key].get<std::vector<json>>();
}

TEST(StatusBoard, SeriesHasThirtyPointsOfThirtySeconds) {
    board_fixture f;
    const json empty = f.board.snapshot();
    EXPECT_EQ(empty["series"]["window"], "15m");
    EXPECT_EQ(empty["series"]["points"], 30);
    EXPECT_EQ(empty["series"]["step_seconds"], 30.0);
    EXPECT_EQ(empty["series"]["burn_rate_window"], "5m");
    f.board.record(f.request("m", 0.2), "");
    const json m = model_named(f.board.snapshot(), "m");
    for (const char* metric : {"ttft", "itl"}) {
        for (const char* q : {"p50", "p99"}) {
            EXPECT_EQ(points(m, metric, q).size(), 30u) << metric << " " << q;
        }
    }
    for (const char* source : {"reported", "native", "normalized"}) {
        EXPECT_EQ(points(m, "tokens_per_second", source).size(), 30u) << source;
    }
    // No SLO: no burn rate.
    EXPECT_TRUE(m["series"]["burn_rate"].empty());
}

TEST(StatusBoard, SeriesPointsMoveWithTheClock) {
    board_fixture f;  // starts at a step boundary
    f.board.record(f.request("m", 0.1), "");
    f.clock.advance(30s);
    f.board.record(f.request("m", 0.4), "");
    f.clock.advance(5s);
    json m = model_named(f.board.snapshot(), "m");
    std::vector<json> ttft = points(m, "ttft", "p50");
    const double e = quantile_sketch::relative_error() * (1 + 1e-9);
    EXPECT_NEAR(ttft[28].get<double>(), 0.1, 0.1 * e);
    EXPECT_NEAR(ttft[29].get<double>(), 0.4, 0.4 * e);
    for (std::size_t i = 0; i < 28; ++i) {
        EXPECT_TRUE(ttft[i].is_null()) << i;
    }
    // Before the start no rate; after it, 0 without tokens.
    std::vector<json> rate = points(m, "tokens_per_second", "reported");
    EXPECT_TRUE(rate[27].is_null());
    EXPECT_DOUBLE_EQ(rate[28].get<double>(), 10 / 30.0);
    EXPECT_DOUBLE_EQ(rate[29].get<double>(), 10 / 5.0);  // the newest point so far

    // A minute later both moved two points to the left; 15 minutes later they are gone.
    f.clock.advance(60s);
    m = model_named(f.board.snapshot(), "m");
    ttft = points(m, "ttft", "p50");
    EXPECT_NEAR(ttft[26].get<double>(), 0.1, 0.1 * e);
    EXPECT_NEAR(ttft[27].get<double>(), 0.4, 0.4 * e);
    EXPECT_TRUE(ttft[29].is_null());
    EXPECT_EQ(points(m, "tokens_per_second", "native")[29], 0.0);
    f.clock.advance(15min);
    m = model_named(f.board.snapshot(), "m");
    for (const json& v : points(m, "ttft", "p99")) {
        EXPECT_TRUE(v.is_null());
    }
    for (const json& v : points(m, "tokens_per_second", "reported")) {
        EXPECT_EQ(v, 0.0);
    }
}

TEST(StatusBoard, NewestPointAgreesWithTheWindows) {
    slo_options slo;
    slo.models["m"] = slo_target{100ms, 20ms, 0.9, 0.99};
    board_fixture f(fine_options(), slo);
    f.clock.advance(10s);  // the second slot of a step
    for (int i = 1; i <= 40; ++i) {
        f.board.record(f.request("m", i / 100.0, i % 3 == 0 ? 0.03 : 0.01, 12), "");
    }
    f.clock.advance(5s);
    const json doc = f.board.snapshot();
    const json& m = model_named(doc, "m");
    // Every request is in the newest point and in the 1-minute window: the same numbers.
    for (const char* metric : {"ttft", "itl"}) {
        for (const char* q : {"p50", "p99"}) {
            EXPECT_EQ(points(m, metric, q).back(), m["latency"]["1m"][metric][q])
                << metric << " " << q;
        }
    }
    // The newest point covers 15 s of its step so far, as the windows cover their time.
    EXPECT_DOUBLE_EQ(points(m, "tokens_per_second", "reported").back().get<double>(),
                     40 * 12 / 15.0);
    EXPECT_EQ(points(m, "tokens_per_second", "normalized").back(),
              m["throughput"]["15m"]["tokens_per_second"]["normalized"]);
    for (const char* kind : {"ttft", "tpot", "availability"}) {
        EXPECT_EQ(points(m, "burn_rate", kind).back(), m["slo"][kind]["5m"]["burn_rate"]) << kind;
        EXPECT_TRUE(points(m, "burn_rate", kind).front().is_null()) << kind;
    }
    EXPECT_NEAR(points(m, "burn_rate", "ttft").back().get<double>(), 30 / 40.0 / 0.1, 1e-9);
}

TEST(StatusBoard, SeriesBurnRateIsTheFiveMinutesEndingWithEachPoint) {
    slo_options slo;
    slo.models["m"] = slo_target{100ms, std::nullopt, 0.9, std::nullopt};
    board_fixture f(fine_options(), slo);
    for (int i = 0; i < 10; ++i) {
        f.board.record(f.request("m", i < 5 ? 0.05 : 0.5), "");  // half bad: burn rate 5
    }
    f.clock.advance(30s);
    for (int i = 0; i < 10; ++i) {
        f.board.record(f.request("m", 0.05), "");  // all good
    }
    f.clock.advance(2min);
    json burn = model_named(f.board.snapshot(), "m")["series"]["burn_rate"];
    std::vector<json> ttft = burn["ttft"].get<std::vector<json>>();
    // Point 24 holds the first requests (5 bad of 10), the windows of 25 onwards all 20.
    EXPECT_TRUE(ttft[23].is_null());
    EXPECT_NEAR(ttft[24].get<double>(), 5.0, 1e-9);
    for (std::size_t i = 25; i < 30; ++i) {
        EXPECT_NEAR(ttft[i].get<double>(), 2.5, 1e-9) << i;
    }
    // No TPOT target: no TPOT verdicts, null burn rates; no availability objective: no array.
    EXPECT_TRUE(burn["tpot"][29].is_null());
    EXPECT_FALSE(burn.contains("availability"));
    // Five minutes after the last requests the newest points have none in their window.
    f.clock.advance(4min);
    ttft = model_named(f.board.snapshot(), "m")["series"]["burn_rate"]["ttft"]
               .get<std::vector<json>>();
    EXPECT_NEAR(ttft[17].get<double>(), 2.5, 1e-9);
    EXPECT_NEAR(ttft[25].get<double>(), 2.5, 1e-9);  // its window starts with the first slot
    EXPECT_DOUBLE_EQ(ttft[26].get<double>(), 0.0);   // only the good ones
    EXPECT_TRUE(ttft[29].is_null());
}

TEST(StatusBoard, SeriesStaysBoundedOverHours) {
    board_fixture f;
    for (int i = 0; i < 3 * 360; ++i) {  // three hours, a request every 10 s
        f.board.record(f.request("m", 0.05 + (i % 7) / 100.0), "");
        f.clock.advance(10s);
    }
    const json m = model_named(f.board.snapshot(), "m");
    EXPECT_EQ(points(m, "ttft", "p50").size(), 30u);
    // Each complete point holds three requests of 10 tokens in 30 s.
    const std::vector<json> rate = points(m, "tokens_per_second", "reported");
    for (std::size_t i = 0; i < 29; ++i) {
        EXPECT_DOUBLE_EQ(rate[i].get<double>(), 1.0) << i;
    }
}

TEST(StatusBoard, TopTenantsByTokensAndBy429s) {
    board_fixture f;
    f.board.record(f.request("m", 0.1, 0.01, 10), "small");   // 5 + 10 tokens
    f.board.record(f.request("m", 0.1, 0.01, 100), "large");  // 5 + 100
    f.board.record(f.request("m", 0.1, 0.01, 100), "large");
    f.board.rate_limited("small");
    f.board.rate_limited("small");
    f.board.rate_limited("noisy");
    f.board.record(f.request("m", 0.1), "");  // not metered per tenant
    const json t = f.board.snapshot()["tenants"];
    EXPECT_EQ(t["window"], "15m");
    ASSERT_EQ(t["by_tokens"].size(), 2u);
    EXPECT_EQ(t["by_tokens"][0]["tenant"], "large");
    EXPECT_EQ(t["by_tokens"][0]["tokens"], 210);
    EXPECT_EQ(t["by_tokens"][1]["tenant"], "small");
    EXPECT_EQ(t["by_tokens"][1]["tokens"], 15);
    ASSERT_EQ(t["by_rate_limited"].size(), 2u);
    EXPECT_EQ(t["by_rate_limited"][0]["tenant"], "small");
    EXPECT_EQ(t["by_rate_limited"][0]["rate_limited"], 2);
    // A tenant never served takes no label slot: its 429s count under "other".
    EXPECT_EQ(t["by_rate_limited"][1]["tenant"], "other");
    f.clock.advance(16min);
    EXPECT_TRUE(f.board.snapshot()["tenants"]["by_tokens"].empty());
}

TEST(StatusBoard, ModelsAndTenantsAreLabelBounded) {
    board_fixture f(fine_options(2), {}, 2);
    for (int i = 0; i < 50; ++i) {
        f.board.record(f.request("model-" + std::to_string(i), 0.1), "tenant-" + std::to_string(i));
        f.board.rate_limited("limited-" + std::to_string(i));
    }
    const json doc = f.board.snapshot();
    EXPECT_EQ(doc["models"].size(), 3u);  // model-0, model-1, other
    EXPECT_EQ(model_named(doc, "other")["latency"]["1m"]["requests"], 48);
    EXPECT_LE(doc["tenants"]["by_tokens"].size(), 3u);
    EXPECT_EQ(doc["tenants"]["by_tokens"][0]["tenant"], "other");
    EXPECT_LE(doc["tenants"]["by_rate_limited"].size(), 3u);
}

TEST(StatusBoard, RecentUpstreamErrorsNewestFirstAndBounded) {
    board_fixture f;
    for (int i = 0; i < 30; ++i) {
        f.wall_ms += 1000;
        f.board.upstream_error(i % 3 == 0 ? "connect_refused" : "idle_timeout");
    }
    const json e = f.board.snapshot()["upstream_errors"];
    ASSERT_EQ(e["recent"].size(), 20u);
    EXPECT_EQ(e["recent"][0]["at_unix_ms"], f.wall_ms);
    EXPECT_EQ(e["recent"][0]["reason"], "idle_timeout");
    EXPECT_EQ(e["total"]["connect_refused"], 10);
    EXPECT_EQ(e["total"]["idle_timeout"], 20);
}

TEST(StatusBoard, UnmeteredAndRejectedRequests) {
    board_fixture f;
    meter::request_summary none;
    none.api = protocol::api_kind::none;
    none.end = f.clock.now();
    f.board.record(none, "t");
    EXPECT_TRUE(f.board.snapshot()["models"].empty());
    auto rejected = f.request("m", 0.1);
    rejected.result = meter::outcome::rejected;
    f.board.record(rejected, "t");
    const json doc = f.board.snapshot();
    // Never served: no tokens, and no label slot for its model (it counts under "other").
    EXPECT_EQ(model_named(doc, "other")["throughput"]["1m"]["output_tokens"]["reported"], 0);
    EXPECT_TRUE(doc["tenants"]["by_tokens"].empty());
    f.board.record(f.request("m", 0.1), "t");
    EXPECT_EQ(model_named(f.board.snapshot(), "m")["latency"]["1m"]["requests"], 1);
}

TEST(StatusBoard, ConfigSummaryAndHostileNames) {
    registry metrics(fine_options());
    core::manual_clock clock;
    status_options options;
    options.summary = {{"listen", "127.0.0.1:8080"}, {"usage_sink", "on"}};
    status_board board(
        metrics, nullptr, clock, [] { return 0; }, options);
    meter::request_summary s;
    s.api = protocol::api_kind::openai_chat_completions;
    s.model = std::string("bad\xff\xfe<script>", 13);
    s.upstream_received = true;
    s.status = 200;
    s.end = clock.now();
    board.record(s, "");
    const json doc = json::parse(board.snapshot_text());
    EXPECT_EQ(doc["config"]["listen"], "127.0.0.1:8080");
    EXPECT_EQ(doc["config"]["usage_sink"], "on");
    EXPECT_EQ(doc["models"][0]["model"], "bad\xEF\xBF\xBD\xEF\xBF\xBD<script>");
}

}  // namespace
}  // namespace tokenmeter::metrics
