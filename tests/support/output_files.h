// What the tests of capture and trace files share (unit/io/output_file_test.cc through the
// library, integration/output_files_test.cc and hardening_test.cc through `simnic up`): private
// temporary directories, a file read whole, a file another user planted, and whole pcap records.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace simnic::test {

// The other user of issue 29's shared class folder.
inline constexpr uid_t kNobody = 65534;

// A fresh private directory /tmp/simnic-test-<tag>-XXXXXX; "" when it cannot be made.
inline std::string temp_dir(const char* tag) {
  std::string tmpl = std::string("/tmp/simnic-test-") + tag + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  return ::mkdtemp(buf.data()) ? buf.data() : "";
}

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

inline bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

// As user B (nobody, in a forked child): creates `path` mode 0666 holding `text`, as the
// classmate of issue 29 did. False if that cannot be done (we are not root, say).
inline bool plant_as_nobody(const std::string& path, const std::string& text) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(2);
    ::umask(0);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0 || ::write(fd, text.data(), text.size()) != ssize_t(text.size())) ::_exit(3);
    ::_exit(0);
  }
  int st = 0;
  return pid > 0 && ::waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

// The records of a classic pcap file, checked whole: the 24-byte header, then each record's 16
// bytes and its caplen bytes, ending exactly at the end of the file. -1 if it ends mid-record.
inline long whole_pcap_records(const std::string& bytes) {
  if (bytes.size() < 24) return -1;
  size_t at = 24;
  long n = 0;
  while (at < bytes.size()) {
    if (bytes.size() - at < 16) return -1;
    uint32_t caplen;
    std::memcpy(&caplen, bytes.data() + at + 8, 4);
    if (bytes.size() - at - 16 < caplen) return -1;
    at += 16 + caplen;
    ++n;
  }
  return n;
}

}  // namespace simnic::test
