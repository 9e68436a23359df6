// Issue 29, points 1 and 9: the pcap and trace files in a directory other users can write to,
// their size limit, and a full disk. Another user's pre-created file is refused and left as it
// was; our own old file is replaced by a new private one; a file stops at a whole record (the
// size limit, a failed write), says so once and counts what it did not write.
#include "simnic/io/output_file.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "simnic/io/pcap_writer.h"
#include "simnic/io/trace_hub.h"
#include "support/output_files.h"

namespace simnic::io {
namespace {

struct Lines final : core::Logger {
  std::vector<std::string> lines;
  void log(core::LogLevel, const std::string& line) override { lines.push_back(line); }
};

// A 1777 directory, like /tmp or a class folder everyone may write to.
std::string sticky_shared_dir(const char* tag) {
  std::string dir = test::temp_dir(tag);
  if (!dir.empty()) ::chmod(dir.c_str(), 01777);
  return dir;
}

proto::IpUdpInfo packet_addresses() { return proto::IpUdpInfo{0x7f000001, 0x7f000002, 4791, 4791, 0, 0}; }

// Every line ends with '\n' and is a whole JSON object as written ({...}).
bool whole_lines(const std::string& text, size_t* count) {
  std::istringstream in(text);
  std::string line;
  *count = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line.front() != '{' || line.back() != '}') return false;
    ++*count;
  }
  return text.empty() || text.back() == '\n';
}

std::span<const uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(OutputFile, AnotherUsersPrecreatedFileIsRefusedAndNeverWrittenInto) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as a second user (nobody) who plants the files";
  const std::string dir = sticky_shared_dir("shared");
  ASSERT_TRUE(test::plant_as_nobody(dir + "/simnic0.pcap", "B's bait\n"));
  ASSERT_TRUE(test::plant_as_nobody(dir + "/simnic0.jsonl", "B's bait\n"));
  Lines log;
  PcapWriter pcap;
  std::string error;
  EXPECT_FALSE(pcap.open(dir + "/simnic0.pcap", 1 << 20, &log, &error));
  EXPECT_TRUE(test::contains(error, "cannot write pcap " + dir + "/simnic0.pcap: it belongs to uid 65534")) << error;
  EXPECT_TRUE(test::contains(error, "not you (uid 0")) << error;
  EXPECT_TRUE(test::contains(error, "someone else created it")) << error;
  boost::asio::io_context io;
  TraceHub trace(io);
  error.clear();
  EXPECT_FALSE(trace.open_file(dir + "/simnic0.jsonl", 1 << 20, &log, &error));
  EXPECT_TRUE(test::contains(error, "cannot write trace " + dir + "/simnic0.jsonl: it belongs to uid 65534")) << error;
  // B's files are as B left them: nothing of ours went into them.
  for (const char* name : {"/simnic0.pcap", "/simnic0.jsonl"}) {
    struct stat st {};
    ASSERT_EQ(::stat((dir + name).c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, test::kNobody);
    EXPECT_EQ(test::read_all(dir + name), "B's bait\n");
  }
  std::filesystem::remove_all(dir);
}

TEST(OutputFile, OurOwnOldFileIsReplacedByANewPrivateOne) {
  const std::string dir = sticky_shared_dir("own");
  const std::string path = dir + "/simnic0.pcap";
  ::umask(0);
  {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0666);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "old capture", 11), 11);
    ::close(fd);
  }
  ::umask(022);
  // Someone who opened the old file (while it was 0666) keeps only the old inode.
  int old_reader = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(old_reader, 0);
  PcapWriter pcap;
  std::string error;
  ASSERT_TRUE(pcap.open(path, 1 << 20, nullptr, &error)) << error;
  const std::vector<uint8_t> payload(100, 0xab);
  pcap.write(1, packet_addresses(), payload);
  pcap.close();
  struct stat now {
  }, old{};
  ASSERT_EQ(::stat(path.c_str(), &now), 0);
  ASSERT_EQ(::fstat(old_reader, &old), 0);
  EXPECT_NE(now.st_ino, old.st_ino) << "the old file was written into, not replaced";
  EXPECT_EQ(now.st_mode & 07777, 0600u);
  EXPECT_EQ(now.st_uid, ::geteuid());
  EXPECT_EQ(test::whole_pcap_records(test::read_all(path)), 1);
  char buf[32] = {};
  EXPECT_EQ(::pread(old_reader, buf, sizeof buf, 0), 11);  // still the old bytes, and only them
  EXPECT_STREQ(buf, "old capture");
  ::close(old_reader);
  std::filesystem::remove_all(dir);
}

