// An in-memory world for the NIC core: fake host memory, heap "shared" memory, a fabric that
// carries packets between Devices under test control, and a manual clock. Deterministic.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "simnic/abi/rings.h"
#include "simnic/core/device.h"

namespace simnic::testing {

// One fake process address space per pid: a flat buffer at a fixed base address.
class FakeMemory : public core::HostMemory {
 public:
  static constexpr uint64_t kBase = 0x10000000;
  std::vector<uint8_t>& space(pid_t pid) {
    auto& v = spaces_[pid];
    if (v.empty()) v.resize(1 << 22);
    return v;
  }
  uint64_t addr(pid_t pid, size_t offset) {
    space(pid);
    return kBase + offset;
  }
  uint8_t* ptr(pid_t pid, size_t offset) { return space(pid).data() + offset; }
  int read(pid_t pid, uint64_t addr, void* dst, size_t len) override {
    ++read_calls[pid];
    if (fail_reads_at && addr <= fail_reads_at && fail_reads_at < addr + len) return EFAULT;
    auto* p = locate(pid, addr, len);
    if (!p) return EFAULT;
    std::memcpy(dst, p, len);
    return 0;
  }
  int write(pid_t pid, uint64_t addr, const void* src, size_t len) override {
    ++write_calls[pid];
    return store(pid, addr, src, len);
  }
  // With `defer` on, writes the NIC may queue wait for flush(), as ProcessMemory's do; each
  // flush counts one call per process written (ProcessMemory: one process_vm_writev each).
  int write_later(pid_t pid, uint64_t addr, const void* src, size_t len) override {
    if (!defer) return write(pid, addr, src, len);
    const auto* p = static_cast<const uint8_t*>(src);
    queue_.push_back({pid, addr, std::vector<uint8_t>(p, p + len)});
    return 0;
  }
  bool queued() const override { return !queue_.empty(); }
  // Whether the programs count as running or waiting for a CPU (a receive wait's extension).
  bool programs_runnable = false;
  bool runnable(pid_t) override { return programs_runnable; }
  void flush(std::vector<FailedWrite>* failed) override {
    if (on_flush) on_flush();
    std::set<pid_t> pids;
    for (auto& q : queue_) {
      pids.insert(q.pid);
      if (int e = store(q.pid, q.addr, q.bytes.data(), q.bytes.size()))
        failed->push_back({q.pid, q.addr, q.bytes.size(), e});
    }
    for (pid_t p : pids) ++flush_calls[p];
    queue_.clear();
  }
  int writes = 0;
  std::map<pid_t, int> read_calls, write_calls, flush_calls;  // DMA system calls simnicd would make
  bool defer = false;
  std::function<void()> on_flush;  // runs as a flush starts, before any queued byte lands
  uint64_t poisoned = 0;           // an address whose writes fail, as if unmapped after registration
  uint64_t fail_reads_at = 0;      // an address whose reads fail

