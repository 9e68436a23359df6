// Device: protection domains, memory regions and address handles (the verbs on a PD).
#include "simnic/core/device.h"
#include "simnic/core/text.h"

#include <cerrno>

namespace simnic::core {

namespace {

constexpr uint32_t kKnownAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                  IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
                                  IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_ON_DEMAND;

}  // namespace

int Device::alloc_pd(Context* ctx, uint32_t* handle) {
  if (int e = check_room(ctx, pds_.size(), &Context::pds, DeviceLimits::kMaxPd, "PDs", "max_pd")) return e;
  auto pd = make_object<Pd>(ctx);
  tracer_.event(TraceKind::kPdCreate).u("ctx", ctx->id).u("pd", pd->handle);
  *handle = insert_object(pds_, ctx->pds, std::move(pd))->handle;
  return 0;
}

int Device::dealloc_pd(Context* ctx, uint32_t handle) {
  Pd* pd = owned(pds_, ctx, handle);
  if (!pd) return EINVAL;
  if (pd->users)
    return journal_.refuse(EBUSY, std::to_string(pd->users) + " object(s) (MRs, QPs, SRQs, AHs) still use PD " +
                                      std::to_string(handle) + ": destroy them first");
  tracer_.event(TraceKind::kPdDestroy).u("ctx", ctx->id).u("pd", handle);
  erase_object(pds_, ctx->pds, handle);
  return 0;
}

int Device::reg_mr(Context* ctx, uint32_t pd_handle, uint64_t addr, uint64_t length, uint64_t iova, uint32_t access,
                   Mr** out) {
  Pd* pd = owned(pds_, ctx, pd_handle);
  if (!pd) return EINVAL;
  if (access & ~kKnownAccess)
    return journal_.refuse(EINVAL, "access flags " + hex(access) + " include bits simnic does not know");
  // Remote write or atomic access needs local write (IBA o10-36.2.1, ib_check_mr_access).
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
    return journal_.refuse(
        EINVAL,
        "IBV_ACCESS_REMOTE_WRITE and IBV_ACCESS_REMOTE_ATOMIC need IBV_ACCESS_LOCAL_WRITE too (IBA o10-36.2.1)");
  if (covers_no_page(addr, length))
    return journal_.refuse(EINVAL, "a zero-length MR at " + hex(addr) +
                                       ", a page boundary, covers no page (the kernel's "
                                       "ib_umem_get refuses it; at an address inside a page it registers that page)");
  // ODP (memory/odp.cc): the range is checked, its pages are not.
  if (access & IBV_ACCESS_ON_DEMAND) {
    if (int e = check_odp_range(addr, length, iova)) return e;
  } else if (length > DeviceLimits::kMaxMrSize || addr + length < addr) {
    return journal_.refuse(EINVAL, "length " + std::to_string(length) + " wraps around, or is more than max_mr_size");
  }
  // The kernel pins the pages at registration: an unmapped range fails here, not later (an
  // ODP MR's pages are looked for at each access instead). A zero-length MR pins addr's page.
  if (!(access & IBV_ACCESS_ON_DEMAND))
    if (int e = check_pinnable(ctx, addr, length, access)) return e;
  return add_mr(ctx, pd, addr, length, iova, access, out);
}

// A checked registration becomes an MR with a fresh key (ibv_reg_mr, ibv_reg_dm_mr).
int Device::add_mr(Context* ctx, Pd* pd, uint64_t addr, uint64_t length, uint64_t iova, uint32_t access, Mr** out) {
  if (int e = check_room(ctx, mrs_.size(), &Context::mrs, DeviceLimits::kMaxMr, "MRs", "max_mr")) return e;
  auto mr = make_object<Mr>(ctx);
  mr->pd = pd;
  mr->addr = addr;
  mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : iova;
  mr->length = length;
  mr->access = access;
  const uint32_t key = new_mr_key();
  mr->lkey = mr->rkey = key;
  pd->users++;
  mr_by_key_[key] = mr.get();
  if (tracer_.on()) trace_points_.trace_mr_create(*mr);
  *out = insert_object(mrs_, ctx->mrs, std::move(mr));
  return 0;
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

int Device::dereg_mr(Context* ctx, uint32_t handle) {
  Mr* mr = owned(mrs_, ctx, handle);
  if (!mr) return EINVAL;
  if (mr->bound_mws) return journal_.refuse(EINVAL, bound_windows_refusal(*mr));
  // An engine may still point at this MR mid-message; drop those references.
  for (auto& [h, qp] : qps_) {
    if (qp->resp.write_mr == mr) qp->resp.write_mr = nullptr, qp->resp.write_left = 0;
    for (auto& rr : qp->resp.read_responses)
      if (rr.mr == mr) rr.mr = nullptr;
  }
  tracer_.event(TraceKind::kMrDestroy)
      .u("ctx", ctx->id)
      .u("pd", mr->pd->handle)
      .u("mr", handle)
      .u("lkey", mr->lkey)
      .u("rkey", mr->rkey)
      .hex("addr", mr->iova)
      .u("length", mr->length)
      .s("access", access_string(mr->access));
  mr->pd->users--;
  mr_by_key_.erase(mr->lkey);
  erase_object(mrs_, ctx->mrs, handle);
  return 0;
}

int Device::create_ah(Context* ctx, uint32_t pd_handle, const ibv_ah_attr& attr, uint32_t* handle) {
  Pd* pd = owned(pds_, ctx, pd_handle);
  if (!pd) return EINVAL;
  if (attr.port_num != 1)
    return journal_.refuse(EINVAL,
                           "port_num " + std::to_string(attr.port_num) + " does not exist (the NIC has port 1)");
  // On RoCE an AH without a GRH has nowhere to go; in IB mode its DLID names the peer. A
  // multicast GID is sent to the IPv4 group group_ipv4 maps it to.
  uint32_t dst_ip = 0;
  std::string why;
  if (attr.is_global && is_multicast_gid(attr.grh.dgid)) {
    if (check_sgid_index(attr.grh.sgid_index, &why)) return journal_.refuse(EINVAL, why);
    dst_ip = group_ipv4(attr.grh.dgid);
  } else if (resolve_av(attr, &dst_ip, &why)) {
    journal_.log(LogLevel::kWarn, "create_ah refused (EINVAL): " + why);
    return journal_.refuse(EINVAL, why);
  }
  if (int e = check_room(ctx, ahs_.size(), &Context::ahs, DeviceLimits::kMaxAh, "address handles", "max_ah")) return e;
  auto ah = make_object<Ah>(ctx);
  ah->pd = pd;
  ah->attr = attr;
  ah->dst_ip = dst_ip;
  pd->users++;
  *handle = insert_object(ahs_, ctx->ahs, std::move(ah))->handle;
  return 0;
}

int Device::destroy_ah(Context* ctx, uint32_t handle) {
  Ah* ah = owned(ahs_, ctx, handle);
  if (!ah) return EINVAL;
  ah->pd->users--;
  erase_object(ahs_, ctx->ahs, handle);
  return 0;
}

}  // namespace simnic::core
