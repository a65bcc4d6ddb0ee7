#include "usage/spool.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <unordered_map>

namespace tokenmeter::usage {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view segment_prefix = "usage-";
constexpr std::string_view segment_suffix = ".jsonl";
constexpr const char* cursor_file = "shipper.cursor";
constexpr const char* lock_file = ".lock";
constexpr const char* recovery_mark_file = "recovered.mark";
constexpr const char* segment_mark_file = "segments.mark";
constexpr std::uint64_t last_segment_number = std::numeric_limits<std::uint64_t>::max();

std::string errno_text(const std::string& what) {
    // Not strerror: its buffer is shared by every thread, and the shipper, the writer and the
    // sessions all report disk errors.
    return what + ": " + std::generic_category().message(errno);
}

bool fsync_dir(const fs::path& dir) {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    bool ok = ::fsync(fd) == 0;
    ::close(fd);
    return ok;
}

bool write_all(int fd, std::string_view data) {
    while (!data.empty()) {
        ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return false;
        }
        data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

std::uint64_t count_lines(std::string_view text) {
    return static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '\n'));
}

std::optional<std::uint64_t> segment_number(const std::string& name) {
    if (name.size() != segment_prefix.size() + 20 + segment_suffix.size() ||
        name.compare(0, segment_prefix.size(), segment_prefix) != 0 ||
        name.compare(name.size() - segment_suffix.size(), segment_suffix.size(), segment_suffix) !=
            0) {
        return std::nullopt;
    }
    std::uint64_t n = 0;
    for (std::size_t i = segment_prefix.size(); i < segment_prefix.size() + 20; ++i) {
        if (name[i] < '0' || name[i] > '9') {
            return std::nullopt;
        }
        n = n * 10 + static_cast<std::uint64_t>(name[i] - '0');
    }
    return n;
}

bool read_from(const fs::path& file, std::uint64_t offset, std::string& out) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
        return false;
    }
    in.seekg(static_cast<std::streamoff>(offset));
    if (!in) {
        out.clear();
        return true;
    }
    std::ostringstream text;
    text << in.rdbuf();
    out = std::move(text).str();
    return true;
}

}  // namespace

std::string segment_name(std::uint64_t number) {
    std::array<char, 48> buf{};
    std::snprintf(buf.data(), buf.size(), "usage-%020llu.jsonl",
                  static_cast<unsigned long long>(number));
    return buf.data();
}

// ---- writer -------------------------------------------------------------------------------

spool_writer::spool_writer(spool_options options, error_log log)
    : options_(std::move(options)), log_(std::move(log)) {
    std::error_code ec;
    fs::create_directories(options_.dir, ec);
    if (ec) {
        throw std::runtime_error("cannot create usage.spool_dir " + options_.dir.string() + ": " +
                                 ec.message());
    }
    // Two processes appending to one spool would interleave segments: refuse the second. The
    // lock dies with the process, so a SIGKILLed predecessor never blocks a restart.
    lock_fd_ = ::open((options_.dir / lock_file).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd_ < 0 || ::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
        std::string message = errno_text("usage.spool_dir " + options_.dir.string() +
                                         " is in use by another tokenmeter (lock)");
        if (lock_fd_ >= 0) {
            ::close(lock_fd_);
        }
        throw std::runtime_error(message);
    }
    const std::uint64_t highest = highest_segment_in_use(options_.dir);
    segment_mark_ = read_segment_mark(options_.dir).value_or(0);
    if (highest == last_segment_number) {
        ::close(lock_fd_);
        throw std::runtime_error(
            "usage spool " + options_.dir.string() + ": segment numbers are exhausted (a " +
            "segment, shipper.cursor or segments.mark names " + std::to_string(highest) +
            "); move the spool directory aside and start with an empty one");
    }
    if (!open_segment(highest + 1)) {
        ::close(lock_fd_);
        throw std::runtime_error(
            errno_text("cannot create a spool segment in " + options_.dir.string()));
    }
    first_segment_ = segment_number_;
    thread_ = std::thread([this] { run(); });
}

spool_writer::~spool_writer() {
    stop();
    std::unique_lock lock(mutex_);
    if (!queue_.empty() || !retry_.empty()) {
        commit_once(lock);
    }
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
    ::close(lock_fd_);
}

