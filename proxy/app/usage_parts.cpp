#include "app/usage_parts.hpp"

#include <spdlog/spdlog.h>

#include <csignal>
#include <filesystem>

#include "app/start_up.hpp"
#include "usage/recovery.hpp"

namespace tokenmeter::app {

void usage_parts::stop() {  // NOLINT(readability-make-member-function-const): stops what it owns
    if (spool) {
        spool->stop();
    }
    if (shipper) {
        shipper->stop();
    }
}

usage_parts open_usage(const config::usage_settings& settings) {
    usage_parts parts;
    if (settings.spool_dir.empty()) {
        return parts;
    }
    // A file-size limit must fail the write (EFBIG, counted and retried), not kill the process
    // with SIGXFSZ in the middle of everyone's streams.
    std::signal(SIGXFSZ, SIG_IGN);
    parts.spool = std::make_unique<usage::spool_writer>(
        usage::spool_options{settings.spool_dir, settings.fsync_interval, settings.segment_bytes,
                             settings.max_pending_bytes},
        [](const std::string& message) { spdlog::error("{}", message); });
    const std::filesystem::path dir(settings.spool_dir);
    if (!settings.sink.url.empty()) {
        parts.unacknowledged_at_start =
            usage::count_records_after(dir, usage::read_cursor(dir).value_or(usage::cursor{}));
    }
    const auto report = usage::recover_unclosed(*parts.spool, dir);
    if (!report.written) {
        spdlog::error(
            "usage spool: the {} recovered records could not be written yet; they stay queued "
            "and are retried",
            report.recovered);
    } else if (!report.mark_written) {
        spdlog::warn(
            "usage spool: cannot write the recovery mark in {}; the next start reads more "
            "segments than needed",
            settings.spool_dir);
    }
    parts.quarantined_at_start = report.malformed;
    for (const auto& q : report.first_quarantined) {
        spdlog::warn(
            "usage spool: {}/{} line {} (offset {}) is not a usage entry; set aside in {}/{} and "
            "skipped",
            settings.spool_dir, q.file, q.line, q.offset, settings.spool_dir,
            usage::quarantine_file::file_name);
    }
    if (report.malformed > report.first_quarantined.size()) {
        spdlog::warn("usage spool: {} more line(s) that are not usage entries set aside in {}/{}",
                     report.malformed - report.first_quarantined.size(), settings.spool_dir,
                     usage::quarantine_file::file_name);
    }
    if (!report.quarantine_written) {
        spdlog::error(
            "usage spool: cannot write {}/{}; the lines stay in their segments (skipped) and are "
            "set aside again at the next start",
            settings.spool_dir, usage::quarantine_file::file_name);
    }
    spdlog::info(
        "usage spool {}: {} segment(s), {} record(s), {} recovered as crash_recovered, {} "
        "line(s) quarantined, {} cut tail(s)",
        settings.spool_dir, report.segments, report.records, report.recovered, report.malformed,
        report.partial_tail);
    parts.sink = std::make_unique<observe::spool_sink>(*parts.spool);
    if (!settings.sink.url.empty()) {
        const auto& sink = settings.sink;
        const auto target = config::parse_upstream(sink.url).value_or(config::upstream_target{});
        outbound::shipper_options options;
        options.url = sink.url;
        options.target = {target.scheme, target.host, target.port, target.base_path};
        options.batch_size = sink.batch_size;
        options.backoff_initial = sink.backoff_initial;
        options.backoff_max = sink.backoff_max;
        options.request_timeout = sink.request_timeout;
        options.source = sink.source;
        options.ca_file = sink.ca_file;
        options.token = configured_secret("usage.sink.token_env", sink.token_env,
                                          "usage.sink.token_file", sink.token_file);
        options.token_file = sink.token_file;
        // A CA file that does not load throws, naming usage.sink.ca_file.
        parts.shipper = std::make_unique<outbound::usage_shipper>(dir, std::move(options));
        parts.spool->set_on_commit([s = parts.shipper.get()] { s->wake(); });
        parts.shipper->start();
    }
    return parts;
}

}  // namespace tokenmeter::app
