// Every DMA the NIC does goes through here, and is checked first: the key must name an MR,
// in the QP's PD, with the rights the operation needs, and the range must fit inside it
// (IBA 10.6.3 / C9-88 for remote access; local keys per 10.6.3.1).
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "simnic/core/device.h"
#include "simnic/core/text.h"

namespace simnic::core {

namespace {

const char* access_name(uint32_t a) {
  switch (a) {
    case IBV_ACCESS_LOCAL_WRITE: return "LOCAL_WRITE";
    case IBV_ACCESS_REMOTE_WRITE: return "REMOTE_WRITE";
    case IBV_ACCESS_REMOTE_READ: return "REMOTE_READ";
    case IBV_ACCESS_REMOTE_ATOMIC: return "REMOTE_ATOMIC";
    default: return "local read";
  }
}

bool in_range(const Mr& mr, uint64_t va, uint64_t len) {
  return va >= mr.iova && len <= mr.length && va - mr.iova <= mr.length - len;
}

}  // namespace

// The MR bytes [s.addr + offset, +len) of an SGE lie in, checked at every use: when the WQE is
// first seen and again at each DMA, since the MR may have been deregistered meanwhile. The
// lkey must name a registered MR of the QP's PD with the rights the DMA needs, and the range
// must fit inside it (IBA 10.6.3.1); otherwise nullptr and *why. `pd`, when given, is the PD
// instead of the QP's (an SRQ's receive WQE is checked against the SRQ's PD).
const Mr* MemoryAccess::local_mr(const Qp& qp, const ibv_sge& s, uint64_t offset, uint64_t len, uint32_t need_access,
                                 std::string* why, const Pd* pd) const {
  const Mr* mr = dev_.tables().find_mr_by_key(s.lkey);
  if (!mr) {
    *why = "lkey " + hex(s.lkey) + " names no MR (never registered, or deregistered)";
    return nullptr;
  }
  if (mr->pd != (pd ? pd : qp.pd)) {
    *why = "lkey " + hex(s.lkey) + " belongs to another PD than the " + (pd && pd != qp.pd ? "SRQ's" : "QP's");
    return nullptr;
  }
  if (need_access && !(mr->access & need_access)) {
    *why = "MR lkey " + hex(s.lkey) + " lacks " + access_name(need_access);
    return nullptr;
  }
  if (s.addr + offset < s.addr || !in_range(*mr, s.addr + offset, len)) {
    *why = "[" + hex(s.addr + offset) + ", +" + std::to_string(len) + ") is outside MR lkey " + hex(s.lkey) + " [" +
           hex(mr->iova) + ", +" + std::to_string(mr->length) + ")";
    return nullptr;
  }
  return mr;
}

bool MemoryAccess::check_sges(const Qp& qp, const ibv_sge* sge, uint32_t num_sge, uint32_t need_access, uint64_t* total,
                              std::string* why) const {
  uint64_t sum = 0;
  for (uint32_t i = 0; i < num_sge; ++i) {
    const ibv_sge& s = sge[i];
    sum += s.length;
    if (s.length == 0) continue;
    if (!local_mr(qp, s, 0, s.length, need_access, why)) {
      *why = "sge " + std::to_string(i) + ": " + *why;
      return false;
    }
  }
  *total = sum;
  return true;
}

const Mr* MemoryAccess::check_rkey(const Qp& qp, uint32_t rkey, uint64_t va, uint64_t len, uint32_t access,
                                   uint64_t* mr_va, std::string* why) const {
  if (!(qp.attr.qp_access_flags & access)) {
    *why = std::string("QP ") + hex(qp.qpn) + " was not given " + access_name(access) + " in qp_access_flags";
    return nullptr;
  }
  const Mr* mr = dev_.tables().find_mr_by_key(rkey);
  if (!mr) {
    if (const Mw* mw = dev_.tables().find_mw_by_rkey_index(rkey))
      return windows_.check_mw_access(qp, *mw, rkey, va, len, access, mr_va, why);
    *why = "rkey " + hex(rkey) + " names no MR or memory window";
    return nullptr;
  }
  if (mr->pd != qp.pd) {
    *why = "rkey " + hex(rkey) + " belongs to another PD than QP " + hex(qp.qpn) + "'s";
    return nullptr;
  }
  if (!(mr->access & access)) {
    *why = "rkey " + hex(rkey) + " not valid for " + access_name(access) + " (MR registered without IBV_ACCESS_" +
           access_name(access) + ")";
    return nullptr;
  }
  if (!in_range(*mr, va, len)) {
    *why = "rkey " + hex(rkey) + ": [" + hex(va) + ", +" + std::to_string(len) + ") is outside the MR [" +
           hex(mr->iova) + ", +" + std::to_string(mr->length) + ")";
    return nullptr;
  }
  *mr_va = va;
  return mr;
}

// Copies `len` bytes between a buffer and the memory an SGE list describes, from byte `offset`
// of the list on: the one loop gather (send data out) and scatter (data in) share. Every SGE
// piece is checked again (local_mr) at the DMA, and traced.
int MemoryAccess::copy_sges(const Qp& qp, const ibv_sge* sge, uint32_t num_sge, uint32_t offset, uint8_t* buf,
                            uint32_t len, bool to_memory, std::string* why) {
  return sge_dma(qp, sge, num_sge, offset, buf, len, to_memory ? SgeDma::kWrite : SgeDma::kRead, why);
}

// copy_sges, and two more uses of the same walk: kCheck makes every per-DMA check and moves
// nothing (bytes sent from a stage), kProbe reads as kRead does but counts, notes and explains
// no failure (a chunk read ahead: the packet that needs the bytes reports it, as before).
int MemoryAccess::sge_dma(const Qp& qp, const ibv_sge* sge, uint32_t num_sge, uint32_t offset, uint8_t* buf,
                          uint32_t len, SgeDma op, std::string* why, const Pd* pd) {
  const bool to_memory = op == SgeDma::kWrite;
  const char* dir = to_memory ? "write" : "read";
  for (uint32_t i = 0; i < num_sge && len; ++i) {
    const ibv_sge& s = sge[i];
    if (offset >= s.length) {
      offset -= s.length;
      continue;
    }
    uint32_t n = std::min(len, s.length - offset);
    const Mr* mr = local_mr(qp, s, offset, n, to_memory ? IBV_ACCESS_LOCAL_WRITE : 0, why, pd);
    if (!mr) {
      // Receive WQEs are checked here only (as bytes land): name the SGE, as check_sges does.
      if (to_memory) *why = "sge " + std::to_string(i) + ": " + *why;
      return EINVAL;
    }
    // The trace shows each packet's bytes, read now or earlier into a stage; a chunk read
    // ahead (kProbe) is not a packet's and leaves none.
    if (op != SgeDma::kProbe) dev_.trace_points().trace_dma(qp.qpn, dir, s.lkey, s.addr + offset, n);
    if (op == SgeDma::kCheck) {
      len -= n;
      offset = 0;
      continue;
    }
    const uint64_t addr = mr->addr + (s.addr - mr->iova) + offset;
    if (int e = to_memory ? dma_write(*mr, addr, buf, n) : dma_read(mr->ctx->pid, addr, buf, n)) {
      if (op == SgeDma::kProbe) return e;
      ++dev_.counters_.dma_errors;
      if (is_odp_mr(*mr) && e == EFAULT) note_odp_fault(qp, *mr, s.addr + offset, n, false);
      *why = std::string("DMA ") + dir + " of " + std::to_string(n) + " bytes at " + hex(s.addr + offset) +
             " failed: " + std::strerror(e);
      return e;
    }
    buf += n;
    len -= n;
    offset = 0;
  }
  if (len && to_memory) *why = "message longer than the receive buffers";
  return len ? (to_memory ? EMSGSIZE : EINVAL) : 0;
}

int MemoryAccess::check_program_read(const Qp& qp, const abi::SendWqe& w, uint32_t len, std::string* why) {
  if (w.send_flags & IBV_SEND_INLINE) return 0;
  return sge_dma(qp, w.sge, std::min(w.num_sge, abi::kMaxSge), 0, nullptr, len, SgeDma::kCheck, why);
}

int MemoryAccess::gather(const Qp& qp, const abi::SendWqe& wqe, uint32_t offset, uint8_t* dst, uint32_t len,
                         std::string* why) {
  if (wqe.send_flags & IBV_SEND_INLINE) {
    if (wqe.inline_len > abi::kMaxInlineData || offset + len > wqe.inline_len) return EINVAL;
    std::memcpy(dst, wqe.inline_data + offset, len);
    return 0;
  }
  return copy_sges(qp, wqe.sge, std::min(wqe.num_sge, abi::kMaxSge), offset, dst, len, false, why);
}

// Receive buffers, READ responses and atomic results land in local memory: LOCAL_WRITE.
int MemoryAccess::scatter(const Qp& qp, const ibv_sge* sge, uint32_t num_sge, uint32_t offset, const uint8_t* src,
                          uint32_t len, std::string* why, const Pd* pd) {
  if (num_sge > abi::kMaxSge) {
    *why = "num_sge " + std::to_string(num_sge) + " exceeds the NIC's max_sge " + std::to_string(abi::kMaxSge);
    return EINVAL;
  }
  // sge_dma only reads from the buffer when it writes to memory.
  return sge_dma(qp, sge, num_sge, offset, const_cast<uint8_t*>(src), len, SgeDma::kWrite, why, pd);
}

}  // namespace simnic::core