bool spool_writer::open_segment(std::uint64_t number) {
    for (int attempt = 0; attempt < 100; ++attempt, ++number) {
        if (number == 0) {
            errno = EOVERFLOW;  // past 2^64-1: no number left that readers would order last
            return false;
        }
        // The mark goes first: a segment on disk is never above it, so a number is not reused
        // after every segment up to it was pruned.
        if (number > segment_mark_) {
            bool marked = false;
            try {
                marked = write_segment_mark(options_.dir, number);
            } catch (const std::exception&) {
                errno = ENOMEM;
            }
            if (!marked) {
                return false;
            }
            segment_mark_ = number;
        }
        const fs::path file = options_.dir / segment_name(number);
        int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0 && errno == EEXIST) {
            continue;
        }
        if (fd < 0) {
            return false;
        }
        if (fd_ >= 0) {
            ::close(fd_);
        }
        fd_ = fd;
        segment_number_ = number;
        segment_size_ = 0;
        // The new name must survive a crash too, or its records vanish with it.
        fsync_dir(options_.dir);
        return true;
    }
    return false;
}

std::uint64_t spool_writer::append(std::string_view line, bool is_close) {
    std::unique_lock lock(mutex_);
    if (queue_.empty() && retry_.empty()) {
        stats_.oldest_pending = std::chrono::steady_clock::now();
    }
    queue_ += line;
    queue_closes_ += is_close ? 1 : 0;
    stats_.appended += 1;
    std::uint64_t seq = next_seq_++;
    if (stopped_) {
        commit_once(lock);
    } else {
        wake_.notify_one();
    }
    return seq;
}

void spool_writer::when_durable(std::uint64_t seq, durable_callback cb) {
    std::unique_lock lock(mutex_);
    if (seq <= durable_seq_) {
        lock.unlock();
        cb(true);
        return;
    }
    if (seq <= attempted_seq_ || stopped_) {
        // Its commit failed already: do not hold anyone for a broken disk.
        lock.unlock();
        cb(false);
        return;
    }
    waiters_.emplace(seq, std::move(cb));
}

bool spool_writer::is_durable(std::uint64_t seq) const {
    std::lock_guard lock(mutex_);
    return seq <= durable_seq_;
}

bool spool_writer::flush() {
    std::unique_lock lock(mutex_);
    std::uint64_t target = next_seq_ - 1;
    if (stopped_) {
        if (!queue_.empty() || !retry_.empty()) {
            commit_once(lock);
        }
        return durable_seq_ >= target;
    }
    wake_.notify_one();
    committed_.wait(lock, [&] { return notified_seq_ >= target || stopped_; });
    return durable_seq_ >= target;
}

void spool_writer::stop() {
    {
        std::lock_guard lock(mutex_);
        if (stopped_) {
            return;
        }
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) {
        thread_.join();
    }
    std::multimap<std::uint64_t, durable_callback> dropped;
    {
        std::lock_guard lock(mutex_);
        stopped_ = true;
        dropped.swap(waiters_);
    }
    committed_.notify_all();
    // Destroyed outside the lock: a callback may own the last reference to a session whose
    // destructor appends its close entry.
    dropped.clear();
}

void spool_writer::set_on_commit(std::function<void()> fn) {
    std::lock_guard lock(mutex_);
    on_commit_ = std::move(fn);
}

spool_stats spool_writer::stats() const {
    std::lock_guard lock(mutex_);
    spool_stats s = stats_;
    s.pending_bytes = queue_.size() + retry_.size();
    s.segment = segment_number_;
    return s;
}

void spool_writer::run() {
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !retry_.empty(); });
        if (queue_.empty() && retry_.empty()) {
            break;  // stopping, nothing left
        }
        // Group commit: at most one fsync per interval; entries arriving meanwhile join the batch.
        // A failing disk is retried ten times a second at most.
        auto interval = stats_.failing
                            ? std::max(options_.fsync_interval, std::chrono::milliseconds(100))
                            : options_.fsync_interval;
        auto due = last_commit_ + interval;
        if (!stopping_ && std::chrono::steady_clock::now() < due) {
            wake_.wait_until(lock, due, [&] { return stopping_; });
        }
        commit_once(lock);
        if (stopping_ && stats_.failing) {
            break;  // a dead disk must not keep shutdown hanging; the destructor tries once more
        }
    }
}