TEST(OutputFile, SymlinksHardLinksAndNonRegularFilesAreRefused) {
  const std::string dir = test::temp_dir("odd");
  std::ofstream(dir + "/precious") << "precious\n";
  ASSERT_EQ(::symlink((dir + "/precious").c_str(), (dir + "/a.pcap").c_str()), 0);
  ASSERT_EQ(::link((dir + "/precious").c_str(), (dir + "/b.pcap").c_str()), 0);
  ASSERT_EQ(::mkfifo((dir + "/c.pcap").c_str(), 0600), 0);
  OutputFile f;
  std::string error;
  EXPECT_FALSE(f.open(dir + "/a.pcap", "pcap", 1 << 20, nullptr, &error));
  EXPECT_TRUE(test::contains(error, "symbolic link")) << error;
  EXPECT_FALSE(f.open(dir + "/b.pcap", "pcap", 1 << 20, nullptr, &error));
  EXPECT_TRUE(test::contains(error, "it has 2 hard links")) << error;
  EXPECT_FALSE(f.open(dir + "/c.pcap", "pcap", 1 << 20, nullptr, &error));
  EXPECT_TRUE(test::contains(error, "is not a regular file")) << error;
  EXPECT_EQ(test::read_all(dir + "/precious"), "precious\n");
  std::filesystem::remove_all(dir);
}

// Others may remove or rename entries of a directory they can write unless it is sticky.
TEST(OutputFile, ADirectoryOthersCanWriteIsRefusedUnlessSticky) {
  const std::string dir = test::temp_dir("open");
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  OutputFile f;
  std::string error;
  EXPECT_FALSE(f.open(dir + "/simnic0.jsonl", "trace", 1 << 20, nullptr, &error));
  EXPECT_TRUE(test::contains(error, "its directory " + dir + " has mode 0777 and is not sticky")) << error;
  EXPECT_FALSE(std::filesystem::exists(dir + "/simnic0.jsonl"));
  ASSERT_EQ(::chmod(dir.c_str(), 01777), 0);
  EXPECT_TRUE(f.open(dir + "/simnic0.jsonl", "trace", 1 << 20, nullptr, &error)) << error;
  f.close();
  std::filesystem::remove_all(dir);
}

TEST(OutputFile, StopsWholeAtItsSizeLimitLogsOnceAndCountsWhatItDidNotWrite) {
  const std::string dir = test::temp_dir("limit");
  Lines log;
  OutputFile f;
  std::string error;
  ASSERT_TRUE(f.open(dir + "/t.jsonl", "trace", 1000, &log, &error)) << error;
  int written = 0;
  for (int i = 0; i < 25; ++i) {
    const std::string line = "{\"n\":" + std::string(90, 'x') + std::to_string(100 + i) + "}";  // 99 bytes
    written += f.append({as_bytes(line), as_bytes("\n")});
  }
  EXPECT_EQ(written, 10);
  EXPECT_EQ(f.state(), OutputFile::State::kAtLimit);
  EXPECT_EQ(f.records_lost(), 15u);
  EXPECT_TRUE(test::contains(f.status_lines(), "trace_records_lost 15\n")) << f.status_lines();
  EXPECT_TRUE(test::contains(f.status_lines(), "trace_stopped size_limit\n")) << f.status_lines();
  EXPECT_TRUE(test::contains(f.status_lines(), "trace_max_bytes 1000\n")) << f.status_lines();
  f.close();
  const std::string text = test::read_all(dir + "/t.jsonl");
  EXPECT_EQ(text.size(), 1000u);
  size_t lines = 0;
  EXPECT_TRUE(whole_lines(text, &lines));
  EXPECT_EQ(lines, 10u);
  ASSERT_EQ(log.lines.size(), 1u) << "logged once, not once per record";
  EXPECT_TRUE(test::contains(log.lines[0], "reached its size limit of 1000 bytes (--trace-max-bytes")) << log.lines[0];
  std::filesystem::remove_all(dir);
}

