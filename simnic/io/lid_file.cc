#include "simnic/io/lid_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace simnic::io {

namespace {
constexpr off_t kMaxBytes = 4 << 20;  // a full 48K-LID fabric fits well within this
}  // namespace

bool LidFile::reload_if_changed() {
  // Never through a symlink planted in the directory; the directory itself is checked at start.
  int fd = ::open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kMaxBytes) {
    if (fd >= 0) ::close(fd);
    return false;
  }
  const Stamp now{st.st_ino, st.st_size, (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec};
  if (now == stamp_) {
    ::close(fd);
    return false;
  }
  std::string text(size_t(st.st_size), '\0');
  ssize_t got = ::pread(fd, text.data(), text.size(), 0);
  ::close(fd);
  if (got < 0) return false;
  text.resize(size_t(got));
  std::vector<std::string> errors;
  entries_ = abi::parse_lid_map(text, &errors);
  stamp_ = now;
  for (const std::string& e : errors)
    logger_.log(core::LogLevel::kWarn, "LID registry " + path_ + ", " + e + " (skipped)");
  return true;
}

bool LidFile::address_of(uint16_t lid, uint32_t* ipv4) {
  for (int pass = 0; pass < 2; ++pass) {
    for (const abi::LidEntry& e : entries_)
      if (e.lid == lid) {
        *ipv4 = e.ipv4;
        return true;
      }
    if (pass == 0 && !reload_if_changed()) return false;
  }
  return false;
}

uint16_t LidFile::lid_of(uint32_t ipv4) {
  if (uint16_t lid = abi::lid_of_address(entries_, ipv4)) return lid;
  return reload_if_changed() ? abi::lid_of_address(entries_, ipv4) : 0;
}

}  // namespace simnic::io
