// `simnic up` and `simnic down`: start NICs in the background and stop them, by pid.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "simnic/abi/control.h"
#include "simnic/abi/paths.h"
#include "simnic/abi/state_dir.h"
#include "simnic/cli/cli.h"
#include "simnic/cli/link_layer.h"
#include "simnic/io/netif.h"
#include "simnic/io/proc_stat.h"

namespace simnic::cli {
namespace {

using namespace std::chrono_literals;

std::string log_path(const std::string& dir, const std::string& name) { return dir + "/" + name + ".log"; }

std::string tail_of(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out += "  " + all[i] + "\n";
  return out;
}

// A live simnicd: a zombie (exited, not yet reaped by whoever adopted it) does not count.
bool is_simnicd(pid_t pid) {
  const io::ProcStat p = io::read_proc_stat(pid);
  return p.comm == "simnicd" && p.state && p.state != 'Z';
}

// Who holds UDP `addr`:4791 (issue 29 point 3: another user binds a NIC's address while it
// restarts, and would receive its peers' packets). /proc/net/udp gives every socket's local
// address, uid and inode; the owning process is found by the inode among the processes we
// may look into (our own; all of them as root).
struct PortHolder {
  bool found = false;
  uid_t uid = 0;
  unsigned long inode = 0;
  pid_t pid = 0;  // 0: not a process we can see
};

PortHolder udp_port_holder(uint32_t addr_be, uint16_t port) {
  PortHolder h;
  std::ifstream in("/proc/net/udp");
  std::string line;
  std::getline(in, line);  // the column titles
  while (std::getline(in, line)) {
    unsigned slot = 0, local = 0, lport = 0, uid = 0;
    unsigned long inode = 0;
    // "  12: 0100007F:12B7 00000000:0000 07 00000000:00000000 00:00000000 00000000  1000  0 4242 ..."
    if (std::sscanf(line.c_str(), " %u: %X:%X %*X:%*X %*X %*X:%*X %*X:%*X %*X %u %*d %lu", &slot, &local, &lport, &uid,
                    &inode) != 5)
      continue;
    if (lport != port || (local != addr_be && local != INADDR_ANY)) continue;
    h = PortHolder{true, uid_t(uid), inode, 0};
    break;
  }
  if (!h.found || !h.inode) return h;
  const std::string target = "socket:[" + std::to_string(h.inode) + "]";
  std::error_code ec;
  for (const auto& proc : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = proc.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    for (const auto& fd : std::filesystem::directory_iterator(proc.path() / "fd", ec)) {
      std::error_code ec2;
      if (std::filesystem::read_symlink(fd.path(), ec2).string() == target) return h.pid = pid_t(std::stol(pid)), h;
    }
  }
  return h;
}

std::string user_name(uid_t uid) {
  passwd* pw = ::getpwuid(uid);
  return pw ? pw->pw_name : "uid " + std::to_string(uid);
}

// Why `addr`:4791 is taken, said so that the user knows whether their NIC's traffic would
// reach someone else.
std::string explain_taken_address(const std::string& addr) {
  in_addr ia{};
  if (inet_pton(AF_INET, addr.c_str(), &ia) != 1) return "";
  const PortHolder h = udp_port_holder(ia.s_addr, 4791);
  const std::string where = addr + ":4791";
  const std::string pick = "choose a free address with `simnic up --addr 127.0.N.1`, N your own number";
  if (!h.found) return where + " was taken, and is free again now: try `simnic up` once more";
  if (h.uid != ::getuid())
    return where + " is held by user " + user_name(h.uid) + " (uid " + std::to_string(h.uid) +
           "), not by a simnic NIC of yours: your NIC's traffic (and its peers' packets: RETHs with "
           "addresses and rkeys, payloads) would reach them; " +
           pick + ", and tell your peers";
  if (h.pid && is_simnicd(h.pid))
    return where + " is held by a simnicd of yours (pid " + std::to_string(h.pid) +
           "), a NIC of another SIMNIC_DIR or started by hand; stop it (`kill " + std::to_string(h.pid) + "`), or " +
           pick;
  return where + " is held by a process of yours that is not a NIC" +
         (h.pid ? " (pid " + std::to_string(h.pid) + ")" : std::string()) + "; stop it, or " + pick;
}

pid_t read_pid(const std::string& dir, const std::string& name) {
  std::ifstream in(abi::pid_file_path(dir, name));
  long pid = 0;
  if (in >> pid && pid > 0) return pid_t(pid);
  std::string text;  // no pid file (started by hand): ask the NIC itself
  if (query_nic(dir, name, unsigned(abi::Op::Status), "", &text) == 0) {
    auto kv = parse_kv(text);
    if (kv.count("pid")) return pid_t(std::stol(kv["pid"]));
  }
  return 0;
}

// Keeps the previous run's log as NAME.log.1. A log that is a link to another NIC's (one
// process served both) becomes a link to that NIC's previous log.
void rotate_log(const std::string& log) {
  char target[256];
  const ssize_t n = ::readlink(log.c_str(), target, sizeof target - 1);
  if (n <= 0) return (void)::rename(log.c_str(), (log + ".1").c_str());
  const std::string previous = std::string(target, size_t(n)) + ".1";
  ::unlink((log + ".1").c_str());
  [[maybe_unused]] int rc = ::symlink(previous.c_str(), (log + ".1").c_str());
  ::unlink(log.c_str());
}

// A process group of its own: the terminal's Ctrl-C and job control (SIGINT, SIGTSTP to the
// foreground group) and its hang-up (SIGHUP, ignored) leave the NIC alone. Not a session of its
// own (setsid), which on Linux is also a scheduling group of its own (autogroup): CFS then shares
// the CPUs between that group and the user's other sessions as wholes, and beside busy loops
// and other NICs' traffic (the busy-host soak, `simnic bench --load`) such a NIC waited on the
// run queue up to 1-3 s at a time without running (its /proc/PID/schedstat), far past any ACK
// timeout: 1 run in 2 of the soak ended in timeouts and resends of packets the peer had. In the
// session of the user who started it, the NIC is one more of their tasks (docs/performance.md,
// "A NIC in its user's session"); none waited 0.3 s in the same runs.
void detach_from_terminal() {
  ::setpgid(0, 0);
  ::signal(SIGHUP, SIG_IGN);  // kept across exec
}

// Starts one simnicd detached from this terminal; returns its pid or 0.
pid_t spawn(const std::string& simnicd, const std::vector<std::string>& argv, const std::string& log) {
  pid_t pid = ::fork();
  if (pid < 0) return 0;
  if (pid == 0) {
    detach_from_terminal();
    int in = ::open("/dev/null", O_RDONLY);
    rotate_log(log);
    int out = abi::create_private_file(log);  // never through a planted symlink
    if (in >= 0) ::dup2(in, 0);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    std::vector<char*> args;
    args.push_back(const_cast<char*>(simnicd.c_str()));
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(simnicd.c_str(), args.data());
    std::fprintf(stderr, "simnic: cannot run %s: %s\n", simnicd.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  return pid;
}

void write_pid_file(const std::string& path, pid_t pid) {
  int fd = abi::create_private_file(path);
  if (fd < 0) {
    std::fprintf(stderr, "simnic: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    return;
  }
  std::string text = std::to_string(pid) + "\n";
  [[maybe_unused]] ssize_t n = ::write(fd, text.data(), text.size());
  ::close(fd);
}

const char kUpUsage[] =
    "usage: simnic up [N] [options]\n"
    "Starts N simulated NICs (default 2; 1 with --iface, --name or an address outside 127/8):\n"
    "simnic0 on 127.0.0.1, simnic1 on 127.0.0.2, ...\n"
    "Each runs as a background simnicd (all as one with --one-process); a NIC's log is\n"
    "<dir>/<name>.log.\n"
    "  --addr A.B.C.D      address of simnic0 (default 127.0.0.1); the next NICs count up. Any\n"
    "                      address of this host: on a LAN address, NICs on other hosts reach it\n"
    "                      (docs/wire.md; anyone on that network can send it packets)\n"
    "  --iface NAME        use interface NAME's first IPv4 address (one NIC per address)\n"
    "  --name NAME         name the NIC NAME instead of simnic0 (with N = 1)\n"
    "  --mtu BYTES         port MTU (256..4096, default: the largest whose packets fit the\n"
    "                      interface MTU: 4096 on loopback, 1024 on 1500-byte Ethernet)\n"
    "  --pcap-dir DIR      each NIC writes DIR/<name>.pcap\n"
    "  --trace DIR         each NIC records its trace events as DIR/<name>.jsonl\n"
    "  --pcap-max-bytes N --trace-max-bytes N\n"
    "                      stop each file at its last whole record before it passes N bytes\n"
    "                      (K, M, G suffixes; default 1G). DIR must be yours and writable by\n"
    "                      nobody else, or sticky like /tmp (docs/security.md)\n"
    "  --loss P --dup P --reorder P --delay US --seed N\n"
    "                      fault injection on every NIC's outgoing packets\n"
    "  --trace-steps       trace the steps each packet walks in the engines (engine_steps)\n"
    "  --paused            start in step mode (see `simnic step`)\n"
    "  --no-history        keep no recent events for a viewer that attaches later (faster; for\n"
    "                      benchmarks)\n"
    "  --gso / --no-gso    always / never send runs of same-sized packets to one peer as one\n"
    "                      UDP GSO send. Default: GSO on loopback addresses while nobody captures\n"
    "                      lo (tcpdump, Wireshark), so captures show the packets (docs/wire.md)\n"
    "  --busy-poll-us N    each NIC keeps looking for work N microseconds after an event before\n"
    "                      it sleeps (0: sleep at once; default 0; docs/performance.md)\n"
    "  --one-process       run the N NICs as one simnicd, on one event loop, as the ports of one\n"
    "                      card: a message between them wakes no other process (a third less\n"
    "                      latency on a quiet machine; on a busy one the pair gets one process'\n"
    "                      share of the CPU: docs/performance.md). They stop and restart together\n"
    "                      (`simnic down` or `simnic restart` of one: all) and share one log\n"
    "  --verbose           verbose NIC logs\n";

// Where the NICs go: --iface NAME's first address, or --addr and the addresses counting up
// from it. Each must be this host's (every 127/8 address is), since a NIC binds its address
// and its GID is that address. Returns 0 or the exit code after saying why.
int check_addresses(const std::string& iface, bool addr_given, const std::string& first_name, int count,
                    uint32_t* base) {
  std::string why;
  if (!iface.empty()) {
    if (addr_given) {
      std::fprintf(stderr, "simnic up: give --addr or --iface, not both\n");
      return 2;
    }
    auto itf = io::interface_by_name(iface, &why);
    if (!itf) return std::fprintf(stderr, "simnic up: --iface %s: %s\n", iface.c_str(), why.c_str()), 2;
    *base = itf->ipv4;
  }
  if (!first_name.empty() && (count != 1 || first_name.size() > 60 || first_name.find('/') != std::string::npos ||
                              first_name == abi::kSysfsRootName)) {
    std::fprintf(
        stderr,
        "simnic up: --name names one NIC (N = 1), without '/', not \"%s\" (the directory of the NICs' sysfs root)\n",
        abi::kSysfsRootName);
    return 2;
  }
  for (int i = 0; i < count; ++i) {
    if (io::interface_with_address(*base + uint32_t(i), &why)) continue;
    std::fprintf(stderr, "simnic up: %s%s\n", why.c_str(),
                 i ? " (the NICs after the first count up from --addr: start one NIC per address of yours)" : "");
    return 2;
  }
  return 0;
}

// What `simnic up` was asked for: how many NICs, where, and the options every simnicd gets.
struct UpOptions {
  int count = 2;
  bool count_given = false;
  std::vector<std::string> common;  // passed through to every simnicd
  std::string pcap_dir, trace_dir;
  uint32_t base = 0x7f000001;  // 127.0.0.1
  LinkLayerSetup link;         // --link-layer, --gid-table, --lid-map
  bool addr_given = false;     // --addr, --iface, --name: where the NICs go and what they are called
  std::string iface, first_name;
  bool one_process = false;  // --one-process: one simnicd serves all N (simnicd --next)
};

// Options simnicd takes as they are: with a value, and without.
bool is_passed_with_value(const std::string& a) {
  return a == "--mtu" || a == "--loss" || a == "--dup" || a == "--reorder" || a == "--delay" || a == "--seed" ||
         a == "--busy-poll-us" || a == "--pcap-max-bytes" || a == "--trace-max-bytes";
}

bool is_passed_flag(const std::string& a) {
  return a == "--paused" || a == "--verbose" || a == "--no-history" || a == "--gso" || a == "--no-gso" ||
         a == "--trace-steps";
}

constexpr int kKeepGoing = -1;  // parse_up_arg: the argument was taken, go on

// The option that takes a string value into one of opt's fields, or nullptr.
std::string* string_option(const std::string& a, UpOptions* opt) {
  if (a == "--iface") return &opt->iface;
  if (a == "--name") return &opt->first_name;
  if (a == "--pcap-dir") return &opt->pcap_dir;
  if (a == "--trace" || a == "--trace-dir") return &opt->trace_dir;
  return nullptr;
}

int parse_count(const std::string& a, UpOptions* opt) {
  opt->count = std::atoi(a.c_str());
  opt->count_given = true;
  if (opt->count < 1 || opt->count > 250) {
    std::fprintf(stderr, "simnic up: N must be 1..250\n");
    return 2;
  }
  return kKeepGoing;
}

// Takes args[i] (and its value, advancing i); kKeepGoing, or the exit code `simnic up` ends with.
int parse_up_arg(const std::vector<std::string>& args, size_t& i, UpOptions* opt) {
  const std::string& a = args[i];
  auto value = [&](std::string* out) {
    if (i + 1 >= args.size()) return false;
    *out = args[++i];
    return true;
  };
  std::string v;
  if (a == "--help" || a == "-h") {
    std::fputs(kUpUsage, stdout);
    std::fputs(LinkLayerSetup::usage(), stdout);
    return 0;
  } else if (int taken = opt->link.parse(args, i)) {
    if (taken < 0) return 2;
  } else if (a == "--addr") {
    in_addr ia;
    if (!value(&v) || inet_pton(AF_INET, v.c_str(), &ia) != 1) {
      std::fprintf(stderr, "simnic up: --addr needs an IPv4 address A.B.C.D\n");
      return 2;
    }
    opt->base = ntohl(ia.s_addr);
    opt->addr_given = true;
  } else if (std::string* field = string_option(a, opt)) {
    if (!value(field)) return std::fputs(kUpUsage, stderr), 2;
  } else if (is_passed_with_value(a)) {
    if (!value(&v)) return std::fputs(kUpUsage, stderr), 2;
    opt->common.push_back(a);
    opt->common.push_back(v);
  } else if (a == "--one-process") {
    opt->one_process = true;
  } else if (is_passed_flag(a)) {
    opt->common.push_back(a);
  } else if (!a.empty() && std::isdigit(static_cast<unsigned char>(a[0]))) {
    return parse_count(a, opt);
  } else {
    std::fprintf(stderr, "simnic up: unknown argument '%s'\n%s", a.c_str(), kUpUsage);
    return 2;
  }
  return kKeepGoing;
}

// kKeepGoing once every argument is taken, or the exit code `simnic up` ends with.
int parse_up_args(const std::vector<std::string>& args, UpOptions* opt) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (int rc = parse_up_arg(args, i, opt); rc != kKeepGoing) return rc;
  }
  return kKeepGoing;
}

// The output directories are made for the user, as `mkdir -p` would; one made here is 0755
// whatever the umask, since simnicd refuses a directory others may write to (output_file.h).
bool make_output_dirs(const UpOptions& opt) {
  for (const std::string& out : {opt.pcap_dir, opt.trace_dir}) {
    if (out.empty()) continue;
    std::error_code ec;
    if (std::filesystem::create_directories(out, ec)) ::chmod(out.c_str(), 0755);
    if (ec) {
      std::fprintf(stderr, "simnic up: cannot create %s: %s\n", out.c_str(), ec.message().c_str());
      return false;
    }
  }
  return true;
}

struct Started {
  std::string name;
  pid_t pid;
  std::string addr;
};

std::vector<std::string> simnicd_args(const UpOptions& opt, const std::string& dir, const std::string& name,
                                      const char* addr) {
  std::vector<std::string> argv = {"--name", name, "--addr", addr, "--dir", dir};
  if (!opt.pcap_dir.empty()) argv.insert(argv.end(), {"--pcap", opt.pcap_dir + "/" + name + ".pcap"});
  if (!opt.trace_dir.empty()) argv.insert(argv.end(), {"--trace", opt.trace_dir + "/" + name + ".jsonl"});
  argv.insert(argv.end(), opt.common.begin(), opt.common.end());
  return argv;
}

// NIC i to start: its name, address and simnicd arguments. False if it already runs (said so)
// or its arguments could not be made (*failed set).
bool nic_to_start(const std::string& dir, UpOptions& opt, int i, Started* nic, std::vector<std::string>* argv,
                  bool* failed) {
  nic->name = opt.first_name.empty() ? "simnic" + std::to_string(i) : opt.first_name;
  if (query_nic(dir, nic->name, unsigned(abi::Op::Hello), "", nullptr) == 0) {
    std::printf("%s is already running (pid %d)\n", nic->name.c_str(), int(read_pid(dir, nic->name)));
    return false;
  }
  in_addr ia{htonl(opt.base + uint32_t(i))};
  char addr[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &ia, addr, sizeof addr);
  nic->addr = addr;
  *argv = simnicd_args(opt, dir, nic->name, addr);
  *failed = !opt.link.nic_args(nic->name, opt.base + uint32_t(i), argv);
  return !*failed;
}

// Spawns one simnicd for `nics` (with --one-process several, their arguments joined by --next;
// the others' logs are links to the first's). False if it could not be started.
bool spawn_nics(const std::string& simnicd, const std::string& dir, const std::vector<Started>& nics,
                const std::vector<std::string>& argv, std::vector<Started>* started) {
  const std::string log = log_path(dir, nics.front().name);
  pid_t pid = spawn(simnicd, argv, log);
  if (!pid) {
    std::fprintf(stderr, "simnic: cannot start %s: %s\n", nics.front().name.c_str(), std::strerror(errno));
    return false;
  }
  for (Started nic : nics) {
    if (nic.name != nics.front().name) {  // relative: the directory may be reached by another path
      rotate_log(log_path(dir, nic.name));
      [[maybe_unused]] int rc = ::symlink((nics.front().name + ".log").c_str(), log_path(dir, nic.name).c_str());
    }
    write_pid_file(abi::pid_file_path(dir, nic.name), pid);
    nic.pid = pid;
    started->push_back(nic);
  }
  return true;
}

enum class StartOutcome { kUp, kExited, kTimedOut };

// Waits until s answers on its control socket, or has died.
StartOutcome wait_for_start(const std::string& dir, const Started& s) {
  auto deadline = std::chrono::steady_clock::now() + 10s;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (query_nic(dir, s.name, unsigned(abi::Op::Hello), "", nullptr) == 0) return StartOutcome::kUp;
    if (::waitpid(s.pid, &status, WNOHANG) == s.pid) return StartOutcome::kExited;
    if (::kill(s.pid, 0) != 0 && errno == ESRCH) return StartOutcome::kExited;  // reaped for a NIC sharing it
    std::this_thread::sleep_for(20ms);
  }
  return StartOutcome::kTimedOut;
}

// A NIC that did not come up: stopped, its pid file removed, and why it failed (its log's
// tail, with a hint when its address was taken) told.
void report_failed_start(const std::string& dir, const Started& s, bool exited, uint32_t base) {
  if (!exited) ::kill(s.pid, SIGKILL);
  ::unlink(abi::pid_file_path(dir, s.name).c_str());
  const std::string why = tail_of(log_path(dir, s.name), 5);
  std::fprintf(stderr, "simnic: %s did not start%s:\n%s", s.name.c_str(), exited ? "" : " within 10 s", why.c_str());
  if (why.find("Address already in use") != std::string::npos && (base >> 24) != 127)
    std::fprintf(stderr,
                 "simnic: UDP port 4791 of that address is taken: another simnicd, or a RoCE device on "
                 "its interface (rdma_rxe); see docs/wire.md\n");
  else if (why.find("Address already in use") != std::string::npos)
    std::fprintf(stderr, "simnic: %s\n", explain_taken_address(s.addr).c_str());
}

// Starts the NICs and waits for each; the number that failed.
int start_and_wait(const std::string& simnicd, const std::string& dir, UpOptions& opt) {
  std::vector<Started> started, together;
  std::vector<std::string> together_argv;
  int failures = 0;
  for (int i = 0; i < opt.count; ++i) {
    Started nic{};
    std::vector<std::string> argv;
    bool failed = false;
    if (!nic_to_start(dir, opt, i, &nic, &argv, &failed)) {
      failures += failed;
      continue;
    }
    if (!opt.one_process) {
      failures += !spawn_nics(simnicd, dir, {nic}, argv, &started);
      continue;
    }
    if (!together.empty()) together_argv.push_back("--next");
    together_argv.insert(together_argv.end(), argv.begin(), argv.end());
    together.push_back(nic);
  }
  if (!together.empty() && !spawn_nics(simnicd, dir, together, together_argv, &started))
    failures += int(together.size());
  // The LID registry: NICs read it only when a program names a LID, after `simnic up` is done.
  if (!opt.link.commit()) ++failures;
  for (const auto& s : started) {
    StartOutcome outcome = wait_for_start(dir, s);
    if (outcome == StartOutcome::kUp) {
      std::printf("%s up (pid %d, log %s)\n", s.name.c_str(), int(s.pid), log_path(dir, s.name).c_str());
      continue;
    }
    ++failures;
    report_failed_start(dir, s, outcome == StartOutcome::kExited, opt.base);
  }
  return failures;
}

}  // namespace

int cmd_up(const std::vector<std::string>& args) {
  UpOptions opt;
  if (int rc = parse_up_args(args, &opt); rc != kKeepGoing) return rc;
  // A host has one address to give (its interface's), not a range: one NIC unless told more.
  if (!opt.count_given && (!opt.iface.empty() || !opt.first_name.empty() || (opt.base >> 24) != 127)) opt.count = 1;
  if (int rc = check_addresses(opt.iface, opt.addr_given, opt.first_name, opt.count, &opt.base)) return rc;
  const std::string simnicd = find_simnicd();
  if (simnicd.empty()) {
    std::fprintf(stderr, "simnic: simnicd not found next to %s/simnic; build it (cmake --build build)\n",
                 self_dir().c_str());
    return 1;
  }
  const std::string dir = state_dir(true);
  if (dir.empty() || !opt.link.begin(dir)) return 1;
  if (!make_output_dirs(opt)) return 1;
  return start_and_wait(simnicd, dir, opt) ? 1 : 0;
}

namespace {

// How long `simnic down` gives a NIC to stop after SIGTERM before it kills it. A NIC stops in
// milliseconds; the wait is long so that a loaded machine's stalled disk or CPU does not turn
// a clean stop into a kill.
constexpr std::chrono::seconds kStopWait{10};

// What a process that outlived its wait was doing: its state letter (io::ProcStat) and the
// kernel function it sleeps in, so that a NIC that does not stop says why in the message.
std::string where_it_waits(pid_t pid) {
  std::ifstream wchan_file("/proc/" + std::to_string(pid) + "/wchan");
  std::string wchan;
  std::getline(wchan_file, wchan);
  const char state = io::read_proc_stat(pid).state;
  return std::string("state ") + (state ? state : '?') + (wchan.empty() || wchan == "0" ? "" : ", waiting in " + wchan);
}

// The other NICs one simnicd serves with `name` (simnic up --one-process).
std::vector<std::string> sharing_process(const std::string& dir, const std::string& name, pid_t pid) {
  std::vector<std::string> others;
  for (const auto& other : list_nics(dir))
    if (other != name && read_pid(dir, other) == pid) others.push_back(other);
  return others;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

int cmd_down(const std::vector<std::string>& args) {
  const std::string dir = state_dir(false);
  if (dir.empty()) return 1;
  std::vector<std::string> names = args;
  if (names.empty()) names = list_nics(dir);
  if (names.empty()) {
    std::printf("no NIC is running in %s\n", dir.c_str());
    return 0;
  }
  int failures = 0;
  std::set<pid_t> stopped;  // a process serving several of the names (--one-process) stops once
  for (const auto& name : names) {
    pid_t pid = read_pid(dir, name);
    if (stopped.count(pid)) {
      ::unlink(abi::pid_file_path(dir, name).c_str());
      std::printf("%s stopped (pid %d)\n", name.c_str(), int(pid));
      continue;
    }
    if (pid <= 0 || !is_simnicd(pid)) {
      // Not running: clear what a crashed daemon left behind.
      bool stale = ::unlink(abi::control_socket_path(dir, name).c_str()) == 0;
      ::unlink(abi::pid_file_path(dir, name).c_str());
      std::printf("%s is not running%s\n", name.c_str(), stale ? " (removed its stale socket)" : "");
      continue;
    }
    const std::vector<std::string> others = sharing_process(dir, name, pid);
    if (!others.empty() && std::find(names.begin(), names.end(), others.front()) == names.end())
      std::printf("%s shares its process with %s (simnic up --one-process): they stop too\n", name.c_str(),
                  joined(others).c_str());
    ::kill(pid, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + kStopWait;
    while (std::chrono::steady_clock::now() < deadline && is_simnicd(pid)) std::this_thread::sleep_for(10ms);
    if (is_simnicd(pid)) {
      const std::string where = where_it_waits(pid);
      ::kill(pid, SIGKILL);
      std::fprintf(stderr, "simnic: %s (pid %d) did not stop within %lld s of SIGTERM (%s); killed\n", name.c_str(),
                   int(pid), static_cast<long long>(kStopWait.count()), where.c_str());
      ::unlink(abi::control_socket_path(dir, name).c_str());
      ++failures;
    }
    ::unlink(abi::pid_file_path(dir, name).c_str());
    std::printf("%s stopped (pid %d)\n", name.c_str(), int(pid));
    stopped.insert(pid);
    for (const auto& other : others)
      if (std::find(names.begin(), names.end(), other) == names.end()) ::unlink(abi::pid_file_path(dir, other).c_str());
  }
  return failures ? 1 : 0;
}

namespace {

// Waits until simnicd closes `fd` (its end of a control connection): at its exec every
// descriptor but the UDP socket closes.
bool wait_for_hangup(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, int(timeout.count())) != 1) return false;
  char c;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

bool wait_until_answering(const std::string& dir, const std::string& name, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (query_nic(dir, name, unsigned(abi::Op::Hello), "", nullptr) == 0) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// One NIC: SIGUSR2 makes simnicd execute itself anew with the same pid and command line and
// its UDP socket still bound (simnic/io/nic_server.cc, restart_in_place). Between `simnic down`
// and `simnic up` the address is free, and another user can bind it and receive the packets
// the NIC's peers keep sending (issue 29 point 3); here it never is.
int restart_one(const std::string& dir, const std::string& name) {
  pid_t pid = read_pid(dir, name);
  if (pid <= 0 || !is_simnicd(pid)) {
    std::fprintf(stderr, "simnic: %s is not running in %s; start it with `simnic up`\n", name.c_str(), dir.c_str());
    return 1;
  }
  const std::vector<std::string> others = sharing_process(dir, name, pid);
  std::string text;
  query_nic(dir, name, unsigned(abi::Op::Status), "", &text);
  const std::string addr = parse_kv(text)["addr"];
  std::string why;
  int held = abi::connect_nic(abi::control_socket_path(dir, name), &why);
  if (held < 0) {
    std::fprintf(stderr, "simnic: cannot reach %s: %s\n", name.c_str(),
                 why.empty() ? std::strerror(errno) : why.c_str());
    return 1;
  }
  ::kill(pid, SIGUSR2);
  const bool went = wait_for_hangup(held, 5s);
  ::close(held);
  bool answering = went && wait_until_answering(dir, name, 10s);
  for (const auto& other : others) answering = answering && wait_until_answering(dir, other, 10s);
  if (!answering) {
    std::fprintf(stderr, "simnic: %s did not restart%s:\n%s", name.c_str(),
                 went ? " (it exec'd but does not answer)" : "", tail_of(log_path(dir, name), 5).c_str());
    return 1;
  }
  std::printf("%s restarted in place (pid %d; %s:4791 stayed bound throughout)\n", name.c_str(), int(pid),
              addr.empty() ? "its address" : addr.c_str());
  if (!others.empty())
    std::printf("%s restarted with it: one process serves them (simnic up --one-process), each kept its address\n",
                joined(others).c_str());
  return 0;
}

}  // namespace

int cmd_restart(const std::vector<std::string>& args) {
  const std::string dir = state_dir(false);
  if (dir.empty()) return 1;
  std::vector<std::string> names = args.empty() ? list_nics(dir) : args;
  if (names.empty()) {
    std::printf("no NIC is running in %s\n", dir.c_str());
    return 1;
  }
  int failures = 0;
  std::set<pid_t> restarted;  // a process serving several of the names restarts once
  for (const auto& name : names) {
    const pid_t pid = read_pid(dir, name);
    if (pid <= 0 || restarted.insert(pid).second) failures += restart_one(dir, name);  // each not running says so
  }
  return failures ? 1 : 0;
}

}  // namespace simnic::cli
