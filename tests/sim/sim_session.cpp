#include "sim_session.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <cctype>
#include <cerrno>
#include <nlohmann/json.hpp>

namespace tokenmeter::sim {
namespace {

using json = nlohmann::json;

constexpr std::size_t request_body_limit = 64 * 1024 * 1024;
constexpr std::uint32_t request_header_limit = 64 * 1024;
constexpr std::chrono::seconds idle_timeout{300};
constexpr std::string_view continue_line = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr std::string_view default_model = "sim-model";

std::string lower(std::string_view text) {
    std::string out{text};
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

std::string dump(const json& value) {
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string error_body(std::string_view message, std::string_view type, std::string_view code) {
    json error = {{"message", message}, {"type", type}, {"param", nullptr}};
    error["code"] = code.empty() ? json(nullptr) : json(code);
    return dump(json{{"error", std::move(error)}});
}

std::string_view error_type_for(unsigned status) {
    switch (status) {
        case 401:
            return "authentication_error";
        case 403:
            return "permission_error";
        case 404:
            return "not_found_error";
        case 429:
            return "rate_limit_error";
        default:
            return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

std::int64_t monotonic_ns(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

sim_session::sim_session(tcp::socket&& socket, std::shared_ptr<server_state> state)
    : stream_(std::move(socket)), state_(std::move(state)), timer_(stream_.get_executor()) {
    state_->stats.connections_accepted.fetch_add(1, std::memory_order_relaxed);
    state_->stats.connections_active.fetch_add(1, std::memory_order_relaxed);
}

sim_session::~sim_session() {
    if (stream_active_) {
        state_->stats.streams_aborted.fetch_add(1, std::memory_order_relaxed);
    }
    state_->stats.connections_active.fetch_sub(1, std::memory_order_relaxed);
}

void sim_session::run() {
    // The socket was accepted onto a strand; start there so every handler is serialized.
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&sim_session::do_read_header, shared_from_this()));
}

void sim_session::do_read_header() {
    parser_.emplace();
    parser_->body_limit(request_body_limit);
    parser_->header_limit(request_header_limit);
    stream_.expires_after(idle_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        beast::bind_front_handler(&sim_session::on_read_header, shared_from_this()));
}

void sim_session::on_read_header(beast::error_code ec, std::size_t /*bytes*/) {
    if (ec) {
        if (ec == http::error::end_of_stream) {
            close_connection(false);
        } else {
            reject_unreadable(ec);
        }
        return;
    }
    // curl and others wait up to a second for "100 Continue" before sending a large body.
    if (iequals(parser_->get()[http::field::expect], "100-continue")) {
        net::async_write(
            stream_, net::buffer(continue_line),
            beast::bind_front_handler(&sim_session::on_continue_sent, shared_from_this()));
        return;
    }
    do_read_body();
}

void sim_session::on_continue_sent(beast::error_code ec, std::size_t /*bytes*/) {
    if (ec) {
        return;
    }
    do_read_body();
}

void sim_session::do_read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&sim_session::on_read_body, shared_from_this()));
}

void sim_session::on_read_body(beast::error_code ec, std::size_t /*bytes*/) {
    if (ec) {
        reject_unreadable(ec);
        return;
    }
    received_at_ = clock::now();
    stream_.expires_never();  // idle timeout is for reads only; a stream may be long
    request_ = parser_->release();
    handle_request();
}

void sim_session::reject_unreadable(beast::error_code ec) {
    // Socket errors and timeouts end the connection silently; a malformed or oversized
    // request gets a status first so a test sees why.
    if (ec.category() != http::make_error_code(http::error::bad_method).category() ||
        ec == http::error::partial_message) {
        close_connection(false);
        return;
    }
    unsigned status = 400;
    if (ec == http::error::body_limit) {
        status = 413;
    } else if (ec == http::error::header_limit) {
        status = 431;
    }
    request_ = {};
    request_id_ = state_->next_request_id.fetch_add(1, std::memory_order_relaxed);
    settings_ = default_settings(state_->options);
    keep_alive_ = false;  // the rest of the byte stream cannot be trusted
    chunked_ = true;
    respond_error(status, "cannot read request: " + ec.message(), "invalid_request_error", "",
                  clock::now());
}

namespace {

// The completion endpoints, by the paths the real servers use.
std::optional<api_kind> api_for_path(std::string_view path) {
    if (path == "/v1/chat/completions") {
        return api_kind::chat;
    }
    if (path == "/v1/completions") {
        return api_kind::completions;
    }
    if (path == "/v1/responses") {
        return api_kind::responses;
    }
    if (path == "/v1/messages") {
        return api_kind::anthropic;
    }
    if (path == "/generate" || path == "/generate_stream") {
        return api_kind::tgi;
    }
    if (path == "/completion") {
        return api_kind::llamacpp;
    }
    if (path == "/api/chat") {
        return api_kind::ollama_chat;
    }
    if (path == "/api/generate") {
        return api_kind::ollama_generate;
    }
    const auto models = path.rfind("/models/");
    const auto colon = path.rfind(':');
    if (models != std::string_view::npos && colon != std::string_view::npos && colon > models + 8 &&
        (path.ends_with(":generateContent") || path.ends_with(":streamGenerateContent"))) {
        return api_kind::gemini;
    }
    return std::nullopt;
}

}  // namespace

void sim_session::handle_request() {
    auto& stats = state_->stats;
    stats.requests.fetch_add(1, std::memory_order_relaxed);
    request_id_ = state_->next_request_id.fetch_add(1, std::memory_order_relaxed);
    keep_alive_ = request_.keep_alive();
    chunked_ = request_.version() >= 11;
    script_.reset();
    settings_ = default_settings(state_->options);
    schedule_base_ = received_at_;

    std::string_view target = request_.target();
    std::string_view path = target.substr(0, target.find('?'));
    const auto method = request_.method();
    const std::optional<api_kind> completion_api = api_for_path(path);
    const std::optional<pooling_kind> pooling_api =
        method == http::verb::post ? pooling_for_path(path) : std::nullopt;

    // Completion endpoints honour every x-sim-* header; the rest only x-sim-fail, so an
    // echo test may send arbitrary x-sim-* headers through the proxy.
    std::optional<std::string> header_error;
    for (const auto& field : request_) {
        std::string name = lower(field.name_string());
        if (!name.starts_with("x-sim-")) {
            continue;
        }
        if (completion_api || pooling_api) {
            header_error = apply_request_header(settings_, name, field.value());
        } else if (name == "x-sim-fail") {
            header_error = parse_failure_plan(field.value(), settings_.failure);
        }
        if (header_error) {
            break;
        }
    }
    arm_peer_watch();
    if (header_error) {
        settings_.failure = failure_plan{};
        respond_error(400, *header_error, "invalid_request_error", "", received_at_);
        return;
    }
    const failure_plan& failure = settings_.failure;
    if (failure.reset) {
        close_connection(true);
        return;
    }
    schedule_base_ = received_at_ + failure.slow_headers;
    if (failure.status) {
        const std::string message =
            "simulated failure (x-sim-fail: status:" + std::to_string(*failure.status) + ")";
        const unsigned status = *failure.status;
        respond_error(status, message, error_type_for(status),
                      status == 429 ? "rate_limit_exceeded" : "", schedule_base_);
        return;
    }

    if (completion_api) {
        if (method != http::verb::post) {
            respond_error(405, "use POST", "invalid_request_error", "method_not_allowed",
                          schedule_base_);
            return;
        }
        handle_completion(*completion_api);
    } else if (pooling_api) {
        handle_pooling(*pooling_api);
    } else if (path == "/echo" || path.starts_with("/echo/")) {
        handle_echo();
    } else if (path == "/v1/models" && method == http::verb::get) {
        handle_models();
    } else if (path == "/health" && method == http::verb::get) {
        respond(200, "text/plain", "ok", schedule_base_);
    } else if (path == "/sim/stats" && method == http::verb::get) {
        handle_stats();
    } else if (method == http::verb::post) {
        // Any other POST echoes too, so a test can send e.g. /v1/files
        // through the proxy and see exactly what arrived upstream.
        handle_echo();
    } else {
        std::string message = "no route for ";
        message += request_.method_string();
        message += ' ';
        message += path;
        respond_error(404, message, "invalid_request_error", "not_found", schedule_base_);
    }
}

std::optional<json> sim_session::read_json_object() {
    // A model server refuses absurd nesting; the limit also keeps this server's own walks
    // bounded. The parse is iterative, and so are destruction and the word count.
    constexpr int max_depth = 512;
    bool too_deep = false;
    json body = json::parse(
        request_.body(),
        [&too_deep](int depth, json::parse_event_t, json&) {
            too_deep = too_deep || depth > max_depth;
            return !too_deep;
        },
        false);
    if (too_deep) {
        respond_error(400, "request body nests deeper than 512 levels", "invalid_request_error", "",
                      schedule_base_);
        return std::nullopt;
    }
    if (body.is_discarded() || !body.is_object()) {
        respond_error(400, "request body is not a JSON object", "invalid_request_error", "",
                      schedule_base_);
        return std::nullopt;
    }
    return body;
}

void sim_session::handle_pooling(pooling_kind kind) {
    std::optional<json> body = read_json_object();
    if (!body) {
        return;
    }
    pooling_answer answer =
        pooling_response(kind, *body, request_id_, settings_.usage != usage_mode::never);
    respond(answer.status, "application/json", std::move(answer.body),
            schedule_base_ + settings_.time_to_first_token);
}

void sim_session::handle_completion(api_kind api) {
    std::optional<json> parsed = read_json_object();
    if (!parsed) {
        return;
    }
    json& body = *parsed;
    completion_plan plan;
    plan.api = api;
    plan.request_id = request_id_;
    plan.model = default_model;
    if (auto model = body.find("model"); model != body.end() && model->is_string()) {
        plan.model = model->get<std::string>();
    }
    std::string_view target = request_.target();
    std::string_view path = target.substr(0, target.find('?'));
    // Ollama streams unless told not to; TGI and Gemini stream by path.
    bool stream = api == api_kind::ollama_chat || api == api_kind::ollama_generate;
    if (auto value = body.find("stream"); value != body.end() && value->is_boolean()) {
        stream = value->get<bool>();
    }
    if (api == api_kind::tgi) {
        stream = path.ends_with("_stream");
    } else if (api == api_kind::gemini) {
        stream = path.ends_with(":streamGenerateContent");
        const auto models = path.rfind("/models/");
        plan.model = std::string(path.substr(models + 8, path.rfind(':') - models - 8));
    }
    bool include_usage = false;
    bool continuous_usage = false;  // vLLM's stream_options.continuous_usage_stats
    if (auto options = body.find("stream_options"); options != body.end() && options->is_object()) {
        if (auto value = options->find("include_usage");
            value != options->end() && value->is_boolean()) {
            include_usage = value->get<bool>();
        }
        if (auto value = options->find("continuous_usage_stats");
            value != options->end() && value->is_boolean()) {
            continuous_usage = value->get<bool>();
        }
    }
    std::optional<std::uint64_t> max_tokens;
    // Each dialect's output cap: OpenAI, Anthropic, Responses, llama.cpp at the top level; TGI,
    // Ollama and Gemini in a nested options object.
    const json* options = &body;
    for (const char* nest : {"parameters", "options", "generationConfig"}) {
        if (auto inner = body.find(nest); inner != body.end() && inner->is_object()) {
            options = &*inner;
        }
    }
    for (const char* key : {"max_tokens", "max_completion_tokens", "max_output_tokens", "n_predict",
                            "max_new_tokens", "num_predict", "maxOutputTokens"}) {
        const json* found = nullptr;
        for (const json* holder : {options, static_cast<const json*>(&body)}) {
            if (auto it = holder->find(key); found == nullptr && it != holder->end()) {
                found = &*it;
            }
        }
        if (found == nullptr || found->is_null()) {
            continue;
        }
        const auto value = found;
        if (!value->is_number_integer() || value->get<std::int64_t>() < 0) {
            respond_error(400, std::string{key} + " must be a non-negative integer",
                          "invalid_request_error", "", schedule_base_);
            return;
        }
        max_tokens = std::min(max_tokens.value_or(UINT64_MAX), value->get<std::uint64_t>());
    }

    plan.prompt_tokens = count_prompt_tokens(body, api);
    plan.completion_tokens = settings_.output_tokens;
    if (max_tokens && *max_tokens < settings_.output_tokens) {
        plan.completion_tokens = static_cast<std::uint32_t>(*max_tokens);
        plan.cut_by_max_tokens = true;
    }
    plan.tokens_per_chunk = settings_.tokens_per_chunk;
    plan.reasoning_tokens = settings_.reasoning_tokens;
    plan.tool_call = settings_.tool_call;
    plan.continuous_usage = settings_.continuous_usage || continuous_usage;
    plan.pad_bytes = settings_.pad_bytes;
    plan.seed = settings_.seed;
    plan.usage_chunk = settings_.usage == usage_mode::always ||
                       (settings_.usage == usage_mode::when_requested && include_usage);
    script_.emplace(std::move(plan));

    if (settings_.failure.no_sse) {
        send_no_sse();
        return;
    }
    // Garbage only makes sense as an event stream, so it forces streaming.
    if (stream || settings_.failure.garbage) {
        start_stream();
        return;
    }
    const std::uint32_t chunks = script_->content_chunk_count();
    const auto due = schedule_base_ + settings_.time_to_first_token +
                     settings_.inter_token_latency * (chunks > 0 ? chunks - 1 : 0);
    respond(200, "application/json", script_->response_body(settings_.usage != usage_mode::never),
            due);
}

void sim_session::handle_echo() {
    json headers = json::object();
    json header_list = json::array();
    for (const auto& field : request_) {
        std::string name = lower(field.name_string());
        std::string value{field.value()};
        header_list.push_back(json::array({std::string{field.name_string()}, value}));
        if (auto existing = headers.find(name); existing != headers.end()) {
            existing->get_ref<std::string&>() += ", " + value;
        } else {
            headers[name] = value;
        }
    }
    const std::string& body = request_.body();
    json echo = {
        {"method", std::string{request_.method_string()}},
        {"target", std::string{request_.target()}},
        {"version", request_.version() == 11 ? "1.1" : "1.0"},
        {"headers", std::move(headers)},
        {"header_list", std::move(header_list)},
        {"body", body},
        {"body_length", body.size()},
        {"body_base64", base64(body)},
    };
    respond(200, "application/json", dump(echo), schedule_base_);
}

void sim_session::handle_models() {
    json models = json::array();
    for (const char* id : {"sim-model", "sim-model-large"}) {
        models.push_back({{"id", id},
                          {"object", "model"},
                          {"created", fixed_created},
                          {"owned_by", "tokenmeter-sim"}});
    }
    respond(200, "application/json", dump(json{{"object", "list"}, {"data", std::move(models)}}),
            schedule_base_);
}

void sim_session::handle_stats() {
    const auto& stats = state_->stats;
    auto load = [](const std::atomic<std::uint64_t>& counter) {
        return counter.load(std::memory_order_relaxed);
    };
    const std::uint64_t started = load(stats.streams_started);
    const std::uint64_t finished =
        load(stats.streams_completed) + load(stats.streams_aborted) + load(stats.streams_truncated);
    json body = {
        {"connections_accepted", load(stats.connections_accepted)},
        {"connections_active", load(stats.connections_active)},
        {"requests", load(stats.requests)},
        {"streams_started", started},
        {"streams_completed", load(stats.streams_completed)},
        {"streams_aborted", load(stats.streams_aborted)},
        {"streams_truncated", load(stats.streams_truncated)},
        {"streams_active", started >= finished ? started - finished : 0},
    };
    respond(200, "application/json", dump(body), schedule_base_);
}

void sim_session::respond(unsigned status, std::string_view content_type, std::string body,
                          clock::time_point due) {
    // 204 and 304 must not carry a body (RFC 9110).
    const bool bodyless = status == 204 || status == 304;
    if (bodyless) {
        body.clear();
    }
    begin_head(status);
    if (!bodyless) {
        add_header("content-type", content_type);
        add_header("content-length", std::to_string(body.size()));
    }
    if (status == 429 || status == 503) {
        add_header("retry-after", "1");
    }
    end_head();
    payload_ = std::move(body);
    chunk_line_.clear();
    trailer_.clear();
    after_write next = after_write::read_next;
    if (settings_.failure.close_after_chunks) {
        // A non-streamed body has no chunks: cut it after N bytes, always short of complete.
        const std::size_t keep = std::min<std::size_t>(*settings_.failure.close_after_chunks,
                                                       payload_.empty() ? 0 : payload_.size() - 1);
        payload_.resize(keep);
        next = after_write::truncate;
    }
    write_at(due, next);
}

void sim_session::respond_error(unsigned status, std::string_view message, std::string_view type,
                                std::string_view code, clock::time_point due) {
    respond(status, "application/json", error_body(message, type, code), due);
}

void sim_session::start_stream() {
    state_->stats.streams_started.fetch_add(1, std::memory_order_relaxed);
    stream_active_ = true;
    next_chunk_ = 0;
    chunk_count_ = script_->content_chunk_count();
    truncate_after_ =
        std::min(settings_.failure.close_after_chunks.value_or(chunk_count_), chunk_count_);
    begin_head(200);
    add_header("content-type", script_->stream_content_type());
    add_header("cache-control", "no-cache");
    if (settings_.stamp) {
        // With sim_sent_ns this lets a benchmark split lateness into ours and the network's.
        add_header("x-sim-received-ns", std::to_string(monotonic_ns(received_at_)));
    }
    if (chunked_) {
        add_header("transfer-encoding", "chunked");
    } else {
        keep_alive_ = false;  // an HTTP/1.0 body without chunking ends at close
    }
    end_head();
    payload_.clear();
    if (script_->has_role_event()) {
        script_->append_role_event(payload_);
    }
    frame_payload(false);
    write_at(schedule_base_, after_write::stream_step);
}

void sim_session::stream_step() {
    if (settings_.failure.close_after_chunks && next_chunk_ >= truncate_after_) {
        state_->stats.streams_truncated.fetch_add(1, std::memory_order_relaxed);
        stream_active_ = false;
        close_connection(false);
        return;
    }
    const auto first_token_at = schedule_base_ + settings_.time_to_first_token;
    if (next_chunk_ < chunk_count_) {
        // Absolute deadlines from the request's arrival: a late write never shifts the rest.
        wait_until(first_token_at + settings_.inter_token_latency * next_chunk_,
                   &sim_session::send_content_chunk);
    } else {
        wait_until(chunk_count_ == 0 ? first_token_at : clock::time_point{},
                   &sim_session::send_stream_tail);
    }
}

void sim_session::send_content_chunk() {
    payload_.clear();
    script_->open_content_event(payload_, next_chunk_);
    std::optional<std::int64_t> sent_ns;
    if (settings_.stamp) {
        sent_ns = monotonic_ns(clock::now());
    }
    script_->close_content_event(payload_, sent_ns);
    if (settings_.failure.garbage) {
        script_->append_garbage(payload_, next_chunk_);
    }
    ++next_chunk_;
    frame_payload(false);
    do_write(after_write::stream_step);
}

void sim_session::send_stream_tail() {
    payload_.clear();
    if (is_dialect(script_->plan().api)) {
        script_->append_dialect_tail(payload_);
        frame_payload(true);
        do_write(after_write::stream_done);
        return;
    }
    script_->append_finish_event(payload_);
    if (script_->plan().usage_chunk) {
        script_->append_usage_event(payload_);
    }
    completion_script::append_done_event(payload_);
    frame_payload(true);
    do_write(after_write::stream_done);
}

void sim_session::send_no_sse() {
    begin_head(200);
    add_header("content-type", "text/event-stream");
    add_header("cache-control", "no-cache");
    if (chunked_) {
        add_header("transfer-encoding", "chunked");
    } else {
        keep_alive_ = false;
    }
    end_head();
    payload_ = "simulated upstream: this body is plain text, not server-sent events\n";
    payload_ += script_->answer_text();
    payload_ += '\n';
    frame_payload(true);
    write_at(schedule_base_ + settings_.time_to_first_token, after_write::read_next);
}

void sim_session::begin_head(unsigned status) {
    std::string_view reason = http::obsolete_reason(static_cast<http::status>(status));
    if (reason.empty() || reason.front() == '<') {
        reason = "Status";
    }
    head_ = "HTTP/1.1 ";
    head_ += std::to_string(status);
    head_ += ' ';
    head_ += reason;
    head_ += "\r\n";
    add_header("server", "tokenmeter-sim");
    add_header("x-sim-request-id", std::to_string(request_id_));
}

void sim_session::add_header(std::string_view name, std::string_view value) {
    head_ += name;
    head_ += ": ";
    head_ += value;
    head_ += "\r\n";
}

void sim_session::end_head() {
    if (!keep_alive_) {
        add_header("connection", "close");
    } else if (request_.version() < 11) {
        add_header("connection", "keep-alive");
    }
    head_ += "\r\n";
}

void sim_session::frame_payload(bool last) {
    chunk_line_.clear();
    trailer_.clear();
    if (!chunked_) {
        return;
    }
    if (!payload_.empty()) {
        std::array<char, 16> digits{};
        std::size_t size = payload_.size();
        std::size_t count = 0;
        do {
            digits[count++] = "0123456789abcdef"[size & 15];
            size >>= 4;
        } while (size > 0);
        chunk_line_.assign(digits.rbegin() + static_cast<std::ptrdiff_t>(digits.size() - count),
                           digits.rend());
        chunk_line_ += "\r\n";
        trailer_ = "\r\n";
    }
    if (last) {
        trailer_ += "0\r\n\r\n";
    }
}

void sim_session::wait_until(clock::time_point due, step next) {
    if (due <= clock::now()) {
        (this->*next)();
        return;
    }
    timer_.expires_at(due);
    timer_.async_wait(beast::bind_front_handler(&sim_session::on_timer, shared_from_this(), next));
}

void sim_session::on_timer(step next, beast::error_code ec) {
    if (ec) {
        return;  // cancelled: the connection is going away
    }
    (this->*next)();
}

void sim_session::write_at(clock::time_point due, after_write next) {
    if (due <= clock::now()) {
        do_write(next);
        return;
    }
    timer_.expires_at(due);
    timer_.async_wait(
        beast::bind_front_handler(&sim_session::on_write_due, shared_from_this(), next));
}

void sim_session::on_write_due(after_write next, beast::error_code ec) {
    if (ec) {
        return;
    }
    do_write(next);
}

void sim_session::do_write(after_write next) {
    const std::array<net::const_buffer, 4> buffers{net::buffer(head_), net::buffer(chunk_line_),
                                                   net::buffer(payload_), net::buffer(trailer_)};
    net::async_write(stream_, buffers,
                     beast::bind_front_handler(&sim_session::on_write, shared_from_this(), next));
}

void sim_session::on_write(after_write next, beast::error_code ec, std::size_t /*bytes*/) {
    if (ec) {
        close_connection(false);  // the client is gone; the destructor counts the abort
        return;
    }
    head_.clear();
    switch (next) {
        case after_write::read_next:
            end_response();
            break;
        case after_write::stream_step:
            stream_step();
            break;
        case after_write::stream_done:
            stream_active_ = false;
            state_->stats.streams_completed.fetch_add(1, std::memory_order_relaxed);
            end_response();
            break;
        case after_write::truncate:
            close_connection(false);
            break;
    }
}

void sim_session::arm_peer_watch() {
    watching_ = true;
    stream_.socket().async_wait(tcp::socket::wait_read,
                                beast::bind_front_handler(&sim_session::on_peer_readable,
                                                          shared_from_this(), watch_generation_));
}

void sim_session::on_peer_readable(std::uint64_t generation, beast::error_code ec) {
    if (ec || generation != watch_generation_ || !watching_) {
        return;
    }
    // Readiness alone proves nothing: with several threads the reactor can deliver an edge
    // for bytes the request read already consumed. Peek to tell EOF from data from nothing.
    char byte = 0;
    const ssize_t peeked =
        ::recv(stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (peeked > 0) {
        watching_ = false;
        return;  // a pipelined request, not a hang-up: leave it for the next read
    }
    if (peeked < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        arm_peer_watch();  // a stale readiness edge; keep watching
        return;
    }
    // EOF or a reset while the response is still being produced: stop generating now
    // instead of at the next write.
    watching_ = false;
    close_connection(false);
}

void sim_session::end_response() {
    if (watching_) {
        watching_ = false;
        ++watch_generation_;
        beast::error_code ignored;
        stream_.socket().cancel(ignored);
    }
    if (!keep_alive_) {
        do_graceful_close();
        return;
    }
    do_read_header();
}

void sim_session::do_graceful_close() {
    // Closing with unread input makes the kernel send RST, which can destroy the response
    // before the client reads it (a 413 while the body is still arriving): send FIN, then
    // discard input until the client closes too.
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds{5});
    do_drain();
}

void sim_session::do_drain() {
    buffer_.clear();
    stream_.async_read_some(
        buffer_.prepare(64 * 1024),
        beast::bind_front_handler(&sim_session::on_drained, shared_from_this()));
}

void sim_session::on_drained(beast::error_code ec, std::size_t /*bytes*/) {
    if (ec) {
        close_connection(false);
        return;
    }
    do_drain();
}

void sim_session::close_connection(bool send_reset) {
    watching_ = false;
    ++watch_generation_;
    timer_.cancel();
    beast::error_code ignored;
    auto& socket = stream_.socket();
    if (send_reset) {
        // SO_LINGER with a zero timeout makes close() send RST instead of FIN.
        socket.set_option(net::socket_base::linger(true, 0), ignored);
    } else {
        socket.shutdown(tcp::socket::shutdown_both, ignored);
    }
    socket.close(ignored);
}

}  // namespace tokenmeter::sim
