// What the middleware tests share besides the integration harness (harness.h): running the NICs
// and the programs as this user or as uid 65534 (nobody), and reading the NICs' packet counters,
// which every test checks so that a silent fallback to another transport fails it.
#pragma once
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "harness.h"

namespace simnic::it {

using StatusMap = std::map<std::string, std::string>;

constexpr uid_t kNobody = 65534;

// The prefix that runs a command as uid 65534 with no supplementary groups (needs root).
inline std::vector<std::string> as_nobody() { return {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}; }

inline std::string nic_name(int i) { return "simnic" + std::to_string(i); }

// `simnic status NIC --raw` parsed into its "key value" lines, as Nics::status does.
inline StatusMap parse_status(const std::string& raw) {
  StatusMap kv;
  std::istringstream in(raw);
  for (std::string line; std::getline(in, line);)
    if (auto sp = line.find(' '); sp != std::string::npos) kv[line.substr(0, sp)] = line.substr(sp + 1);
  return kv;
}

// One counter of a parsed status; a missing one fails the test (and reads 0).
inline uint64_t counter_in(const StatusMap& status, const std::string& key) {
  auto it = status.find(key);
  if (it == status.end()) {
    ADD_FAILURE() << "no " << key << " in simnic status --raw";
    return 0;
  }
  return std::stoull(it->second);
}

// A NIC's packet counters: what it sent and received over its UDP socket.
struct Packets {
  uint64_t tx = 0, rx = 0;
  uint64_t total() const { return tx + rx; }
};

// The packet counters of `nic`, read through anything with status(nic): Nics or Runner.
template <class Source>
Packets packets(const Source& from, const std::string& nic) {
  const StatusMap st = from.status(nic);
  return {counter_in(st, "tx_packets"), counter_in(st, "rx_packets")};
}

// The packet counters of simnic0 .. simnic<count-1>, to compare before and after a run.
template <class Source>
std::vector<Packets> packets_of_nics(const Source& from, int count) {
  std::vector<Packets> out;
  for (int i = 0; i < count; ++i) out.push_back(packets(from, nic_name(i)));
  return out;
}

// Who runs the NICs and the programs: `prefix` (empty, or as_nobody()) before each command,
// with SIMNIC_DIR in the environment, no LD_PRELOAD but simnic run's, and the device nodes on.
struct Runner {
  std::vector<std::string> prefix;
  std::string dir;

  std::vector<std::string> command(const std::vector<std::string>& argv) const {
    std::vector<std::string> full = prefix;
    full.insert(full.end(), argv.begin(), argv.end());
    return full;
  }
  // `simnic run [opts] -- argv`.
  std::vector<std::string> simnic_run(const std::vector<std::string>& opts,
                                      const std::vector<std::string>& argv) const {
    std::vector<std::string> full = {bin_dir() + "/simnic", "run"};
    full.insert(full.end(), opts.begin(), opts.end());
    full.push_back("--");
    full.insert(full.end(), argv.begin(), argv.end());
    return command(full);
  }
  std::vector<std::string> simnic_run(const std::vector<std::string>& argv) const { return simnic_run({}, argv); }
  std::map<std::string, std::string> env(std::map<std::string, std::string> extra = {}) const {
    extra["SIMNIC_DIR"] = dir;
    extra["LD_PRELOAD"] = "";  // nothing inherited: the preload is simnic run's
    extra["SIMNIC_DEVNODES"] = "1";
    return extra;
  }
  StatusMap status(const std::string& nic) const {
    using namespace std::chrono_literals;
    return parse_status(run(command({bin_dir() + "/simnic", "status", nic, "--raw"}), env(), 10s).output);
  }
};

// This user, on the harness's NICs.
inline Runner runner_for(const Nics& nics) { return Runner{{}, nics.dir()}; }

// Why programs cannot run as uid 65534 here ("" if they can): it takes root, setpriv, and a
// build tree uid 65534 can use (simnic and the shim's libraries; a private one is closed to it).
inline std::string nobody_cannot_run() {
  using namespace std::chrono_literals;
  if (::geteuid() != 0) return "needs root to run the programs as uid 65534 (setpriv)";
  if (!have_program("setpriv")) return "needs setpriv (Debian package util-linux)";
  std::vector<std::string> probe = as_nobody();
  for (const std::string& a : {std::string("test"), std::string("-x"), bin_dir() + "/simnic", std::string("-a"),
                               std::string("-r"), shim_dir() + "/libsimnic_devnode.so"})
    probe.push_back(a);
  if (run(probe, {}, 10s).exit_code != 0)
    return "uid 65534 cannot run " + bin_dir() + "/simnic or read " + shim_dir() + " (a private build tree)";
  return "";
}

// `count` NICs started by uid 65534 in a SIMNIC_DIR it owns (/tmp/simnic-mw-<tag>-nobody-*), on
// a loopback block of their own: simnic refuses an address another user's NIC holds, so a taken
// block is retried elsewhere. Stopped, and killed by pid, at the end.
class NobodyNics {
 public:
  NobodyNics(int count, const std::string& tag) : count_(count) {
    using namespace std::chrono_literals;
    who.prefix = as_nobody();
    static std::random_device rd;
    for (int attempt = 0; attempt < 8; ++attempt) {
      std::string tmpl = "/tmp/simnic-mw-" + tag + "-nobody-XXXXXX";
      if (!::mkdtemp(tmpl.data())) return;
      who.dir = tmpl;  // removed by stop() from here on
      if (::chown(tmpl.c_str(), kNobody, kNobody) != 0) return;
      base_ = "127." + std::to_string(16 + rd() % 200) + "." + std::to_string(1 + rd() % 250) + ".";
      up = run(who.command({bin_dir() + "/simnic", "up", std::to_string(count), "--addr", addr(0)}), who.env(), 30s);
      if (up.exit_code == 0 || up.output.find("Address already in use") == std::string::npos) return;
      stop();
    }
  }
  ~NobodyNics() { stop(); }
  NobodyNics(const NobodyNics&) = delete;
  NobodyNics& operator=(const NobodyNics&) = delete;
  bool ok() const { return up.exit_code == 0; }
  std::string addr(int i) const { return base_ + std::to_string(1 + i); }  // NIC i's address
  Runner who;
  Result up;

 private:
  void stop() {
    using namespace std::chrono_literals;
    if (who.dir.empty()) return;
    std::vector<pid_t> pids;
    for (int i = 0; i < count_; ++i) {
      std::ifstream in(who.dir + "/" + nic_name(i) + ".pid");
      long pid = 0;
      if (in >> pid && pid > 0) pids.push_back(pid_t(pid));
    }
    run(who.command({bin_dir() + "/simnic", "down"}), who.env(), 30s);
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    std::error_code ec;
    std::filesystem::remove_all(who.dir, ec);
    who.dir.clear();
  }
  int count_;
  std::string base_;
};

}  // namespace simnic::it
