#include "usage/recovery.hpp"

#include "usage/record.hpp"
#include "usage/spool.hpp"

namespace tokenmeter::usage {

recovery_report recover_unclosed(spool_writer& spool, const std::filesystem::path& dir) {
    recovery_report report;
    quarantine_file quarantine(dir);
    auto found = find_unclosed(dir, read_recovery_mark(dir).value_or(0),
                               [&](const std::string& file, std::string_view line,
                                   std::uint64_t number, std::uint64_t offset) {
                                   quarantine.add(file, number, offset, line);
                                   if (report.first_quarantined.size() < max_listed_quarantined) {
                                       report.first_quarantined.push_back({file, number, offset});
                                   }
                               });
    for (const auto& record : found.recovered) {
        spool.append(encode_close(record), true);
    }
    report.segments = found.segments;
    report.records = found.records;
    report.recovered = found.recovered.size();
    report.malformed = found.counts.malformed;
    report.partial_tail = found.counts.partial_tail;
    report.quarantine_written = quarantine.finish();
    report.written = spool.flush();
    // The mark moves only once the recovered records and the quarantined lines are durable, so a
    // failed write reads the same segments again next time.
    report.mark_written = report.written && report.quarantine_written &&
                          write_recovery_mark(dir, spool.first_segment());
    return report;
}

}  // namespace tokenmeter::usage