void spool_writer::commit_once(std::unique_lock<std::mutex>& lock) {
    std::string batch = std::move(retry_);
    batch += queue_;
    queue_.clear();
    std::uint64_t closes = retry_closes_ + queue_closes_;
    retry_.clear();
    retry_closes_ = 0;
    queue_closes_ = 0;
    std::uint64_t seq_high = next_seq_ - 1;
    committing_ = true;
    lock.unlock();
    bool ok = write_batch(batch);
    auto now = std::chrono::steady_clock::now();
    lock.lock();
    committing_ = false;
    last_commit_ = now;
    stats_.commits += 1;
    attempted_seq_ = seq_high;
    if (ok && failures_in_a_row_ > 0 && log_) {
        std::string message = "usage spool writes succeed again in " + options_.dir.string() +
                              " after " + std::to_string(failures_in_a_row_) + " failed attempts";
        failures_in_a_row_ = 0;
        lock.unlock();
        log_(message);
        lock.lock();
    }
    if (ok) {
        durable_seq_ = seq_high;
        stats_.durable += count_lines(batch);
        stats_.closes_durable += closes;
        stats_.failing = false;
        stats_.oldest_pending = now;
    } else {
        stats_.errors += 1;
        stats_.failing = true;
        failures_in_a_row_ += 1;
        std::string message = errno_text("usage spool write failed in " + options_.dir.string());
        message += " (attempt " + std::to_string(failures_in_a_row_) + ")";
        if (batch.size() + queue_.size() > options_.max_pending_bytes) {
            std::uint64_t lost = count_lines(batch);
            stats_.dropped += lost;
            message +=
                "; " + std::to_string(lost) + " entries DROPPED (usage.max_pending_bytes exceeded)";
        } else {
            retry_ = std::move(batch);
            retry_closes_ = closes;
            message += "; entries kept in memory and retried";
        }
        // The first failure, then every 50th (about every 5 s), and every drop: loud, not a flood.
        bool dropped_now = message.find("DROPPED") != std::string::npos;
        if (log_ && (failures_in_a_row_ == 1 || failures_in_a_row_ % 50 == 0 || dropped_now)) {
            lock.unlock();
            log_(message);
            lock.lock();
        }
    }
    std::vector<durable_callback> ready;
    auto end = waiters_.upper_bound(seq_high);
    for (auto it = waiters_.begin(); it != end; ++it) {
        ready.push_back(std::move(it->second));
    }
    waiters_.erase(waiters_.begin(), end);
    auto on_commit = on_commit_;
    lock.unlock();
    for (auto& cb : ready) {
        cb(ok);
    }
    ready.clear();
    if (ok && on_commit) {
        on_commit();
    }
    lock.lock();
    notified_seq_ = std::max(notified_seq_, seq_high);
    committed_.notify_all();
}

bool spool_writer::write_batch(const std::string& batch) {
    if (batch.empty()) {
        return true;
    }
    if (fd_ < 0 && !open_segment(segment_number_ + 1)) {
        return false;
    }
    // The last number is never rotated away from: its segment grows past segment_bytes instead.
    if (segment_size_ > 0 && segment_size_ + batch.size() > options_.segment_bytes &&
        segment_number_ != last_segment_number) {
        if (!open_segment(segment_number_ + 1)) {
            return false;
        }
    }
    if (!write_all(fd_, batch) || ::fdatasync(fd_) != 0) {
        int saved = errno;
        // Take back whatever part of the batch reached the file, so the retry appends whole
        // lines to the same segment. If even that fails, the part is a cut tail: the retry goes
        // to a new segment, and readers skip an older segment's cut tail.
        if (::ftruncate(fd_, static_cast<off_t>(segment_size_)) != 0) {
            ::close(fd_);
            fd_ = -1;
        }
        errno = saved;
        return false;
    }
    segment_size_ += batch.size();
    return true;
}

// ---- reading ------------------------------------------------------------------------------

std::vector<segment_file> list_segments(const fs::path& dir) {
    std::vector<segment_file> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (auto n = segment_number(it->path().filename().string())) {
            out.push_back({*n, it->path()});
        }
    }
    std::sort(out.begin(), out.end(),
              [](const segment_file& a, const segment_file& b) { return a.number < b.number; });
    return out;
}

namespace {

// Lines of `text` (which starts at file offset `base`). Returns false if fn stopped the scan.
bool scan_text(std::string_view text, std::uint64_t base, scan_counts& counts, const entry_fn& fn,
               std::uint64_t* consumed_end, const malformed_fn& malformed = nullptr) {
    std::size_t pos = 0;
    std::uint64_t line_number = 0;
    while (pos < text.size()) {
        std::size_t newline = text.find('\n', pos);
        if (newline == std::string_view::npos) {
            counts.partial_tail += 1;
            return true;
        }
        std::string_view line = text.substr(pos, newline - pos);
        const std::uint64_t start = base + pos;
        std::uint64_t end = base + newline + 1;
        pos = newline + 1;
        line_number += 1;
        if (line.empty()) {
            if (consumed_end != nullptr) {
                *consumed_end = end;
            }
            continue;
        }
        counts.lines += 1;
        auto entry = decode_line(line);
        if (consumed_end != nullptr) {
            *consumed_end = end;
        }
        if (!entry) {
            counts.malformed += 1;
            if (malformed) {
                malformed(line, line_number, start);
            }
            continue;
        }
        if (!fn(*entry, end)) {
            return false;
        }
    }
    return true;
}

}  // namespace

