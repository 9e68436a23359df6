// ibv_rereg_mr (IBA 11.2.8.3, "Reregister Memory Region"): the PD, the translation and the
// access of an existing MR change in place; its handle and keys stay, as mlx5 keeps them when
// it can. The checks and errnos are the kernel's (ib_uverbs_rereg_mr, ib_check_mr_access).
#include "simnic/core/device.h"
#include "simnic/core/text.h"

#include <cerrno>

namespace simnic::core {

namespace {

constexpr uint32_t kReregFlags = IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;

}  // namespace

// The access rules of ibv_reg_mr, shared by every verb that sets an MR's access.
int MemoryVerbs::check_mr_access(uint32_t access) {
  constexpr uint32_t kKnown = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                              IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
                              IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_ON_DEMAND;
  if (access & ~kKnown)
    return dev_.journal().refuse(EINVAL, "access flags " + hex(access) + " include bits simnic does not know");
  // Remote write or atomic access needs local write (IBA o10-36.2.1, ib_check_mr_access).
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
    return dev_.journal().refuse(
        EINVAL,
        "IBV_ACCESS_REMOTE_WRITE and IBV_ACCESS_REMOTE_ATOMIC need IBV_ACCESS_LOCAL_WRITE too (IBA o10-36.2.1)");
  return 0;
}

// [addr, addr + length) must be a valid range, mapped in the program (the kernel pins it).
int MemoryVerbs::check_mr_range(Context* ctx, uint64_t addr, uint64_t length, uint32_t access) {
  if (length == 0 || length > DeviceLimits::kMaxMrSize || addr + length < addr)
    return dev_.journal().refuse(EINVAL, "length " + std::to_string(length) +
                                             " is 0, wraps around, or is more than max_mr_size");
  return check_pinnable(ctx, addr, length, access);
}

// What the kernel's ib_umem_get checks when it pins an MR's pages (pin_user_pages, with
// FOLL_WRITE when ib_access_writable): every page mapped and readable, and writable if the MR
// may be written (local or remote write, atomics, memory window binding).
int MemoryVerbs::check_pinnable(Context* ctx, uint64_t addr, uint64_t length, uint32_t access) {
  const bool writable =
      access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND);
  const int e = dev_.env_.memory.check_mapped(ctx->pid, addr, length, writable);
  if (e == 0) return 0;
  return dev_.journal().refuse(e == EPERM ? EPERM : EFAULT,
                               "[" + hex(addr) + ", +" + std::to_string(length) + ") is not all mapped " +
                                   (writable ? "readable and writable" : "readable") + " in the program");
}

// Everything is checked before anything changes: a refused rereg leaves the MR as it was.
int MemoryVerbs::check_rereg(Context* ctx, const Mr& mr, const MrRereg& req, Pd** new_pd) {
  if (is_dm_mr(mr.handle))
    return dev_.journal().refuse(EINVAL, "an MR over device memory cannot be re-registered (as the kernel's)");
  if (mr.bound_mws)
    return dev_.journal().refuse(EBUSY, std::to_string(mr.bound_mws) + " memory window(s) are bound to MR " +
                                            hex(mr.lkey) + ": invalidate or unbind them before ibv_rereg_mr");
  *new_pd = mr.pd;
  if (req.flags & IBV_REREG_MR_CHANGE_PD) {
    *new_pd = dev_.tables().owned(dev_.pds_, ctx, req.pd);
    if (!*new_pd) return dev_.journal().refuse(EINVAL, "IBV_REREG_MR_CHANGE_PD: no such PD");
  }
  if (req.flags & IBV_REREG_MR_CHANGE_ACCESS)
    if (int e = check_mr_access(req.access)) return e;
  // An MR stays pinned or on-demand (memory/odp.cc): that is how it was registered.
  const uint32_t access = (req.flags & IBV_REREG_MR_CHANGE_ACCESS) ? req.access : mr.access;
  const bool odp = access & IBV_ACCESS_ON_DEMAND;
  if (odp != is_odp_mr(mr))
    return dev_.journal().refuse(EINVAL, "ibv_rereg_mr cannot add or remove IBV_ACCESS_ON_DEMAND");
  if (req.flags & IBV_REREG_MR_CHANGE_TRANSLATION)
    if (int e = odp ? check_odp_range(req.addr, req.length, req.addr)
                    : check_mr_range(ctx, req.addr, req.length, access))
      return e;
  return 0;
}

int MemoryVerbs::rereg_mr(Context* ctx, const MrRereg& req, Mr** out) {
  if (!req.flags || (req.flags & ~kReregFlags))
    return dev_.journal().refuse(EINVAL, "ibv_rereg_mr flags " + hex(req.flags) +
                                             ": none, or bits outside IBV_REREG_MR_FLAGS_SUPPORTED");
  Mr* mr = dev_.tables().owned(dev_.mrs_, ctx, req.mr);
  if (!mr) return EINVAL;
  Pd* pd = nullptr;
  if (int e = check_rereg(ctx, *mr, req, &pd)) return e;
  // What an engine is doing with the old registration ends as after ibv_dereg_mr: the rest of
  // a message in flight finds no MR (IBA 11.2.8.3: rereg is a deregister then a register).
  dev_.engines_.responder.forget_mr(mr);
  dev_.trace_points().trace_mr_destroy(*mr);
  mr->pd->users--;
  mr->pd = pd;
  pd->users++;
  const bool was_zero_based = mr->access & IBV_ACCESS_ZERO_BASED;
  if (req.flags & IBV_REREG_MR_CHANGE_ACCESS) mr->access = req.access;
  if (req.flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
    dev_.env_.memory.unshare_pages(mr->lkey);  // the new range is reached by pid (no memfd came)
    mr->addr = req.addr, mr->length = req.length;
  }
  // The iova: zero-based, or the new address (rdma-core's providers send hca_va = addr).
  if (mr->access & IBV_ACCESS_ZERO_BASED) mr->iova = 0;
  else if ((req.flags & IBV_REREG_MR_CHANGE_TRANSLATION) || was_zero_based) mr->iova = mr->addr;
  if (dev_.tracer_.on()) dev_.trace_points().trace_mr_create(*mr);
  *out = mr;
  return 0;
}

}  // namespace simnic::core