 private:
  uint8_t* locate(pid_t pid, uint64_t addr, size_t len) {
    auto it = spaces_.find(pid);
    if (it == spaces_.end() || addr < kBase || addr - kBase + len > it->second.size()) return nullptr;
    return it->second.data() + (addr - kBase);
  }
  int store(pid_t pid, uint64_t addr, const void* src, size_t len) {
    auto* p = locate(pid, addr, len);
    if (!p) return EFAULT;
    if (poisoned && addr <= poisoned && poisoned < addr + len) return EFAULT;  // a page that went away
    std::memcpy(p, src, len);
    ++writes;
    return 0;
  }
  struct Queued {
    pid_t pid;
    uint64_t addr;
    std::vector<uint8_t> bytes;
  };
  std::map<pid_t, std::vector<uint8_t>> spaces_;
  std::vector<Queued> queue_;
};

class HeapShm : public core::ShmAllocator {
 public:
  bool allocate(size_t size, const std::string&, core::ShmRegion* out, int*) override {
    out->addr = std::aligned_alloc(4096, (size + 4095) / 4096 * 4096);
    std::memset(out->addr, 0, (size + 4095) / 4096 * 4096);
    out->size = size;
    out->fd = -1;
    return true;
  }
  void release(core::ShmRegion& r) override {
    std::free(r.addr);
    r = {};
  }
};

class RecordingNotifier : public core::Notifier {
 public:
  void completion_event(int fd, uint32_t cq) override { events.push_back({fd, cq}); }
  void async_event(int, uint32_t type, uint32_t handle) override { async.push_back({type, handle}); }
  void release_fd(int) override {}
  void wake_sleepers(std::atomic<uint32_t>* word) override { wakes.push_back(word); }
  std::vector<std::pair<int, uint32_t>> events;
  std::vector<std::atomic<uint32_t>*> wakes;  // futex words woken (context pages)
  std::vector<std::pair<uint32_t, uint32_t>> async;
};

class CapturingLogger : public core::Logger {
 public:
  void log(core::LogLevel, const std::string& line) override { lines.push_back(line); }
  bool contains(const std::string& s) const {
    for (auto& l : lines)
      if (l.find(s) != std::string::npos) return true;
    return false;
  }
  std::vector<std::string> lines;
};

struct WirePacket {
  uint32_t src_ip, dst_ip;
  std::vector<uint8_t> bytes;
  uint8_t tos = 0;  // the IPv4 TOS byte the datagram carries (RoCEv2's GRH traffic class)
};

// Packets wait in a queue until the test delivers them; a filter can drop or duplicate.
class Fabric {
 public:
  class Port : public core::PacketSink {
   public:
    Port(Fabric& f, uint32_t ip) : fabric_(f), ip_(ip) { fabric_.ports.insert(this); }
    ~Port() override { fabric_.ports.erase(this); }
    Port(const Port&) = delete;
    Port& operator=(const Port&) = delete;
    core::SendOutcome send(uint32_t dst_ip, uint16_t port, std::span<const uint8_t> b) override {
      return send_with_tos(dst_ip, port, b, 0);
    }
    core::SendOutcome send_with_tos(uint32_t dst_ip, uint16_t, std::span<const uint8_t> b, uint8_t tos) override {
      if (fabric_.inject_loss && fabric_.inject_loss(WirePacket{ip_, dst_ip, {b.begin(), b.end()}, tos}))
        return core::SendOutcome::kDropped;  // as simnicd's fault injector: never sent
      if (fabric_.hold_until_turn_ends) {    // as UdpPort: sent at the end of the turn
        held_.push_back({ip_, dst_ip, {b.begin(), b.end()}, tos});
        return core::SendOutcome::kSent;
      }
      fabric_.queue.push_back({ip_, dst_ip, {b.begin(), b.end()}, tos});
      if (fabric_.on_send) fabric_.on_send(fabric_.queue.back());
      ++fabric_.sent;
      return core::SendOutcome::kSent;
    }
    // IP multicast: the fabric hands a datagram sent to a group to every port that joined it.
    int join_group(uint32_t group_ip) override {
      fabric_.groups[group_ip].insert(ip_);
      return 0;
    }
    void leave_group(uint32_t group_ip) override {
      fabric_.groups[group_ip].erase(ip_);
      if (fabric_.groups[group_ip].empty()) fabric_.groups.erase(group_ip);
    }

    // With local_peers, what a kernel on one host would list for the peer's socket: its queue
    // is what waits for it on the fabric, its drops what the test says the kernel dropped.
    PeerEnd peer_end(uint32_t dst_ip, uint16_t) override {
      if (!fabric_.local_peers) return {};
      PeerEnd e;
      e.local = true;
      e.open = !fabric_.gone.count(dst_ip);
      e.socket = e.open ? 1 : 0;
      e.drops = fabric_.socket_drops[dst_ip];
      e.busy = fabric_.busy_peers.count(dst_ip) != 0;
      for (const WirePacket& p : fabric_.queue)
        if (p.dst_ip == dst_ip && e.open) e.queued += p.bytes.size();
      return e;
    }
    // This port's own socket: what waits for it on the fabric.
    bool holds_unread() override {
      return std::any_of(fabric_.queue.begin(), fabric_.queue.end(),
                         [this](const WirePacket& p) { return p.dst_ip == ip_; });
    }
    bool takes_direct_sends() const override { return fabric_.direct_sends; }
    void send_queued() override {
      for (WirePacket& p : held_) {
        fabric_.queue.push_back(std::move(p));
        if (fabric_.on_send) fabric_.on_send(fabric_.queue.back());
        ++fabric_.sent;
      }
      held_.clear();
    }

