#include "simnic/io/output_file.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace simnic::io {

namespace {

// Whole records wait here until this many bytes are buffered: one write(2) per 64 KiB.
constexpr size_t kBufferBytes = 64 << 10;

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string name_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "uid 65534 (nobody)": the owner as the user knows them.
std::string who(uid_t uid) {
  std::string s = "uid " + std::to_string(uid);
  passwd pw{}, *found = nullptr;
  char buf[1024];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found) s += std::string(" (") + pw.pw_name + ")";
  return s;
}

std::string octal(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", unsigned(m & 07777));
  return buf;
}

// "" when nobody but us (or root) can remove or rename the file once it is there. In a sticky
// directory (/tmp, a 1777 class folder) only a file's owner may remove or rename it (the
// kernel's rule for S_ISVTX), so O_EXCL and the owner check below are enough; in any other
// directory someone who may write to it could swap our finished capture for theirs.
std::string check_directory(int dirfd, const std::string& dir) {
  struct stat st {};
  if (::fstat(dirfd, &st) != 0) return std::strerror(errno);
  if (st.st_mode & S_ISVTX) return "";
  const uid_t me = ::geteuid();
  if (st.st_uid != me && st.st_uid != 0)
    return "its directory " + dir + " belongs to " + who(st.st_uid) + ", who could remove or replace the file; " +
           "write into a directory of your own";
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return "its directory " + dir + " has mode " + octal(st.st_mode) + " and is not sticky: other users may " +
           "remove or replace the file there (whoever reads it next would read theirs); use a directory of your " +
           "own, or a sticky one like /tmp (chmod +t " + dir + ")";
  return "";
}

// A file already where ours goes: removed if it is our own old one (our uid, a regular file,
// one link), else refused. Returns "" when the name is free now, else why not.
std::string remove_our_old_file(int dirfd, const std::string& name) {
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT ? "" : std::strerror(errno);
  if (S_ISLNK(st.st_mode)) return "it is a symbolic link, which simnicd never writes through; remove it";
  if (!S_ISREG(st.st_mode)) return "it exists and is not a regular file; remove it or choose another directory";
  const uid_t me = ::geteuid();
  if (st.st_uid != me)
    return "it belongs to " + who(st.st_uid) + ", not you (" + who(me) + "): someone else created it, and " +
           "simnicd never writes into another user's file (they would read every packet and key it records); " +
           "remove it or choose another directory";
  if (st.st_nlink != 1)
    return "it has " + std::to_string(st.st_nlink) + " hard links, and another name would show what simnicd " +
           "writes; remove it";
  if (::unlinkat(dirfd, name.c_str(), 0) != 0 && errno != ENOENT) return std::strerror(errno);
  return "";
}

// O_EXCL|O_NOFOLLOW: a new inode of ours, never an existing file or a link planted since.
int create_exclusively(int dirfd, const std::string& name, std::string* why) {
  int fd = ::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  *why = errno == EEXIST ? "another file appeared in its place while simnicd replaced its old one (someone is "
                           "racing to create it); refused"
                         : std::strerror(errno);
  return -1;
}

std::string max_bytes_flag(const std::string& what) { return "--" + what + "-max-bytes"; }

}  // namespace

int create_output_file(const std::string& path, const char* what, std::string* error) {
  const std::string dir = directory_of(path), name = name_of(path);
  std::string why;
  int fd = -1;
  int dirfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) why = std::string("its directory ") + dir + ": " + std::strerror(errno);
  if (why.empty()) why = check_directory(dirfd, dir);
  if (why.empty()) why = remove_our_old_file(dirfd, name);
  if (why.empty()) fd = create_exclusively(dirfd, name, &why);
  if (dirfd >= 0) ::close(dirfd);
  if (fd < 0) *error = std::string("cannot write ") + what + " " + path + ": " + why;
  return fd;
}

bool OutputFile::open(const std::string& path, const char* what, uint64_t max_bytes, core::Logger* log,
                      std::string* error) {
  close();
  fd_ = create_output_file(path, what, error);
  if (fd_ < 0) return false;
  path_ = path;
  what_ = what;
  max_bytes_ = max_bytes;
  log_ = log;
  state_ = State::kWriting;
  on_disk_ = 0;
  records_lost_ = 0;
  buf_.clear();
  buf_.reserve(kBufferBytes);
  ends_.clear();
  ends_.reserve(kBufferBytes / 32);  // more than the smallest records (a 74-byte pcap one) fill
  return true;
}

