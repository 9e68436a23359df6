// `simnic status NAME`: one NIC's counters grouped, each with a line saying what it counts,
// and its QPs with their state, peer and PSNs. `--raw` prints the NIC's own "key value" lines
// (every counter, for scripts and tests).
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "simnic/abi/device_counters.h"
#include "simnic/cli/cli.h"

namespace simnic::cli {
namespace {

// A counter, and what it counts: the device counters' meanings come from their table
// (simnic/abi/device_counters.h); the others (objects, the socket, output files) are the I/O
// layer's and say here what they count.
struct Row {
  const char* key;
  const char* meaning = nullptr;
  const char* what() const { return meaning ? meaning : abi::device_counter_meaning(key); }
};
struct Group {
  const char* title;
  std::vector<Row> rows;
};

const std::vector<Group>& groups() {
  static const std::vector<Group> kGroups = {
      {"Objects",
       {{"contexts", "programs (ibv_open_device) using this NIC"},
        {"pds", "protection domains"},
        {"mrs", "registered memory regions"},
        {"mws", "memory windows"},
        {"cqs", "completion queues"},
        {"qps", "queue pairs"},
        {"srqs", "shared receive queues"}}},
      {"Traffic",
       {{"tx_packets"},
        {"tx_bytes"},
        {"direct_sends"},
        {"rx_packets"},
        {"rx_bytes"},
        {"acks_sent"},
        {"acks_received"},
        {"mcast_tx_packets"},
        {"mcast_deliveries"}}},
      {"Reliability (RC)",
       {{"retransmits"},
        {"timeouts"},
        {"timeouts_deferred"},
        {"naks_sent"},
        {"naks_received"},
        {"rnr_naks_sent"},
        {"rnr_naks_received"},
        {"receive_waits"},
        {"duplicates"}}},
      {"Back-pressure (the window towards each peer NIC, docs/congestion.md)",
       {{"cc_window_cap", "bytes in flight allowed towards one peer, all QPs together"},
        {"cc_window_min", "the smallest peer window now (halved on loss, regrown by ACKs)"},
        {"cc_in_flight", "bytes in flight now, all peers"},
        {"cc_waiting_qps", "QPs waiting now for credit towards their peer"},
        {"cc_waits", "times a QP found its peer's window full and waited"},
        {"cc_wakeups", "times a waiting QP was resumed by freed credit"},
        {"cc_cuts", "window halvings: a timeout or a sequence NAK (loss)"},
        {"rx_socket_buffer", "the UDP receive buffer the kernel gave this NIC (bytes)"},
        {"rx_socket_buffer_forced", "1: SO_RCVBUFFORCE (root) got past net.core.rmem_max"}}},
      {"Drops (packets discarded, by reason)",
       {{"rx_drop_malformed"},
        {"rx_drop_icrc"},
        {"rx_drop_no_qp"},
        {"rx_drop_qp_state"},
        {"rx_drop_wrong_source"},
        {"rx_drop_unexpected"},
        {"rx_drop_qkey"},
        {"rx_drop_no_wqe"},
        {"rx_drop_ud_too_long"},
        {"rx_drop_ud_throttled"},
        {"rx_drop_uc_message"},
        {"rx_drop_out_of_sequence"},
        {"rx_drop_mcast"},
        {"rx_drop_bad_msn"},
        {"rx_drop_socket_overflow", "datagrams the kernel dropped: the NIC's receive buffer was full"},
        {"fault_drops", "packets the fault injector dropped on purpose (simnic fault)"},
        {"fault_dups", "packets the fault injector duplicated"},
        {"fault_delayed", "packets the fault injector held back"},
        {"tx_socket_drops", "packets the kernel would not send (its send buffer was full)"},
        {"tx_too_big", "of those, larger than the interface MTU (lowered since the NIC started?)"}}},
      {"Completions",
       {{"completions"},
        {"completion_errors"},
        {"cq_overruns"},
        {"dma_errors"},
        {"event_drops", "events a program's full socket could not take"}}},
      {"Output files (--pcap-dir, --trace; docs/security.md)",
       {{"pcap_bytes", "bytes in the pcap file"},
        {"pcap_max_bytes", "its size limit (--pcap-max-bytes)"},
        {"pcap_records_lost", "packets not captured: the file stopped (its limit, or a failed write)"},
        {"pcap_stopped", "no, size_limit or write_error (a full disk: cut back to its last whole record)"},
        {"trace_bytes", "bytes in the trace file"},
        {"trace_max_bytes", "its size limit (--trace-max-bytes)"},
        {"trace_records_lost", "trace lines not written: the file stopped (its limit, or a failed write)"},
        {"trace_stopped", "no, size_limit or write_error (a full disk: cut back to its last whole line)"}}},
  };
  return kGroups;
}

void print_groups(std::map<std::string, std::string>& kv) {
  for (const Group& g : groups()) {
    std::printf("\n%s\n", g.title);
    for (const Row& r : g.rows) {
      auto it = kv.find(r.key);
      if (it == kv.end()) continue;
      std::printf("  %-24s %12s  %s\n", r.key, it->second.c_str(), r.what());
      kv.erase(it);
    }
  }
}

void print_qps(const std::map<std::string, std::string>& kv) {
  std::vector<std::string> lines;
  for (const auto& [key, value] : kv)
    if (key.rfind("qp.", 0) == 0) lines.push_back(key.substr(3) + "  " + value);
  std::printf("\nQPs (QPN, type, state, peer address/QPN, PSNs: next to send, oldest unacknowledged, expected)\n");
  if (lines.empty()) std::printf("  none\n");
  for (const auto& l : lines) std::printf("  %s\n", l.c_str());
}

}  // namespace

namespace {

// How packets leave: one datagram each, or runs of them as one UDP GSO send (--gso / --no-gso).
void print_gso_line(std::map<std::string, std::string>& kv) {
  if (kv["gso_mode"].empty()) return;
  const bool on = kv["gso"] == "1";
  const std::string now = on ? "a run of same-sized packets goes to the kernel as one UDP GSO send (faster)"
                             : "one UDP datagram per packet";
  if (kv["gso_mode"] == "auto" && on)
    std::printf(
        "sending: %s; switched off while anyone captures lo, so captures show single packets "
        "(a capture stopped it %s times so far)\n",
        now.c_str(), kv["gso_capture_seen"].c_str());
  else if (kv["gso_mode"] == "auto")
    std::printf("sending: %s (lo is being captured, or the NIC is not on loopback; --gso forces GSO)\n", now.c_str());
  else std::printf("sending: %s (--%sgso)\n", now.c_str(), kv["gso_mode"] == "on" ? "" : "no-");
}

// How the NIC reaches the applications' registered memory: mapped (shared pages) or by pid.
void print_memory_line(std::map<std::string, std::string>& kv) {
  if (kv["dma_bytes_shared"].empty()) return;
  std::printf(
      "memory: %s regions of registered pages mapped (%s bytes); moved %s bytes through them with memcpy, %s bytes "
      "with "
      "process_vm_* (docs/shim.md, \"Shared pages\")\n",
      kv["shared_views"].c_str(), kv["shared_view_bytes"].c_str(), kv["dma_bytes_shared"].c_str(),
      kv["dma_bytes_by_pid"].c_str());
}

}  // namespace

void print_status_view(const std::string& name, const std::string& text) {
  auto kv = parse_kv(text);
  std::printf("%s  %s  pid %s  MTU %s  (every counter as 'key value': simnic status %s --raw)\n", name.c_str(),
              kv["addr"].c_str(), kv["pid"].c_str(), kv["mtu"].c_str(), name.c_str());
  if (!kv["iface"].empty())
    std::printf("on interface %s (link MTU %s bytes)\n", kv["iface"].c_str(), kv["link_mtu"].c_str());
  if (kv["faults"] != "" && kv["faults"].find("loss=0 dup=0 reorder=0 delay_us=0") != 0)
    std::printf("fault injection: %s\n", kv["faults"].c_str());
  if (kv["paused"] == "1") std::printf("paused in step mode (simnic step %s next)\n", name.c_str());
  if (kv["busy_poll_us"] == "0")
    std::printf("event loop: sleeps in epoll as soon as nothing is ready (--busy-poll-us 0)\n");
  else if (!kv["busy_poll_us"].empty())
    std::printf(
        "event loop: polls for up to %s us after each event before sleeping (%s events found so; %s "
        "windows ran out, %s gave way to a task waiting for a CPU)\n",
        kv["busy_poll_us"].c_str(), kv["busy_poll_found"].c_str(), kv["busy_poll_sleeps"].c_str(),
        kv["busy_poll_gave_way"].c_str());
  print_gso_line(kv);
  print_memory_line(kv);
  if (kv["link_layer"] == "ib")
    std::printf("InfiniBand port: LID %s, subnet manager at LID %s (docs/link-layer.md)\n", kv["lid"].c_str(),
                kv["sm_lid"].c_str());
  else if (!kv["gid_table"].empty() && kv["gid_table"] != "simple")
    std::printf("RoCE port, %s GID table (ibv_devinfo -v lists it)\n", kv["gid_table"].c_str());
  print_groups(kv);
  print_qps(kv);
}

}  // namespace simnic::cli