scan_counts scan_segment(const fs::path& file, std::uint64_t offset, const entry_fn& fn,
                         const malformed_fn& malformed) {
    scan_counts counts;
    std::string text;
    if (!read_from(file, offset, text)) {
        return counts;
    }
    scan_text(text, offset, counts, fn, nullptr, malformed);
    return counts;
}

recovery_result find_unclosed(const fs::path& dir, std::uint64_t from_segment,
                              const segment_malformed_fn& malformed) {
    recovery_result result;
    std::unordered_map<std::string, open_info> opens;
    std::vector<std::string> order;  // recovered records come out in the order they started
    std::unordered_map<std::string, checkpoint_info> checkpoints;
    for (const auto& segment : list_segments(dir)) {
        if (segment.number < from_segment) {
            continue;
        }
        result.segments += 1;
        const std::string file = segment.path.filename().string();
        malformed_fn on_malformed;
        if (malformed) {
            on_malformed = [&](std::string_view line, std::uint64_t number, std::uint64_t offset) {
                malformed(file, line, number, offset);
            };
        }
        auto counts = scan_segment(
            segment.path, 0,
            [&](const spool_entry& e, std::uint64_t) {
                switch (e.kind) {
                    case entry_kind::open:
                        if (opens.emplace(e.open.id, e.open).second) {
                            order.push_back(e.open.id);
                        }
                        break;
                    case entry_kind::checkpoint:
                        if (opens.contains(e.checkpoint.id)) {
                            checkpoints[e.checkpoint.id] = e.checkpoint;
                        }
                        break;
                    case entry_kind::close:
                        result.records += 1;
                        opens.erase(e.record.id);
                        checkpoints.erase(e.record.id);
                        break;
                }
                return true;
            },
            on_malformed);
        result.counts.lines += counts.lines;
        result.counts.malformed += counts.malformed;
        result.counts.partial_tail += counts.partial_tail;
    }
    for (const auto& id : order) {
        auto it = opens.find(id);
        if (it == opens.end()) {
            continue;
        }
        std::optional<checkpoint_info> last;
        if (auto c = checkpoints.find(id); c != checkpoints.end()) {
            last = c->second;
        }
        result.recovered.push_back(recover_record(it->second, last));
    }
    return result;
}

namespace {

std::optional<nlohmann::json> read_json_file(const fs::path& file) {
    std::ifstream in(file);
    if (!in) {
        return std::nullopt;
    }
    std::ostringstream text;
    text << in.rdbuf();
    auto j = nlohmann::json::parse(text.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return std::nullopt;
    }
    return j;
}

// Write, fsync, rename over, fsync the directory: the file is the old one or the new one.
bool replace_file(const fs::path& dir, const char* name, const std::string& text) {
    const fs::path tmp = dir / (std::string(name) + ".tmp");
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return false;
    }
    bool ok = write_all(fd, text) && ::fsync(fd) == 0;
    ::close(fd);
    if (!ok || ::rename(tmp.c_str(), (dir / name).c_str()) != 0) {
        return false;
    }
    return fsync_dir(dir);
}

}  // namespace

std::optional<std::uint64_t> read_recovery_mark(const fs::path& dir) {
    auto j = read_json_file(dir / recovery_mark_file);
    if (!j || !j->contains("closed_below_segment") ||
        !(*j)["closed_below_segment"].is_number_unsigned()) {
        return std::nullopt;
    }
    return (*j)["closed_below_segment"].get<std::uint64_t>();
}

bool write_recovery_mark(const fs::path& dir, std::uint64_t first_unscanned) {
    nlohmann::json j = {{"closed_below_segment", first_unscanned}};
    return replace_file(dir, recovery_mark_file, j.dump() + "\n");
}

std::optional<std::uint64_t> read_segment_mark(const fs::path& dir) {
    auto j = read_json_file(dir / segment_mark_file);
    if (!j || !j->contains("highest_segment") || !(*j)["highest_segment"].is_number_unsigned()) {
        return std::nullopt;
    }
    return (*j)["highest_segment"].get<std::uint64_t>();
}

