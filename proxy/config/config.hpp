// config: the proxy's settings as plain structs, loaded from YAML and validated. Every member is
// named as its YAML key (config/README.md); config/schema.cpp maps one to the other. Loading is
// the one place exceptions are used; validation collects every error with its key.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/modes.hpp"
#include "config/parse.hpp"

namespace tokenmeter::config {

using std::chrono::milliseconds;

struct timeouts_settings {
    milliseconds request_header{30'000};  // time to receive a request's head (and body)
    milliseconds client_idle{60'000};     // keep-alive idle between requests on a client connection
    milliseconds upstream_connect{5'000};  // TCP connect to the upstream
    // max gap between two upstream reads (not a whole-stream deadline)
    milliseconds upstream_idle{300'000};
    milliseconds client_write{60'000};  // max time one write to a (slow) client may take
    milliseconds drain{30'000};         // on SIGTERM: how long in-flight streams may finish
    bool operator==(const timeouts_settings&) const = default;
};

struct limits_settings {
    std::uint64_t max_request_body_bytes = 32ull * 1024 * 1024;
    std::uint64_t max_request_header_bytes = 64ull * 1024;
    // larger events are forwarded, not metered
    std::uint64_t max_sse_event_bytes = 4ull * 1024 * 1024;
    // non-streamed JSON bodies kept for metering
    std::uint64_t max_buffered_response_bytes = 16ull * 1024 * 1024;
    // prompt bytes tokenized exactly per tokenizer; a longer prompt's count is an estimate
    std::uint64_t max_prompt_count_bytes = 1ull * 1024 * 1024;
    std::uint32_t max_json_depth = 256;        // deeper request/response JSON is not parsed
    std::uint32_t max_client_connections = 0;  // 0: no limit beyond open-file descriptors
    // a metered request whose JSON body cannot be read: 400, or forwarded unmetered by its body
    unparsable_body_mode unparsable_body = unparsable_body_mode::refuse;
    bool operator==(const limits_settings&) const = default;
};

struct upstream_pool_settings {
    std::uint32_t max_connections = 0;  // total, across worker threads; 0: no cap
    // kept alive for reuse, across worker threads; 0: every one a finished request leaves
    std::uint32_t max_idle_connections = 0;
    milliseconds idle_keepalive{60'000};  // drop idle upstream connections after this long
    milliseconds acquire_timeout{5'000};  // wait for a free slot before answering 503
    bool operator==(const upstream_pool_settings&) const = default;
};

// WebSocket tunnels (RFC 6455): an upgrade the upstream accepts becomes a tunnel of bytes.
struct websocket_settings {
    milliseconds idle_timeout{300'000};  // a tunnel with no bytes either way is closed (1001)
    std::uint32_t max_tunnels = 1024;    // open tunnels per process; 0: no cap
    // a frame, or a fragmented message, larger than this closes the tunnel (1009)
    std::uint64_t max_message_bytes = 16ull * 1024 * 1024;
    bool operator==(const websocket_settings&) const = default;
};

// Who may drain the proxy over HTTP (/drain, /undrain). Off while token_file is empty.
struct admin_auth_settings {
    std::string
        token_file;  // the bearer token those requests must send; a trailing newline dropped
    bool operator==(const admin_auth_settings&) const = default;
};

struct readiness_settings {
    // how often /readyz checks that the upstream accepts connections
    milliseconds probe_interval{5'000};
    bool operator==(const readiness_settings&) const = default;
};

// Bucket boundaries in seconds (or tokens per second). Unset: metrics/'s default list.
struct histogram_buckets {
    std::optional<std::vector<double>> time_to_first_token;
    std::optional<std::vector<double>> inter_token_latency;
    std::optional<std::vector<double>> time_per_output_token;
    std::optional<std::vector<double>> output_tokens_per_second;
    std::optional<std::vector<double>> decode_tokens_per_second;
    std::optional<std::vector<double>> request_duration;
    bool operator==(const histogram_buckets&) const = default;
};

// metrics.models: how the `model` label is bounded.
struct model_label_settings {
    std::vector<std::string>
        allowlist;                  // when non-empty: only these names, everything else "other"
    std::uint32_t max_models = 32;  // without allowlist: first N distinct names, then "other"
    bool operator==(const model_label_settings&) const = default;
};

struct metrics_settings {
    model_label_settings models;
    histogram_buckets buckets;
    // Upper bounds (input tokens, inclusive) of the TTFT histogram's prompt_class label; one more
    // class holds longer prompts, and "unknown" those whose size nobody reported.
    std::vector<std::uint64_t> prompt_classes = {512, 2048, 8192, 32768};
    // Latency and rate histograms also as Prometheus native histograms, served in the protobuf
    // exposition to a scraper that asks for it (classic buckets stay, in both formats).
    bool native_histograms = false;
    // The live status page on the admin listener (/, /status.json): windowed quantiles, tokens/s,
    // SLO burn, top tenants, recent upstream errors (docs/status.md).
    bool status_page = true;
    bool operator==(const metrics_settings&) const = default;
};

struct log_settings {
    log_level level = log_level::info;
    log_format format = log_format::text;
    bool access_log = false;  // one line per request
    bool operator==(const log_settings&) const = default;
};

// W3C Trace Context: every request carries a trace (relay/request_plan); these settle how new
// traces are sampled, and where spans and metrics go over OTLP/HTTP.
struct otel_settings {
    // The share of traces the proxy starts (no valid traceparent came) that are sampled; a
    // client's traceparent keeps its own sampled flag.
    double sampling_ratio = 1.0;
    // The file has an `otel` section. Only then is anything exported: the endpoint is
    // `endpoint`, else OTEL_EXPORTER_OTLP_ENDPOINT; with neither, nothing is.
    bool written = false;
    std::string endpoint;  // the collector's base URL: http[s]://host[:port][/path]
    otlp_encoding encoding = otlp_encoding::protobuf;
    milliseconds export_interval{5'000};
    milliseconds request_timeout{10'000};
    std::string headers_file;  // "Name: value" lines sent with every export (re-read each time)
    std::string ca_file;       // https: PEM CAs trusted instead of the system bundle
    std::uint32_t max_queue = 2048;  // finished requests waiting for the exporter
    bool operator==(const otel_settings&) const = default;
};

// Who a request belongs to, per-tenant metric labels and provisioned throughput.
struct tenant_limit {
    double provisioned_tokens_per_second = 0;  // input + output tokens per second; 0: none
    bool operator==(const tenant_limit&) const = default;
};

// The fleet-wide tenant limit's store: one Redis for every replica.
struct redis_limit_settings {
    std::string url;            // "": limits per process; redis:// or rediss://host[:port]
    std::string username;       // ACL user; "" with a password: AUTH <password>
    std::string password_env;   // env var holding the password (never in the file itself)
    std::string password_file;  // file holding the password
    std::string key_prefix = "tokenmeter:";
    milliseconds timeout{50};                   // one admission's round trip at most
    std::string on_error = "allow";             // allow: the local bucket decides; deny: 429
    std::uint32_t connections = 2;              // the pool; calls are pipelined on each
    std::uint64_t max_reply_bytes = 1'048'576;  // one reply (1 MiB); more closes the connection
    std::uint32_t max_reply_elements = 1'024;   // array members in one reply
    std::string ca_file;      // rediss://: PEM CAs trusted instead of the system bundle
    std::string server_name;  // rediss://: the name the certificate must carry; "": the host
    bool operator==(const redis_limit_settings&) const = default;
};

struct shared_limits_settings {
    redis_limit_settings redis;
    bool operator==(const shared_limits_settings&) const = default;
};

// A redis:// or rediss:// (TLS) URL, split. Credentials in it are refused.
struct redis_endpoint {
    std::string host;
    std::uint16_t port = 6379;
    bool tls = false;  // rediss://
};
// Empty error: parsed.
redis_endpoint parse_redis_url(const std::string& url, std::string& error);

struct tenants_settings {
    tenant_source source = tenant_source::none;
    std::string header = "x-tenant-id";  // source: header; set by a trusted auth layer in front
    std::string api_key_secret_env;      // source: api_key; env var holding the HMAC secret
    std::string api_key_secret_file;     // source: api_key; file holding the HMAC secret
    std::map<std::string, std::string> api_key_names;  // "key:<hash>" -> tenant name
    std::vector<std::string> metrics_allowlist;        // label values; others "other"
    std::uint32_t max_tenants = 100;             // without allowlist: first N tenants, then "other"
    std::map<std::string, tenant_limit> limits;  // tenant name -> limits
    bool enforce_provisioned = false;  // 429 a new request while its tenant's bucket is in debt
    milliseconds provisioned_burst{1'000};  // bucket size = rate x burst
    // Output tokens reserved at admission for a request that names no output limit.
    std::uint32_t default_output_reservation = 512;
    shared_limits_settings shared_limits;  // one limit across replicas
    bool operator==(const tenants_settings&) const = default;
};

struct usage_sink {
    std::string url;         // "": no shipping; http[s]://host[:port]/path
    std::string ca_file;     // https: PEM CAs trusted instead of the system bundle
    std::string token_file;  // file holding the bearer token (re-read for every batch)
    std::string token_env;   // env var holding the bearer token (never in the file itself)
    std::uint32_t batch_size = 100;
    milliseconds backoff_initial{200};
    milliseconds backoff_max{30'000};
    milliseconds request_timeout{10'000};
    std::string source = "tokenmeter";  // CloudEvents "source"
    bool operator==(const usage_sink&) const = default;
};

// TLS on a listener (`tls`, `admin_tls`). Off while cert_file is empty.
struct tls_settings {
    std::string cert_file;  // PEM: certificate, then its chain
    std::string key_file;   // PEM private key
    std::string client_ca_file;
    tls_client_auth client_auth = tls_client_auth::none;
    tls_min_version min_version = tls_min_version::v1_2;
    // How often the files are checked for a change (a Kubernetes secret rotation); 0: only on
    // SIGHUP.
    milliseconds watch_interval{10'000};
    [[nodiscard]] bool enabled() const { return !cert_file.empty(); }
    bool operator==(const tls_settings&) const = default;
};

// TLS to an https:// upstream. Verification is on unless insecure_skip_verify (which warns at
// start and is exported as a gauge).
struct upstream_tls_settings {
    std::string ca_file;      // PEM CAs trusted instead of the system bundle
    std::string cert_file;    // client certificate (PEM, with its chain) for upstreams that ask
    std::string key_file;     // its PEM private key
    std::string server_name;  // SNI and the name the certificate must carry; "": the URL's host
    bool insecure_skip_verify = false;
    bool operator==(const upstream_tls_settings&) const = default;
};

// Billing records: the durable spool and its shipper. Off while spool_dir is empty.
struct usage_settings {
    std::string spool_dir;
    milliseconds fsync_interval{10};
    std::uint64_t segment_bytes = 64ull * 1024 * 1024;
    milliseconds checkpoint_interval{1'000};
    bool hold_until_durable = true;  // release response head/end only once open/close are on disk
    bool readyz_fail_on_spool_error = false;
    std::uint64_t max_pending_bytes = 64ull * 1024 * 1024;  // memory kept while the disk fails
    usage_sink sink;
    bool operator==(const usage_settings&) const = default;
};

// What a request bills when it fails (meter/billing, docs/usage-records.md).
struct billing_settings {
    // A request the model server received and failed with no usage report and no output bills
    // its counted prompt.
    bool bill_failed_input = false;
    bool operator==(const billing_settings&) const = default;
};

// A path whose API is named in the config rather than recognized by its well-known path, e.g. an
// OpenAI-compatible server mounted under /llm/ or Ollama behind /ollama/.
struct route {
    std::string path;  // exact request path, or a prefix when it ends with '*'
    std::string api;   // an `api` label value: openai_chat, ollama_chat, ..., or none (app checks)
    std::optional<bool> usage_injection;  // overrides the top-level usage_injection
    // With usage injection: also ask for usage in every chunk (vLLM and SGLang's
    // stream_options.continuous_usage_stats), removed again from what the client receives.
    bool continuous_usage_stats = false;
    bool operator==(const route&) const = default;
};

// Re-tokenization (tokenizer/): the model's own tokenizer and how it treats special tokens.
struct model_settings {
    std::string tokenizer;  // "o200k_base", "cl100k_base" or a path
    special_tokens_mode special_tokens = special_tokens_mode::file_default;
    bool operator==(const model_settings&) const = default;
};

// One model's token prices per million tokens, kept exact: micro-units of `currency` (the YAML
// decimal is read as text, at most 6 decimal places). Unset cached_input, cache_write /
// reasoning: the input / output price; unset cache_write_1h: the cache_write price. input,
// output and currency are required (rules.cpp).
struct price_settings {
    std::optional<std::int64_t> input;
    std::optional<std::int64_t> cached_input;
    std::optional<std::int64_t> cache_write;
    std::optional<std::int64_t> cache_write_1h;
    std::optional<std::int64_t> output;
    std::optional<std::int64_t> reasoning;
    std::string currency;
    bool operator==(const price_settings&) const = default;
};

// One model's service-level objectives, as written: a preset and explicit targets (which win
// over the preset's). metrics/slo resolves the preset. A target left unset is not counted.
struct slo_target {
    slo_preset preset = slo_preset::none;
    std::optional<milliseconds> ttft;  // a request is good when its TTFT is at most this
    std::optional<milliseconds> tpot;  // ... and when its TPOT is at most this
    std::optional<double> objective;   // fraction of good requests (0.99); unset: slo.objective
    // Fraction of requests served without a failure (0.999); unset: the preset's, else none.
    std::optional<double> availability;
    bool operator==(const slo_target&) const = default;
};

struct slo_settings {
    double objective = 0.99;  // for entries that do not name their own
    // YAML `default` (a C++ keyword): for every model without its own entry.
    std::optional<slo_target> default_target;
    std::map<std::string, slo_target> models;  // keyed by the model name clients send
    bool operator==(const slo_settings&) const = default;
};

// Task time: a task label from a request header, bounded by an allowlist, and sessions
// (several requests of one task) added up by a session id header.
struct tasks_settings {
    std::string header = "x-tokenmeter-task";  // the request header naming the task
    std::vector<std::string> allowed;          // label values; others "other"; empty: task time off
    std::string session_header = "x-tokenmeter-session";  // "": no sessions
    milliseconds session_idle_expiry{300'000};  // a session ends this long after its last request
    std::uint32_t max_sessions = 10'000;  // sessions kept at once; beyond, the oldest is evicted
    bool operator==(const tasks_settings&) const = default;
};

// In the config file's order, for the reader; one per process, so its padding costs nothing.
struct settings {  // NOLINT(clang-analyzer-optin.performance.Padding)
    endpoint listen{"127.0.0.1", 8080};
    endpoint admin{"127.0.0.1", 9090};
    upstream_target upstream{"http", "127.0.0.1", 8000, ""};
    std::uint32_t threads = 0;   // 0: one per core
    bool preserve_host = false;  // false: Host sent upstream is the upstream's host:port
    forwarded_for_mode forwarded_for = forwarded_for_mode::keep;
    tls_settings tls;
    upstream_tls_settings upstream_tls;
    tls_settings admin_tls;  // the admin listener's own certificate and client policy
    admin_auth_settings admin_auth;
    timeouts_settings timeouts;
    limits_settings limits;
    upstream_pool_settings upstream_pool;
    websocket_settings websocket;
    readiness_settings readiness;
    metrics_settings metrics;
    log_settings log;
    otel_settings otel;
    tenants_settings tenants;
    usage_settings usage;
    billing_settings billing;
    // Re-tokenization (top-level keys). Normalizes counts across models; "none" turns it off.
    std::string reference_tokenizer = "o200k_base";
    // Set when the config names reference_tokenizer: then a missing file is an error, while the
    // default only warns (normalized counts off) so that a bare binary still starts. Not a key.
    bool reference_explicit = false;
    special_tokens_mode reference_special_tokens = special_tokens_mode::file_default;
    // Where named encodings (o200k_base, cl100k_base) are looked up; "" means
    // $TOKENMETER_TOKENIZER_DIR, else /usr/local/share/tokenmeter/tokenizers.
    std::string tokenizer_dir;
    count_input_tokens_mode count_input_tokens = count_input_tokens_mode::when_unreported;
    std::map<std::string, model_settings> models;  // by the request's "model" field
    std::map<std::string, price_settings> prices;  // by the request's "model" field
    slo_settings slo;
    tasks_settings tasks;
    // Add stream_options.include_usage to streamed OpenAI chat/completions requests that did not
    // ask for usage, and remove the extra usage chunk from what the client receives.
    bool usage_injection = true;
    std::vector<route> routes;  // checked in order before the well-known paths
    bool operator==(const settings&) const = default;
};

// Every field at its documented default (the same as a default-constructed settings); load_yaml
// starts from this, so a key the file leaves out keeps its default.
settings default_settings();

struct config_error {
    // Dotted YAML path, e.g. "timeouts.upstream_idle" or "metrics.buckets.time_to_first_token[3]".
    std::string key;
    std::string message;
    bool operator==(const config_error&) const = default;
};

// "key: message", or just the message when the key is empty (file and YAML syntax errors).
std::string to_string(const config_error& e);

struct load_result {
    settings value;
    std::vector<config_error> errors;  // empty when valid
    [[nodiscard]] bool ok() const { return errors.empty(); }
};

// Parses YAML text. Unknown keys, wrong types and out-of-range values are errors naming the key.
load_result load_yaml(const std::string& yaml_text);
// Reads and parses a file; an unreadable file is one error with key "".
load_result load_file(const std::string& path);

// Every key with its value, as YAML that load_yaml reads back as `s` (values unset in `s`, such
// as an optional target, are left out). Secrets are never in settings: the config names them by
// file or environment variable.
std::string to_yaml(const settings& s);

// Words given for a mode that name none of its values, by dotted key: the mode keeps its
// default and validate() reports the word where that key's check runs.
using unknown_words = std::map<std::string, std::string>;

// Range checks of every key and the cross-field rules, shared by the file loader and
// command-line overrides.
std::vector<config_error> validate(const settings& s, const unknown_words& words = {});

}  // namespace tokenmeter::config
