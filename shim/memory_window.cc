// Memory windows: ibv_alloc_mw / ibv_dealloc_mw / ibv_bind_mw reach us through
// ibv_context.ops (verbs.h's inline wrappers call them). Allocation is a slow-path call; a
// bind is a BIND_MW work request on the QP's send queue, as on rxe and mlx5, so it is ordered
// with the QP's other work and completes with IBV_WC_BIND_MW.
#include <string>

#include "shim/shim.h"

using namespace simnic::abi;

namespace simnic::shim {

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
    explain_refusal("ibv_alloc_mw", EINVAL,
                    "type " + std::to_string(int(type)) + ": a memory window is IBV_MW_TYPE_1 or IBV_MW_TYPE_2");
    return fail_null<ibv_mw>(EINVAL);
  }
  AllocMwReply rep{};
  if (int st = rpc(to_shim(pd->context), Op::AllocMw, AllocMwReq{pd->handle, uint32_t(type)}, &rep)) {
    explain_refusal("ibv_alloc_mw", st, last_refusal());
    return fail_null<ibv_mw>(st);
  }
  auto* mw = new ibv_mw{};
  mw->context = pd->context;
  mw->pd = pd;
  mw->rkey = rep.rkey;
  mw->handle = rep.handle;
  mw->type = type;
  return mw;
}

int dealloc_mw(ibv_mw* mw) {
  int st = rpc_status(to_shim(mw->context), Op::DeallocMw, HandleReq{mw->handle, 0});
  if (st == 0) delete mw;
  return st;
}

extern int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);

// Type 1 windows (verbs.h already checked the type and the MR's PD). The window gets the next
// key byte at once; if the bind completes in error the application undoes that, as with rxe.
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind) {
  if (mw_bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED) return EINVAL;
  ibv_send_wr wr{};
  wr.wr_id = mw_bind->wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = mw_bind->send_flags;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = mw_bind->bind_info;
  ibv_send_wr* bad = nullptr;
  if (int st = post_send(qp, &wr, &bad)) return st;
  mw->rkey = wr.bind_mw.rkey;
  return 0;
}

}  // namespace simnic::shim
