// Issue 12, as an attacker and a careless student would try it: someone else's or a world-open
// simnic directory, planted symlinks, a fake NIC run by another user, a client that stalls the
// doorbell or passes the wrong descriptors, and programs whose NIC dies under them.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "harness.h"
#include "simnic/abi/paths.h"
#include "simnic/abi/seqpacket.h"
#include "support/output_files.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

constexpr uid_t kStranger = 4321;  // a uid that is neither ours, nobody's nor root's

// 127.4.<pid>.1: an address no other test of this file uses at the same time.
std::string own_addr(int n) { return "127.4." + std::to_string(1 + (::getpid() + n) % 250) + ".1"; }

// Waits until `p` printed `text`.
bool wait_for_output(const Process& p, const std::string& text, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (test::contains(p.output(), text)) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// `simnic up` refuses `dir` and starts nothing there.
void expect_up_refused(const std::string& dir, const std::string& why, int n) {
  std::map<std::string, std::string> env = {{"SIMNIC_DIR", dir}};
  Result up = run({bin_dir() + "/simnic", "up", "1", "--addr", own_addr(n)}, env, 20s);
  run({bin_dir() + "/simnic", "down"}, env, 10s);  // in case it did start one
  EXPECT_EQ(up.exit_code, 1) << up.output;
  EXPECT_TRUE(test::contains(up.output, "simnic: " + dir)) << up.output;
  EXPECT_TRUE(test::contains(up.output, why)) << up.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/simnic0.sock")) << up.output;
  Result daemon = run({bin_dir() + "/simnicd", "--name", "simnic0", "--addr", own_addr(n), "--dir", dir}, {}, 10s);
  EXPECT_NE(daemon.exit_code, 0) << daemon.output;
  EXPECT_TRUE(test::contains(daemon.output, why)) << daemon.output;
  Result st = run({bin_dir() + "/simnic", "status"}, env, 10s);
  EXPECT_EQ(st.exit_code, 1) << st.output;
  EXPECT_TRUE(test::contains(st.output, why)) << st.output;
}

TEST(Hardening, UpRefusesADirectoryOwnedBySomeoneElse) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to uid 65534";
  std::string dir = test::temp_dir("foreign");
  ASSERT_EQ(::chown(dir.c_str(), test::kNobody, test::kNobody), 0);
  expect_up_refused(dir, "is owned by uid 65534, not you (uid 0): someone else created it", 1);
  std::filesystem::remove_all(dir);
}

TEST(Hardening, UpRefusesASymlinkedDirectory) {
  std::string real = test::temp_dir("real");
  std::string link = real + "-link";
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  expect_up_refused(link, "is a symbolic link", 2);
  ::unlink(link.c_str());
  std::filesystem::remove_all(real);
}

TEST(Hardening, UpRefusesAWorldOpenDirectory) {
  std::string dir = test::temp_dir("open");
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  expect_up_refused(dir, "has mode 0777", 3);
  std::filesystem::remove_all(dir);
}

// A directory of ours in a parent everyone may write to (and not sticky like /tmp): anyone
// could rename it away and put theirs in its place after we checked it.
TEST(Hardening, UpRefusesADirectoryInAParentOthersCanRenameItOutOf) {
  std::string parent = test::temp_dir("shared");
  ASSERT_EQ(::chmod(parent.c_str(), 0777), 0);
  std::string dir = parent + "/mine";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  expect_up_refused(dir, "its parent " + parent + " has mode 0777", 5);
  std::filesystem::remove_all(parent);
}

