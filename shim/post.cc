// The fast path: posting work requests. A WQE is written into the shared ring, the producer
// index is published (release), and the doorbell wakes simnicd, like an RNIC's MMIO doorbell.
// Errors that rdma-core's rxe provider reports at post time (a BIND_MW on a UD QP, too many
// SGEs, too much inline data, a full queue, a QP not yet ready) are returned here with
// *bad_wr set; everything else (an opcode the QP type cannot carry included) is simnicd's to
// check and completes with an error status.
#include <cstdio>
#include <cstring>
#include <string>

#include "shim/shim.h"
#include "simnic/abi/wr_opcodes.h"

using namespace simnic::abi;

namespace simnic::shim {
// Whether ibv_post_send takes `op` on a QP of `type` (also used by the wr_* API). As rxe:
// its provider refuses only a BIND_MW on a QP that cannot bind windows (rdma-core
// providers/rxe/rxe.c validate_send_wr), and takes every other opcode, whether or not the
// transport can carry it; the requester then completes the WR with IBV_WC_LOC_QP_OP_ERR
// (rxe_req.c: next_opcode fails, wqe->status = IB_WC_LOC_QP_OP_ERR; IBA 9.9.2, the opcodes
// of each service in IBA Table 39). So an RDMA READ, WRITE or atomic on a UD QP, or a READ
// or atomic on a UC QP, is posted and fails in the CQ, as conformance suites expect. An XRC
// TGT QP has no send queue at all.
bool opcode_allowed(ibv_qp_type type, ibv_wr_opcode op) {
  if (type == IBV_QPT_XRC_RECV) return false;
  if (op == IBV_WR_BIND_MW) return wr_opcode_allowed(type, op);
  return true;
}

// BIND_MW, for ibv_post_send and ibv_wr_bind_mw alike: the errno a request the shim cannot even
// hand over gets at post time (a window missing or of another device), with *why; then the
// WQE's window part. Everything the IBA checks at bind time (the PDs of QP, window and MR: IBA
// C10-72; the MR's rights; the range) is simnicd's, and a failure completes with
// IBV_WC_MW_BIND_ERR, as rxe_bind_mw does. (ibv_bind_mw's own EPERM for an MR of another PD
// than a type 1 window is verbs.h's inline check, made before the shim is called.)
int bind_mw_error(const ibv_context* context, const ibv_mw* mw, const ibv_mw_bind_info& b, std::string* why) {
  if (!mw) {
    *why = "BIND_MW without a window: bind_mw.mw is NULL";
    return EINVAL;
  }
  if (mw->context != context) {
    *why = "BIND_MW of a window of another device context than the QP's";
    return EINVAL;
  }
  if (b.mr && b.mr->context != context) {
    *why = "BIND_MW to an MR of another device context than the QP's";
    return EINVAL;
  }
  return 0;
}

void fill_bind_mw(const ibv_mw& mw, uint32_t rkey, const ibv_mw_bind_info& b, SendWqe& w) {
  w.bind_mw = mw.handle;
  w.imm_data = mw.rkey;  // the window's rkey as the application knows it: simnicd checks it, as rxe
  w.rkey = rkey;
  w.bind_lkey = b.mr ? b.mr->lkey : 0;
  w.remote_addr = b.addr;
  w.bind_length = b.length;
  w.bind_access = b.mw_access_flags;
}

namespace {

std::string wr_opcode_text(ibv_wr_opcode op) {
  const WrOpcodeInfo* w = wr_opcode_info(op);
  return w ? std::string("IBV_WR_") + w->name : "(an opcode simnic does not know)";
}

const char* qp_state_text(ibv_qp_state s) {
  static const char* const kNames[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
  return unsigned(s) < 7 ? kNames[s] : "an unknown state";
}

std::string qp_prefix(const ibv_qp* qp) {
  char b[24];
  std::snprintf(b, sizeof b, "QP 0x%x: ", qp->qp_num);
  return b;
}

// A BIND_MW work request carries no data and no immediate: rxe's provider refuses one with a
// scatter/gather list or imm_data at post time (validate_send_wr), and so do we.
int bind_wr_error(const ibv_send_wr& wr, std::string* why) {
  if (wr.num_sge != 0) {
    *why = "BIND_MW with num_sge " + std::to_string(wr.num_sge) + ": a bind moves no data, num_sge must be 0";
    return EINVAL;
  }
  if (wr.imm_data != 0) {
    *why = "BIND_MW with imm_data set: a bind carries no immediate, imm_data must be 0";
    return EINVAL;
  }
  return 0;
}

// The WQE's data: inline bytes copied now (so the application may reuse its buffer on
// return), or the scatter/gather list as given.
int fill_payload(const ShimQp* qp, const ibv_send_wr& wr, SendWqe& w, std::string* why) {
  if (!(wr.send_flags & IBV_SEND_INLINE)) {
    w.inline_len = 0;
    w.num_sge = uint32_t(wr.num_sge);
    if (wr.num_sge) std::memcpy(w.sge, wr.sg_list, sizeof(ibv_sge) * size_t(wr.num_sge));
    return 0;
  }
  size_t total = 0;
  for (int i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
  if (total > qp->cap.max_inline_data) {
    *why = "IBV_SEND_INLINE with " + std::to_string(total) + " bytes, more than the QP's max_inline_data " +
           std::to_string(qp->cap.max_inline_data);
    return EINVAL;
  }
  size_t off = 0;
  for (int i = 0; i < wr.num_sge; ++i) {
    std::memcpy(w.inline_data + off, reinterpret_cast<const void*>(wr.sg_list[i].addr), wr.sg_list[i].length);
    off += wr.sg_list[i].length;
  }
  w.inline_len = uint32_t(total);
  w.num_sge = 0;
  return 0;
}

// Fills one send WQE; returns 0 or the errno post_send returns, with *why for the student.
int build_send_wqe(const ShimQp* qp, const ibv_send_wr& wr, SendWqe& w, std::string* why) {
  const ibv_qp& q = qp->qpx.qp_base;
  if (!opcode_allowed(q.qp_type, wr.opcode)) {
    *why = q.qp_type == IBV_QPT_XRC_RECV
               ? std::string("an XRC TGT QP sends nothing: post on the XRC INI QP")
               : wr_opcode_text(wr.opcode) + " needs an RC, UC or XRC INI QP: a UD QP binds no memory windows";
    return EINVAL;
  }
  w.wr_id = wr.wr_id;
  w.opcode = wr.opcode;
  w.send_flags = wr.send_flags;
  // An opcode simnic does not know has no row: it is posted as it is, and the requester
  // completes it with IBV_WC_LOC_QP_OP_ERR (as rxe).
  const WrOpcodeInfo* info = wr_opcode_info(wr.opcode);
  const uint32_t props = info ? info->props : 0;
  w.imm_data = (props & kWrInv) ? wr.invalidate_rkey : wr.imm_data;
  w.rkey = 0;
  w.remote_addr = 0;
  w.compare_add = w.swap = 0;
  w.ah = w.remote_qpn = w.remote_qkey = 0;
  w.remote_srqn = q.qp_type == IBV_QPT_XRC_SEND ? wr.qp_type.xrc.remote_srqn : 0;
  w.bind_mw = w.bind_lkey = w.bind_access = 0;
  w.bind_length = 0;
  if (props & kWrLocal) {
    // Memory-window operations carry no data: BIND_MW refuses a scatter/gather list (as rxe),
    // LOCAL_INV's is ignored.
    if (wr.opcode == IBV_WR_BIND_MW) {
      if (int e = bind_wr_error(wr, why)) return e;
      if (int e = bind_mw_error(q.context, wr.bind_mw.mw, wr.bind_mw.bind_info, why)) return e;
      fill_bind_mw(*wr.bind_mw.mw, wr.bind_mw.rkey, wr.bind_mw.bind_info, w);
    }
    w.num_sge = 0;
    w.inline_len = 0;
    w.send_flags &= ~unsigned(IBV_SEND_INLINE);
    return 0;
  }
  if (wr.num_sge < 0 || uint32_t(wr.num_sge) > qp->cap.max_send_sge) {
    *why = "num_sge " + std::to_string(wr.num_sge) + " is more than the QP's max_send_sge " +
           std::to_string(qp->cap.max_send_sge);
    return EINVAL;
  }
  if (props & kWrAtomic) {
    w.remote_addr = wr.wr.atomic.remote_addr;
    w.rkey = wr.wr.atomic.rkey;
    w.compare_add = wr.wr.atomic.compare_add;
    w.swap = wr.wr.atomic.swap;
  } else if (props & kWrRemoteAddr) {
    w.remote_addr = wr.wr.rdma.remote_addr;
    w.rkey = wr.wr.rdma.rkey;
  }
  if (q.qp_type == IBV_QPT_UD) {
    if (!wr.wr.ud.ah) {
      *why = "a UD send needs an address handle: wr.wr.ud.ah is NULL (create one with ibv_create_ah)";
      return EINVAL;
    }
    w.ah = wr.wr.ud.ah->handle;
    w.remote_qpn = wr.wr.ud.remote_qpn;
    w.remote_qkey = wr.wr.ud.remote_qkey;
  }
  return fill_payload(qp, wr, w, why);
}

int fill_recv_wqe(const ibv_recv_wr& wr, uint32_t max_sge, RecvWqe& w) {
  if (wr.num_sge < 0 || uint32_t(wr.num_sge) > max_sge) return EINVAL;
  w.wr_id = wr.wr_id;
  w.num_sge = uint32_t(wr.num_sge);
  if (wr.num_sge) std::memcpy(w.sge, wr.sg_list, sizeof(ibv_sge) * size_t(wr.num_sge));
  return 0;
}

}  // namespace

// A NIC that is gone takes no work: EIO, the errno rdma-core's post calls get from a removed
// device (rxe's doorbell command on a disassociated uverbs file).
template <class Wr>
bool refuse_if_lost(ibv_context* context, Wr* wr, Wr** bad_wr) {
  if (!nic_lost_sampled(to_shim(context))) return false;
  if (bad_wr) *bad_wr = wr;
  return true;
}

int post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  if (refuse_if_lost(ibqp->context, wr, bad_wr)) return EIO;
  ShimQp* qp = to_shim(ibqp);
  ShimContext* ctx = to_shim(ibqp->context);
  auto state = ibv_qp_state(qp->shm->state.load(std::memory_order_acquire));
  std::string why;
  int err = 0;
  bool sent_here = false;
  uint32_t posted = 0;  // WQEs published by this call
  {
    std::lock_guard lock(qp->sq_mu);
    // Sends need RTS (or SQD/SQE/ERR, where they are held or flushed), as on a real RNIC.
    if (state == IBV_QPS_RESET || state == IBV_QPS_INIT || state == IBV_QPS_RTR) {
      err = EINVAL;
      why = std::string("the QP is in ") + qp_state_text(state) +
            ", and sending needs RTS (ibv_modify_qp through INIT and RTR to RTS first)";
    }
    uint32_t prod = qp->shm->sq.producer.value.load(std::memory_order_relaxed);
    for (; wr && !err; wr = wr->next) {
      uint32_t cons = qp->shm->sq.consumer.value.load(std::memory_order_acquire);
      if (prod - cons >= qp->cap.max_send_wr) {
        err = ENOMEM;
        why = "the send queue is full: " + std::to_string(qp->cap.max_send_wr) +
              " work requests are outstanding (max_send_wr); poll their completions before posting more";
        break;
      }
      if ((err = build_send_wqe(qp, *wr, qp->sq[prod & (qp->sq_entries - 1)], &why))) break;
      ++prod;
      ++posted;
    }
    // One WQE, while the NIC lends the QP its next PSN: its packet is built before the WQE is
    // published and sent after (direct_send.cc), and the NIC needs no doorbell for it.
    DirectPacket direct;
    const uint32_t first = prod - 1;
    const bool one = posted && !err && wr == nullptr &&
                     first == qp->shm->sq.producer.value.load(std::memory_order_relaxed);
    const bool built = one && prepare_direct_send(ctx, qp, qp->sq[first & (qp->sq_entries - 1)], first, &direct);
    qp->shm->sq.producer.value.store(prod, std::memory_order_release);
    sent_here = built && send_direct_packet(ctx, qp, direct);
  }
  if (posted) note_posts(int(posted));
  if (posted && !sent_here && abi::send_must_ring(*qp->shm)) ring_doorbell(ctx);
  if (err && bad_wr) *bad_wr = wr;
  if (err) explain_refusal("ibv_post_send", err, qp_prefix(ibqp) + why);
  return err;
}

int post_recv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  if (refuse_if_lost(ibqp->context, wr, bad_wr)) return EIO;
  ShimQp* qp = to_shim(ibqp);
  std::string why;
  int err = 0;
  bool posted = false;
  {
    std::lock_guard lock(qp->rq_mu);
    if (ibqp->srq || qp->rq_entries == 0) {
      err = EINVAL;  // receives go to the SRQ
      why = "the QP takes its receives from an SRQ: post them with ibv_post_srq_recv";
    } else if (qp->shm->state.load(std::memory_order_acquire) == IBV_QPS_RESET) {
      err = EINVAL;
      why = "the QP is in RESET, and receives can be posted from INIT on";
    }
    uint32_t prod = qp->rq_entries ? qp->shm->rq.producer.value.load(std::memory_order_relaxed) : 0;
    for (; wr && !err; wr = wr->next) {
      uint32_t cons = qp->shm->rq.consumer.value.load(std::memory_order_acquire);
      if (prod - cons >= qp->cap.max_recv_wr) {
        err = ENOMEM;
        why = "the receive queue is full: " + std::to_string(qp->cap.max_recv_wr) +
              " receives are posted (max_recv_wr)";
        break;
      }
      if ((err = fill_recv_wqe(*wr, qp->cap.max_recv_sge, qp->rq[prod & (qp->rq_entries - 1)]))) {
        why = "num_sge " + std::to_string(wr->num_sge) + " is more than the QP's max_recv_sge " +
              std::to_string(qp->cap.max_recv_sge);
        break;
      }
      ++prod;
      posted = true;
    }
    if (posted) qp->shm->rq.producer.value.store(prod, std::memory_order_release);
  }
  // Receives need no doorbell to be found, but a QP in ERR must flush them at once, and a
  // request waiting in simnicd for a receive (docs/performance.md, "A request that waits for
  // its receive") must hear of it now rather than at the end of its wait.
  const abi::CqShared* recv_cq = ibqp->recv_cq ? to_shim(ibqp->recv_cq)->shm : nullptr;
  if (posted &&
      (qp->shm->state.load(std::memory_order_acquire) == IBV_QPS_ERR || abi::receive_must_ring(*qp->shm, recv_cq)))
    ring_doorbell(to_shim(ibqp->context));
  if (err && bad_wr) *bad_wr = wr;
  if (err) explain_refusal("ibv_post_recv", err, qp_prefix(ibqp) + why);
  return err;
}

int post_srq_recv(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  if (refuse_if_lost(ibsrq->context, wr, bad_wr)) return EIO;
  ShimSrq* srq = to_shim(ibsrq);
  int err = 0;
  std::lock_guard lock(srq->mu);
  uint32_t prod = srq->shm->ring.producer.value.load(std::memory_order_relaxed);
  for (; wr; wr = wr->next) {
    uint32_t cons = srq->shm->ring.consumer.value.load(std::memory_order_acquire);
    if (prod - cons >= srq->max_wr) {
      err = ENOMEM;
      break;
    }
    if ((err = fill_recv_wqe(*wr, srq->max_sge, srq->slots[prod & (srq->entries - 1)]))) break;
    ++prod;
  }
  srq->shm->ring.producer.value.store(prod, std::memory_order_release);
  if (err && bad_wr) *bad_wr = wr;
  return err;
}

}  // namespace simnic::shim
