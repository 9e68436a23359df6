// Issue 29, points 1 and 9, through `simnic up`: capture files (--pcap-dir, --trace) in a
// directory a classmate can write to, their size limits, and a full disk. The classmate (user B)
// is `nobody`, in a forked child; the NICs run as us (user A).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "harness.h"
#include "support/output_files.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

size_t count_of(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

// The lines of a JSON-lines file, or -1 when one is cut (no '\n' at the end, not a {...}).
long whole_lines(const std::string& text) {
  if (!text.empty() && text.back() != '\n') return -1;
  std::istringstream in(text);
  long n = 0;
  for (std::string line; std::getline(in, line); ++n)
    if (line.empty() || line.front() != '{' || line.back() != '}') return -1;
  return n;
}

uint64_t number(const std::map<std::string, std::string>& kv, const std::string& key) {
  auto it = kv.find(key);
  return it == kv.end() ? 0 : std::stoull(it->second);
}

// Point 1: B pre-creates A's capture files in a 1777 class folder. A's NIC refuses them,
// naming their owner, and writes nothing into them (before: O_TRUNC, and B read A's rkeys).
TEST(OutputFiles, UpRefusesCaptureFilesAnotherUserPlanted) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as a second user (nobody) who plants the files";
  const std::string shared = test::temp_dir("class");
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  ASSERT_TRUE(test::plant_as_nobody(shared + "/simnic0.pcap", "B's bait\n"));
  ASSERT_TRUE(test::plant_as_nobody(shared + "/simnic0.jsonl", "B's bait\n"));
  {
    Nics nics(1, {"--pcap-dir", shared});
    EXPECT_FALSE(nics.ok()) << nics.up_result().output;
    EXPECT_TRUE(test::contains(test::read_all(nics.dir() + "/simnic0.log"),
                               "cannot write pcap " + shared + "/simnic0.pcap: it belongs to uid 65534"))
        << nics.up_result().output << test::read_all(nics.dir() + "/simnic0.log");
  }
  {
    Nics nics(1, {"--trace", shared});
    EXPECT_FALSE(nics.ok()) << nics.up_result().output;
    EXPECT_TRUE(test::contains(test::read_all(nics.dir() + "/simnic0.log"),
                               "cannot write trace " + shared + "/simnic0.jsonl: it belongs to uid 65534"))
        << nics.up_result().output << test::read_all(nics.dir() + "/simnic0.log");
  }
  for (const char* name : {"/simnic0.pcap", "/simnic0.jsonl"}) {
    struct stat st {};
    ASSERT_EQ(::stat((shared + name).c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, test::kNobody) << name;
    EXPECT_EQ(test::read_all(shared + name), "B's bait\n") << name;
  }
  // A's own files there (after B's are gone) are new, private and A's.
  ::unlink((shared + "/simnic0.pcap").c_str());
  {
    Nics nics(1, {"--pcap-dir", shared});
    ASSERT_TRUE(nics.ok()) << nics.up_result().output;
    struct stat st {};
    ASSERT_EQ(::stat((shared + "/simnic0.pcap").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, ::geteuid());
    EXPECT_EQ(st.st_mode & 07777, 0600u);
  }
  std::filesystem::remove_all(shared);
}

// Point 1: a world-writable directory that is not sticky lets B swap A's finished capture for
// a forged one: refused, saying how to fix it.
TEST(OutputFiles, UpRefusesADirectoryOthersCanWriteThatIsNotSticky) {
  const std::string open_dir = test::temp_dir("open");
  ASSERT_EQ(::chmod(open_dir.c_str(), 0777), 0);
  Nics nics(1, {"--trace", open_dir});
  EXPECT_FALSE(nics.ok()) << nics.up_result().output;
  EXPECT_TRUE(test::contains(test::read_all(nics.dir() + "/simnic0.log"), "has mode 0777 and is not sticky"))
      << test::read_all(nics.dir() + "/simnic0.log");
  EXPECT_FALSE(std::filesystem::exists(open_dir + "/simnic0.jsonl"));
  std::filesystem::remove_all(open_dir);
}

// Point 1: --pcap-max-bytes and --trace-max-bytes through `simnic up`: each file stops at a
// whole record within its limit, says so once in the log, and `simnic status` counts the rest.
TEST(OutputFiles, SizeLimitsStopEachFileWholeCountedAndLoggedOnce) {
  const std::string out = test::temp_dir("limits");
  Nics nics(2, {"--pcap-dir", out, "--trace", out, "--pcap-max-bytes", "20K", "--trace-max-bytes", "16K"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r =
      nics.run({bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic1", "-n", "3", "-s", "3000"}, 120s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto st = nics.status("simnic0");
  EXPECT_EQ(st["pcap_max_bytes"], "20480");
  EXPECT_EQ(st["trace_max_bytes"], "16384");
  EXPECT_EQ(st["pcap_stopped"], "size_limit");
  EXPECT_EQ(st["trace_stopped"], "size_limit");
  EXPECT_GT(number(st, "pcap_records_lost"), 0u);
  EXPECT_GT(number(st, "trace_records_lost"), 0u);
  EXPECT_LE(number(st, "pcap_bytes"), 20480u);
  Result view = run({bin_dir() + "/simnic", "status", "simnic0"}, nics.env(), 10s);
  EXPECT_TRUE(test::contains(view.output, "packets not captured")) << view.output;
  run({bin_dir() + "/simnic", "down"}, nics.env(), 30s);  // closes (flushes) the files
  const std::string pcap = test::read_all(out + "/simnic0.pcap"), trace = test::read_all(out + "/simnic0.jsonl");
  EXPECT_LE(pcap.size(), 20480u);
  EXPECT_LE(trace.size(), 16384u);
  EXPECT_GT(test::whole_pcap_records(pcap), 0) << "cut mid-record: " << pcap.size() << " bytes";
  EXPECT_GT(whole_lines(trace), 0) << "cut mid-line";
  const std::string log = test::read_all(nics.dir() + "/simnic0.log");
  // Each NIC says it of its own files (with --one-process both would share the log).
  EXPECT_EQ(count_of(log, "/simnic0.pcap reached its size limit of 20480 bytes (--pcap-max-bytes"), 1u) << log;
  EXPECT_EQ(count_of(log, "/simnic0.jsonl reached its size limit of 16384 bytes (--trace-max-bytes"), 1u) << log;
  std::filesystem::remove_all(out);
}

TEST(OutputFiles, UpRejectsABadSizeLimit) {
  const std::string out = test::temp_dir("bad");
  Nics nics(1, {"--pcap-dir", out, "--pcap-max-bytes", "lots"});
  EXPECT_FALSE(nics.ok());
  EXPECT_TRUE(test::contains(test::read_all(nics.dir() + "/simnic0.log"), "bad --pcap-max-bytes 'lots'"))
      << nics.up_result().output << test::read_all(nics.dir() + "/simnic0.log");
  std::filesystem::remove_all(out);
}

// Point 9: pcap and trace on a 64 KiB tmpfs, mounted in a mount namespace of this test's own
// (the NICs started from here inherit it). Each file ends at a whole record, the NIC logs the
// failed write once per file and counts what it did not write.
TEST(OutputFiles, AFullDiskLeavesWholeRecordsLoggedOnceAndCounted) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs";
  if (::unshare(CLONE_NEWNS) != 0) GTEST_SKIP() << "cannot make a mount namespace: " << std::strerror(errno);
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    GTEST_SKIP() << "cannot make / private in the new namespace: " << std::strerror(errno);
  const std::string out = test::temp_dir("full");
  if (::mount("simnic-full", out.c_str(), "tmpfs", 0, "size=64k,mode=0755") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs: " << std::strerror(errno);
  {
    Nics nics(2, {"--pcap-dir", out, "--trace", out});
    ASSERT_TRUE(nics.ok()) << nics.up_result().output;
    Result r =
        nics.run({bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic1", "-n", "3", "-s", "30000"}, 120s);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto st0 = nics.status("simnic0"), st1 = nics.status("simnic1");
    EXPECT_TRUE(st0["pcap_stopped"] == "write_error" || st1["pcap_stopped"] == "write_error")
        << st0["pcap_stopped"] << " " << st1["pcap_stopped"];
    EXPECT_GT(number(st0, "pcap_records_lost") + number(st1, "pcap_records_lost"), 0u);
    run({bin_dir() + "/simnic", "down"}, nics.env(), 30s);
    for (const char* nic : {"simnic0", "simnic1"}) {
      const std::string pcap = test::read_all(out + "/" + nic + ".pcap");
      const std::string trace = test::read_all(out + "/" + nic + ".jsonl");
      EXPECT_GE(test::whole_pcap_records(pcap), 0) << nic << ".pcap is cut mid-record: " << pcap.size() << " bytes";
      EXPECT_GE(whole_lines(trace), 0) << nic << ".jsonl is cut mid-line: " << trace.size() << " bytes";
      const std::string log = test::read_all(nics.dir() + "/" + nic + ".log");
      EXPECT_LE(count_of(log, "pcap " + out + "/" + nic + ".pcap: a write failed (No space left on device)"), 1u)
          << log;
      EXPECT_LE(count_of(log, "trace " + out + "/" + nic + ".jsonl: a write failed"), 1u) << log;
    }
    const std::string log0 = test::read_all(nics.dir() + "/simnic0.log") + test::read_all(nics.dir() + "/simnic1.log");
    EXPECT_GE(count_of(log0, "a write failed (No space left on device), so it was cut back to its last whole record"),
              1u)
        << log0;
  }
  ::umount2(out.c_str(), MNT_DETACH);
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace simnic::it
