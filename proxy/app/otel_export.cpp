#include "app/otel_export.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>

#include "app/start_up.hpp"
#include "config/parse.hpp"
#include "core/secret_file.hpp"

namespace tokenmeter::app {

namespace {

std::string environment(const char* name) {
    const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): start-up, one thread
    return value != nullptr ? std::string(value) : std::string();
}

}  // namespace

otel_parts open_otel(const config::settings& settings, prometheus::Registry& registry) {
    otel_parts parts;
    const config::otel_settings& otel = settings.otel;
    if (!otel.written) {
        return parts;
    }
    std::string endpoint = otel.endpoint;
    const char* endpoint_key = "otel.endpoint";
    if (endpoint.empty()) {
        endpoint = environment("OTEL_EXPORTER_OTLP_ENDPOINT");
        endpoint_key = "OTEL_EXPORTER_OTLP_ENDPOINT";
    }
    if (endpoint.empty()) {
        return parts;
    }
    while (endpoint.size() > 1 && endpoint.back() == '/') {
        endpoint.pop_back();
    }
    const auto target = config::parse_upstream(endpoint);
    if (!target) {
        throw start_up_error(std::string(endpoint_key) +
                             ": expected http[s]://host[:port][/path], got \"" + endpoint + "\"");
    }
    outbound::otlp_options options;
    options.url = endpoint;
    options.target = {target->scheme, target->host, target->port, target->base_path};
    options.encoding = otel.encoding == config::otlp_encoding::json ? otlp::encoding::json
                                                                    : otlp::encoding::protobuf;
    options.export_interval = otel.export_interval;
    options.request_timeout = otel.request_timeout;
    options.ca_file = otel.ca_file;
    options.max_queue = otel.max_queue;
    std::string why;
    if (!outbound::parse_otlp_headers_env(environment("OTEL_EXPORTER_OTLP_HEADERS"),
                                          options.fixed_headers, why)) {
        throw start_up_error("OTEL_EXPORTER_OTLP_HEADERS: " + why);
    }
    options.headers = options.fixed_headers;
    if (!otel.headers_file.empty()) {
        options.headers_file = otel.headers_file;
        const auto text = core::read_secret_file(otel.headers_file, why);
        if (!text || !outbound::parse_header_lines(*text, options.headers, why)) {
            throw start_up_error("otel.headers_file: " + why);
        }
    }
    options.server = {settings.upstream.host, settings.upstream.port};
    std::string service = environment("OTEL_SERVICE_NAME");
    options.origin.resource.push_back(
        {"service.name", service.empty() ? std::string("tokenmeter") : service});
    parts.counters = std::make_unique<metrics::otel_metrics>(registry);
    try {
        parts.exporter =
            std::make_unique<outbound::otlp_exporter>(std::move(options), *parts.counters);
    } catch (const std::runtime_error& e) {
        throw start_up_error(e.what());
    }
    parts.exporter->start();
    spdlog::info("otel: exporting spans and metrics to {} ({})", endpoint,
                 otel.encoding == config::otlp_encoding::json ? "json" : "protobuf");
    return parts;
}

}  // namespace tokenmeter::app