bool write_segment_mark(const fs::path& dir, std::uint64_t highest) {
    nlohmann::json j = {{"highest_segment", highest}};
    return replace_file(dir, segment_mark_file, j.dump() + "\n");
}

std::uint64_t highest_segment_in_use(const fs::path& dir) {
    std::uint64_t highest = read_segment_mark(dir).value_or(0);
    if (auto c = read_cursor(dir)) {
        highest = std::max(highest, c->segment);
    }
    for (const auto& segment : list_segments(dir)) {
        highest = std::max(highest, segment.number);
    }
    return highest;
}

quarantine_file::~quarantine_file() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
}

bool quarantine_file::add(const std::string& file, std::uint64_t line_number, std::uint64_t offset,
                          std::string_view text) {
    lines_ += 1;
    nlohmann::json j = {{"file", file},
                        {"line", line_number},
                        {"offset", offset},
                        {"bytes", text.size()},
                        {"text", std::string(text.substr(0, max_text_bytes))}};
    pending_ += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    pending_ += '\n';
    return pending_.size() < (1u << 20) ? !failed_ : write_pending();
}

bool quarantine_file::write_pending() {
    if (failed_) {
        pending_.clear();
        return false;
    }
    if (pending_.empty()) {
        return true;
    }
    if (fd_ < 0) {
        const fs::path path = dir_ / file_name;
        std::error_code ec;
        created_ = !fs::exists(path, ec);
        fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    }
    failed_ = fd_ < 0 || !write_all(fd_, pending_);
    pending_.clear();
    return !failed_;
}

bool quarantine_file::finish() {
    if (!write_pending() || fd_ < 0) {
        return !failed_;
    }
    failed_ = ::fsync(fd_) != 0 || (created_ && !fsync_dir(dir_));
    return !failed_;
}

std::optional<cursor> read_cursor(const fs::path& dir) {
    std::ifstream in(dir / cursor_file);
    if (!in) {
        return std::nullopt;
    }
    std::ostringstream text;
    text << in.rdbuf();
    auto j = nlohmann::json::parse(text.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("segment") || !j.contains("offset") ||
        !j["segment"].is_number_unsigned() || !j["offset"].is_number_unsigned()) {
        return std::nullopt;
    }
    return cursor{j["segment"].get<std::uint64_t>(), j["offset"].get<std::uint64_t>()};
}

bool write_cursor(const fs::path& dir, const cursor& c) {
    nlohmann::json j = {{"segment", c.segment}, {"offset", c.offset}};
    return replace_file(dir, cursor_file, j.dump() + "\n");
}

record_batch read_batch(const fs::path& dir, const cursor& from, std::size_t max_records) {
    record_batch batch;
    batch.next = from;
    auto segments = list_segments(dir);
    for (std::size_t i = 0; i < segments.size(); ++i) {
        const auto& segment = segments[i];
        if (segment.number < from.segment) {
            continue;
        }
        const bool newest = i + 1 == segments.size();
        std::uint64_t offset = segment.number == from.segment ? from.offset : 0;
        std::string text;
        if (!read_from(segment.path, offset, text)) {
            continue;
        }
        scan_counts counts;
        std::uint64_t consumed = offset;
        bool full = false;
        scan_text(
            text, offset, counts,
            [&](const spool_entry& e, std::uint64_t end) {
                if (e.kind == entry_kind::close) {
                    batch.records.push_back(e.record);
                    if (batch.records.size() >= max_records) {
                        batch.next = {segment.number, end};
                        full = true;
                        return false;
                    }
                }
                return true;
            },
            &consumed);
        if (full) {
            return batch;
        }
        if (newest) {
            batch.next = {segment.number, consumed};
            return batch;
        }
        // An older segment is finished (a new process or a rotation started the next one); a
        // cut tail in it can never be completed.
        batch.next = {segments[i + 1].number, 0};
    }
    return batch;
}

std::uint64_t count_records_after(const fs::path& dir, const cursor& from) {
    std::uint64_t n = 0;
    for (const auto& segment : list_segments(dir)) {
        if (segment.number < from.segment) {
            continue;
        }
        std::uint64_t offset = segment.number == from.segment ? from.offset : 0;
        scan_segment(segment.path, offset, [&](const spool_entry& e, std::uint64_t) {
            n += e.kind == entry_kind::close ? 1 : 0;
            return true;
        });
    }
    return n;
}

}  // namespace tokenmeter::usage
