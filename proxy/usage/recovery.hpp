// usage/recovery: crash recovery at start-up. Every stream a previous process left open (it was
// killed) becomes a record, before any new traffic, with the same id and its last checkpointed
// counts; only segments since the last completed recovery are read. A line that is not an entry
// is set aside in the quarantine (usage/spool: quarantine_file) and costs nothing else.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tokenmeter::usage {

class spool_writer;

// Where a quarantined line stands, for the log.
struct quarantined_line {
    std::string file;  // the segment's file name
    std::uint64_t line = 0;
    std::uint64_t offset = 0;
};

struct recovery_report {
    std::uint64_t segments = 0;   // segments read
    std::uint64_t records = 0;    // close entries found in them
    std::uint64_t recovered = 0;  // open entries without a close, now closed as crash_recovered
    std::uint64_t malformed = 0;  // lines that are not entries: all of them quarantined
    std::vector<quarantined_line> first_quarantined;  // the first max_listed of them
    bool quarantine_written = true;  // quarantine.jsonl holds them (false: a write failed)
    std::uint64_t partial_tail = 0;  // segments ending in a cut line
    bool written = true;       // the recovered records are on disk (else queued and retried)
    bool mark_written = true;  // the recovery mark was updated
};

inline constexpr std::size_t max_listed_quarantined = 20;

// Appends a close entry for every unclosed open entry of `dir` to `spool`, flushes, and moves
// the recovery mark past what was read (once the records and the quarantine are on disk).
recovery_report recover_unclosed(spool_writer& spool, const std::filesystem::path& dir);

}  // namespace tokenmeter::usage
