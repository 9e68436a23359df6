// What the pure NIC core needs from the world, as interfaces. simnic/io implements them with
// syscalls; tests implement them in memory (a fabric, a fake host memory, a manual clock).
#pragma once
#include <sys/types.h>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace simnic::core {

// The application's address space, as the NIC's DMA engine sees it.
class HostMemory {
 public:
  virtual ~HostMemory() = default;
  // Both return 0 or an errno (EFAULT for an unmapped address, EPERM if not allowed).
  virtual int read(pid_t pid, uint64_t addr, void* dst, size_t len) = 0;
  virtual int write(pid_t pid, uint64_t addr, const void* src, size_t len) = 0;
  // Registration (ibv_reg_mr) of a pinned MR: 0 when every page of [addr, addr + len) is mapped
  // and readable (and writable when `writable`), else EFAULT, as the kernel's pin_user_pages
  // (FOLL_WRITE for a writable MR) fails in ib_umem_get. This default probes the first and the
  // last byte; simnicd's ProcessMemory reads the process's memory map.
  virtual int check_mapped(pid_t pid, uint64_t addr, uint64_t len, bool writable) {
    (void)writable;
    uint8_t probe;
    for (uint64_t at : {addr, addr + len - 1})
      if (int e = read(pid, at, &probe, 1)) return e;
    return 0;
  }

  // Coalesced writes (issue 14): the NIC queues writes into memory it has already checked (a
  // pinned MR) and makes them all at once, one system call per process, with flush(). `src`
  // is copied: it need not outlive the call. Writes are made in the order they were queued.
  // The NIC flushes before it writes a CQE, sends an ACK, reads the memory or writes it
  // immediately, and at the end of every event. This default writes at once.
  virtual int write_later(pid_t pid, uint64_t addr, const void* src, size_t len) { return write(pid, addr, src, len); }
  struct FailedWrite {
    pid_t pid;
    uint64_t addr;
    size_t len;
    int err;
  };
  virtual bool queued() const { return false; }

  // Shared pages (issue 26 point 4, docs/architecture.md "Shared pages"): the application moved
  // the pages of the MR keyed `key` ([addr, addr + len) of `pid`) onto a sealed memfd `fd` whose
  // offset 0 it maps at `fd_base`. The NIC may map the memfd and reach that memory with memcpy;
  // the pid-based read/write above stay correct for it (the same pages), so any refusal (an
  // errno) only means the slower way. fd -1: the MR has none, and a view overlapping it is
  // stale (the program mapped something else there): it is dropped. `fd` stays the caller's.
  virtual int share_pages(pid_t pid, uint32_t key, uint64_t addr, uint64_t len, int fd, uint64_t fd_base) {
    (void)pid, (void)key, (void)addr, (void)len, (void)fd, (void)fd_base;
    return EOPNOTSUPP;
  }
  // The MR keyed `key` is gone (deregistered, or its translation changed).
  virtual void unshare_pages(uint32_t key) { (void)key; }
  // Where the NIC maps [addr, addr + len) of `pid` (shared pages), so a packet can be built
  // straight from it; nullptr when it does not (read() then). Valid until the next
  // share_pages/unshare_pages: use it at once.
  virtual const uint8_t* mapped(pid_t pid, uint64_t addr, size_t len) {
    (void)pid, (void)addr, (void)len;
    return nullptr;
  }
  // Whether a thread of the program's process is running or waiting for a CPU (state R in
  // /proc/PID/task/*/stat), not all asleep: a receive wait tells a program that was not
  // scheduled from one that chose to wait (engines/receive_wait.cc). A host that cannot tell
  // says no.
  virtual bool runnable(pid_t pid) {
    (void)pid;
    return false;
  }
  // Makes every queued write and appends each that failed to *failed: its bytes are lost, as
  // a real RNIC's writes into pinned pages that the application has since unmapped.
  virtual void flush(std::vector<FailedWrite>* failed) { (void)failed; }
};

// What the port did with a packet (the fault injector may intervene).
enum class SendOutcome { kSent, kDropped, kDuplicated, kDelayed };

