// `simnic status`, `simnic fault` and `simnic step`: talking to running NICs.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <unistd.h>

#include "simnic/abi/control.h"
#include "simnic/abi/paths.h"
#include "simnic/abi/seqpacket.h"
#include "simnic/cli/cli.h"

namespace simnic::cli {
namespace {

uint64_t num(std::map<std::string, std::string>& kv, const char* key) {
  auto it = kv.find(key);
  return it == kv.end() ? 0 : std::strtoull(it->second.c_str(), nullptr, 10);
}

int not_running(const std::string& dir, const std::string& name, int err) {
  std::fprintf(stderr, "simnic: %s is not running in %s (%s); start it with `simnic up`\n", name.c_str(), dir.c_str(),
               std::strerror(err));
  return 1;
}

// Whether the NIC is really gone: nobody accepts on its socket any more (ECONNREFUSED: a socket
// file left behind by a dead simnicd; ENOENT: no socket). A reply that could not be read, or a
// NIC too busy to answer, says nothing of the kind, and `simnic down` would stop a live NIC.
bool nic_gone(const std::string& dir, const std::string& name) {
  int s = abi::connect_control(abi::control_socket_path(dir, name));
  if (s >= 0) return ::close(s), false;
  return errno == ECONNREFUSED || errno == ENOENT;
}

// What went wrong with a NIC that is running but whose answer we could not use.
std::string unreadable_reply(int err) {
  const char* what = err == EPROTO       ? "answered with a reply simnic cannot read (EPROTO)"
                     : err == EMSGSIZE   ? "answered with a reply too large to read (EMSGSIZE)"
                     : err == ECONNRESET ? "closed the connection before answering"
                                         : nullptr;
  return what ? what : std::string("answered with an error: ") + std::strerror(err);
}

// Sends a text command (SetFault or Step) to each named NIC, or to all when none is named.
int text_command(abi::Op op, const std::vector<std::string>& names, const std::string& body) {
  const std::string dir = state_dir(false);
  if (dir.empty()) return 1;
  std::vector<std::string> targets = names.empty() ? list_nics(dir) : names;
  if (targets.empty()) {
    std::fprintf(stderr, "simnic: no NIC is running in %s; start them with `simnic up`\n", dir.c_str());
    return 1;
  }
  int rc = 0;
  for (const auto& name : targets) {
    std::string text;
    int st = query_nic(dir, name, unsigned(op), body, &text);
    if (st == ECONNREFUSED || st == ENOENT) {
      rc = not_running(dir, name, st);
      continue;
    }
    if (!text.empty() && text.back() != '\n') text += '\n';
    std::printf("%s: %s", name.c_str(), text.empty() ? "ok\n" : text.c_str());
    if (st) {
      std::fprintf(stderr, "simnic: %s refused '%s': %s\n", name.c_str(), body.c_str(), std::strerror(st));
      rc = 1;
    }
  }
  return rc;
}

bool is_nic_name(const std::string& s) { return s.rfind("simnic", 0) == 0 || s.find('=') == std::string::npos; }

}  // namespace

constexpr const char* kStatusUsage =
    "usage: simnic status [NAME...] [--raw]\n"
    "Without NAME: one line per running NIC (address, pid, MTU, contexts, QPs, packets,\n"
    "retransmissions, drops, completion errors). With NAME: that NIC's counters grouped, each\n"
    "with what it counts, and its QPs; --raw prints every counter as 'key value' lines.\n";

int cmd_status(const std::vector<std::string>& all_args) {
  std::vector<std::string> args;
  bool raw = false;
  for (const auto& a : all_args) {
    if (a == "--help" || a == "-h") return std::fputs(kStatusUsage, stdout), 0;
    if (a == "--raw") raw = true;
    else if (a.rfind("-", 0) == 0)
      return std::fprintf(stderr, "simnic status: unknown option %s\n%s", a.c_str(), kStatusUsage), 2;
    else args.push_back(a);
  }
  const std::string dir = state_dir(false);
  if (dir.empty()) return 1;
  std::vector<std::string> names = args.empty() ? list_nics(dir) : args;
  if (names.empty()) {
    std::printf("no NIC is running in %s; start them with `simnic up`\n", dir.c_str());
    return 1;
  }
  if (args.empty())
    std::printf("%-10s %-15s %7s %5s %4s %4s %10s %10s %6s %6s %6s\n", "NIC", "ADDRESS", "PID", "MTU", "CTX", "QPS",
                "TX_PKTS", "RX_PKTS", "RETX", "DROPS", "ERRORS");
  int rc = 0;
  for (const auto& name : names) {
    std::string text;
    int st = query_nic(dir, name, unsigned(abi::Op::Status), "", &text);
    if (st == EAGAIN || st == EWOULDBLOCK) {  // connected, but no answer within the timeout
      std::printf("%-10s not answering (busy or stuck; see %s/%s.log)\n", name.c_str(), dir.c_str(), name.c_str());
      rc = 1;
      continue;
    }
    if (st && nic_gone(dir, name)) {
      rc = args.empty() ? (std::printf("%-10s not running (stale socket; `simnic down %s` clears it)\n", name.c_str(),
                                       name.c_str()),
                           1)
                        : not_running(dir, name, st);
      continue;
    }
    if (st) {  // it runs: never advise `simnic down` for a reply we could not read
      std::printf("%-10s is running but %s; the NIC is left as it is (its log: %s/%s.log)\n", name.c_str(),
                  unreadable_reply(st).c_str(), dir.c_str(), name.c_str());
      rc = 1;
      continue;
    }
    auto kv = parse_kv(text);
    if (!args.empty()) {  // one NIC in full: every counter
      if (raw) std::printf("%s", text.c_str());
      else print_status_view(name, text);
      continue;
    }
    // Every packet or message the NIC lost on purpose or had to discard.
    uint64_t drops = 0;
    for (const auto& [key, value] : kv)
      if (key.rfind("rx_drop_", 0) == 0 || key == "fault_drops") drops += std::strtoull(value.c_str(), nullptr, 10);
    std::printf("%-10s %-15s %7s %5s %4s %4s %10llu %10llu %6llu %6llu %6llu\n", name.c_str(), kv["addr"].c_str(),
                kv["pid"].c_str(), kv["mtu"].c_str(), kv["contexts"].c_str(), kv["qps"].c_str(),
                (unsigned long long)num(kv, "tx_packets"), (unsigned long long)num(kv, "rx_packets"),
                (unsigned long long)num(kv, "retransmits"), (unsigned long long)drops,
                (unsigned long long)num(kv, "completion_errors"));
  }
  if (args.empty()) std::printf("(details: simnic status NAME)\n");
  return rc;
}

// simnic fault [NAME...] loss=P dup=P reorder=P delay=US seed=N | off
int cmd_fault(const std::vector<std::string>& args) {
  std::vector<std::string> names;
  std::string body;
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      std::puts(
          "usage: simnic fault [NAME...] loss=P dup=P reorder=P delay=US seed=N | off\n"
          "Changes fault injection on outgoing packets of the named NICs (default: all).\n"
          "With no setting, shows the current one.");
      return 0;
    }
    if (a != "off" && is_nic_name(a)) names.push_back(a);
    else body += (body.empty() ? "" : " ") + a;
  }
  return text_command(abi::Op::SetFault, names, body);
}

// simnic step [NAME...] on | off | next [N] | status
int cmd_step(const std::vector<std::string>& args) {
  std::vector<std::string> names;
  std::string body;
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      std::puts(
          "usage: simnic step [NAME...] on | off | next [N] | status\n"
          "Step mode holds every event (packets, doorbells, timers) of the named NICs\n"
          "(default: all) until `next` releases N of them (default 1).");
      return 0;
    }
    if (a.rfind("simnic", 0) == 0) names.push_back(a);
    else body += (body.empty() ? "" : " ") + a;
  }
  if (body.empty()) body = "status";
  return text_command(abi::Op::Step, names, body);
}

}  // namespace simnic::cli
