// config/schema: one table per section of the YAML file. Each row is a key, the member it fills,
// how it is read, its range check and a one-line doc; loading, validate() and the documented-keys
// test all walk these tables, so a key is written once. Rules across keys are in rules.cpp.
#include "config/schema.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "config/schema_checks.hpp"
#include "config/walk.hpp"
#include "core/text.hpp"

namespace tokenmeter::config::schema {
namespace {

using T = timeouts_settings;
const table<T>& timeouts_table() {
    static const table<T> t{
        value("request_header", &T::request_header, read_duration, check_positive,
              "time for a client to send a request's head and body"),
        value("client_idle", &T::client_idle, read_duration, check_positive,
              "how long an idle keep-alive client connection stays open"),
        value("upstream_connect", &T::upstream_connect, read_duration, check_positive,
              "TCP connect to the upstream"),
        value("upstream_idle", &T::upstream_idle, read_duration, check_positive,
              "longest silence between two reads from the upstream"),
        value("client_write", &T::client_write, read_duration, check_positive,
              "longest time one write to a slow client may take"),
        value("drain", &T::drain, read_duration, check_positive,
              "on SIGTERM, how long in-flight streams may run to completion"),
    };
    return t;
}

using L = limits_settings;
const table<L>& limits_table() {
    static const table<L> t{
        value("max_request_body_bytes", &L::max_request_body_bytes, read_size, check_positive_bytes,
              "largest request body accepted"),
        value("max_request_header_bytes", &L::max_request_header_bytes, read_size,
              check_positive_bytes, "largest request head"),
        value("max_sse_event_bytes", &L::max_sse_event_bytes, read_size, check_positive_bytes,
              "largest server-sent event that is metered"),
        value("max_buffered_response_bytes", &L::max_buffered_response_bytes, read_size,
              check_positive_bytes, "largest plain JSON response kept to read its usage"),
        value("max_prompt_count_bytes", &L::max_prompt_count_bytes, read_size, check_positive_bytes,
              "prompt bytes tokenized exactly; past them, an estimate"),
        value("max_json_depth", &L::max_json_depth, read_count, check_json_depth,
              "deepest JSON nesting the proxy looks into"),
        value<L, std::uint32_t>("max_client_connections", &L::max_client_connections, read_count,
                                nullptr, "open client connections at most; 0: no fixed limit"),
        choice("unparsable_body", &L::unparsable_body,
               "a metered request whose JSON body cannot be read: refuse (400) or forward"),
    };
    return t;
}

using P = upstream_pool_settings;
const table<P>& upstream_pool_table() {
    static const table<P> t{
        value<P, std::uint32_t>("max_connections", &P::max_connections, read_count, nullptr,
                                "concurrent upstream connections, across worker threads; 0: "
                                "no cap"),
        value<P, std::uint32_t>("max_idle_connections", &P::max_idle_connections, read_count,
                                nullptr,
                                "idle upstream connections kept for reuse, across worker threads; "
                                "0: no cap (each closes after idle_keepalive)"),
        value("idle_keepalive", &P::idle_keepalive, read_duration, check_positive,
              "an idle upstream connection is closed after this long"),
        value("acquire_timeout", &P::acquire_timeout, read_duration, check_positive,
              "how long a request waits for a free connection before 503"),
    };
    return t;
}

using WS = websocket_settings;
const table<WS>& websocket_table() {
    static const table<WS> t{
        value("idle_timeout", &WS::idle_timeout, read_duration, check_positive,
              "a tunnel with no bytes either way for this long is closed"),
        value<WS, std::uint32_t>("max_tunnels", &WS::max_tunnels, read_count, nullptr,
                                 "open WebSocket tunnels per process; 0: no cap"),
        value("max_message_bytes", &WS::max_message_bytes, read_size, check_positive_bytes,
              "largest frame or fragmented message a tunnel carries"),
    };
    return t;
}

using R = readiness_settings;
const table<R>& readiness_table() {
    static const table<R> t{
        value("probe_interval", &R::probe_interval, read_duration, check_positive,
              "how often /readyz checks that the upstream accepts connections"),
    };
    return t;
}

using AA = admin_auth_settings;
const table<AA>& admin_auth_table() {
    static const table<AA> t{
        value<AA, std::string>("token_file", &AA::token_file, read_string, nullptr,
                               "file holding the bearer token /drain and /undrain require"),
    };
    return t;
}

using ML = model_label_settings;
const table<ML>& model_labels_table() {
    static const table<ML> t{
        value<ML, std::vector<std::string>>("allowlist", &ML::allowlist, read_model_names, nullptr,
                                            "only these model names become label values"),
        value<ML, std::uint32_t>("max_models", &ML::max_models, read_count, nullptr,
                                 "without an allowlist: the first N model names, then other"),
    };
    return t;
}

using B = histogram_buckets;
const table<B>& buckets_table() {
    static const table<B> t{
        value("time_to_first_token", &B::time_to_first_token, read_bounds, check_buckets,
              "seconds from request start to the first output token"),
        value("inter_token_latency", &B::inter_token_latency, read_bounds, check_buckets,
              "seconds between two consecutive output tokens"),
        value("time_per_output_token", &B::time_per_output_token, read_bounds, check_buckets,
              "seconds per output token after the first"),
        value("output_tokens_per_second", &B::output_tokens_per_second, read_bounds, check_buckets,
              "output tokens per second over the whole request"),
        value("decode_tokens_per_second", &B::decode_tokens_per_second, read_bounds, check_buckets,
              "output tokens per second after the first token"),
        value("request_duration", &B::request_duration, read_bounds, check_buckets,
              "seconds from request start to the end of the response"),
    };
    return t;
}

using M = metrics_settings;
const table<M>& metrics_table() {
    static const table<M> t{
        section("models", &M::models, model_labels_table, "how the model label is bounded",
                check_model_labels),
        section("buckets", &M::buckets, buckets_table, "histogram bucket boundaries"),
        value("prompt_classes", &M::prompt_classes, read_token_counts, check_prompt_classes,
              "upper bounds (input tokens) of the TTFT histogram's prompt_class label"),
        value<M, bool>("native_histograms", &M::native_histograms, read_bool, nullptr,
                       "also keep Prometheus native histograms"),
        value<M, bool>("status_page", &M::status_page, read_bool, nullptr,
                       "serve the status page and /status.json on the admin listener"),
    };
    return t;
}

using G = log_settings;
const table<G>& log_table() {
    static const table<G> t{
        choice("level", &G::level, "minimum level written"),
        choice("format", &G::format, "text for people, json for one object per line"),
        value<G, bool>("access_log", &G::access_log, read_bool, nullptr,
                       "one log line per proxied request"),
    };
    return t;
}

using OT = otel_settings;
const table<OT>& otel_table() {
    static const table<OT> t{
        value("sampling_ratio", &OT::sampling_ratio, read_rate, check_ratio,
              "share of new traces (no valid traceparent came) that are sampled, 0 to 1"),
        value<OT, std::string>("endpoint", &OT::endpoint, read_string, nullptr,
                               "OTLP/HTTP collector base URL; spans to /v1/traces, metrics to "
                               "/v1/metrics (else OTEL_EXPORTER_OTLP_ENDPOINT)"),
        choice("encoding", &OT::encoding, "OTLP body encoding: protobuf or json"),
        value("export_interval", &OT::export_interval, read_duration, check_positive,
              "how often metrics (and the spans queued) are exported"),
        value("request_timeout", &OT::request_timeout, read_duration, check_positive,
              "connect, send and answer of one export"),
        value<OT, std::string>("headers_file", &OT::headers_file, read_string, nullptr,
                               "file of \"Name: value\" lines sent with every export"),
        value<OT, std::string>("ca_file", &OT::ca_file, read_string, nullptr,
                               "https: PEM CAs trusted instead of the system bundle"),
        value("max_queue", &OT::max_queue, read_count, check_batch_size,
              "finished requests waiting for export; past it they are dropped and counted"),
    };
    return t;
}

// The otel section, marked as written when the file has it: export depends on that.
field<settings> otel_section() {
    field<settings> f =
        section("otel", &settings::otel, otel_table, "W3C trace context and OTLP/HTTP export");
    auto read = f.read;
    f.read = [read](walker& w, node_ref n, key_ref k, settings& s) {
        read(w, n, k, s);
        s.otel.written = true;
    };
    auto write = f.write;
    f.write = [write](YAML::Node& out, const settings& s) {
        if (s.otel.written) {
            write(out, s);
        }
    };
    return f;
}

using TL = tenant_limit;
const table<TL>& tenant_limit_table() {
    static const table<TL> t{
        value("provisioned_tokens_per_second", &TL::provisioned_tokens_per_second, read_rate,
              check_rate, "provisioned input + output tokens per second"),
    };
    return t;
}

void check_on_error(checker& c, key_ref key, const std::string& word) {
    if (word != "allow" && word != "deny") {
        c.error(key, "must be allow or deny, got " + detail::quote(word));
    }
}

void check_connections(checker& c, key_ref key, const std::uint32_t& n) {
    if (n < 1 || n > 64) {
        c.error(key, "must be from 1 to 64, got " + std::to_string(n));
    }
}

// The bucket script's reply is a few dozen bytes in an array of two.
void check_reply_bytes(checker& c, key_ref key, const std::uint64_t& bytes) {
    if (bytes < 1024 || bytes > 512ULL * 1024 * 1024) {
        c.error(key, "must be from 1KiB to 512MiB, got " + std::to_string(bytes));
    }
}

void check_reply_elements(checker& c, key_ref key, const std::uint32_t& n) {
    if (n < 2 || n > 1'000'000) {
        c.error(key, "must be from 2 to 1000000, got " + std::to_string(n));
    }
}

using RL = redis_limit_settings;
const table<RL>& redis_limit_table() {
    static const table<RL> t{
        value<RL, std::string>("url", &RL::url, read_string, nullptr,
                               "redis:// or rediss:// (TLS) host:port of the shared store; "
                               "empty: per process"),
        value<RL, std::string>("username", &RL::username, read_string, nullptr,
                               "Redis ACL user name"),
        value<RL, std::string>("password_env", &RL::password_env, read_string, nullptr,
                               "environment variable holding the Redis password"),
        value<RL, std::string>("password_file", &RL::password_file, read_string, nullptr,
                               "file holding the Redis password"),
        value<RL, std::string>("key_prefix", &RL::key_prefix, read_string, nullptr,
                               "prefix of every key the proxy writes"),
        value("timeout", &RL::timeout, read_duration, check_positive,
              "longest wait for one admission's answer"),
        value("on_error", &RL::on_error, read_string, check_on_error,
              "allow or deny while Redis fails or is slow"),
        value("connections", &RL::connections, read_count, check_connections,
              "Redis connections per proxy; calls are pipelined"),
        value("max_reply_bytes", &RL::max_reply_bytes, read_size, check_reply_bytes,
              "largest Redis reply read; a larger one closes the connection"),
        value("max_reply_elements", &RL::max_reply_elements, read_count, check_reply_elements,
              "most array members in one Redis reply; more closes the connection"),
        value<RL, std::string>("ca_file", &RL::ca_file, read_text, nullptr,
                               "rediss://: PEM CAs trusted instead of the system bundle"),
        value<RL, std::string>("server_name", &RL::server_name, read_text, nullptr,
                               "rediss://: the name Redis's certificate must carry; default: "
                               "the host"),
    };
    return t;
}

using SL = shared_limits_settings;
const table<SL>& shared_limits_table() {
    static const table<SL> t{
        section("redis", &SL::redis, redis_limit_table, "the shared store"),
    };
    return t;
}

using N = tenants_settings;
const table<N>& tenants_table() {
    static const table<N> t{
        choice("source", &N::source, "where a request's tenant comes from"),
        value<N, std::string>("header", &N::header, read_string, nullptr,
                              "the header carrying the tenant (source header)"),
        value<N, std::string>("api_key_secret_env", &N::api_key_secret_env, read_string, nullptr,
                              "environment variable holding the HMAC secret"),
        value<N, std::string>("api_key_secret_file", &N::api_key_secret_file, read_string, nullptr,
                              "file holding the HMAC secret"),
        value<N, std::map<std::string, std::string>>("api_key_names", &N::api_key_names,
                                                     read_string_map, nullptr,
                                                     "a tenant name for a hashed key"),
        value<N, std::vector<std::string>>("metrics_allowlist", &N::metrics_allowlist, read_names,
                                           nullptr, "only these tenants become label values"),
        value("max_tenants", &N::max_tenants, read_count, check_at_least_one,
              "without an allowlist: the first N tenants, then other"),
        named("limits", &N::limits, tenant_limit_table,
              {"<tenant>", "expected a mapping of tenant names to limits, got ",
               "keys must be plain tenant names, got ", "", true, true},
              "per-tenant limits"),
        value<N, bool>("enforce_provisioned", &N::enforce_provisioned, read_bool, nullptr,
                       "429 a new request while its tenant's bucket is in debt"),
        value("provisioned_burst", &N::provisioned_burst, read_duration, check_positive,
              "bucket size = provisioned rate x this"),
        value<N, std::uint32_t>(
            "default_output_reservation", &N::default_output_reservation, read_count, nullptr,
            "output tokens reserved at admission when the request names no output limit"),
        section("shared_limits", &N::shared_limits, shared_limits_table,
                "one tenant limit across replicas"),
    };
    return t;
}

using K = usage_sink;
const table<K>& sink_table() {
    static const table<K> t{
        value<K, std::string>("url", &K::url, read_string, nullptr,
                              "where records are POSTed as CloudEvents"),
        value<K, std::string>("ca_file", &K::ca_file, read_string, nullptr,
                              "https: PEM CAs trusted instead of the system bundle"),
        value<K, std::string>("token_file", &K::token_file, read_string, nullptr,
                              "file holding the sink's bearer token"),
        value<K, std::string>("token_env", &K::token_env, read_string, nullptr,
                              "environment variable holding the sink's bearer token"),
        value("batch_size", &K::batch_size, read_count, check_batch_size, "records per POST"),
        value("backoff_initial", &K::backoff_initial, read_duration, check_positive,
              "first retry delay after a failed POST"),
        value<K, milliseconds>("backoff_max", &K::backoff_max, read_duration, nullptr,
                               "longest retry delay"),
        value("request_timeout", &K::request_timeout, read_duration, check_positive,
              "connect, write and read timeout of one POST"),
        value<K, std::string>("source", &K::source, read_string, nullptr,
                              "CloudEvents source attribute"),
    };
    return t;
}

using U = usage_settings;
const table<U>& usage_table() {
    static const table<U> t{
        value<U, std::string>("spool_dir", &U::spool_dir, read_string, nullptr,
                              "spool directory; empty: no records"),
        value("fsync_interval", &U::fsync_interval, read_duration, check_positive,
              "group commit interval"),
        value("segment_bytes", &U::segment_bytes, read_size, check_segment_bytes,
              "a segment is rotated before it grows past this"),
        value("checkpoint_interval", &U::checkpoint_interval, read_duration, check_positive,
              "how often a streaming request's running counts are written"),
        value<U, bool>("hold_until_durable", &U::hold_until_durable, read_bool, nullptr,
                       "release response head and end only once their entries are on disk"),
        value<U, bool>("readyz_fail_on_spool_error", &U::readyz_fail_on_spool_error, read_bool,
                       nullptr, "/readyz answers 503 while spool writes fail"),
        value("max_pending_bytes", &U::max_pending_bytes, read_size, check_positive_bytes,
              "entries kept in memory while the disk fails"),
        section("sink", &U::sink, sink_table, "shipping records as CloudEvents"),
    };
    return t;
}

using BI = billing_settings;
const table<BI>& billing_table() {
    static const table<BI> t{
        value<BI, bool>("bill_failed_input", &BI::bill_failed_input, read_bool, nullptr,
                        "a failed request with no usage report and no output bills its prompt"),
    };
    return t;
}

using MS = model_settings;
const table<MS>& model_table() {
    static const table<MS> t{
        value("tokenizer", &MS::tokenizer, read_text, check_model_tokenizer,
              "the model's own tokenizer"),
        choice("special_tokens", &MS::special_tokens, "added and special tokens: match or text",
               special_tokens_complaint),
    };
    return t;
}

using PR = price_settings;
const table<PR>& price_table() {
    static const table<PR> t{
        value("input", &PR::input, read_price, check_required_price,
              "price per million input tokens not served from cache"),
        value<PR, std::optional<std::int64_t>>("cached_input", &PR::cached_input, read_price,
                                               nullptr,
                                               "per million cached input tokens; default: input"),
        value<PR, std::optional<std::int64_t>>(
            "cache_write", &PR::cache_write, read_price, nullptr,
            "per million input tokens written to the prompt cache; default: input"),
        value<PR, std::optional<std::int64_t>>(
            "cache_write_1h", &PR::cache_write_1h, read_price, nullptr,
            "per million tokens written to the 1-hour prompt cache; default: cache_write"),
        value("output", &PR::output, read_price, check_required_price,
              "price per million output tokens"),
        value<PR, std::optional<std::int64_t>>("reasoning", &PR::reasoning, read_price, nullptr,
                                               "per million reasoning tokens; default: output"),
        value("currency", &PR::currency, read_text, check_currency,
              "three-letter currency code of the prices"),
    };
    return t;
}

using E = slo_target;
const table<E>& slo_entry_table() {
    static const table<E> t{
        choice("preset", &E::preset, "MLPerf Inference LLM scenario: server or interactive",
               nullptr, true),
        value("ttft", &E::ttft, read_optional_duration, check_positive_optional,
              "good when the time to first token is at most this"),
        value("tpot", &E::tpot, read_optional_duration, check_positive_optional,
              "good when the time per output token is at most this"),
        value("objective", &E::objective, read_optional_objective, check_optional_objective,
              "this entry's share of good requests"),
        value("availability", &E::availability, read_optional_objective, check_optional_objective,
              "share of requests served without a 5xx or a cut stream; presets: 99.9%"),
    };
    return t;
}

using O = slo_settings;
const table<O>& slo_table() {
    static const table<O> t{
        value("objective", &O::objective, read_objective, check_objective,
              "share of requests that must be good"),
        optional_section("default", &O::default_target, slo_entry_table,
                         "the entry for every model without its own", check_slo_entry),
        named("models", &O::models, slo_entry_table,
              {"<name>", "expected a mapping of model name to its SLO, got ",
               "keys must be model names, got ", "duplicate model", false, true},
              "per-model entries", check_slo_entry),
    };
    return t;
}

// An HTTP header name (RFC 9110 token), as read_word gives it: trimmed and lower-case.
bool is_header_name(const std::string& name) {
    constexpr std::size_t max_header_name = 64;
    return !name.empty() && name.size() <= max_header_name &&
           std::all_of(name.begin(), name.end(), [](char ch) {
               return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                      std::string_view("!#$%&'*+-.^_`|~").find(ch) != std::string_view::npos;
           });
}

void check_task_header(checker& c, key_ref key, const std::string& name) {
    if (!is_header_name(name)) {
        c.error(key, "must be an HTTP header name (letters, digits, '-', at most 64), got " +
                         detail::quote(name));
    }
}

void check_session_header(checker& c, key_ref key, const std::string& name) {
    if (!name.empty()) {
        check_task_header(c, key, name);
    }
}

// Each name is a label value: short, plain, never the catch-all "other".
void check_task_names(checker& c, key_ref key, const std::vector<std::string>& names) {
    constexpr std::size_t max_tasks = 64;
    constexpr std::size_t max_task_length = 64;
    if (names.size() > max_tasks) {
        c.error(key, "at most " + std::to_string(max_tasks) +
                         " tasks (each is a label value), got " + std::to_string(names.size()));
    }
    std::set<std::string_view> seen;
    for (std::size_t i = 0; i < names.size(); ++i) {
        const std::string item = index_key(key, i);
        const std::string& name = names[i];
        const bool plain = std::all_of(name.begin(), name.end(), [](char ch) {
            return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                   (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == ':' ||
                   ch == '/';
        });
        if (name.empty() || name.size() > max_task_length || !plain) {
            c.error(item, "a task name is 1 to 64 letters, digits and - _ . : /, got " +
                              detail::quote(name));
        } else if (name == "other") {
            c.error(item, "\"other\" is where tasks off the list are counted; choose another name");
        } else if (!seen.insert(name).second) {
            c.error(item, "duplicate task " + detail::quote(name));
        }
    }
}

void check_session_expiry(checker& c, key_ref key, const milliseconds& d) {
    if (d <= milliseconds::zero() || d > std::chrono::hours(24)) {
        c.error(key,
                "must be greater than 0 and at most 24h, got " + std::to_string(d.count()) + "ms");
    }
}

void check_max_sessions(checker& c, key_ref key, const std::uint32_t& n) {
    if (n < 1 || n > 1'000'000) {
        c.error(key, "must be from 1 to 1000000, got " + std::to_string(n));
    }
}

void check_tasks(checker& c, key_ref key, const tasks_settings& t) {
    if (!t.session_header.empty() && t.session_header == t.header) {
        c.error(join_key(key, "session_header"),
                "must differ from tasks.header (" + detail::quote(t.header) + ")");
    }
}

using TK = tasks_settings;
const table<TK>& tasks_table() {
    static const table<TK> t{
        value("header", &TK::header, read_word, check_task_header,
              "the request header naming the task"),
        value("allowed", &TK::allowed, read_names, check_task_names,
              "task names that become label values; others are other; empty: off"),
        value("session_header", &TK::session_header, read_word, check_session_header,
              "the request header carrying a session id; empty: no sessions"),
        value("session_idle_expiry", &TK::session_idle_expiry, read_duration, check_session_expiry,
              "a session ends this long after its last request"),
        value("max_sessions", &TK::max_sessions, read_count, check_max_sessions,
              "sessions kept at once; the least recently active is evicted beyond"),
    };
    return t;
}

using RT = route;
const table<RT>& route_table() {
    static const table<RT> t{
        value("path", &RT::path, read_text, check_route_path,
              "exact request path, or a prefix when it ends with *"),
        value<RT, std::string>("api", &RT::api, read_word, nullptr,
                               "the api label value of the path, or none"),
        value<RT, std::optional<bool>>("usage_injection", &RT::usage_injection, read_optional_bool,
                                       nullptr, "overrides the top-level usage_injection"),
        value<RT, bool>("continuous_usage_stats", &RT::continuous_usage_stats, read_bool, nullptr,
                        "with usage injection, also ask for usage in every chunk"),
    };
    return t;
}

using TS = tls_settings;
const table<TS>& tls_table() {
    static const table<TS> t{
        value<TS, std::string>("cert_file", &TS::cert_file, read_text, nullptr,
                               "PEM certificate and chain; TLS is on when set"),
        value<TS, std::string>("key_file", &TS::key_file, read_text, nullptr,
                               "PEM private key of cert_file"),
        value<TS, std::string>("client_ca_file", &TS::client_ca_file, read_text, nullptr,
                               "PEM CAs that client certificates must chain to"),
        choice("client_auth", &TS::client_auth, "client certificates: none, optional or require"),
        choice("min_version", &TS::min_version, "the oldest TLS version accepted: 1.2 or 1.3"),
        value<TS, milliseconds>("watch_interval", &TS::watch_interval, read_duration, nullptr,
                                "how often the files are checked for a change; 0s: only on SIGHUP"),
    };
    return t;
}

using UT = upstream_tls_settings;
const table<UT>& upstream_tls_table() {
    static const table<UT> t{
        value<UT, std::string>("ca_file", &UT::ca_file, read_text, nullptr,
                               "PEM CAs trusted instead of the system bundle"),
        value<UT, std::string>("cert_file", &UT::cert_file, read_text, nullptr,
                               "client certificate (PEM, with chain) for upstreams that ask"),
        value<UT, std::string>("key_file", &UT::key_file, read_text, nullptr,
                               "PEM private key of cert_file"),
        value<UT, std::string>("server_name", &UT::server_name, read_text, nullptr,
                               "SNI and the name the certificate must carry; default: the host"),
        value<UT, bool>("insecure_skip_verify", &UT::insecure_skip_verify, read_bool, nullptr,
                        "do not verify the upstream's certificate (warns; for tests only)"),
    };
    return t;
}

using S = settings;

// Naming the reference tokenizer makes a missing file an error rather than a warning.
field<S> reference_tokenizer_row() {
    field<S> f{"reference_tokenizer",
               value_shape::scalar,
               "the tokenizer every model's output is also counted with, or none",
               {},
               {},
               {},
               {}};
    f.read = [](walker& w, node_ref n, key_ref k, S& s) {
        if (const auto text = w.scalar(n, k, "a tokenizer name or a path to tokenizer.json")) {
            s.reference_tokenizer = std::string(core::trim(*text));
            s.reference_explicit = true;
        }
    };
    f.check = [](checker& c, key_ref k, const S& s) {
        check_reference(c, k, s.reference_tokenizer);
    };
    f.write = [](YAML::Node& out, const S& s) {
        out["reference_tokenizer"] = s.reference_tokenizer;
    };
    return f;
}

}  // namespace

const table<S>& root() {
    static const table<S> t{
        value("listen", &S::listen, read_endpoint, check_host, "where clients connect"),
        value("admin", &S::admin, read_endpoint, check_host,
              "serves /metrics, /healthz and /readyz"),
        value("upstream", &S::upstream, read_upstream, check_upstream,
              "the model server requests are forwarded to"),
        value("threads", &S::threads, read_count, check_threads,
              "worker threads; 0: one per CPU core"),
        value<S, bool>("preserve_host", &S::preserve_host, read_bool, nullptr,
                       "forward the client's Host header unchanged"),
        choice("forwarded_for", &S::forwarded_for,
               "the client's X-Forwarded-For upstream: keep, append or drop"),
        section("tls", &S::tls, tls_table, "TLS on the proxy listener"),
        section("upstream_tls", &S::upstream_tls, upstream_tls_table,
                "TLS to an https:// upstream"),
        section("admin_tls", &S::admin_tls, tls_table,
                "TLS on the admin listener (/metrics, probes, status page)"),
        section("admin_auth", &S::admin_auth, admin_auth_table,
                "a bearer token for /drain and /undrain"),
        section("timeouts", &S::timeouts, timeouts_table, "timeouts; each greater than 0"),
        section("limits", &S::limits, limits_table, "size limits"),
        section("upstream_pool", &S::upstream_pool, upstream_pool_table, "upstream connections"),
        section("websocket", &S::websocket, websocket_table, "WebSocket tunnels"),
        section("readiness", &S::readiness, readiness_table, "the /readyz probe"),
        section("metrics", &S::metrics, metrics_table, "labels and histograms"),
        section("log", &S::log, log_table, "logging"),
        otel_section(),
        section("tenants", &S::tenants, tenants_table, "who a request belongs to"),
        section("usage", &S::usage, usage_table, "usage records for billing"),
        section("billing", &S::billing, billing_table, "what failed requests bill"),
        reference_tokenizer_row(),
        value<S, std::string>("tokenizer_dir", &S::tokenizer_dir, read_text, nullptr,
                              "the first directory of the tokenizer search path"),
        choice("reference_special_tokens", &S::reference_special_tokens,
               "added and special tokens in the reference count: match or text",
               special_tokens_complaint),
        choice("count_input_tokens", &S::count_input_tokens,
               "when the prompt's texts are tokenized"),
        named("models", &S::models, model_table,
              {"<name>", "expected a mapping of model names to settings, got ",
               "model names must be non-empty strings, got ", "duplicate model", false, false},
              "per-model tokenizer settings, by the request's model field"),
        named("prices", &S::prices, price_table,
              {"<name>", "expected a mapping of model names to prices, got ",
               "model names must be non-empty strings, got ", "duplicate model", false, false},
              "token prices per model, for the cost in usage records and metrics"),
        section("slo", &S::slo, slo_table, "latency and availability service-level objectives"),
        section("tasks", &S::tasks, tasks_table, "task time: a task label and sessions by header",
                check_tasks),
        value<S, bool>("usage_injection", &S::usage_injection, read_bool, nullptr,
                       "ask OpenAI streams for usage and hide the extra chunk"),
        section_list("routes", &S::routes, route_table,
                     "expected a list of routes (path, api), got ",
                     "the API of paths that are not the well-known ones"),
    };
    return t;
}

}  // namespace tokenmeter::config::schema

namespace tokenmeter::config {

std::vector<documented_key> documented_keys() {
    std::vector<documented_key> out;
    schema::list_section("", schema::root(), out);
    return out;
}

}  // namespace tokenmeter::config
