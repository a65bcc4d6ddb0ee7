#include "usage/recovery.hpp"

#include "usage/record.hpp"
#include "usage/spool.hpp"

namespace tokenmeter::usage {

recovery_report recover_unclosed(spool_writer& spool, const std::filesystem::path& dir) {
    auto found = find_unclosed(dir, read_recovery_mark(dir).value_or(0));
    for (const auto& record : found.recovered) {
        spool.append(encode_close(record), true);
    }
    recovery_report report;
    report.segments = found.segments;
    report.records = found.records;
    report.recovered = found.recovered.size();
    report.malformed = found.counts.malformed;
    report.partial_tail = found.counts.partial_tail;
    report.written = spool.flush();
    // The mark moves only once the recovered records are durable, so a failed flush reads the
    // same segments again next time.
    report.mark_written = report.written && write_recovery_mark(dir, spool.first_segment());
    return report;
}

}  // namespace tokenmeter::usage
