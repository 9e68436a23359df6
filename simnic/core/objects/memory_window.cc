// Memory windows (IBA 10.6.7; rxe_mw.c plays the same role): allocation, the BIND_MW and
// LOCAL_INV work requests the requester executes when it reaches them in the SQ, remote
// invalidation by SEND_WITH_INV, and the check a remote access through a window's rkey passes.
// Each rule refused cites its IBA number, because the messages are what a student reads.
#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "simnic/core/device.h"
#include "simnic/core/text.h"

namespace simnic::core {

int Device::alloc_mw(Context* ctx, uint32_t pd_handle, ibv_mw_type type, Mw** out) {
  Pd* pd = owned(pds_, ctx, pd_handle);
  if (!pd) return EINVAL;
  if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)
    return refuse(EINVAL, "type " + std::to_string(int(type)) + ": a memory window is IBV_MW_TYPE_1 or IBV_MW_TYPE_2");
  if (int e = check_room(ctx, mws_.size(), &Context::mws, DeviceLimits::kMaxMw, "memory windows", "max_mw")) return e;
  auto mw = std::make_unique<Mw>();
  mw->handle = new_mw_index();  // also the rkey's index (rkey >> 8), so random too
  mw->ctx = ctx;
  mw->pd = pd;
  mw->type = type;
  mw->rkey = (mw->handle << 8) | (keys_.next() & 0xff);
  pd->users++;
  ctx->mws.push_back(mw->handle);
  trace_mw_create(*mw);
  *out = mw.get();
  mws_[mw->handle] = std::move(mw);
  return 0;
}

int Device::dealloc_mw(Context* ctx, uint32_t handle) {
  Mw* mw = owned(mws_, ctx, handle);
  if (!mw) return EINVAL;
  unbind_mw(*mw);  // deallocating a bound window invalidates it (IBA 11.2.10.5)
  tracer_.event(TraceKind::kMwDestroy).u("ctx", ctx->id).u("mw", handle).u("rkey", mw->rkey);
  mw->pd->users--;
  ctx->mws.erase(std::remove(ctx->mws.begin(), ctx->mws.end(), handle), ctx->mws.end());
  mws_.erase(handle);
  return 0;
}

Mw* Device::find_mw_by_rkey_index(uint32_t rkey) const {
  auto it = mws_.find(rkey >> 8);
  return it == mws_.end() ? nullptr : it->second.get();
}

}  // namespace simnic::core