// Symlinks planted where simnic writes its log or a pcap are never written through.
TEST(Hardening, PlantedSymlinksAreNeverWrittenThrough) {
  std::string dir = test::temp_dir("planted"), pcaps = test::temp_dir("pcaps");
  std::string victim = dir + "-victim";
  std::ofstream(victim) << "precious\n";
  ASSERT_EQ(::symlink(victim.c_str(), (dir + "/simnic0.log").c_str()), 0);
  ASSERT_EQ(::symlink(victim.c_str(), (pcaps + "/simnic0.pcap").c_str()), 0);
  std::map<std::string, std::string> env = {{"SIMNIC_DIR", dir}};
  Result up = run({bin_dir() + "/simnic", "up", "1", "--addr", own_addr(4)}, env, 20s);
  EXPECT_EQ(up.exit_code, 0) << up.output;
  run({bin_dir() + "/simnic", "down"}, env, 20s);
  struct stat st {};
  ASSERT_EQ(::lstat((dir + "/simnic0.log").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "the log replaced the planted link";
  EXPECT_TRUE(test::contains(test::read_all(dir + "/simnic0.log"), "ready")) << test::read_all(dir + "/simnic0.log");
  EXPECT_EQ(test::read_all(victim), "precious\n");

  Result pcap = run({bin_dir() + "/simnic", "up", "1", "--addr", own_addr(4), "--pcap-dir", pcaps}, env, 20s);
  run({bin_dir() + "/simnic", "down"}, env, 20s);
  EXPECT_EQ(pcap.exit_code, 1) << pcap.output;
  EXPECT_TRUE(test::contains(pcap.output, "symbolic link")) << pcap.output;
  EXPECT_EQ(test::read_all(victim), "precious\n");
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(pcaps);
  ::unlink(victim.c_str());
}

// A fake NIC: listens on `path` as uid kStranger and answers every Hello like simnicd.
pid_t start_fake_nic(const std::string& path) {
  int ls = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  if (::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  ::chmod(path.c_str(), 0777);
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  pid_t pid = ::fork();
  if (pid != 0) {
    ::close(ls);
    ::close(ready[1]);
    // Until the child listens, a client is refused and sees no NIC at all: wait for it.
    char byte = 0;
    const bool listening = pid > 0 && ::read(ready[0], &byte, 1) == 1;
    ::close(ready[0]);
    return listening ? pid : -1;
  }
  ::close(ready[0]);
  // listen() records the credentials a connecting client sees: the stranger's.
  if (::setgid(kStranger) != 0 || ::setuid(kStranger) != 0 || ::listen(ls, 8) != 0) ::_exit(1);
  [[maybe_unused]] ssize_t told = ::write(ready[1], "L", 1);
  ::close(ready[1]);
  for (;;) {
    int c = ::accept(ls, nullptr, nullptr);
    if (c < 0) continue;
    std::vector<uint8_t> buf;
    std::vector<int> fds;
    while (abi::recv_message(c, buf, fds) == 0 && buf.size() >= sizeof(abi::ReqHeader)) {
      abi::HelloReply rep{};
      std::snprintf(rep.name, sizeof rep.name, "simnic0");
      rep.abi_version = abi::kAbiVersion;
      rep.daemon_pid = uint32_t(::getpid());
      rep.num_comp_vectors = 1;
      abi::RespHeader rh{uint32_t(abi::Op::Hello), sizeof rep, 0, 0};
      abi::send_message(c, &rh, sizeof rh, &rep, sizeof rep);
      for (int fd : fds) ::close(fd);
      fds.clear();
    }
    ::close(c);
  }
}

TEST(Hardening, TheShimRefusesANicServedByAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run processes as other uids";
  if (!have_program("setpriv") || !have_program("ibv_devices")) GTEST_SKIP() << "needs setpriv and ibv_devices";
  if (run({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "test", "-r",
           shim_dir() + "/libibverbs.so.1"},
          {}, 10s)
          .exit_code != 0)
    GTEST_SKIP() << "uid 65534 cannot read " << shim_dir() << " (a private build tree)";
  std::string dir = test::temp_dir("fake");
  ASSERT_EQ(::chown(dir.c_str(), test::kNobody, test::kNobody), 0);  // the victim's own, proper directory
  pid_t fake = start_fake_nic(abi::control_socket_path(dir, "simnic0"));
  ASSERT_GT(fake, 0);
  std::vector<std::string> as_nobody = {"setpriv",
                                        "--reuid=65534",
                                        "--regid=65534",
                                        "--clear-groups",
                                        "env",
                                        "SIMNIC_DIR=" + dir,
                                        "LD_LIBRARY_PATH=" + shim_dir()};
  auto with = [&](std::vector<std::string> cmd) {
    std::vector<std::string> v = as_nobody;
    v.insert(v.end(), cmd.begin(), cmd.end());
    return v;
  };
  Result devices = run(with({"ibv_devices"}), {}, 20s);
  Result status = run(with({bin_dir() + "/simnic", "status"}), {}, 20s);
  ::kill(fake, SIGKILL);
  ::waitpid(fake, nullptr, 0);
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(test::contains(devices.output, "simnic0 ")) << devices.output;  // ibv_devices: "name  guid"
  EXPECT_TRUE(test::contains(devices.output, "is served by uid 4321")) << devices.output;
  EXPECT_TRUE(test::contains(devices.output, "not you (uid 65534) or root")) << devices.output;
  EXPECT_TRUE(test::contains(status.output, "is served by uid 4321")) << status.output;
}

// A client that clears O_NONBLOCK on its doorbell and rings it does not stall simnicd.
TEST(Hardening, AClientThatClearsONonblockCannotStallTheNic) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  auto hostile = nics.start({bin_dir() + "/simnic-hostile-client", "block-doorbell", "simnic0"});
  ASSERT_TRUE(wait_for_output(*hostile, "rang doorbell", 20s)) << hostile->output();
  std::this_thread::sleep_for(200ms);
  auto st = nics.status("simnic0");  // answers within its 5 s timeout, or the NIC is stuck
  EXPECT_EQ(st["contexts"], "1") << "simnic status got no answer";
  Result devices = nics.run({"ibv_devices"}, 20s);
  EXPECT_TRUE(test::contains(devices.output, "simnic0")) << devices.output;
  Result check = nics.run({bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic0", "-n", "1"}, 60s);
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

TEST(Hardening, DescriptorsOfTheWrongTypeAreRefused) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({bin_dir() + "/simnic-hostile-client", "bad-fds", "simnic0"}, 30s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* what : {"doorbell=/dev/null", "doorbell=semaphore", "doorbell=socket", "async=stream",
                           "async=/dev/null", "channel=eventfd", "channel=stream"})
    EXPECT_TRUE(test::contains(r.output, std::string(what) + ": Invalid argument")) << what << "\n" << r.output;
  EXPECT_TRUE(test::contains(r.output, "good: accepted")) << r.output;
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline && nics.status("simnic0")["contexts"] != "0")
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(nics.status("simnic0")["contexts"], "0");  // and the NIC still answers
}

// Passing the control connection (or a socket carrying it) as an event socket must not keep a
// context alive once its process has exited.
TEST(Hardening, AContextDiesWithItsProcessWhateverItPassed) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({bin_dir() + "/simnic-hostile-client", "ctl-as-event-fd", "simnic0"}, 30s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(test::contains(r.output, "channel=control: Invalid argument")) << r.output;
  EXPECT_TRUE(test::contains(r.output, "async=control: Invalid argument")) << r.output;
  EXPECT_TRUE(test::contains(r.output, "channel=carrying-control: accepted")) << r.output;
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline && nics.status("simnic0")["contexts"] != "0")
    std::this_thread::sleep_for(20ms);
  auto st = nics.status("simnic0");
  EXPECT_EQ(st["contexts"], "0");
  EXPECT_EQ(st["qps"], "0");
}

// A busy-polling program learns that its NIC was killed: ibv_poll_cq < 0, posts fail with EIO,
// and IBV_EVENT_DEVICE_FATAL arrives.
TEST(Hardening, APollingProgramLearnsTheNicDied) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  auto watch = nics.start({bin_dir() + "/simnic-nic-loss-watch", "simnic0"});
  ASSERT_TRUE(wait_for_output(*watch, "ready", 20s)) << watch->output();
  auto pids = nics.daemon_pids();
  ASSERT_EQ(pids.size(), 1u);
  ::kill(pids[0], SIGKILL);
  Result r = watch->wait(20s);
  EXPECT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(test::contains(r.output, "poll_cq: -1")) << r.output;
  EXPECT_TRUE(test::contains(r.output, "post_recv: Input/output error")) << r.output;
  EXPECT_TRUE(test::contains(r.output, "post_send: Input/output error")) << r.output;
  EXPECT_TRUE(test::contains(r.output, "async_event: local catastrophic error")) << r.output;
}

// ibv_rc_pingpong itself, busy-polling, exits with an error when its NIC is killed.
TEST(Hardening, IbvRcPingpongExitsWhenItsNicIsKilled) {
  if (!have_program("ibv_rc_pingpong")) GTEST_SKIP() << "ibv_rc_pingpong not installed";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  const std::string port = std::to_string(free_tcp_port());
  auto srv = nics.start({"ibv_rc_pingpong", "-d", "simnic0", "-g", "0", "-p", port, "-n", "100000000"});
  ASSERT_TRUE(wait_for_listener(std::stoi(port), 10s)) << srv->output();
  auto cl = nics.start({"ibv_rc_pingpong", "-d", "simnic1", "-g", "0", "-p", port, "-n", "100000000", "127.0.0.1"});
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline && std::stoull("0" + nics.status("simnic0")["rx_packets"]) < 100)
    std::this_thread::sleep_for(50ms);
  auto pids = nics.daemon_pids();
  ASSERT_EQ(pids.size(), 2u);
  ::kill(pids[0], SIGKILL);
  Result s = srv->wait(20s);
  EXPECT_FALSE(s.timed_out) << s.output;
  EXPECT_NE(s.exit_code, 0) << s.output;
  // Which verb notices first depends on where the program was when the NIC died: polling
  // (ibv_poll_cq < 0: "poll CQ failed") or about to post after a completion it had already
  // polled (EIO from the post: "Couldn't post send" / "Couldn't post receive"). Both are how a
  // program meets a dead device on real hardware; hanging or exiting 0 is not.
  EXPECT_TRUE(test::contains(s.output, "poll CQ failed") || test::contains(s.output, "Couldn't post send") ||
              test::contains(s.output, "Couldn't post receive"))
      << s.output;
  // The client's NIC is alive: it only fails if a send of its was outstanding (retries run
  // out); waiting for a receive, it waits, as on real hardware (RC has no keepalive).
  // Its Process kills it.
}