namespace simnic::core {

// --- Fewer DMA system calls (issue 14) ---------------------------------------------------
// process_vm_readv/writev cost about 1.7 us a call whatever the size, so the NIC moves a
// message's bytes in as few calls as it can. Sending, it reads up to kStageBytes of a
// message at once into a stage and sends the following packets from there; receiving, it
// queues writes into pinned MRs and makes them together (one process_vm_writev per process)
// before anything can report them. Every packet still passes every check it passed before:
// the SGE's MR is looked up at each packet (local_mr), an rkey at each message, before any
// write is queued. Only the moment the bytes move changes.

int MemoryAccess::dma_read(pid_t pid, uint64_t addr, void* dst, size_t len) {
  flush_dma_writes();  // a read sees every write before it
  return dev_.env_.memory.read(pid, addr, dst, len);
}

int MemoryAccess::dma_write_now(pid_t pid, uint64_t addr, const void* src, size_t len) {
  flush_dma_writes();  // in order with the queued ones (they may overlap)
  return dev_.env_.memory.write(pid, addr, src, len);
}

// A pinned MR's pages were there at registration (reg_mr probes them) and stay: a write into
// it is queued, and a failure at the flush is counted and logged, as a real RNIC writes into
// pinned pages the program may have unmapped since. An ODP MR's fault must NAK the packet that
// met it, and device memory is cheap to reach: both are written at once.
int MemoryAccess::dma_write(const Mr& mr, uint64_t addr, const void* src, size_t len) {
  if (is_odp_mr(mr) || dev_.memory_verbs().is_dm_mr(mr.handle)) return dma_write_now(mr.ctx->pid, addr, src, len);
  if (int e = dev_.env_.memory.write_later(mr.ctx->pid, addr, src, len)) return e;
  queued_write_bytes_ += len;
  if (queued_write_bytes_ >= kMaxQueuedWrites) flush_dma_writes();
  return 0;
}

void MemoryAccess::flush_dma_writes() {
  if (!dev_.env_.memory.queued()) return;
  queued_write_bytes_ = 0;
  failed_writes_.clear();
  dev_.env_.memory.flush(&failed_writes_);
  for (const HostMemory::FailedWrite& f : failed_writes_) {
    ++dev_.counters_.dma_errors;
    dev_.journal().log_limited(LogLevel::kError, "deferred_write", 0, [&] {
      return "DMA write of " + std::to_string(f.len) + " bytes at " + hex(f.addr) + " into pid " +
             std::to_string(f.pid) + "'s registered memory failed: " + std::strerror(f.err) +
             ". The packet had been accepted, so the bytes are lost, as when a program unmaps memory "
             "it registered with a real RNIC";
    });
  }
}

// The stage that holds bytes [offset, +len) of message (owner, tag), reading a chunk from
// `offset` into the least recently used one if none does; nullptr when the packet is better
// read alone: the rest of the message is this packet, or a chunk read failed (the packet's own
// read then meets the failure and reports it exactly as it did before stages).
template <class Read>
MemoryAccess::DmaStage* MemoryAccess::stage(const void* owner, uint64_t tag, uint32_t offset, uint32_t len,
                                            uint32_t msg_len, Read&& read) {
  DmaStage* lru = &stages_[0];
  for (DmaStage& s : stages_) {
    if (s.owner == owner && s.tag == tag) {
      if (s.failed) return nullptr;
      if (offset >= s.begin && offset + len <= s.end) {
        s.used = ++stage_clock_;
        return &s;
      }
      lru = &s;  // the same message further on: its stage moves on
      break;
    }
    if (s.used < lru->used) lru = &s;
  }
  if (offset + len >= msg_len) return nullptr;
  const uint32_t n = std::min<uint32_t>(msg_len - offset, kStageBytes);
  DmaStage& s = *lru;
  s = DmaStage{owner, tag, offset, offset + n, false, ++stage_clock_, std::move(s.bytes)};
  if (s.bytes.size() < kStageBytes) s.bytes.resize(kStageBytes);
  if (read(s.bytes.data(), offset, n)) {
    s.failed = true;
    return nullptr;
  }
  return &s;
}

void MemoryAccess::drop_stage(const void* owner, uint64_t tag) {
  for (DmaStage& s : stages_)
    if (s.owner == owner && s.tag == tag) s.owner = nullptr;
}

int MemoryAccess::send_payload(const Qp& qp, uint32_t slot, const SendWqeState& st, uint32_t offset, uint32_t len,
                               const uint8_t** out, std::string* why) {
  const abi::SendWqe& w = st.wqe;
  const uint32_t nsge = std::min(w.num_sge, abi::kMaxSge);
  auto read = [&](uint8_t* buf, uint32_t from, uint32_t n) {
    std::string ignored;
    return sge_dma(qp, w.sge, nsge, from, buf, n, SgeDma::kProbe, &ignored);
  };
  if (!(w.send_flags & IBV_SEND_INLINE)) {
    if (const uint8_t* p = mapped_sge_bytes(qp, w.sge, nsge, offset, len)) {
      // Shared pages: the packet is built from the application's memory itself; the DMA
      // checks and the trace are the packet's own, as for a stage.
      if (int e = sge_dma(qp, w.sge, nsge, offset, nullptr, len, SgeDma::kCheck, why)) return e;
      *out = p;
      return 0;
    }
    if (DmaStage* s = stage(&qp, slot, offset, len, st.length, read)) {
      // The bytes were read with an earlier packet; this one's DMA checks are made now, as if
      // it read them itself (an MR deregistered meanwhile fails this packet, as before).
      if (int e = sge_dma(qp, w.sge, nsge, offset, nullptr, len, SgeDma::kCheck, why)) return e;
      *out = s->bytes.data() + (offset - s->begin);
      return 0;
    }
  }
  *out = payload_buffer_.data();
  return gather(qp, w, offset, payload_buffer_.data(), len, why);
}

const uint8_t* MemoryAccess::mapped_sge_bytes(const Qp& qp, const ibv_sge* sge, uint32_t num_sge, uint32_t offset,
                                              uint32_t len) {
  for (uint32_t i = 0; i < num_sge; ++i) {
    const ibv_sge& s = sge[i];
    if (offset >= s.length) {
      offset -= s.length;
      continue;
    }
    if (len > s.length - offset) return nullptr;  // across SGEs: gathered
    std::string ignored;                          // a failing check is the packet's to report
    const Mr* mr = local_mr(qp, s, offset, len, 0, &ignored);
    if (!mr || is_odp_mr(*mr)) return nullptr;
    flush_dma_writes();  // a read sees every write before it
    return dev_.env_.memory.mapped(mr->ctx->pid, mr->addr + (s.addr - mr->iova) + offset, len);
  }
  return nullptr;
}

// rr.mr was checked (rkey, range: respond_read) when the READ arrived, and is cleared if the MR
// is deregistered: the caller looks at it before each packet.
int MemoryAccess::read_response_payload(const Qp& qp, const ReadResponse& rr, uint32_t offset, uint32_t len,
                                        const uint8_t** out) {
  const Mr& mr = *rr.mr;
  auto trace = [&](uint32_t from, uint32_t n) {
    dev_.trace_points().trace_dma(qp.qpn, "read", mr.rkey, rr.va + from, n);
  };
  auto read = [&](uint8_t* buf, uint32_t from, uint32_t n) {
    return dma_read(mr.ctx->pid, mr.addr + (rr.va + from - mr.iova), buf, n);
  };
  trace(offset, len);  // the packet's bytes, as sge_dma traces them
  if (!is_odp_mr(mr)) {
    flush_dma_writes();
    if (const uint8_t* p = dev_.env_.memory.mapped(mr.ctx->pid, mr.addr + (rr.va + offset - mr.iova), len)) {
      *out = p;  // shared pages: the response is built from the application's memory itself
      return 0;
    }
  }
  if (DmaStage* s = stage(&qp, read_stage_tag(rr), offset, len, rr.length, read)) {
    *out = s->bytes.data() + (offset - s->begin);
    return 0;
  }
  *out = payload_buffer_.data();
  return read(payload_buffer_.data(), offset, len);
}

// A DMA through an ODP MR met a page with no mapping (memory/odp.cc): the odp_fault trace event.
void MemoryAccess::note_odp_fault(const Qp& qp, const Mr& mr, uint64_t va, uint64_t len, bool remote) {
  dev_.tracer_.event(TraceKind::kOdpFault)
      .u("qp", qp.qpn)
      .u("mr", mr.handle)
      .u("key", remote ? mr.rkey : mr.lkey)
      .hex("addr", va)
      .u("length", len)
      .s("side", remote ? "remote" : "local");
  dev_.journal().log_limited(LogLevel::kWarn, "odp_fault", qp.qpn, [&] {
    return "QP " + hex(qp.qpn) + ": " + (remote ? "remote" : "local") + " access to [" + hex(va) + ", +" +
           std::to_string(len) + ") of ODP MR " + hex(mr.lkey) + " met a page with no mapping in the program";
  });
}

}  // namespace simnic::core
