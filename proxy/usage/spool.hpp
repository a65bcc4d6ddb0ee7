// usage/spool: the append-only spool on local disk. Segments are JSON Lines files named
// usage-<20-digit number>.jsonl in one directory; a new process always starts a new segment,
// and a segment is rotated when it would grow past its size limit. The writer commits in
// groups: entries queue in memory, and a thread writes and fsyncs them at most once per
// fsync interval, so a thousand closing streams cost one fsync, not a thousand.
// Segment numbers only grow: a new segment is numbered after the highest of the segments
// present, the shipper's cursor and the high-water mark (segments.mark, written before each new
// segment), so pruning segments never makes a number come round again.
// Reading (recovery scan, shipper batches, the usage command) lives here too: only usage/
// touches these files.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "usage/record.hpp"

namespace tokenmeter::usage {

struct spool_options {
    std::filesystem::path dir;
    std::chrono::milliseconds fsync_interval{10};
    std::uint64_t segment_bytes = 64ull * 1024 * 1024;
    std::uint64_t max_pending_bytes = 64ull * 1024 * 1024;
};

struct spool_stats {
    std::uint64_t appended = 0;        // entries accepted
    std::uint64_t durable = 0;         // entries written and fsynced
    std::uint64_t closes_durable = 0;  // close entries (records) written and fsynced
    std::uint64_t commits = 0;         // fsyncs
    std::uint64_t errors = 0;          // failed writes or fsyncs
    std::uint64_t dropped = 0;         // entries dropped after max_pending_bytes (logged loudly)
    std::uint64_t pending_bytes = 0;   // queued, not yet durable
    std::uint64_t segment = 0;         // current segment number
    bool failing = false;              // the last commit failed
    std::chrono::steady_clock::time_point oldest_pending{};  // valid when pending_bytes > 0
};

class spool_writer {
  public:
    // ok: the entry is on disk; false: the disk failed (the entry stays queued and is retried).
    using durable_callback = std::function<void(bool ok)>;
    using error_log = std::function<void(const std::string&)>;

    // Creates the directory if needed and opens a new segment after the highest number in use
    // (next_segment_number). Throws std::runtime_error when that fails (start-up only), and when
    // the numbers are exhausted (a segment, cursor or mark at 2^64-1).
    spool_writer(spool_options options, error_log log);
    ~spool_writer();
    spool_writer(const spool_writer&) = delete;
    spool_writer& operator=(const spool_writer&) = delete;

    // Queues one line (newline included). Returns its sequence number. Never blocks on disk.
    std::uint64_t append(std::string_view line, bool is_close = false);
    // Runs cb once the entry `seq` is durable (on the writer thread), or at once on this thread
    // when it already is. On a disk failure cb(false) runs after the failed attempt, so nothing
    // waits forever for a broken disk.
    void when_durable(std::uint64_t seq, durable_callback cb);
    [[nodiscard]] bool is_durable(std::uint64_t seq) const;
    // Blocks until everything appended so far is durable or a commit failed.
    bool flush();
    // Stops the thread after a last commit and drops pending callbacks. Later appends are
    // committed synchronously (shutdown: sessions destroyed after the workers stop).
    void stop();
    // Called after every successful commit, on the writer thread.
    void set_on_commit(std::function<void()> fn);

    [[nodiscard]] spool_stats stats() const;
    [[nodiscard]] const std::filesystem::path& dir() const noexcept { return options_.dir; }
    // The segment this writer started with: every earlier segment belongs to earlier processes.
    [[nodiscard]] std::uint64_t first_segment() const noexcept { return first_segment_; }

  private:
    void run();
    // Writes and fsyncs `batch`; called without the lock held, by one thread at a time.
    bool write_batch(const std::string& batch);
    bool open_segment(std::uint64_t number);
    void commit_once(std::unique_lock<std::mutex>& lock);

