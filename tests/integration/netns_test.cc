// Two hosts on a real Ethernet link: two network namespaces joined by a veth pair (MTU 1500),
// one NIC in each, started by `ip netns exec NS simnic up --addr ...`. The packets cross the
// veth as they would cross a LAN between two machines: the kernel of one namespace routes
// them out of its veth and the other receives them. Checked across that link: the port MTU
// (1024 on 1500-byte Ethernet), ibv_rc_pingpong, the byte-checked simnic-verbs-check exchange
// with a path MTU (4096) larger than the link carries, a lossy run, and the ICRC of every
// packet captured on the veth by an independent checker (scripts/check_icrc.py).
//
// Both NICs share one SIMNIC_DIR (a filesystem path, the same in both namespaces; simnic's
// sockets there are not abstract, so they do not depend on the namespace): that lets one
// simnic-verbs-check process, which compares every byte on both sides, use both NICs. It
// changes nothing on the wire, where each simnicd sends from its own namespace.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

// The namespaces, the veth pair, and the NICs in them; the destructor stops the NICs (by pid,
// from their pid files) and deletes the namespaces, which deletes the veth pair too.
class TwoHosts {
 public:
  explicit TwoHosts(const std::vector<std::string>& up_args = {}) {
    static int seq = 0;
    const std::string tag = std::to_string(::getpid()) + "x" + std::to_string(seq++);
    ns_ = {"simnicA" + tag, "simnicB" + tag};
    veth_ = {"sva" + tag, "svb" + tag};
    // 10.<from the pid>.<run>.1 and .2: unique per run, easy to tell apart in a capture.
    const std::string net = "10." + std::to_string(100 + ::getpid() % 150) + "." + std::to_string(seq) + ".";
    addr_ = {net + "1", net + "2"};
    dir_ = make_dir();
    why_not_ = make_link();
    if (!why_not_.empty()) return;
    for (int i = 0; i < 2; ++i) {
      // Host A names its interface, host B its address: both ways of choosing where a NIC goes.
      std::vector<std::string> up = {"ip",
                                     "netns",
                                     "exec",
                                     ns_[i],
                                     bin_dir() + "/simnic",
                                     "up",
                                     i == 0 ? "--iface" : "--addr",
                                     i == 0 ? veth_[0] : addr_[1],
                                     "--name",
                                     "simnic" + std::to_string(i)};
      up.insert(up.end(), up_args.begin(), up_args.end());
      Result r = it::run(up, env(), 30s);
      up_output_ += r.output;
      if (r.exit_code != 0) up_failed_ = true;
    }
  }
  ~TwoHosts() {
    std::vector<pid_t> pids;
    for (const char* nic : {"simnic0", "simnic1"}) {
      std::ifstream in(dir_ + "/" + nic + ".pid");
      long pid = 0;
      if (in >> pid && pid > 0) pids.push_back(pid_t(pid));
    }
    it::run({bin_dir() + "/simnic", "down"}, env(), 20s);
    for (pid_t pid : pids) ::kill(pid, SIGKILL);  // in case `down` could not stop one
    for (const auto& ns : ns_) it::run({"ip", "netns", "del", ns}, {}, 10s);
    it::run({"ip", "link", "del", veth_[0]}, {}, 10s);  // only if it never reached its namespace
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TwoHosts(const TwoHosts&) = delete;
  TwoHosts& operator=(const TwoHosts&) = delete;

  const std::string& why_not() const { return why_not_; }  // non-empty: the link could not be made
  bool up() const { return !up_failed_; }
  const std::string& up_output() const { return up_output_; }
  const std::string& ns(int i) const { return ns_[size_t(i)]; }
  const std::string& veth(int i) const { return veth_[size_t(i)]; }
  const std::string& addr(int i) const { return addr_[size_t(i)]; }
  std::map<std::string, std::string> env() const { return {{"SIMNIC_DIR", dir_}, {"HOME", "/tmp"}}; }

  // argv in host i's namespace; `simnic run -- argv` with `verbs`.
  std::vector<std::string> in_host(int i, const std::vector<std::string>& argv, bool verbs) const {
    std::vector<std::string> full = {"ip", "netns", "exec", ns_[size_t(i)]};
    if (verbs) full.insert(full.end(), {bin_dir() + "/simnic", "run", "--"});
    full.insert(full.end(), argv.begin(), argv.end());
    return full;
  }
  Result run(int i, const std::vector<std::string>& argv, bool verbs = true,
             std::chrono::milliseconds timeout = 30s) const {
    return it::run(in_host(i, argv, verbs), env(), timeout);
  }
  std::map<std::string, std::string> status(const std::string& nic) const {
    Result r = it::run({bin_dir() + "/simnic", "status", nic, "--raw"}, env(), 10s);
    std::map<std::string, std::string> kv;
    std::istringstream in(r.output);
    for (std::string line; std::getline(in, line);)
      if (auto sp = line.find(' '); sp != std::string::npos) kv[line.substr(0, sp)] = line.substr(sp + 1);
    return kv;
  }

 private:
  static std::string make_dir() {
    char tmpl[] = "/tmp/simnic-netns-XXXXXX";
    return ::mkdtemp(tmpl) ? tmpl : "";
  }
  // Returns "" or why the namespaces could not be made (then the test skips).
  std::string make_link() {
    if (::geteuid() != 0) return "creating network namespaces needs root";
    if (!have_program("ip")) return "`ip` (iproute2) is not installed";
    const std::vector<std::vector<std::string>> steps = {
        {"ip", "netns", "add", ns_[0]},
        {"ip", "netns", "add", ns_[1]},
        {"ip", "link", "add", veth_[0], "mtu", "1500", "type", "veth", "peer", "name", veth_[1], "mtu", "1500"},
        {"ip", "link", "set", veth_[0], "netns", ns_[0]},
        {"ip", "link", "set", veth_[1], "netns", ns_[1]},
    };
    for (const auto& s : steps)
      if (Result r = it::run(s, {}, 10s); r.exit_code != 0) return "cannot create namespaces: " + r.output;
    for (int i = 0; i < 2; ++i) {
      for (const std::vector<std::string>& s :
           {std::vector<std::string>{"ip", "addr", "add", addr_[size_t(i)] + "/24", "dev", veth_[size_t(i)]},
            std::vector<std::string>{"ip", "link", "set", veth_[size_t(i)], "up"},
            std::vector<std::string>{"ip", "link", "set", "lo", "up"}})
        if (Result r = run(i, s, false, 10s); r.exit_code != 0) return "cannot configure the veth pair: " + r.output;
    }
    return "";
  }

  std::vector<std::string> ns_, veth_, addr_;
  std::string dir_, why_not_, up_output_;
  bool up_failed_ = false;
};

// Waits until a process in the namespace of `pid` listens on TCP `port` (that namespace's
// /proc/PID/net/tcp: the test's own /proc/net shows only its own namespace).
bool wait_for_listener_of(pid_t pid, int port, std::chrono::milliseconds timeout) {
  char needle[16];
  std::snprintf(needle, sizeof needle, ":%04X ", port);
  for (auto deadline = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < deadline;
       std::this_thread::sleep_for(20ms)) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/net/tcp");
    for (std::string line; std::getline(in, line);) {
      std::istringstream ls(line);
      std::string sl, local, remote, st;
      ls >> sl >> local >> remote >> st;
      if (st == "0A" && (local + " ").find(needle) != std::string::npos) return true;
    }
  }
  return false;
}