// Datagrams the kernel drops because simnicd's receive buffer is full show in `simnic status`.
TEST(Hardening, ReceiveBufferOverflowsAreCountedAsDrops) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  auto pids = nics.daemon_pids();
  ASSERT_EQ(pids.size(), 1u);
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(4791);
  inet_pton(AF_INET, nics.addr(0).c_str(), &a.sin_addr);
  const char junk[16] = {};
  auto blast = [&](int count) {
    for (int i = 0; i < count; ++i)
      ::sendto(s, junk, sizeof junk, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&a), sizeof a);
  };
  ::kill(pids[0], SIGSTOP);  // the NIC reads nothing: its buffer fills, the rest is dropped
  blast(200000);
  ::kill(pids[0], SIGCONT);
  std::this_thread::sleep_for(300ms);
  // The drop count rides on the next datagram that is queued.
  uint64_t overflow = 0;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline && overflow == 0) {
    blast(1);
    overflow = std::stoull("0" + nics.status("simnic0")["rx_drop_socket_overflow"]);
  }
  ::close(s);
  EXPECT_GT(overflow, 0u);
  Result table = run({bin_dir() + "/simnic", "status"}, nics.env(), 10s);
  std::istringstream in(table.output);
  uint64_t drops = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::vector<std::string> cols{std::istream_iterator<std::string>(f), {}};
    if (cols.size() == 11 && cols[0] == "simnic0") drops = std::stoull(cols[9]);
  }
  EXPECT_GE(drops, overflow) << table.output;
}

