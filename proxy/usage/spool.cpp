#include "usage/spool.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <system_error>

#include "core/thread_name.hpp"
#include "usage/spool_io.hpp"

namespace tokenmeter::usage {
namespace {

namespace fs = std::filesystem;
using spool_io::fsync_dir;
using spool_io::write_all;

constexpr const char* lock_file = ".lock";
constexpr std::uint64_t last_segment_number = std::numeric_limits<std::uint64_t>::max();

std::string errno_text(const std::string& what) {
    // Not strerror: its buffer is shared by every thread, and the shipper, the writer and the
    // sessions all report disk errors.
    return what + ": " + std::generic_category().message(errno);
}

std::uint64_t count_lines(std::string_view text) {
    return static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

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
    thread_ = std::thread([this] {
        core::name_this_thread("tm-spool");
        run();
    });
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

}  // namespace tokenmeter::usage