    spool_options options_;
    error_log log_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable committed_;
    std::string queue_;
    std::uint64_t queue_closes_ = 0;
    std::string retry_;  // a batch whose write failed: written again first, to a new segment
    std::uint64_t retry_closes_ = 0;
    std::uint64_t next_seq_ = 1;
    std::uint64_t durable_seq_ = 0;
    std::uint64_t attempted_seq_ = 0;
    std::uint64_t notified_seq_ = 0;  // callbacks up to here have run
    std::multimap<std::uint64_t, durable_callback> waiters_;
    std::function<void()> on_commit_;
    spool_stats stats_;
    std::chrono::steady_clock::time_point last_commit_{};
    bool stopping_ = false;
    bool stopped_ = false;
    bool committing_ = false;
    int fd_ = -1;
    int lock_fd_ = -1;  // flock'ed for the writer's lifetime
    std::uint64_t segment_number_ = 0;
    std::uint64_t segment_mark_ = 0;  // the high-water mark as last written or read
    std::uint64_t segment_size_ = 0;
    std::uint64_t failures_in_a_row_ = 0;
    std::uint64_t first_segment_ = 0;
    std::thread thread_;
};

// ---- reading ----

struct segment_file {
    std::uint64_t number = 0;
    std::filesystem::path path;
};

// Segments in the directory, oldest first. An unreadable directory gives an empty list.
std::vector<segment_file> list_segments(const std::filesystem::path& dir);
std::string segment_name(std::uint64_t number);

// The highest segment number a writer must not reuse: the highest of the segments present, the
// cursor's segment and the high-water mark. 0 for an empty, new spool.
std::uint64_t highest_segment_in_use(const std::filesystem::path& dir);
// The high-water mark: the highest segment number ever opened in this directory.
std::optional<std::uint64_t> read_segment_mark(const std::filesystem::path& dir);
bool write_segment_mark(const std::filesystem::path& dir, std::uint64_t highest);

struct scan_counts {
    std::uint64_t lines = 0;
    std::uint64_t malformed = 0;     // not JSON, unknown version or type
    std::uint64_t partial_tail = 0;  // an unterminated last line (a write cut by a crash)
};

// Calls fn(entry, end_offset) for every complete, decodable line from `offset` on, until fn
// returns false.
using entry_fn = std::function<bool(const spool_entry&, std::uint64_t end_offset)>;
// Called for every complete line that is not an entry: its text, its number (1 for the line at
// `offset`, counting empty lines) and the offset where it starts.
using malformed_fn =
    std::function<void(std::string_view line, std::uint64_t line_number, std::uint64_t offset)>;
scan_counts scan_segment(const std::filesystem::path& file, std::uint64_t offset,
                         const entry_fn& fn, const malformed_fn& malformed = nullptr);

// The quarantine: quarantine.jsonl in the spool directory, one JSON object per line that is not
// an entry: {"file": segment file name, "line": its number, "offset": byte offset, "bytes": its
// length, "text": the line (its first max_text_bytes; invalid UTF-8 replaced)}. The segment
// itself is left as it is; readers skip the line. Appended by the recovery scan at start-up.
class quarantine_file {
  public:
    static constexpr std::size_t max_text_bytes = std::size_t{64} * 1024;
    static constexpr const char* file_name = "quarantine.jsonl";

    explicit quarantine_file(std::filesystem::path dir) : dir_(std::move(dir)) {}
    ~quarantine_file();
    quarantine_file(const quarantine_file&) = delete;
    quarantine_file& operator=(const quarantine_file&) = delete;

    // Queues one line; writes when enough is queued. False once a write failed.
    bool add(const std::string& file, std::uint64_t line_number, std::uint64_t offset,
             std::string_view text);
    // Writes what is queued and fsyncs the file (and the directory when it was created).
    bool finish();
    [[nodiscard]] std::uint64_t lines() const noexcept { return lines_; }

  private:
    bool write_pending();

    std::filesystem::path dir_;
    std::string pending_;
    std::uint64_t lines_ = 0;
    int fd_ = -1;
    bool created_ = false;
    bool failed_ = false;
};

// Every open entry without a close, as a crash_recovered record built from its last checkpoint.
struct recovery_result {
    std::vector<usage_record> recovered;
    std::uint64_t segments = 0;
    std::uint64_t records = 0;  // close entries seen
    scan_counts counts;
};
// Only segments numbered from_segment or later are read (see recovery marks below). Each line
// that is not an entry goes to `malformed` with its segment's file name.
using segment_malformed_fn = std::function<void(const std::string& file, std::string_view line,
                                                std::uint64_t line_number, std::uint64_t offset)>;
recovery_result find_unclosed(const std::filesystem::path& dir, std::uint64_t from_segment = 0,
                              const segment_malformed_fn& malformed = nullptr);

// The recovery mark: "every open entry in a segment numbered below N has its close". A process
// writes it (N = its first segment) once its recovered records are on disk; the next start then
// reads only the segments from N on, so start-up time does not grow with the spool.
std::optional<std::uint64_t> read_recovery_mark(const std::filesystem::path& dir);
bool write_recovery_mark(const std::filesystem::path& dir, std::uint64_t first_unscanned);

// The shipper's position: every close entry before it has been acknowledged by the sink.
struct cursor {
    std::uint64_t segment = 0;
    std::uint64_t offset = 0;
    bool operator==(const cursor&) const = default;
};
std::optional<cursor> read_cursor(const std::filesystem::path& dir);
// Atomically replaces the cursor file (write, fsync, rename, fsync the directory).
bool write_cursor(const std::filesystem::path& dir, const cursor& c);

struct record_batch {
    std::vector<usage_record> records;
    cursor next;  // the position after the last line consumed
};
// Up to max_records close entries from `from` on. Stops at the unterminated tail of the newest
// segment (it may still be being written); skips malformed lines and the cut tails of older
// segments.
record_batch read_batch(const std::filesystem::path& dir, const cursor& from,
                        std::size_t max_records);
// Close entries at or after `from` (records not yet acknowledged).
std::uint64_t count_records_after(const std::filesystem::path& dir, const cursor& from);

}  // namespace tokenmeter::usage