// The wire: a whole RoCEv2 UDP payload (BTH .. ICRC) for the NIC at dst_ip:dst_port.
class PacketSink {
 public:
  virtual ~PacketSink() = default;
  virtual SendOutcome send(uint32_t dst_ip, uint16_t dst_port, std::span<const uint8_t> udp_payload) = 0;
  // The same datagram with IPv4 TOS byte `tos` (DSCP and ECN): RoCEv2 carries the GRH's
  // traffic class there (IBA Annex A17). A wire that cannot set it sends with its own.
  virtual SendOutcome send_with_tos(uint32_t dst_ip, uint16_t dst_port, std::span<const uint8_t> udp_payload,
                                    uint8_t tos) {
    (void)tos;
    return send(dst_ip, dst_port, udp_payload);
  }
  // Multicast (RoCEv2 carries a multicast GID as an IP multicast destination): the port starts
  // or stops receiving what is sent to the IPv4 group `group_ip`, as a real NIC joins the group
  // (IGMP). 0 or an errno. A wire without group filtering (tests that need none) accepts all.
  virtual int join_group(uint32_t group_ip) { return group_ip ? 0 : EINVAL; }
  virtual void leave_group(uint32_t /*group_ip*/) {}
  // The receiving end of the NIC at dst_ip:dst_port when it runs on this host: its socket as
  // the kernel lists it. A datagram sent to a live local socket is either in its queue or
  // counted in its drops, so an ACK timer can tell a packet that waits from one that was lost
  // (issue 26; completer_timers.cc). A wire that cannot tell says "not local" (another host).
  struct PeerEnd {
    bool local = false;   // the peer is (or was) on this host: the fields below are known
    bool open = false;    // its socket exists now (false: that NIC is gone)
    uint64_t socket = 0;  // the socket's identity (its inode): another one is a NIC started again
    uint64_t drops = 0;   // datagrams lost on the way: the socket's drops and this wire's own
    uint64_t queued = 0;  // bytes waiting in the socket's receive queue
    bool busy = false;    // the NIC process holding it is running or waiting for a CPU (state R),
                          // when this host lets it be seen (another user's NIC: false)
  };
  virtual PeerEnd peer_end(uint32_t /*dst_ip*/, uint16_t /*dst_port*/) { return {}; }
  // Datagrams wait unread in this NIC's own socket (a NIC that was not scheduled reads a
  // bounded batch before its timers run, so answers may still be behind it).
  virtual bool holds_unread() { return false; }
  // Whether a program may send a request packet from the NIC's socket itself (a lent PSN,
  // engines/direct_send.h): the wire would send it as it is, with no fault injected into it and
  // no capture of this NIC's packets to miss it. A wire that cannot tell says no.
  virtual bool takes_direct_sends() const { return false; }
  // Puts on the wire now what the wire holds back to send at the end of the event loop's turn
  // (batching): before a lend, so that the program's packet cannot overtake its QP's earlier ones.
  virtual void send_queued() {}
};

// Shared memory for queues: a mapping the application can map too (a memfd in simnicd).
struct ShmRegion {
  void* addr = nullptr;
  size_t size = 0;
  int fd = -1;  // to pass to the application; -1 in tests
};

class ShmAllocator {
 public:
  virtual ~ShmAllocator() = default;
  // Zero-filled; returns false with errno-style code in *err on failure.
  virtual bool allocate(size_t size, const std::string& name, ShmRegion* out, int* err) = 0;
  virtual void release(ShmRegion& region) = 0;
};

// Events the application learns about through file descriptors.
class Notifier {
 public:
  virtual ~Notifier() = default;
  virtual void completion_event(int channel_fd, uint32_t cq_handle) = 0;
  virtual void async_event(int async_fd, uint32_t event_type, uint32_t handle) = 0;
  // The core is done with a descriptor the I/O layer handed it (a channel socket).
  virtual void release_fd(int fd) = 0;
  // Wakes every thread of any process asleep on `word` (a futex in shared memory: a context's
  // ContextShared::cqe_seq). A no-op where nobody can sleep (tests).
  virtual void wake_sleepers(std::atomic<uint32_t>* word) { (void)word; }
  // One message on an rdma_cm event channel's socket; false if it could not be sent.
  virtual bool send_event(int fd, const void* msg, size_t len) {
    (void)fd, (void)msg, (void)len;
    return false;
  }
};

enum class LogLevel { kError, kWarn, kInfo, kDebug };

class Logger {
 public:
  virtual ~Logger() = default;
  virtual void log(LogLevel level, const std::string& line) = 0;
};

// What one NIC reaches the world through: the interfaces above, held by its Device and reached
// by its parts through it (dev.env_.wire ...).
struct Environment {
  HostMemory& memory;  // the applications' memory (process_vm_* in simnicd)
  PacketSink& wire;    // the UDP port
  ShmAllocator& shm;   // queue rings (memfds)
  Notifier& notifier;  // completion channels, async events, wake-ups
  Logger& logger;
};

// InfiniBand link-layer mode: the simulated subnet's LID table, LID <-> NIC address (the
// subnet manager's view; simnic/abi/lid_map.h). simnicd reads it from the simnic directory.
class LidDirectory {
 public:
  virtual ~LidDirectory() = default;
  // The address (host order) of the NIC port `lid` names; false if no NIC has that LID.
  virtual bool address_of(uint16_t lid, uint32_t* ipv4) = 0;
  // The LID of the NIC at `ipv4`, or 0 if it has none.
  virtual uint16_t lid_of(uint32_t ipv4) = 0;
};

}  // namespace simnic::core
