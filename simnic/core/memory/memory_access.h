// The memory-access unit: every DMA the NIC does into or out of an application goes through
// here, checked first (lkey/rkey, PD, rights, bounds: IBA 10.6.3), and is batched: a message
// is read in large stages and sent as several packets, writes into pinned MRs are queued and
// flushed before anything reports them. Owns the stages, the queued writes and the payload
// buffer; calls WindowBinding (an rkey that names a memory window) and the Device's shared
// helpers (host memory, MR lookup, counters, tracer, log).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "simnic/core/env.h"
#include "simnic/core/objects/objects.h"

namespace simnic::core {

class Device;
class WindowBinding;

class MemoryAccess {
 public:
  MemoryAccess(Device& dev, WindowBinding& windows) : dev_(dev), windows_(windows) {}

  // --- Checks: the MR a key and range land in ---
  bool check_sges(const Qp& qp, const ibv_sge* sge, uint32_t num_sge, uint32_t need_access, uint64_t* total,
                  std::string* why) const;
  const Mr* local_mr(const Qp& qp, const ibv_sge& s, uint64_t offset, uint64_t len, uint32_t need_access,
                     std::string* why, const Pd* pd = nullptr) const;
  // The MR a remote access lands in, through an MR's rkey or a memory window's; *mr_va is
  // the address in that MR's iova space (a zero-based window's offset is translated).
  const Mr* check_rkey(const Qp& qp, uint32_t rkey, uint64_t va, uint64_t len, uint32_t access, uint64_t* mr_va,
                       std::string* why) const;

  // --- Gather and scatter through scatter lists ---
  int gather(const Qp& qp, const abi::SendWqe& wqe, uint32_t offset, uint8_t* dst, uint32_t len, std::string* why);
  int copy_sges(const Qp& qp, const ibv_sge* sge, uint32_t num_sge, uint32_t offset, uint8_t* buf, uint32_t len,
                bool to_memory, std::string* why);
  // pd: the PD the lkeys must belong to when not the QP's (an SRQ's receive WQEs)
  int scatter(const Qp& qp, const ibv_sge* sge, uint32_t num_sge, uint32_t offset, const uint8_t* src, uint32_t len,
              std::string* why, const Pd* pd = nullptr);

  // --- Raw DMA (the responder's READ, WRITE and atomics) ---
  int dma_read(pid_t pid, uint64_t addr, void* dst, size_t len);
  int dma_write_now(pid_t pid, uint64_t addr, const void* src, size_t len);
  int dma_write(const Mr& mr, uint64_t addr, const void* src, size_t len);  // queued into a pinned MR
  // Makes the writes queued into pinned MRs (HostMemory::write_later). simnicd calls it at the
  // end of every event; the NIC calls it itself before a CQE, an ACK, or any other access to
  // application memory, so nothing can report bytes that have not landed.
  void flush_dma_writes();
  // A DMA through an ODP MR met a page with no mapping: the odp_fault trace event.
  void note_odp_fault(const Qp& qp, const Mr& mr, uint64_t va, uint64_t len, bool remote);

  // --- Staged message bytes ---
  // Bytes [offset, +len) of the message of send WQE `slot`: from a stage, or gathered into
  // payload_buffer_; *out points at them.
  int send_payload(const Qp& qp, uint32_t slot, const SendWqeState& st, uint32_t offset, uint32_t len,
                   const uint8_t** out, std::string* why);
  // A packet the program sent itself under a lent PSN (engines/direct_send.h): the `len` bytes
  // its post read from its memory for WQE `w`, checked and traced as the NIC's own read of them
  // (nothing moves); 0, or the errno a read would have failed with. Inline data was never in
  // memory the NIC reads.
  int check_program_read(const Qp& qp, const abi::SendWqe& w, uint32_t len, std::string* why);
  // The same for a READ response's bytes [offset, +len) (rr.mr must be set).
  int read_response_payload(const Qp& qp, const ReadResponse& rr, uint32_t offset, uint32_t len, const uint8_t** out);
  static uint64_t read_stage_tag(const ReadResponse& rr) { return (1ull << 32) | rr.first_psn; }
  void drop_stage(const void* owner, uint64_t tag);  // a new message takes the tag

 private:
  // A chunk of a message read from the application in one DMA, then sent as several packets.
  struct DmaStage {
    const void* owner = nullptr;  // the Qp
    uint64_t tag = 0;             // which message: a send WQE's SQ index, or read_stage_tag
    uint32_t begin = 0, end = 0;  // the message's bytes [begin, end) held in `bytes`
    bool failed = false;          // a chunk read failed: this message goes packet by packet
    uint64_t used = 0;            // when last used: the least recently used is replaced
    std::vector<uint8_t> bytes;
  };
  static constexpr uint32_t kStageBytes = 256 * 1024;    // one read covers 64 packets at MTU 4096
  static constexpr size_t kStages = 8;                   // messages staged at once (8 x 256 KiB)
  static constexpr uint64_t kMaxQueuedWrites = 4 << 20;  // bytes queued before a flush is forced
  enum class SgeDma { kRead, kWrite, kProbe, kCheck };   // kProbe: a read that reports nothing
  int sge_dma(const Qp& qp, const ibv_sge* sge, uint32_t num_sge, uint32_t offset, uint8_t* buf, uint32_t len,
              SgeDma op, std::string* why, const Pd* pd = nullptr);
  // Shared pages: [offset, +len) of the SGE list where the NIC maps it, when it lies in one
  // SGE whose MR passes the checks; nullptr: stage or gather it.
  const uint8_t* mapped_sge_bytes(const Qp& qp, const ibv_sge* sge, uint32_t num_sge, uint32_t offset, uint32_t len);
  // The stage holding [offset, +len) of message (owner, tag), filled by read(buf, from, n) when
  // none does; nullptr: gather the packet alone.
  template <class Read>
  DmaStage* stage(const void* owner, uint64_t tag, uint32_t offset, uint32_t len, uint32_t msg_len, Read&& read);

  // --- The units it calls ---
  Device& dev_;
  WindowBinding& windows_;

  // --- State ---
  std::vector<DmaStage> stages_ = std::vector<DmaStage>(kStages);
  uint64_t stage_clock_ = 0;
  uint64_t queued_write_bytes_ = 0;
  std::vector<HostMemory::FailedWrite> failed_writes_;
  std::vector<uint8_t> payload_buffer_ = std::vector<uint8_t>(8192);
};

}  // namespace simnic::core
