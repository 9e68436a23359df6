// The memory-window data path (IBA 10.6.7; rxe_mw.c plays the same role): the BIND_MW and
// LOCAL_INV work requests the requester executes when it reaches them in the SQ, remote
// invalidation by SEND_WITH_INV, and the check a remote access through a window's rkey passes.
// Each rule refused cites its IBA number, because the messages are what a student reads.
// Allocation and deallocation are verbs (memory_window.cc).
#include <string>

#include "simnic/core/device.h"
#include "simnic/core/text.h"

namespace simnic::core {

namespace {

constexpr uint32_t kRemoteAccess = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;

std::string mw_name(const Mw& mw) {
  return std::string("type ") + (mw.type == IBV_MW_TYPE_2 ? "2" : "1") + " window " + hex(mw.rkey);
}

// The window side of BIND_MW (IBA 10.6.7.2 and the checks C10-72..C10-75 that rxe also
// makes): "" when `mw` may be bound by `w` through `qp`, else why not.
// The new rkey's index is not checked: only its key byte is taken (rkey_after_bind). The WR
// names the window by its current rkey too (ibv_mw.rkey, which the shim carries in imm_data,
// where mlx5 puts it as well): rxe_bind_mw refuses a WR whose mw_rkey is not the window's.
std::string bind_window_error(const Qp& qp, const abi::SendWqe& w, const Mw& mw) {
  if (w.imm_data != mw.rkey)
    return "the WR names it by rkey " + hex(w.imm_data) + " (ibv_mw.rkey), but its rkey is " + hex(mw.rkey) +
           ": ibv_post_send does not update ibv_mw.rkey after a bind; set it to the rkey the bind gave, as on rxe";
  if (mw.pd != qp.pd) return "the window and QP " + hex(qp.qpn) + " are in different PDs (IBA C10-72)";
  if (mw.type == IBV_MW_TYPE_1 && (w.bind_access & IBV_ACCESS_ZERO_BASED))
    return "a type 1 window cannot be zero based (IBA o10-36.2.2)";
  if (mw.type == IBV_MW_TYPE_2 && mw.mr)
    return "a type 2 window must be free to be bound; invalidate it first (IBA o10-37.2.30)";
  return "";
}

// The MR side: "" when `mr` (nullptr: an unbind) may back the window.
std::string bind_mr_error(const Qp& qp, const abi::SendWqe& w, const Mw& mw, const Mr* mr) {
  if (mw.type == IBV_MW_TYPE_2 && (!mr || w.bind_length == 0))
    return "a type 2 window needs an MR and a length > 0 (IBA o10-37.2.40)";
  if (!mr) return "";
  if (mr->pd != qp.pd) return "MR lkey " + hex(mr->lkey) + " is in another PD than the QP and window";
  if (mr->access & IBV_ACCESS_ZERO_BASED)
    return "MR lkey " + hex(mr->lkey) + " is zero based; windows bind to virtually addressed MRs";
  if (!(mr->access & IBV_ACCESS_MW_BIND))
    return "MR lkey " + hex(mr->lkey) + " was registered without IBV_ACCESS_MW_BIND (IBA C10-73)";
  if ((w.bind_access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(mr->access & IBV_ACCESS_LOCAL_WRITE))
    return "remote write or atomic rights need an MR with LOCAL_WRITE (IBA C10-74)";
  const uint64_t start = (w.bind_access & IBV_ACCESS_ZERO_BASED) ? mr->iova : w.remote_addr;
  if (start < mr->iova || w.bind_length > mr->length || start - mr->iova > mr->length - w.bind_length)
    return "[" + hex(start) + ", +" + std::to_string(w.bind_length) + ") is outside MR lkey " + hex(mr->lkey) + " [" +
           hex(mr->iova) + ", +" + std::to_string(mr->length) + ") (IBA C10-75)";
  return "";
}

// The rkey a bind gives the window: the window's own index with the key byte of the WR's rkey.
// Of an R_Key only the low 8 bits are the consumer-owned key; the rest is the index that names
// the window, and a bind does not move it (IBA 10.6.7.2). rxe_do_bind_mw does the same
// (mw->rkey = (mw->rkey & ~0xff) | (wr.mw.rkey & 0xff)), so a program may pass
// ibv_inc_rkey(mw->rkey) or any small fresh value and read the result from the window's rkey.
uint32_t rkey_after_bind(const Mw& mw, uint32_t wr_rkey) { return (mw.rkey & ~0xffu) | (wr_rkey & 0xffu); }

}  // namespace

void WindowBinding::unbind_mw(Mw& mw) {
  if (mw.mr) mw.mr->bound_mws--;
  mw.mr = nullptr;
  mw.qp = nullptr;
  mw.addr = mw.length = 0;
  mw.access = 0;
}

void WindowBinding::unbind_mws_of_qp(const Qp& qp) {
  for (auto& [h, mw] : dev_.mws_)
    if (mw->qp == &qp) unbind_mw(*mw);
}

const Mr* WindowBinding::check_mw_access(const Qp& qp, const Mw& mw, uint32_t rkey, uint64_t va, uint64_t len,
                                         uint32_t access, uint64_t* mr_va, std::string* why) const {
  const std::string name = "rkey " + hex(rkey);
  if (mw.rkey != rkey) {
    *why = name + " is stale: the window was bound again since and its rkey is now " + hex(mw.rkey);
    return nullptr;
  }
  if (!mw.mr) {
    *why = name + " names a " + mw_name(mw) + " that is not bound (never bound, invalidated or unbound)";
    return nullptr;
  }
  if (mw.pd != qp.pd) {
    *why = name + " names a window of another PD than QP " + hex(qp.qpn) + "'s";
    return nullptr;
  }
  if (mw.type == IBV_MW_TYPE_2 && mw.qp != &qp) {
    *why = name + " names a type 2 window bound through QP " + hex(mw.qp->qpn) + ", not through QP " + hex(qp.qpn) +
           " (IBA 10.6.7.2: a type 2 window serves only the QP that bound it)";
    return nullptr;
  }
  if (!(mw.access & access)) {
    *why = name + " not valid for " + access_string(access) + " (window bound with " +
           (mw.access & kRemoteAccess ? access_string(mw.access & kRemoteAccess) : std::string("no remote rights")) +
           ")";
    return nullptr;
  }
  // A zero-based window is addressed from 0; otherwise with the MR's own addresses.
  const uint64_t base = (mw.access & IBV_ACCESS_ZERO_BASED) ? 0 : mw.addr;
  if (va < base || len > mw.length || va - base > mw.length - len) {
    *why = name + ": [" + hex(va) + ", +" + std::to_string(len) + ") is outside the window [" + hex(base) + ", +" +
           std::to_string(mw.length) + ")";
    return nullptr;
  }
  *mr_va = mw.addr + (va - base);
  return mw.mr;
}

// LOCAL_INV and SEND_WITH_INV make the same checks: only a bound type 2 window of the QP's
// PD, named by its current rkey, can be invalidated (IBA 10.6.7.2.3, o10-37.2.26).
bool WindowBinding::invalidate_mw(Qp& qp, uint32_t rkey, const char* by, std::string* why) {
  const std::string name = std::string(by) + " of rkey " + hex(rkey) + ": ";
  Mw* mw = dev_.tables().find_mw_by_rkey_index(rkey);
  if (!mw) {
    *why = name + (dev_.tables().find_mr_by_key(rkey)
                       ? "it names an MR from ibv_reg_mr, which cannot be invalidated; only type 2 memory windows can"
                       : "it names no memory window");
    return false;
  }
  if (mw->pd != qp.pd) {
    *why = name + "the window belongs to another PD than QP " + hex(qp.qpn) + "'s";
    return false;
  }
  if (mw->rkey != rkey) {
    *why = name + "stale key, the window's rkey is " + hex(mw->rkey);
    return false;
  }
  if (mw->type == IBV_MW_TYPE_1) {
    *why = name + "a type 1 window cannot be invalidated; it is unbound by binding it with length 0 (IBA o10-37.2.26)";
    return false;
  }
  if (!mw->mr) {
    *why = name + "the window is not bound";
    return false;
  }
  unbind_mw(*mw);
  dev_.tracer_.event(TraceKind::kMwInvalidate).u("qp", qp.qpn).u("mw", mw->handle).u("rkey", rkey).s("by", by);
  return true;
}

ibv_wc_status WindowBinding::execute_local_wqe(Qp& qp, const abi::SendWqe& w, std::string* why) {
  // invalidate_rkey travels in imm_data. A LOCAL_INV that cannot be carried out completes with
  // IBV_WC_LOC_QP_OP_ERR, as rxe_do_local_ops completes it; MW_BIND_ERR is for binds.
  if (w.opcode == IBV_WR_LOCAL_INV)
    return invalidate_mw(qp, w.imm_data, "LOCAL_INV", why) ? IBV_WC_SUCCESS : IBV_WC_LOC_QP_OP_ERR;
  Mw* mw = dev_.tables().owned(dev_.mws_, qp.ctx, w.bind_mw);
  if (!mw) {
    *why = "BIND_MW: handle " + std::to_string(w.bind_mw) + " names no memory window of this context";
    return IBV_WC_MW_BIND_ERR;
  }
  const std::string name = "BIND_MW of " + mw_name(*mw) + ": ";
  if (std::string e = bind_window_error(qp, w, *mw); !e.empty()) {
    *why = name + e;
    return IBV_WC_MW_BIND_ERR;
  }
  // A bind of length 0 names no MR, whatever its lkey (rxe_bind_mw looks the MR up only for a
  // length > 0): a type 1 window is unbound so, a type 2 one refused (IBA o10-37.2.40).
  const Mr* mr = nullptr;
  if (w.bind_length) {
    mr = dev_.tables().find_mr_by_key(w.bind_lkey);
    if (!mr || mr->ctx != qp.ctx) {
      *why = name + "lkey " + hex(w.bind_lkey) + " names no MR";
      return IBV_WC_MW_BIND_ERR;
    }
  }
  if (std::string e = bind_mr_error(qp, w, *mw, mr); !e.empty()) {
    *why = name + e;
    return IBV_WC_MW_BIND_ERR;
  }
  bind_mw(qp, w, *mw, mr);
  return IBV_WC_SUCCESS;
}

void WindowBinding::bind_mw(Qp& qp, const abi::SendWqe& w, Mw& mw, const Mr* mr) {
  unbind_mw(mw);  // a type 1 window may be re-bound while bound
  mw.rkey = rkey_after_bind(mw, w.rkey);
  if (mr && w.bind_length) {
    mw.mr = mr;
    mr->bound_mws++;
    mw.qp = mw.type == IBV_MW_TYPE_2 ? &qp : nullptr;
    mw.addr = (w.bind_access & IBV_ACCESS_ZERO_BASED) ? mr->iova : w.remote_addr;
    mw.length = w.bind_length;
    mw.access = w.bind_access & (kRemoteAccess | IBV_ACCESS_ZERO_BASED);
  }
  if (dev_.tracer_.on()) {
    dev_.tracer_.event(TraceKind::kMwBind)
        .u("qp", qp.qpn)
        .u("mw", mw.handle)
        .u("rkey", mw.rkey)
        .u("mr", mr ? mr->handle : 0)
        .hex("addr", mw.addr)
        .u("length", mw.length)
        .s("access", access_string(mw.access));
  }
}

}  // namespace simnic::core