bool OutputFile::append(std::initializer_list<std::span<const uint8_t>> pieces) {
  size_t n = 0;
  for (const auto& p : pieces) n += p.size();
  if (state_ == State::kWriting && bytes() + n > max_bytes_) stop_at_limit(n);
  if (state_ == State::kWriting && !buf_.empty() && buf_.size() + n > buf_.capacity()) flush();
  if (state_ != State::kWriting) {
    ++records_lost_;
    return false;
  }
  // A record larger than the buffer grows it once (rare: a trace line over 64 KiB).
  for (const auto& p : pieces) buf_.insert(buf_.end(), p.begin(), p.end());
  ends_.push_back(buf_.size());
  return true;
}

void OutputFile::flush() {
  if (fd_ < 0 || buf_.empty() || state_ == State::kWriteFailed) return;
  size_t written = 0;
  if (int err = write_out(buf_.data(), buf_.size(), &written); err) stop_after_failed_write(written, err);
  else on_disk_ += buf_.size();
  buf_.clear();
  ends_.clear();
}

void OutputFile::close() {
  if (fd_ < 0) return;
  flush();
  ::close(fd_);
  fd_ = -1;
  if (state_ == State::kWriting) state_ = State::kClosed;
}

// 0 when all n bytes were written; else the errno, with *written the bytes the kernel took.
int OutputFile::write_out(const uint8_t* data, size_t n, size_t* written) {
  while (*written < n) {
    ssize_t w = ::write(fd_, data + *written, n - *written);
    if (w > 0) {
      *written += size_t(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    return w < 0 ? errno : ENOSPC;  // write(2) returning 0 for a regular file: nothing more fits
  }
  return 0;
}

// The record would take the file past its limit: it ends here, at the last whole record.
void OutputFile::stop_at_limit(size_t record_bytes) {
  state_ = State::kAtLimit;
  why_stopped_ = "size_limit";
  say(what_ + " " + path_ + " reached its size limit of " + std::to_string(max_bytes_) + " bytes (" +
      max_bytes_flag(what_) + "; the next record needed " + std::to_string(record_bytes) +
      " more): it ends at its last whole record and nothing more is written to it (what is not written is "
      "counted as " +
      what_ + "_records_lost in simnic status)");
}

// The kernel took only `written` bytes of the buffer (a full disk, a quota): the file is cut
// back to the last record it holds whole, so a reader never meets half a record, and left so.
void OutputFile::stop_after_failed_write(size_t written, int err) {
  size_t keep = 0, whole = 0;
  for (size_t end : ends_) {
    if (end > written) break;
    keep = end;
    ++whole;
  }
  records_lost_ += ends_.size() - whole;
  on_disk_ += keep;
  std::string cut = "cut back to its last whole record (" + std::to_string(on_disk_) + " bytes)";
  if (::ftruncate(fd_, off_t(on_disk_)) != 0)
    cut = "could not be cut back to its last whole record at " + std::to_string(on_disk_) +
          " bytes (ftruncate: " + std::strerror(errno) + ")";
  state_ = State::kWriteFailed;
  why_stopped_ = "write_error";
  say(what_ + " " + path_ + ": a write failed (" + std::strerror(err) + "), so it was " + cut +
      " and nothing more is written to it (what is not written is counted as " + what_ +
      "_records_lost in simnic status)");
}

void OutputFile::say(const std::string& why) {
  if (log_) log_->log(core::LogLevel::kWarn, why);
}

std::string OutputFile::status_lines() const {
  if (what_.empty()) return "";
  const bool stopped = state_ == State::kAtLimit || state_ == State::kWriteFailed;
  return what_ + "_bytes " + std::to_string(bytes()) + "\n" + what_ + "_max_bytes " + std::to_string(max_bytes_) +
         "\n" + what_ + "_records_lost " + std::to_string(records_lost_) + "\n" + what_ + "_stopped " +
         (stopped ? why_stopped_ : "no") + "\n";
}

}  // namespace simnic::io