// The frames of a pcap file (empty if none or unreadable).
std::vector<std::string> pcap_frames(const std::string& pcap) {
  std::ifstream in(pcap, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> frames;
  for (size_t off = 24; off + 16 <= data.size();) {
    uint32_t incl;
    std::memcpy(&incl, data.data() + off + 8, 4);  // native order: tshark wrote it on this host
    frames.push_back(data.substr(off + 16, incl));
    off += 16 + incl;
  }
  return frames;
}

// A bounded tshark capture of one veth, inside its namespace; the destructor kills it by pid.
class VethCapture {
 public:
  VethCapture(const TwoHosts& hosts, int i, std::string path) : path_(std::move(path)) {
    proc_ = std::make_unique<Process>(hosts.in_host(i,
                                                    {"tshark", "-i", hosts.veth(i), "-F", "pcap", "-f", "udp port 4791",
                                                     "-a", "duration:50", "-w", path_},
                                                    false),
                                      hosts.env());
    for (int n = 0; n < 100 && !capturing_; ++n) {
      std::this_thread::sleep_for(100ms);
      capturing_ = proc_->output().find("Capturing on") != std::string::npos;
    }
    if (capturing_) std::this_thread::sleep_for(1s);  // dumpcap starts writing a little after it says so
  }
  ~VethCapture() { std::remove(path_.c_str()); }
  bool capturing() const { return capturing_; }
  // Stops the capture (tshark completes the file on SIGINT) and returns its output.
  std::string stop() {
    std::this_thread::sleep_for(500ms);
    ::kill(proc_->pid(), SIGINT);
    return proc_->wait(10s).output;
  }

 private:
  std::string path_;
  std::unique_ptr<Process> proc_;
  bool capturing_ = false;
};

void expect_all_passed(const Result& r) {
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(" passed, 0 failed"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.output;
}

#define SKIP_WITHOUT_NAMESPACES(hosts)                                                                 \
  if (!(hosts).why_not().empty()) GTEST_SKIP() << "no network namespaces here: " << (hosts).why_not(); \
  ASSERT_TRUE((hosts).up()) << (hosts).up_output()

// No namespace needed: addresses and interfaces the host does not have are refused up front.
TEST(RealInterfaces, AddressesAndInterfacesTheHostDoesNotHaveAreRefused) {
  char dir[] = "/tmp/simnic-it-addr-XXXXXX";
  ASSERT_TRUE(::mkdtemp(dir));
  const std::map<std::string, std::string> env = {{"SIMNIC_DIR", dir}};
  Result r = run({bin_dir() + "/simnic", "up", "--addr", "198.51.100.77"}, env, 20s);  // TEST-NET-2
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("198.51.100.77 is not an address of this host"), std::string::npos) << r.output;
  r = run({bin_dir() + "/simnic", "up", "--iface", "nosuchif0"}, env, 20s);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no interface named nosuchif0"), std::string::npos) << r.output;
  r = run({bin_dir() + "/simnic", "up", "--addr", "224.0.0.1"}, env, 20s);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("not a unicast address"), std::string::npos) << r.output;
  // simnicd itself refuses too, for those who start it by hand.
  r = run({bin_dir() + "/simnicd", "--addr", "198.51.100.77", "--dir", dir}, {}, 20s);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("is not an address of this host"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

TEST(Netns, PortMtuFollowsTheEthernetLink) {
  TwoHosts hosts;
  SKIP_WITHOUT_NAMESPACES(hosts);
  for (int i = 0; i < 2; ++i) {
    Result r = hosts.run(i, {"ibv_devinfo", "-v", "-d", "simnic" + std::to_string(i)});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // The largest IB MTU whose packets fit 1500 bytes; the device can do 4096 (rxe, ConnectX).
    EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(active_mtu:\s+1024 \(3\))"))) << r.output;
    EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(max_mtu:\s+4096 \(5\))"))) << r.output;
    EXPECT_NE(r.output.find("::ffff:" + hosts.addr(i) + ", RoCE v2"), std::string::npos) << r.output;
    auto st = hosts.status("simnic" + std::to_string(i));
    EXPECT_EQ(st["iface"], hosts.veth(i));
    EXPECT_EQ(st["link_mtu"], "1500");
    EXPECT_EQ(st["mtu"], "1024");
  }
}

TEST(Netns, PingpongAndEveryRcOperationCrossTheVethWithValidIcrcs) {
  if (!have_program("tshark")) GTEST_SKIP() << "tshark is not installed (scripts/setup.sh installs it)";
  if (!have_program("python3")) GTEST_SKIP() << "python3 is not installed";
  TwoHosts hosts;
  SKIP_WITHOUT_NAMESPACES(hosts);
  const std::string pcap = "/tmp/simnic-it-veth-" + std::to_string(::getpid()) + ".pcap";
  VethCapture capture(hosts, 0, pcap);
  ASSERT_TRUE(capture.capturing()) << "tshark could not capture on " << hosts.veth(0);

  // ibv_rc_pingpong: server on host A, client on host B, out-of-band TCP across the veth too.
  const std::string port = std::to_string(free_tcp_port());
  Process server(hosts.in_host(0, {"ibv_rc_pingpong", "-d", "simnic0", "-g", "0", "-p", port, "-n", "200", "-c"}, true),
                 hosts.env());
  ASSERT_TRUE(wait_for_listener_of(server.pid(), std::stoi(port), 10s)) << server.output();
  Result client =
      hosts.run(1, {"ibv_rc_pingpong", "-d", "simnic1", "-g", "0", "-p", port, "-n", "200", "-c", hosts.addr(0)});
  Result srv = server.wait(10s);
  ASSERT_EQ(client.exit_code, 0) << "client:\n" << client.output << "\nserver:\n" << srv.output;
  ASSERT_EQ(srv.exit_code, 0) << srv.output;
  // "N bytes in S seconds": both directions, 2 x 4096 bytes x 200 iterations.
  EXPECT_NE(client.output.find("1638400 bytes in"), std::string::npos) << client.output;

  // Every RC operation, every byte compared, with a path MTU of 4096 asked for: modify_qp
  // clamps it to the port's 1024, so nothing larger than the link carries is ever sent.
  expect_all_passed(
      hosts.run(1, {bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic1", "-s", "100000", "-m", "4096"},
                true, 60s));
  const std::string tshark = capture.stop();
  for (const char* nic : {"simnic0", "simnic1"}) {
    auto st = hosts.status(nic);
    EXPECT_EQ(st["tx_too_big"], "0") << nic;
    EXPECT_EQ(st["rx_drop_icrc"], "0") << nic;
    EXPECT_EQ(st["retransmits"], "0") << nic;
  }
  size_t largest = 0, checksummed = 0;
  for (const std::string& f : pcap_frames(pcap)) {
    largest = std::max(largest, f.size());
    // Ethernet 14 + IPv4 20 + UDP checksum at 6: zero, as RoCE NICs send it (SO_NO_CHECK).
    if (f.size() >= 42 && (f[40] != 0 || f[41] != 0)) ++checksummed;
  }
  EXPECT_LE(largest, 1514u) << "a frame larger than the 1500-byte link (plus its 14-byte Ethernet header)";
  EXPECT_GT(largest, 1024u + 14 + 28 + 12) << "no full-MTU packet was captured";
  EXPECT_EQ(checksummed, 0u) << "packets with a UDP checksum";
  Result check = run({"python3", SIMNIC_TEST_SOURCE_DIR "/scripts/check_icrc.py", pcap}, {}, 60s);
  std::printf("largest frame on the veth: %zu bytes; check_icrc.py: %s", largest, check.output.c_str());
  EXPECT_EQ(check.exit_code, 0) << check.output << "\n(tshark: " << tshark << ")";
  const size_t summary = check.output.find(" passed, 0 failed");
  ASSERT_NE(summary, std::string::npos) << check.output;
  const size_t line = check.output.rfind('\n', summary);
  EXPECT_GT(std::stoul(check.output.substr(line == std::string::npos ? 0 : line + 1)), 500u) << check.output;
}

TEST(Netns, LossyLinkStillDeliversEveryByte) {
  TwoHosts hosts({"--loss", "0.03", "--seed", "5"});
  SKIP_WITHOUT_NAMESPACES(hosts);
  expect_all_passed(
      hosts.run(1, {bin_dir() + "/simnic-verbs-check", "-a", "simnic0", "-b", "simnic1", "-s", "65536", "-L"}, true,
                60s));
  uint64_t retx = std::stoull(hosts.status("simnic0")["retransmits"]) +
                  std::stoull(hosts.status("simnic1")["retransmits"]);
  EXPECT_GT(retx, 0u) << "3% loss should have forced retransmissions";
}

}  // namespace
}  // namespace simnic::it
