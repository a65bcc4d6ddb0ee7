// usage/recovery: crash recovery at start-up. Every stream a previous process left open (it was
// killed) becomes a record, before any new traffic, with the same id and its last checkpointed
// counts; only segments since the last completed recovery are read.
#pragma once

#include <cstdint>
#include <filesystem>

namespace tokenmeter::usage {

class spool_writer;

struct recovery_report {
    std::uint64_t segments = 0;   // segments read
    std::uint64_t records = 0;    // close entries found in them
    std::uint64_t recovered = 0;  // open entries without a close, now closed as crash_recovered
    std::uint64_t malformed = 0;  // lines that are not entries
    std::uint64_t partial_tail = 0;  // segments ending in a cut line
    bool written = true;       // the recovered records are on disk (else queued and retried)
    bool mark_written = true;  // the recovery mark was updated
};

// Appends a close entry for every unclosed open entry of `dir` to `spool`, flushes, and moves
// the recovery mark past what was read.
recovery_report recover_unclosed(spool_writer& spool, const std::filesystem::path& dir);

}  // namespace tokenmeter::usage
