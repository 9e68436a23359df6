// `simnic bench --load KIND`: the busy machine of issue 26 (a CI runner, a class server), for
// the whole run, TCP baseline and simnic alike:
//   cpu      one busy loop per CPU at nice 0 (a compiler, a test suite: they compete with the
//            NICs and the applications as equals, unlike --spin's nice-19 spinners)
//   traffic  a second pair of NICs on other loopback addresses, streaming without pause:
//            ib_write_bw over 16 QPs and ib_send_bw, both busy-polling their CQs, restarted
//            every 10 s until the run ends
//   all      both
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "simnic/cli/bench.h"
#include "simnic/cli/cli.h"

namespace simnic::cli::bench {
namespace {

using namespace std::chrono_literals;

// The load NICs' first address: the bench NICs' with the second byte one lower (127.254.N.1
// -> 127.253.N.1), so the two pairs never share an address.
std::string load_addr(const std::string& nic_addr) {
  const size_t a = nic_addr.find('.'), b = nic_addr.find('.', a + 1);
  if (a == std::string::npos || b == std::string::npos) return "127.253.1.1";
  const int second = std::atoi(nic_addr.substr(a + 1, b - a - 1).c_str());
  return nic_addr.substr(0, a + 1) + std::to_string(second > 1 ? second - 1 : second + 1) + nic_addr.substr(b);
}

// One perftest pair on the load NICs, run again and again until this process is killed (its
// children die with it: spawn's parent-death signal).
[[noreturn]] void repeat_pair(const std::string& dir, const std::string& binary, std::vector<std::string> args,
                              const std::string& log) {
  ::setenv("SIMNIC_DIR", dir.c_str(), 1);
  const std::string simnic = self_dir() + "/simnic";
  for (;;) {
    const int port = free_tcp_port();
    auto side = [&](const char* nic) {
      std::vector<std::string> v = {simnic, "run", "--quiet",           "--", binary, "-d", nic, "-x",
                                    "0",    "-p",  std::to_string(port)};
      v.insert(v.end(), args.begin(), args.end());
      return v;
    };
    const pid_t server = spawn(side("simnic0"), log);
    wait_for_listener(port, 15s);
    std::vector<std::string> client = side("simnic1");
    client.push_back("127.0.0.1");
    wait_for(spawn(client, log), 60s);
    wait_for(server, 15s);
    std::this_thread::sleep_for(200ms);
  }
}

pid_t start_repeating(const std::string& dir, const std::string& binary, const std::vector<std::string>& args,
                      const std::string& log) {
  const pid_t pid = ::fork();
  if (pid != 0) {
    if (pid > 0) track_pid(pid);
    return pid;
  }
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::prctl(PR_SET_NAME, "simnic-load");
  repeat_pair(dir, binary, args, log);
}

std::vector<pid_t> start_cpu_hogs(int count) {
  std::vector<pid_t> pids;
  for (int i = 0; i < count; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) break;
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, SIG_DFL);
      ::setpriority(PRIO_PROCESS, 0, 0);
      ::prctl(PR_SET_NAME, "simnic-hog");
      for (;;) asm volatile("");
    }
    track_pid(pid);
    pids.push_back(pid);
  }
  return pids;
}

// The second NIC pair, in its own private SIMNIC_DIR.
bool start_load_nics(Load* load, const std::string& nic_addr, const std::string& log_dir) {
  char tmpl[] = "/tmp/simnic-bench-load-XXXXXX";
  if (!::mkdtemp(tmpl)) return false;
  load->dir = tmpl;
  const char* old = std::getenv("SIMNIC_DIR");
  const std::string saved = old ? old : "";
  ::setenv("SIMNIC_DIR", load->dir.c_str(), 1);
  const Outcome up = run_logged({self_dir() + "/simnic", "up", "2", "--addr", load_addr(nic_addr), "--no-history"},
                                log_dir + "/load-up.log", 60s);
  if (saved.empty()) ::unsetenv("SIMNIC_DIR");
  else ::setenv("SIMNIC_DIR", saved.c_str(), 1);
  return up.exit_code == 0;
}

}  // namespace

bool valid_load_kind(const std::string& kind) { return kind == "cpu" || kind == "traffic" || kind == "all"; }

Load start_load(const std::string& kind, int nproc, const std::string& nic_addr, const std::string& log_dir) {
  Load load;
  load.kind = kind;
  if (kind == "cpu" || kind == "all") load.pids = start_cpu_hogs(nproc);
  if (kind == "traffic" || kind == "all") {
    if (!start_load_nics(&load, nic_addr, log_dir)) {
      std::fprintf(stderr, "simnic bench: the load NICs did not start (%s/load-up.log)\n", log_dir.c_str());
      return load;
    }
    const std::string log = log_dir + "/load-traffic.log";
    load.pids.push_back(start_repeating(load.dir, "ib_write_bw", {"-s", "65536", "-q", "16", "-D", "10", "-F"}, log));
    load.pids.push_back(start_repeating(load.dir, "ib_send_bw", {"-s", "4096", "-D", "10", "-F"}, log));
  }
  return load;
}

void stop_load(Load* load, const std::string& log_dir) {
  for (pid_t pid : load->pids) kill_and_reap(pid), untrack_pid(pid);
  load->pids.clear();
  if (load->dir.empty()) return;
  const char* old = std::getenv("SIMNIC_DIR");
  const std::string saved = old ? old : "";
  ::setenv("SIMNIC_DIR", load->dir.c_str(), 1);
  run_logged({self_dir() + "/simnic", "down"}, log_dir + "/load-down.log", 30s);
  if (saved.empty()) ::unsetenv("SIMNIC_DIR");
  else ::setenv("SIMNIC_DIR", saved.c_str(), 1);
  std::error_code ec;
  std::filesystem::remove_all(load->dir, ec);
  load->dir.clear();
}

}  // namespace simnic::cli::bench