uint64_t cpu_ticks(pid_t pid) {
  std::string stat = test::read_all("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream in(stat.substr(stat.rfind(')') + 2));
  std::vector<std::string> f{std::istream_iterator<std::string>(in), {}};
  return f.size() > 12 ? std::stoull(f[11]) + std::stoull(f[12]) : 0;  // utime + stime
}

// Out of descriptors, simnicd waits instead of retrying accept() in a loop, and serves again
// once descriptors are free.
TEST(Hardening, RunningOutOfDescriptorsDoesNotSpinTheNic) {
  if (!have_program("prlimit")) GTEST_SKIP() << "needs prlimit";
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  pid_t nic = nics.daemon_pids().at(0);
  size_t open_fds = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(nic) + "/fd"))
    ++open_fds;
  const std::string limit = std::to_string(open_fds + 2);
  ASSERT_EQ(run({"prlimit", "--pid", std::to_string(nic), "--nofile=" + limit + ":"}).exit_code, 0);
  std::vector<int> conns;
  for (int i = 0; i < 8; ++i) conns.push_back(abi::connect_control(abi::control_socket_path(nics.dir(), "simnic0")));
  std::this_thread::sleep_for(300ms);
  // The first connection was accepted before the limit; a Hello whose doorbell and event
  // socket simnicd cannot receive is refused, not taken as a query-only Hello.
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  abi::HelloReply hello{};
  EXPECT_EQ(abi::call_fixed(conns[0], abi::Op::Hello, abi::HelloReq{abi::kAbiVersion, 0}, &hello,
                            std::vector<int>{efd, sv[1]}),
            EMFILE);
  for (int fd : {sv[0], sv[1], efd}) ::close(fd);
  uint64_t before = cpu_ticks(nic);
  std::this_thread::sleep_for(1s);
  uint64_t used = cpu_ticks(nic) - before;
  EXPECT_LT(used, uint64_t(::sysconf(_SC_CLK_TCK)) / 4) << "simnicd used " << used << " ticks in 1 s: spinning";
  for (int c : conns) ::close(c);
  ASSERT_EQ(run({"prlimit", "--pid", std::to_string(nic), "--nofile=1024:"}).exit_code, 0);
  EXPECT_EQ(nics.status("simnic0")["contexts"], "0");  // serves again
  std::string log = test::read_all(nics.dir() + "/simnic0.log");
  EXPECT_TRUE(test::contains(log, "cannot accept a control connection: Too many open files")) << log;
}

}  // namespace
}  // namespace simnic::it