TEST(OutputFile, APcapStopsAtItsLimitAfterAWholePacket) {
  const std::string dir = test::temp_dir("pcaplimit");
  Lines log;
  PcapWriter pcap;
  std::string error;
  ASSERT_TRUE(pcap.open(dir + "/simnic0.pcap", 10'000, &log, &error)) << error;
  for (size_t i = 0; i < 100; ++i) {
    std::vector<uint8_t> payload(50 + 37 * i % 900, uint8_t(i));
    pcap.write(i * 1000, packet_addresses(), payload);
  }
  const uint64_t lost = pcap.file().records_lost();
  pcap.close();
  const std::string bytes = test::read_all(dir + "/simnic0.pcap");
  EXPECT_LE(bytes.size(), 10'000u);
  const long records = test::whole_pcap_records(bytes);
  EXPECT_GT(records, 0) << "the capture is cut mid-record";
  EXPECT_EQ(uint64_t(records) + lost, 100u);
  EXPECT_EQ(log.lines.size(), 1u);
  std::filesystem::remove_all(dir);
}

TEST(OutputFile, TraceLinesStopWholeAtTheTraceLimit) {
  const std::string dir = test::temp_dir("tracelimit");
  Lines log;
  boost::asio::io_context io;
  TraceHub hub(io);
  std::string error;
  ASSERT_TRUE(hub.open_file(dir + "/simnic0.jsonl", 4096, &log, &error)) << error;
  for (int i = 0; i < 500; ++i) hub.write_line("{\"kind\":\"x\",\"i\":" + std::to_string(i) + "}");
  const uint64_t lost = hub.file().records_lost();
  hub.close();
  const std::string text = test::read_all(dir + "/simnic0.jsonl");
  size_t lines = 0;
  EXPECT_TRUE(whole_lines(text, &lines));
  EXPECT_LE(text.size(), 4096u);
  EXPECT_GT(lines, 100u);
  EXPECT_EQ(lines + lost, 500u);
  EXPECT_EQ(log.lines.size(), 1u);
  std::filesystem::remove_all(dir);
}

// Point 9, in a forked child with its own mount namespace and a 64 KiB tmpfs: returns "" when
// every check passed, "SKIP: why" when the filesystem cannot be set up, else what failed.
std::string fill_a_small_disk(const std::string& dir) {
  if (::unshare(CLONE_NEWNS) != 0) return std::string("SKIP: unshare(CLONE_NEWNS): ") + std::strerror(errno);
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return std::string("SKIP: making / private: ") + std::strerror(errno);
  if (::mount("simnic-full", dir.c_str(), "tmpfs", 0, "size=64k,mode=0700") != 0)
    return std::string("SKIP: mount tmpfs: ") + std::strerror(errno);
  std::ostringstream bad;
  Lines pcap_log, trace_log;
  PcapWriter pcap;
  boost::asio::io_context io;
  TraceHub trace(io);
  std::string error;
  if (!pcap.open(dir + "/simnic0.pcap", 1 << 30, &pcap_log, &error)) return error;
  if (!trace.open_file(dir + "/simnic0.jsonl", 1 << 30, &trace_log, &error)) return error;
  for (size_t i = 0; i < 400; ++i) {
    std::vector<uint8_t> payload(333 + i % 700, uint8_t(i));
    pcap.write(i, packet_addresses(), payload);
    trace.write_line("{\"kind\":\"packet\",\"i\":" + std::to_string(i) + ",\"pad\":\"" + std::string(200, 'p') + "\"}");
  }
  pcap.flush();
  trace.flush_file();
  const uint64_t pcap_lost = pcap.file().records_lost(), trace_lost = trace.file().records_lost();
  const bool pcap_failed = pcap.file().state() == OutputFile::State::kWriteFailed;
  const bool trace_failed = trace.file().state() == OutputFile::State::kWriteFailed;
  const std::string pcap_status = pcap.file().status_lines();
  pcap.close();
  trace.close();
  const std::string bytes = test::read_all(dir + "/simnic0.pcap"), text = test::read_all(dir + "/simnic0.jsonl");
  const long records = test::whole_pcap_records(bytes);
  size_t lines = 0;
  if (!pcap_failed || !trace_failed) bad << "a file did not stop on the full disk; ";
  if (records < 0) bad << "the pcap ends mid-record (" << bytes.size() << " bytes); ";
  if (records >= 0 && uint64_t(records) + pcap_lost != 400)
    bad << records << " records + " << pcap_lost << " lost != 400; ";
  if (!whole_lines(text, &lines)) bad << "the trace ends mid-line; ";
  if (lines + trace_lost != 400) bad << lines << " lines + " << trace_lost << " lost != 400; ";
  if (pcap_lost == 0 || trace_lost == 0) bad << "nothing counted as lost; ";
  if (!test::contains(pcap_status, "pcap_stopped write_error\n")) bad << "status: " << pcap_status << "; ";
  if (pcap_log.lines.size() != 1 || trace_log.lines.size() != 1)
    bad << "logged " << pcap_log.lines.size() << " and " << trace_log.lines.size() << " times, not once each; ";
  else if (!test::contains(pcap_log.lines[0], "No space left on device") ||
           !test::contains(pcap_log.lines[0], "last whole record"))
    bad << "log: " << pcap_log.lines[0] << "; ";
  return bad.str();
}

TEST(OutputFile, AFullDiskLeavesEachFileAtItsLastWholeRecordLoggedAndCounted) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs (in a private mount namespace)";
  const std::string dir = test::temp_dir("full");
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    const std::string r = fill_a_small_disk(dir);
    (void)!::write(p[1], r.data(), r.size());
    ::_exit(0);
  }
  ::close(p[1]);
  std::string report;
  char buf[512];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) report.append(buf, size_t(n));
  ::close(p[0]);
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  if (report.rfind("SKIP: ", 0) == 0) GTEST_SKIP() << "cannot make a full filesystem here: " << report.substr(6);
  EXPECT_EQ(report, "");
}

}  // namespace
}  // namespace simnic::io
