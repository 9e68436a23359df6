// The files simnicd writes (pcap, trace), made safe for a directory other users can write to
// (issue 29, points 1 and 9):
//  - A file is created exclusively (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600), so it is a new inode
//    of ours. An old file in its place is replaced only when it is ours (our uid, a regular file,
//    one link): unlinked, then created anew. A file of someone else's, a symlink or a hard link is
//    refused with a sentence naming what it is and whose: another user's pre-created 0666 file
//    is never opened, so they read nothing we capture and their file is never written into.
//  - The directory must be one nobody else can empty under us: ours or root's and writable by
//    nobody else, or sticky (/tmp-like: others cannot remove or rename our file). A directory
//    others may write to that is not sticky is refused (they could swap our file for theirs
//    once we closed it, and the user would read a forged capture).
//  - Writes are whole records (a pcap record, a trace line) or nothing: a record that would take
//    the file past its size limit, or that the disk cannot take, ends the file at the last whole
//    record (ftruncate after a short write), and nothing more is written to it. That is logged
//    once and every record not written is counted (simnic status: <what>_records_lost).
// Buffered in simnicd's own memory (no syscall and no allocation per record).
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "simnic/core/env.h"

namespace simnic::io {

// The default size limit of each output file (simnicd --pcap-max-bytes, --trace-max-bytes).
inline constexpr uint64_t kDefaultOutputMaxBytes = uint64_t(1) << 30;  // 1 GiB

// Opens `path` for writing as described above. Returns the descriptor, or -1 with *error saying
// why (`what` is "pcap" or "trace": the refusal names the file as the user knows it).
int create_output_file(const std::string& path, const char* what, std::string* error);

class OutputFile {
 public:
  enum class State { kClosed, kWriting, kAtLimit, kWriteFailed };

  OutputFile() = default;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile() { close(); }

  // Creates the file (create_output_file). `max_bytes` bounds its size; `log` hears once when
  // the file stops (may be null).
  bool open(const std::string& path, const char* what, uint64_t max_bytes, core::Logger* log, std::string* error);
  // Appends one record, the pieces back to back, whole or not at all. False once the file has
  // stopped (the record is counted as lost).
  bool append(std::initializer_list<std::span<const uint8_t>> pieces);
  // Hands the buffered whole records to the kernel.
  void flush();
  void close();

  bool is_open() const { return fd_ >= 0; }
  State state() const { return state_; }
  // Bytes in the file (written and still buffered).
  uint64_t bytes() const { return on_disk_ + buf_.size(); }
  uint64_t max_bytes() const { return max_bytes_; }
  uint64_t records_lost() const { return records_lost_; }
  // `simnic status` lines: <what>_bytes, <what>_max_bytes, <what>_records_lost, <what>_stopped.
  std::string status_lines() const;

 private:
  int write_out(const uint8_t* data, size_t n, size_t* written);
  void stop_at_limit(size_t record_bytes);
  void stop_after_failed_write(size_t written, int err);
  void say(const std::string& why);

  int fd_ = -1;
  std::string path_;
  std::string what_;
  uint64_t max_bytes_ = kDefaultOutputMaxBytes;
  core::Logger* log_ = nullptr;
  State state_ = State::kClosed;
  std::string why_stopped_;
  uint64_t on_disk_ = 0;  // bytes the kernel took: whole records only
  uint64_t records_lost_ = 0;
  std::vector<uint8_t> buf_;  // whole records not yet written
  std::vector<size_t> ends_;  // where each buffered record ends in buf_ (to cut back to one)
};

}  // namespace simnic::io
