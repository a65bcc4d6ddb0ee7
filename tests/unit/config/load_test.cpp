// Loading YAML: every key, defaults, and errors that name the right key.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "config/schema.hpp"

namespace tokenmeter::config {
namespace {

using std::chrono::milliseconds;

const std::string config_dir = TOKENMETER_FIXTURES_DIR "/../../config";

std::vector<std::string> keys_of(const std::vector<config_error>& errors) {
    std::vector<std::string> keys;
    for (const config_error& e : errors) {
        keys.push_back(e.key);
    }
    return keys;
}

std::string dump(const std::vector<config_error>& errors) {
    std::string out;
    for (const config_error& e : errors) {
        out += "\n  " + to_string(e);
    }
    return out;
}

// The single error of a document, or a failure that shows all of them.
config_error only_error(const std::string& yaml) {
    const load_result r = load_yaml(yaml);
    EXPECT_EQ(r.errors.size(), 1u) << yaml << dump(r.errors);
    return r.errors.empty() ? config_error{} : r.errors.front();
}

TEST(Defaults, DefaultConstructedSettingsAreUsable) {
    const settings s;
    EXPECT_EQ(s.metrics.buckets, histogram_buckets{}) << "every list at metrics/'s default";
    EXPECT_TRUE(validate(s).empty()) << dump(validate(s));
    EXPECT_EQ(default_settings(), s);
}

TEST(Defaults, EmptyOrCommentOnlyDocumentGivesDefaults) {
    for (const char* text : {"", "\n", "# nothing here\n", "~\n"}) {
        const load_result r = load_yaml(text);
        EXPECT_TRUE(r.ok()) << text << dump(r.errors);
        EXPECT_EQ(r.value, default_settings()) << text;
    }
}

TEST(Defaults, EmptySectionsKeepDefaults) {
    const load_result r = load_yaml("timeouts:\nlimits:\nmetrics:\n  buckets:\n");
    EXPECT_TRUE(r.ok()) << dump(r.errors);
    EXPECT_EQ(r.value, default_settings());
}

TEST(Load, EveryKey) {
    const load_result r = load_yaml(R"(
listen: "0.0.0.0:18080"
admin: "[::1]:19090"
upstream: "http://vllm.internal:8001/base/"
threads: 4
preserve_host: true
timeouts:
  request_header: 10s
  client_idle: 2m
  upstream_connect: 750ms
  upstream_idle: 1h
  client_write: 15
  drain: 0.5
limits:
  max_request_body_bytes: 1MiB
  max_request_header_bytes: 16KiB
  max_sse_event_bytes: 1048576
  max_buffered_response_bytes: 2GiB
upstream_pool:
  max_connections: 100
  max_idle_connections: 10
  idle_keepalive: 90s
  acquire_timeout: 2s
readiness:
  probe_interval: 1s
metrics:
  models:
    allowlist: [llama-3-8b, "qwen2.5:7b"]
    max_models: 8
  buckets:
    time_to_first_token: [0.1, 1, 10]
    inter_token_latency: [0.01, 0.1]
    time_per_output_token: [0.02, 0.2]
    output_tokens_per_second: [10, 100]
    decode_tokens_per_second: [20, 200]
    request_duration: [1, 1e1, 100]
log:
  level: DEBUG
  format: json
  access_log: yes
)");
    ASSERT_TRUE(r.ok()) << dump(r.errors);
    const settings& s = r.value;
    EXPECT_EQ(s.listen, (endpoint{"0.0.0.0", 18080}));
    EXPECT_EQ(s.admin, (endpoint{"::1", 19090}));
    EXPECT_EQ(s.upstream, (upstream_target{"http", "vllm.internal", 8001, "/base"}));
    EXPECT_EQ(s.threads, 4u);
    EXPECT_TRUE(s.preserve_host);
    EXPECT_EQ(s.timeouts.request_header, milliseconds{10'000});
    EXPECT_EQ(s.timeouts.client_idle, milliseconds{120'000});
    EXPECT_EQ(s.timeouts.upstream_connect, milliseconds{750});
    EXPECT_EQ(s.timeouts.upstream_idle, milliseconds{3'600'000});
    EXPECT_EQ(s.timeouts.client_write, milliseconds{15'000});
    EXPECT_EQ(s.timeouts.drain, milliseconds{500});
    EXPECT_EQ(s.limits.max_request_body_bytes, 1024u * 1024);
    EXPECT_EQ(s.limits.max_request_header_bytes, 16u * 1024);
    EXPECT_EQ(s.limits.max_sse_event_bytes, 1048576u);
    EXPECT_EQ(s.limits.max_buffered_response_bytes, 2ull * 1024 * 1024 * 1024);
    EXPECT_EQ(s.upstream_pool.max_connections, 100u);
    EXPECT_EQ(s.upstream_pool.max_idle_connections, 10u);
    EXPECT_EQ(s.upstream_pool.idle_keepalive, milliseconds{90'000});
    EXPECT_EQ(s.upstream_pool.acquire_timeout, milliseconds{2'000});
    EXPECT_EQ(s.readiness.probe_interval, milliseconds{1'000});
    EXPECT_EQ(s.metrics.models.allowlist, (std::vector<std::string>{"llama-3-8b", "qwen2.5:7b"}));
    EXPECT_EQ(s.metrics.models.max_models, 8u);
    EXPECT_EQ(s.metrics.buckets.time_to_first_token, (std::vector<double>{0.1, 1, 10}));
    EXPECT_EQ(s.metrics.buckets.inter_token_latency, (std::vector<double>{0.01, 0.1}));
    EXPECT_EQ(s.metrics.buckets.time_per_output_token, (std::vector<double>{0.02, 0.2}));
    EXPECT_EQ(s.metrics.buckets.output_tokens_per_second, (std::vector<double>{10, 100}));
    EXPECT_EQ(s.metrics.buckets.decode_tokens_per_second, (std::vector<double>{20, 200}));
    EXPECT_EQ(s.metrics.buckets.request_duration, (std::vector<double>{1, 10, 100}));
    EXPECT_EQ(s.log.level, log_level::debug);
    EXPECT_EQ(s.log.format, log_format::json);
    EXPECT_TRUE(s.log.access_log);
}

TEST(Load, UnparsableBodyIsRefusedByDefaultAndNamesItsKey) {
    EXPECT_EQ(default_settings().limits.unparsable_body, unparsable_body_mode::refuse);
    auto forward = load_yaml("limits:\n  unparsable_body: forward\n");
    ASSERT_TRUE(forward.ok()) << to_string(forward.errors.front());
    EXPECT_EQ(forward.value.limits.unparsable_body, unparsable_body_mode::forward);
    auto bad = load_yaml("limits:\n  unparsable_body: ignore\n");
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.errors[0].key, "limits.unparsable_body");
    EXPECT_NE(bad.errors[0].message.find("refuse"), std::string::npos) << bad.errors[0].message;
}

TEST(Load, RoutesAndUsageInjection) {
    const load_result r = load_yaml(R"(
usage_injection: false
routes:
  - path: /ollama/*
    api: ollama_chat
  - path: /LLM/v1/chat/completions
    api: OpenAI_Chat
    usage_injection: true
    continuous_usage_stats: yes
)");
    ASSERT_TRUE(r.ok()) << dump(r.errors);
    EXPECT_FALSE(r.value.usage_injection);
    ASSERT_EQ(r.value.routes.size(), 2u);
    EXPECT_EQ(r.value.routes[0], (route{"/ollama/*", "ollama_chat", std::nullopt}));
    EXPECT_EQ(r.value.routes[1], (route{"/LLM/v1/chat/completions", "openai_chat", true, true}));
    EXPECT_TRUE(default_settings().usage_injection);
    EXPECT_TRUE(default_settings().routes.empty());
}

TEST(Errors, RoutesNameTheBadEntry) {
    // An unknown api is app/'s check (tests/unit/app: ModuleOptions.UnknownRouteApiNamesTheEntry).
    EXPECT_TRUE(load_yaml("routes:\n  - path: /x\n    api: grpc\n").ok());
    EXPECT_EQ(only_error("routes:\n  - path: x\n    api: none\n").key, "routes[0].path");
    EXPECT_EQ(only_error("routes:\n  - path: /a/*/b\n    api: none\n").key, "routes[0].path");
    EXPECT_EQ(only_error("routes:\n  - {path: /a, api: none}\n  - {path: /b, api: none, "
                         "usage_injection: maybe}\n")
                  .key,
              "routes[1].usage_injection");
    EXPECT_EQ(only_error("routes:\n  - {path: /a, api: none, pth: 1}\n").key, "routes[0].pth");
}

TEST(Load, OneBucketListReplacesOnlyItself) {
    const load_result r = load_yaml("metrics:\n  buckets:\n    request_duration: [1, 2, 3]\n");
    ASSERT_TRUE(r.ok()) << dump(r.errors);
    histogram_buckets expected;
    expected.request_duration = std::vector<double>{1, 2, 3};
    EXPECT_EQ(r.value.metrics.buckets, expected);
}

TEST(Load, EmptyAllowlistMeansNone) {
    const load_result r = load_yaml("metrics:\n  models:\n    allowlist:\n");
    ASSERT_TRUE(r.ok()) << dump(r.errors);
    EXPECT_TRUE(r.value.metrics.models.allowlist.empty());
}

TEST(Load, QuotedScalarsAreAcceptedLikePlainOnes) {
    const load_result r = load_yaml("threads: \"8\"\ntimeouts:\n  drain: \"45s\"\n");
    ASSERT_TRUE(r.ok()) << dump(r.errors);
    EXPECT_EQ(r.value.threads, 8u);
    EXPECT_EQ(r.value.timeouts.drain, milliseconds{45'000});
}

TEST(Load, AnchorsAndAliasesWork) {
    const load_result r = load_yaml(R"(
metrics:
  buckets:
    inter_token_latency: &fast [0.001, 0.01, 0.1]
    time_per_output_token: *fast
)");
    ASSERT_TRUE(r.ok()) << dump(r.errors);
    EXPECT_EQ(r.value.metrics.buckets.time_per_output_token,
              (std::vector<double>{0.001, 0.01, 0.1}));
}

TEST(Files, ExampleLoadsAndEqualsTheDefaults) {
    const load_result r = load_file(config_dir + "/tokenmeter.example.yaml");
    ASSERT_TRUE(r.ok()) << dump(r.errors);
    // The example documents the defaults; this keeps it honest when a default changes. It
    // writes the default bucket lists out, which tests/unit/app compares with metrics/'s.
    settings example = r.value;
    EXPECT_TRUE(example.metrics.buckets.time_to_first_token);
    example.metrics.buckets = {};
    // It writes the otel section out, which is what lets OTEL_EXPORTER_OTLP_ENDPOINT turn
    // export on; a file without the section does not.
    EXPECT_TRUE(example.otel.written);
    example.otel.written = false;
    EXPECT_EQ(example, default_settings());
}

TEST(Otel, ExportKeysAndTheWrittenSection) {
    EXPECT_FALSE(load_yaml("log:\n  level: info\n").value.otel.written);
    const load_result r = load_yaml(R"(
otel:
  endpoint: https://collector.example:4318/otlp
  encoding: json
  export_interval: 2s
  request_timeout: 3s
  headers_file: /run/secrets/otlp
  ca_file: /etc/ca.pem
  max_queue: 100
)");
    ASSERT_TRUE(r.ok()) << dump(r.errors);
    const otel_settings& o = r.value.otel;
    EXPECT_TRUE(o.written);
    EXPECT_EQ(o.endpoint, "https://collector.example:4318/otlp");
    EXPECT_EQ(o.encoding, otlp_encoding::json);
    EXPECT_EQ(o.export_interval, std::chrono::seconds(2));
    EXPECT_EQ(o.request_timeout, std::chrono::seconds(3));
    EXPECT_EQ(o.headers_file, "/run/secrets/otlp");
    EXPECT_EQ(o.max_queue, 100U);
    EXPECT_TRUE(load_yaml("otel:\n").value.otel.written);
}

TEST(Otel, ErrorsNameTheKey) {
    const auto first_key = [](const char* yaml) {
        const load_result r = load_yaml(yaml);
        return r.errors.empty() ? std::string("(none)") : r.errors[0].key;
    };
    EXPECT_EQ(first_key("otel:\n  endpoint: collector:4318\n"), "otel.endpoint");
    EXPECT_EQ(first_key("otel:\n  encoding: grpc\n"), "otel.encoding");
    EXPECT_EQ(first_key("otel:\n  endpoint: http://c:4318\n  ca_file: /x.pem\n"), "otel.ca_file");
    EXPECT_EQ(first_key("otel:\n  max_queue: 0\n"), "otel.max_queue");
    EXPECT_EQ(first_key("otel:\n  export_interval: 0s\n"), "otel.export_interval");
}

TEST(Files, DemoConfigLoads) {
    const load_result r = load_file(config_dir + "/tokenmeter.yaml");
    ASSERT_TRUE(r.ok()) << dump(r.errors);
    EXPECT_EQ(r.value.listen, (endpoint{"127.0.0.1", 8080}));
    EXPECT_EQ(r.value.admin, (endpoint{"127.0.0.1", 9090}));
    EXPECT_EQ(r.value.upstream, (upstream_target{"http", "127.0.0.1", 8000, ""}));
}

TEST(Files, MissingFileIsOneErrorWithoutKey) {
    const load_result r = load_file(config_dir + "/does-not-exist.yaml");
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(r.errors[0].key, "");
    EXPECT_NE(r.errors[0].message.find("does-not-exist.yaml"), std::string::npos);
    EXPECT_NE(r.errors[0].message.find("No such file"), std::string::npos) << r.errors[0].message;
}

TEST(Files, DirectoryIsOneErrorWithoutKey) {
    const load_result r = load_file(config_dir);
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(r.errors[0].key, "");
    EXPECT_NE(r.errors[0].message.find("directory"), std::string::npos);
}

TEST(Errors, UnknownTopLevelKeySuggestsTheClosest) {
    const config_error e = only_error("listen: \"127.0.0.1:8080\"\ntreads: 4\n");
    EXPECT_EQ(e.key, "treads");
    EXPECT_EQ(e.message, "unknown key (did you mean \"threads\"?)");
}

TEST(Errors, SuggestionForgivesSwappedLettersAndCase) {
    EXPECT_EQ(only_error("tiemouts: {}\n").message, "unknown key (did you mean \"timeouts\"?)");
    EXPECT_EQ(only_error("Listen: \"127.0.0.1:1\"\n").message,
              "unknown key (did you mean \"listen\"?)");
}

TEST(Errors, UnknownNestedKeyNamesTheDottedPath) {
    const config_error e = only_error("timeouts:\n  upstream_idl: 10s\n");
    EXPECT_EQ(to_string(e), "timeouts.upstream_idl: unknown key (did you mean \"upstream_idle\"?)");
}

TEST(Errors, UnknownDeepKey) {
    const config_error e = only_error("metrics:\n  buckets:\n    time_to_frist_token: [1]\n");
    EXPECT_EQ(e.key, "metrics.buckets.time_to_frist_token");
    EXPECT_EQ(e.message, "unknown key (did you mean \"time_to_first_token\"?)");
}

TEST(Errors, UnknownKeyFarFromAnyListsTheKnownOnes) {
    const config_error e = only_error("log:\n  colour: true\n");
    EXPECT_EQ(e.key, "log.colour");
    EXPECT_EQ(e.message, "unknown key (expected one of: level, format, access_log)");
}

TEST(Errors, DuplicateKey) {
    const config_error e = only_error("threads: 2\nthreads: 4\n");
    EXPECT_EQ(e.key, "threads");
    EXPECT_EQ(e.message, "duplicate key");
}

TEST(Errors, WrongTypeNamesKeyAndShowsTheValue) {
    const config_error e = only_error("timeouts:\n  drain: [1, 2]\n");
    EXPECT_EQ(to_string(e), "timeouts.drain: expected a duration like 30s, got [1, 2]");
}

TEST(Errors, SectionThatIsNotAMapping) {
    const config_error e = only_error("timeouts: 30s\n");
    EXPECT_EQ(to_string(e), "timeouts: expected a mapping of keys, got \"30s\"");
}

TEST(Errors, TopLevelThatIsNotAMapping) {
    const config_error e = only_error("- listen\n- admin\n");
    EXPECT_EQ(e.key, "");
    EXPECT_NE(e.message.find("top level"), std::string::npos) << e.message;
}

TEST(Errors, MissingValue) {
    const config_error e = only_error("threads:\n");
    EXPECT_EQ(to_string(e), "threads: expected a whole number, got an empty value");
}

TEST(Errors, BadDuration) {
    const config_error e = only_error("upstream_pool:\n  idle_keepalive: 10 minutes\n");
    EXPECT_EQ(e.key, "upstream_pool.idle_keepalive");
    EXPECT_EQ(e.message,
              "expected a duration like 30s, got \"10 minutes\" (unknown unit \"minutes\"; use "
              "ms, s, m or h)");
}

TEST(Errors, NegativeDuration) {
    const config_error e = only_error("readiness:\n  probe_interval: -5s\n");
    EXPECT_EQ(e.key, "readiness.probe_interval");
    EXPECT_NE(e.message.find("negative"), std::string::npos) << e.message;
}

TEST(Errors, BadSize) {
    const config_error e = only_error("limits:\n  max_request_body_bytes: 500KB\n");
    EXPECT_EQ(e.key, "limits.max_request_body_bytes");
    EXPECT_NE(e.message.find("ambiguous"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("KiB"), std::string::npos) << e.message;
}

TEST(Errors, BadCount) {
    EXPECT_EQ(only_error("threads: -1\n").message,
              "expected a whole number, got \"-1\" (cannot be negative)");
    EXPECT_EQ(only_error("threads: 2.5\n").key, "threads");
    EXPECT_EQ(only_error("upstream_pool:\n  max_connections: 4294967296\n").key,
              "upstream_pool.max_connections");
}

TEST(Errors, BadBool) {
    const config_error e = only_error("preserve_host: maybe\n");
    EXPECT_EQ(to_string(e), "preserve_host: expected true or false, got \"maybe\" (not a boolean)");
}

TEST(Errors, BadEndpoint) {
    const config_error e = only_error("listen: localhost\n");
    EXPECT_EQ(to_string(e), "listen: expected \"host:port\", got \"localhost\" (missing port)");
    EXPECT_EQ(only_error("admin: \"127.0.0.1:70000\"\n").key, "admin");
}

TEST(Errors, BadUpstream) {
    const config_error e = only_error("upstream: \"ftp://files:21\"\n");
    EXPECT_EQ(e.key, "upstream");
    EXPECT_NE(e.message.find("unsupported scheme \"ftp\""), std::string::npos) << e.message;
    EXPECT_EQ(only_error("upstream: \"http://h:80/v1?debug=1\"\n").key, "upstream");
}

TEST(Errors, UnknownUpstreamSchemeNamesTheOnesThatWork) {
    const config_error e = only_error("upstream: \"ws://api.example.com\"\n");
    EXPECT_EQ(e.key, "upstream");
    EXPECT_NE(e.message.find("unsupported scheme \"ws\"; use http:// or https://"),
              std::string::npos)
        << e.message;
}

TEST(Errors, NonIncreasingBucketsNameTheIndex) {
    const config_error e =
        only_error("metrics:\n  buckets:\n    time_to_first_token: [0.001, 0.01, 0.005]\n");
    EXPECT_EQ(to_string(e),
              "metrics.buckets.time_to_first_token[2]: must be greater than the boundary before "
              "it (0.01), got 0.005");
}

TEST(Errors, BucketElementOfWrongType) {
    const config_error e = only_error("metrics:\n  buckets:\n    request_duration: [1, two, 3]\n");
    EXPECT_EQ(to_string(e), "metrics.buckets.request_duration[1]: expected a number, got \"two\"");
}

TEST(Errors, BucketListsMustBeLists) {
    EXPECT_EQ(only_error("metrics:\n  buckets:\n    request_duration: 5\n").key,
              "metrics.buckets.request_duration");
    EXPECT_EQ(only_error("metrics:\n  buckets:\n    request_duration: []\n").message,
              "must list at least one boundary");
}

TEST(Errors, AllowlistEntriesAreNamedByIndex) {
    const config_error e = only_error("metrics:\n  models:\n    allowlist: [a, {name: b}]\n");
    EXPECT_EQ(e.key, "metrics.models.allowlist[1]");
    EXPECT_EQ(only_error("metrics:\n  models:\n    allowlist: [a, b, a]\n").key,
              "metrics.models.allowlist[2]");
}

TEST(Errors, LogLevelOutsideItsSet) {
    const config_error e = only_error("log:\n  level: verbose\n");
    EXPECT_EQ(to_string(e),
              "log.level: must be one of trace, debug, info, warn, error, off, got \"verbose\"");
}

TEST(Errors, AllAreCollectedInDocumentOrderThenSemantic) {
    const load_result r = load_yaml(R"(
listen: "127.0.0.1"
treads: 4
timeouts:
  drain: forever
  client_idle: 0s
limits:
  max_sse_event_bytes: 1.5MiB
metrics:
  buckets:
    inter_token_latency: [0.5, 0.1]
log:
  format: xml
)");
    EXPECT_EQ(keys_of(r.errors), (std::vector<std::string>{
                                     "listen",
                                     "treads",
                                     "timeouts.drain",
                                     "limits.max_sse_event_bytes",
                                     "timeouts.client_idle",
                                     "metrics.buckets.inter_token_latency[1]",
                                     "log.format",
                                 }))
        << dump(r.errors);
}

TEST(Errors, ValuesThatLoadedStillApplyWhenOthersFail) {
    const load_result r = load_yaml("threads: 3\ntimeouts:\n  drain: soon\n");
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.value.threads, 3u);
    EXPECT_EQ(r.value.timeouts.drain, timeouts_settings{}.drain);
}

TEST(Errors, MalformedYamlIsOneErrorWithALineNumber) {
    const load_result r = load_yaml(
        "listen: \"127.0.0.1:8080\"\ntimeouts:\n  drain: 30s\n"
        " upstream_idle: 5s\n");
    ASSERT_EQ(r.errors.size(), 1u) << dump(r.errors);
    EXPECT_EQ(r.errors[0].key, "");
    EXPECT_NE(r.errors[0].message.find("line 4"), std::string::npos) << r.errors[0].message;
    EXPECT_EQ(r.value, default_settings());
}

TEST(Errors, UnclosedFlowSequenceIsASyntaxError) {
    const load_result r = load_yaml("metrics:\n  buckets:\n    request_duration: [1, 2\n");
    ASSERT_EQ(r.errors.size(), 1u) << dump(r.errors);
    EXPECT_EQ(r.errors[0].key, "");
    EXPECT_NE(r.errors[0].message.find("line "), std::string::npos) << r.errors[0].message;
}

TEST(Errors, MoreThanOneDocument) {
    const config_error e = only_error("threads: 1\n---\nthreads: 2\n");
    EXPECT_EQ(e.key, "");
    EXPECT_NE(e.message.find("one YAML document"), std::string::npos) << e.message;
}

TEST(Errors, ToStringWithoutKeyIsJustTheMessage) {
    EXPECT_EQ(to_string(config_error{"", "cannot read x"}), "cannot read x");
    EXPECT_EQ(to_string(config_error{"a.b", "bad"}), "a.b: bad");
}

// YAML that sets `key` (dotted, with "<name>" and "[]" as documented_keys() writes them) to
// `value`, and the key an error about that value is reported under.
std::pair<std::string, std::string> nest(const std::string& key, const std::string& value) {
    std::string yaml;
    std::string closing;
    std::string reported;
    std::size_t start = 0;
    while (true) {
        const std::size_t dot = key.find('.', start);
        std::string part = key.substr(start, dot - start);
        if (part.front() == '<') {
            part = "n";  // a free name: a model or a tenant
        }
        const bool list = part.size() > 2 && part.ends_with("[]");
        if (list) {
            part.resize(part.size() - 2);
        }
        reported += (reported.empty() ? "" : ".") + part + (list ? "[0]" : "");
        yaml += "{" + part + ": " + (list ? "[" : "");
        closing = (list ? "]}" : "}") + closing;
        if (dot == std::string::npos) {
            break;
        }
        start = dot + 1;
    }
    return {yaml + value + closing, reported};
}

// Each key of the schema tables, given a value of the wrong kind, must be reported under its
// own name and never as unknown: the loader reads every key the tables (and README) name.
TEST(Errors, EveryDocumentedKeyIsKnown) {
    const std::vector<documented_key> keys = documented_keys();
    ASSERT_GT(keys.size(), 90u);
    for (const documented_key& k : keys) {
        // A mapping is the wrong type for every scalar and list; a list for every mapping.
        const std::string wrong = k.shape == value_shape::mapping ? "[1]" : "{x: 1}";
        const auto [yaml, reported] = nest(k.key, wrong);
        const load_result r = load_yaml(yaml);
        ASSERT_FALSE(r.errors.empty()) << yaml;
        // Load errors come first; a rule may add one more about the same entry.
        EXPECT_EQ(r.errors[0].key, reported) << yaml << dump(r.errors);
        for (const config_error& e : r.errors) {
            EXPECT_EQ(e.message.find("unknown key"), std::string::npos) << yaml << dump(r.errors);
        }
        EXPECT_FALSE(k.doc.empty()) << k.key;
    }
}

std::string readme_text() {
    std::ifstream in(config_dir + "/README.md");
    std::ostringstream readme;
    readme << in.rdbuf();
    return readme.str();
}

// The first cells of the README's key tables (those whose header starts "| Key |").
std::vector<std::string> readme_table_keys(const std::string& readme) {
    std::vector<std::string> keys;
    std::istringstream lines(readme);
    std::string line;
    bool in_key_table = false;
    while (std::getline(lines, line)) {
        if (!line.starts_with("|")) {
            in_key_table = false;
            continue;
        }
        if (line.starts_with("| Key |")) {
            in_key_table = true;
            continue;
        }
        if (in_key_table && line.starts_with("| `")) {
            keys.push_back(line.substr(3, line.find('`', 3) - 3));
        }
    }
    return keys;
}

// The reference mentions every key of the schema tables (sections by their heading or a row).
TEST(Files, ReadmeMentionsEveryKey) {
    const std::string readme = readme_text();
    ASSERT_FALSE(readme.empty());
    for (const documented_key& k : documented_keys()) {
        EXPECT_NE(readme.find("`" + k.key + "`"), std::string::npos) << k.key;
    }
}

// ... and documents no key the tables do not have.
TEST(Files, ReadmeDocumentsOnlyKeysThatExist) {
    std::set<std::string> known;
    for (const documented_key& k : documented_keys()) {
        known.insert(k.key);
    }
    const std::vector<std::string> documented = readme_table_keys(readme_text());
    ASSERT_GT(documented.size(), 80u);
    for (const std::string& key : documented) {
        EXPECT_TRUE(known.contains(key)) << key << " is documented but not a key";
    }
}

}  // namespace
}  // namespace tokenmeter::config
