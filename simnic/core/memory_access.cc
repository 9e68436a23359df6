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
// must fit inside it (IBA 10.6.3.1); otherwise nullptr and *why.
const Mr* Device::local_mr(const Qp& qp, const ibv_sge& s, uint64_t offset, uint64_t len,
                           uint32_t need_access, std::string* why) const {
  const Mr* mr = find_mr_by_key(s.lkey);
  if (!mr) {
    *why = "lkey " + hex(s.lkey) + " names no MR (never registered, or deregistered)";
    return nullptr;
  }
  if (mr->pd != qp.pd) {
    *why = "lkey " + hex(s.lkey) + " belongs to another PD than the QP's";
    return nullptr;
  }
  if (need_access && !(mr->access & need_access)) {
    *why = "MR lkey " + hex(s.lkey) + " lacks " + access_name(need_access);
    return nullptr;
  }
  if (s.addr + offset < s.addr || !in_range(*mr, s.addr + offset, len)) {
    *why = "[" + hex(s.addr + offset) + ", +" + std::to_string(len) + ") is outside MR lkey " + hex(s.lkey) +
           " [" + hex(mr->iova) + ", +" + std::to_string(mr->length) + ")";
    return nullptr;
  }
  return mr;
}

bool Device::check_sges(const Qp& qp, const ibv_sge* sge, uint32_t num_sge, uint32_t need_access,
                        uint64_t* total, std::string* why) const {
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

const Mr* Device::check_rkey(const Qp& qp, uint32_t rkey, uint64_t va, uint64_t len,
                             uint32_t access, uint64_t* mr_va, std::string* why) const {
  if (!(qp.attr.qp_access_flags & access)) {
    *why = std::string("QP ") + hex(qp.qpn) + " was not given " + access_name(access) + " in qp_access_flags";
    return nullptr;
  }
  const Mr* mr = find_mr_by_key(rkey);
  if (!mr) {
    if (const Mw* mw = find_mw_by_rkey_index(rkey))
      return check_mw_access(qp, *mw, rkey, va, len, access, mr_va, why);
    *why = "rkey " + hex(rkey) + " names no MR or memory window";
    return nullptr;
  }
  if (mr->pd != qp.pd) {
    *why = "rkey " + hex(rkey) + " belongs to another PD than QP " + hex(qp.qpn) + "'s";
    return nullptr;
  }
  if (!(mr->access & access)) {
    *why = "rkey " + hex(rkey) + " not valid for " + access_name(access) + " (MR registered without IBV_ACCESS_" + access_name(access) + ")";
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
int Device::copy_sges(const Qp& qp, const ibv_sge* sge, uint32_t num_sge, uint32_t offset, uint8_t* buf,
                      uint32_t len, bool to_memory, std::string* why) {
  const char* dir = to_memory ? "write" : "read";
  for (uint32_t i = 0; i < num_sge && len; ++i) {
    const ibv_sge& s = sge[i];
    if (offset >= s.length) {
      offset -= s.length;
      continue;
    }
    uint32_t n = std::min(len, s.length - offset);
    const Mr* mr = local_mr(qp, s, offset, n, to_memory ? IBV_ACCESS_LOCAL_WRITE : 0, why);
    if (!mr) return EINVAL;
    tracer_.event("dma").u("qp", qp.qpn).s("dir", dir).u("key", s.lkey).hex("addr", s.addr + offset).u("length", n);
    const uint64_t addr = mr->addr + (s.addr - mr->iova) + offset;
    if (int e = to_memory ? memory_.write(mr->ctx->pid, addr, buf, n) : memory_.read(mr->ctx->pid, addr, buf, n)) {
      ++counters_.dma_errors;
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

int Device::gather(const Qp& qp, const abi::SendWqe& wqe, uint32_t offset, uint8_t* dst, uint32_t len,
                   std::string* why) {
  if (wqe.send_flags & IBV_SEND_INLINE) {
    if (wqe.inline_len > abi::kMaxInlineData || offset + len > wqe.inline_len) return EINVAL;
    std::memcpy(dst, wqe.inline_data + offset, len);
    return 0;
  }
  return copy_sges(qp, wqe.sge, std::min(wqe.num_sge, abi::kMaxSge), offset, dst, len, false, why);
}

// Receive buffers, READ responses and atomic results land in local memory: LOCAL_WRITE.
int Device::scatter(const Qp& qp, const ibv_sge* sge, uint32_t num_sge, uint32_t offset,
                    const uint8_t* src, uint32_t len, std::string* why) {
  if (num_sge > abi::kMaxSge) {
    *why = "num_sge " + std::to_string(num_sge) + " exceeds the NIC's max_sge " + std::to_string(abi::kMaxSge);
    return EINVAL;
  }
  // copy_sges only reads from the buffer when it writes to memory.
  return copy_sges(qp, sge, num_sge, offset, const_cast<uint8_t*>(src), len, true, why);
}

}  // namespace simnic::core
