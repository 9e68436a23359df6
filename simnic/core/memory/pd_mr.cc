// MemoryVerbs: protection domains, memory regions, memory windows (alloc and dealloc; binding is
// the requester's: memory_window.cc) and address handles: the verbs on a PD.
#include "simnic/core/device.h"
#include "simnic/core/text.h"

#include <algorithm>
#include <cerrno>

namespace simnic::core {

MemoryVerbs::MemoryVerbs(Device& dev) : dev_(dev) {}

namespace {

constexpr uint32_t kKnownAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                  IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
                                  IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_ON_DEMAND;

}  // namespace

int MemoryVerbs::alloc_pd(Context* ctx, uint32_t* handle) {
  if (int e = dev_.budgets().check_room(ctx, dev_.pds_.size(), &Context::pds, DeviceLimits::kMaxPd, "PDs", "max_pd"))
    return e;
  auto pd = dev_.make_object<Pd>(ctx);
  dev_.tracer_.event(TraceKind::kPdCreate).u("ctx", ctx->id).u("pd", pd->handle);
  *handle = dev_.insert_object(dev_.pds_, ctx->pds, std::move(pd))->handle;
  return 0;
}

int MemoryVerbs::dealloc_pd(Context* ctx, uint32_t handle) {
  Pd* pd = dev_.tables().owned(dev_.pds_, ctx, handle);
  if (!pd) return EINVAL;
  if (pd->users)
    return dev_.journal().refuse(EBUSY, std::to_string(pd->users) + " object(s) (MRs, QPs, SRQs, AHs) still use PD " +
                                            std::to_string(handle) + ": destroy them first");
  dev_.tracer_.event(TraceKind::kPdDestroy).u("ctx", ctx->id).u("pd", handle);
  dev_.erase_object(dev_.pds_, ctx->pds, handle);
  return 0;
}

int MemoryVerbs::reg_mr(Context* ctx, uint32_t pd_handle, uint64_t addr, uint64_t length, uint64_t iova,
                        uint32_t access, Mr** out) {
  Pd* pd = dev_.tables().owned(dev_.pds_, ctx, pd_handle);
  if (!pd) return EINVAL;
  if (access & ~kKnownAccess)
    return dev_.journal().refuse(EINVAL, "access flags " + hex(access) + " include bits simnic does not know");
  // Remote write or atomic access needs local write (IBA o10-36.2.1, ib_check_mr_access).
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
    return dev_.journal().refuse(
        EINVAL,
        "IBV_ACCESS_REMOTE_WRITE and IBV_ACCESS_REMOTE_ATOMIC need IBV_ACCESS_LOCAL_WRITE too (IBA o10-36.2.1)");
  if (covers_no_page(addr, length))
    return dev_.journal().refuse(EINVAL,
                                 "a zero-length MR at " + hex(addr) +
                                     ", a page boundary, covers no page (the kernel's "
                                     "ib_umem_get refuses it; at an address inside a page it registers that page)");
  // ODP (memory/odp.cc): the range is checked, its pages are not.
  if (access & IBV_ACCESS_ON_DEMAND) {
    if (int e = check_odp_range(addr, length, iova)) return e;
  } else if (length > DeviceLimits::kMaxMrSize || addr + length < addr) {
    return dev_.journal().refuse(EINVAL,
                                 "length " + std::to_string(length) + " wraps around, or is more than max_mr_size");
  }
  // The kernel pins the pages at registration: an unmapped range fails here, not later (an
  // ODP MR's pages are looked for at each access instead). A zero-length MR pins addr's page.
  if (!(access & IBV_ACCESS_ON_DEMAND))
    if (int e = check_pinnable(ctx, addr, length, access)) return e;
  return add_mr(ctx, pd, addr, length, iova, access, out);
}

// A checked registration becomes an MR with a fresh key (ibv_reg_mr, ibv_reg_dm_mr).
int MemoryVerbs::add_mr(Context* ctx, Pd* pd, uint64_t addr, uint64_t length, uint64_t iova, uint32_t access,
                        Mr** out) {
  if (int e = dev_.budgets().check_room(ctx, dev_.mrs_.size(), &Context::mrs, DeviceLimits::kMaxMr, "MRs", "max_mr"))
    return e;
  auto mr = dev_.make_object<Mr>(ctx);
  mr->pd = pd;
  mr->addr = addr;
  mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : iova;
  mr->length = length;
  mr->access = access;
  const uint32_t key = dev_.tables().new_mr_key();
  mr->lkey = mr->rkey = key;
  pd->users++;
  dev_.mr_by_key_[key] = mr.get();
  if (dev_.tracer_.on()) dev_.trace_points().trace_mr_create(*mr);
  *out = dev_.insert_object(dev_.mrs_, ctx->mrs, std::move(mr));
  return 0;
}

// Only a pinned MR over the program's own memory qualifies: an ODP MR's pages come and go (it
// reads whatever is mapped now), and device memory is the NIC's own.
int MemoryVerbs::share_pages(const Mr& mr, int fd, uint64_t fd_base) {
  if ((mr.access & IBV_ACCESS_ON_DEMAND) || is_dm_mr(mr.handle) || mr.length == 0) return EOPNOTSUPP;
  return dev_.env_.memory.share_pages(mr.ctx->pid, mr.lkey, mr.addr, mr.length, fd, fd_base);
}

namespace {

// Why an MR with windows bound to it stays registered (IBA 10.6.7.2.6, as rxe_dereg_mr). The
// errno is rxe's EINVAL, which uverbs (uverbs_free_mr) and rdma-core (ibv_cmd_dereg_mr) pass
// through unchanged: nothing in that stack returns EBUSY here.
std::string bound_windows_refusal(const Mr& mr) {
  return "MR lkey " + hex(mr.lkey) + " has " + std::to_string(mr.bound_mws) +
         " memory window(s) bound to it: invalidate them (type 2: LOCAL_INV), unbind them (type 1: bind with "
         "length 0) or deallocate them first (IBA 10.6.7.2.6; EINVAL, as rxe)";
}

}  // namespace

int MemoryVerbs::dereg_mr(Context* ctx, uint32_t handle) {
  Mr* mr = dev_.tables().owned(dev_.mrs_, ctx, handle);
  if (!mr) return EINVAL;
  if (mr->bound_mws) return dev_.journal().refuse(EINVAL, bound_windows_refusal(*mr));
  // An engine may still point at this MR mid-message; drop those references.
  for (auto& [h, qp] : dev_.qps_) {
    if (qp->resp.write_mr == mr) qp->resp.write_mr = nullptr, qp->resp.write_left = 0;
    for (auto& rr : qp->resp.read_responses)
      if (rr.mr == mr) rr.mr = nullptr;
  }
  dev_.tracer_.event(TraceKind::kMrDestroy)
      .u("ctx", ctx->id)
      .u("pd", mr->pd->handle)
      .u("mr", handle)
      .u("lkey", mr->lkey)
      .u("rkey", mr->rkey)
      .hex("addr", mr->iova)
      .u("length", mr->length)
      .s("access", access_string(mr->access));
  mr->pd->users--;
  dev_.env_.memory.unshare_pages(mr->lkey);
  dev_.mr_by_key_.erase(mr->lkey);
  dev_.erase_object(dev_.mrs_, ctx->mrs, handle);
  return 0;
}

int MemoryVerbs::create_ah(Context* ctx, uint32_t pd_handle, const ibv_ah_attr& attr, uint32_t* handle) {
  Pd* pd = dev_.tables().owned(dev_.pds_, ctx, pd_handle);
  if (!pd) return EINVAL;
  if (attr.port_num != 1)
    return dev_.journal().refuse(EINVAL,
                                 "port_num " + std::to_string(attr.port_num) + " does not exist (the NIC has port 1)");
  // On RoCE an AH without a GRH has nowhere to go; in IB mode its DLID names the peer. A
  // multicast GID is sent to the IPv4 group group_ipv4 maps it to.
  uint32_t dst_ip = 0;
  std::string why;
  if (attr.is_global && is_multicast_gid(attr.grh.dgid)) {
    if (dev_.addressing().check_sgid_index(attr.grh.sgid_index, &why)) return dev_.journal().refuse(EINVAL, why);
    dst_ip = group_ipv4(attr.grh.dgid);
  } else if (dev_.addressing().resolve_av(attr, &dst_ip, &why)) {
    dev_.journal().log(LogLevel::kWarn, "create_ah refused (EINVAL): " + why);
    return dev_.journal().refuse(EINVAL, why);
  }
  if (int e = dev_.budgets().check_room(ctx, dev_.ahs_.size(), &Context::ahs, DeviceLimits::kMaxAh, "address handles",
                                        "max_ah"))
    return e;
  auto ah = dev_.make_object<Ah>(ctx);
  ah->pd = pd;
  ah->attr = attr;
  ah->dst_ip = dst_ip;
  pd->users++;
  *handle = dev_.insert_object(dev_.ahs_, ctx->ahs, std::move(ah))->handle;
  return 0;
}

int MemoryVerbs::destroy_ah(Context* ctx, uint32_t handle) {
  Ah* ah = dev_.tables().owned(dev_.ahs_, ctx, handle);
  if (!ah) return EINVAL;
  ah->pd->users--;
  dev_.erase_object(dev_.ahs_, ctx->ahs, handle);
  return 0;
}

int MemoryVerbs::alloc_mw(Context* ctx, uint32_t pd_handle, ibv_mw_type type, Mw** out) {
  Pd* pd = dev_.tables().owned(dev_.pds_, ctx, pd_handle);
  if (!pd) return EINVAL;
  if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)
    return dev_.journal().refuse(EINVAL, "type " + std::to_string(int(type)) +
                                             ": a memory window is IBV_MW_TYPE_1 or IBV_MW_TYPE_2");
  if (int e = dev_.budgets().check_room(ctx, dev_.mws_.size(), &Context::mws, DeviceLimits::kMaxMw, "memory windows",
                                        "max_mw"))
    return e;
  auto mw = std::make_unique<Mw>();
  mw->handle = dev_.tables().new_mw_index();  // also the rkey's index (rkey >> 8), so random too
  mw->ctx = ctx;
  mw->pd = pd;
  mw->type = type;
  mw->rkey = (mw->handle << 8) | (dev_.tables().keys_.next() & 0xff);
  pd->users++;
  ctx->mws.push_back(mw->handle);
  dev_.trace_points().trace_mw_create(*mw);
  *out = mw.get();
  dev_.mws_[mw->handle] = std::move(mw);
  return 0;
}

int MemoryVerbs::dealloc_mw(Context* ctx, uint32_t handle) {
  Mw* mw = dev_.tables().owned(dev_.mws_, ctx, handle);
  if (!mw) return EINVAL;
  dev_.engines_.windows.unbind_mw(*mw);  // deallocating a bound window invalidates it (IBA 11.2.10.5)
  dev_.tracer_.event(TraceKind::kMwDestroy).u("ctx", ctx->id).u("mw", handle).u("rkey", mw->rkey);
  mw->pd->users--;
  ctx->mws.erase(std::remove(ctx->mws.begin(), ctx->mws.end(), handle), ctx->mws.end());
  dev_.mws_.erase(handle);
  return 0;
}
}  // namespace simnic::core