   private:
    Fabric& fabric_;
    uint32_t ip_;
    std::vector<WirePacket> held_;  // hold_until_turn_ends: this turn's packets
  };

  void attach(uint32_t ip, core::Device* d) { devices[ip] = d; }
  // Delivers queued packets (and any they cause) until quiet; `keep` may drop a packet.
  int deliver_all(uint64_t now, const std::function<bool(const WirePacket&)>& keep = {}) {
    int n = 0, batch_left = 0;
    while (!queue.empty() && n < 1000000) {
      if (batch_left <= 0) batch_left = batch ? int(queue.size()) : 1;
      --batch_left;
      WirePacket p = std::move(queue.front());
      queue.pop_front();
      ++n;
      if (keep && !keep(p)) {
        ++dropped;
        if (batch_left == 0 && batch) after_events(now);
        continue;
      }
      if ((p.dst_ip >> 28) == 0xe) {  // 224.0.0.0/4: every member, the sender's NIC included
        auto g = groups.find(p.dst_ip);
        if (g != groups.end())
          for (uint32_t member : std::set<uint32_t>(g->second))
            devices.at(member)->on_packet(p.src_ip, 4791, p.bytes, now, p.dst_ip, p.tos);
      } else if (auto it = devices.find(p.dst_ip); it != devices.end()) {
        it->second->on_packet(p.src_ip, 4791, p.bytes, now, 0, p.tos);
        received_.insert(it->second);
      }
      if (batch_left == 0) after_events(now);
    }
    return n;
  }
  // What simnicd does after each event: the NIC's queued writes land and sleeping pollers are
  // woken, then pending work runs.
  // The NICs that received in this batch end their events first: they share one FakeMemory,
  // and the writes a NIC queued must land (and fail) on that NIC's turn, as in its own simnicd.
  void after_events(uint64_t now) {
    for (Port* port : ports) port->send_queued();
    for (core::Device* d : received_) d->finish_turn();
    received_.clear();
    for (auto& [ip, d] : devices) d->finish_turn();
    for (auto& [ip, d] : devices) {
      int turns = 0;
      while (d->has_pending_work()) {
        // simnicd would run such a NIC's pending work forever, at 100 % CPU: a failure, for the
        // unit tests and the fuzzers (which share this fabric) alike.
        if (++turns > 100000) {
          std::fprintf(stderr, "fabric: a NIC's pending work never ends\n");
          std::abort();
        }
        d->run_pending(now);
        d->finish_turn();
      }
    }
  }
  // Receive batches (as recvmmsg): the packets queued when a batch starts are all delivered
  // before the NICs flush and run pending work. Off: one packet per batch.
  bool batch = false;
  std::deque<WirePacket> queue;
  std::set<core::Device*> received_;               // since the last after_events
  std::function<void(const WirePacket&)> on_send;  // sees every packet as it is sent
  // True: the sender's fault injector drops this packet (SendOutcome::kDropped).
  std::function<bool(const WirePacket&)> inject_loss;
  // The peers are NICs on one host (PacketSink::peer_end answers); their sockets' kernel drops,
  // and the addresses whose NIC is gone (no socket).
  bool local_peers = false;
  std::map<uint32_t, uint64_t> socket_drops;
  std::set<uint32_t> gone;
  std::set<uint32_t> busy_peers;  // local peers whose NIC process is running or waits for a CPU
  // The ports take packets a program sends itself under a lent PSN (engines/direct_send.h).
  bool direct_sends = false;
  // The ports hold what a NIC sends until its turn ends (after_events, or the NIC's own
  // send_queued), as UdpPort batches a turn's datagrams into one sendmmsg.
  bool hold_until_turn_ends = false;
  std::set<Port*> ports;
  std::map<uint32_t, core::Device*> devices;
  std::map<uint32_t, std::set<uint32_t>> groups;  // IP group -> addresses of the ports that joined
  int sent = 0, dropped = 0;
};

}  // namespace simnic::testing
