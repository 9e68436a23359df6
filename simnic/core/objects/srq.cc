// Device: shared receive queues (the ordinary kind; XRC SRQs are in xrc.cc).
#include "simnic/core/device.h"

#include <cerrno>

namespace simnic::core {

namespace {

size_t srq_wqe_offset() { return abi::align_up(sizeof(abi::SrqShared), abi::kCacheLine); }
size_t srq_bytes(uint32_t entries) { return srq_wqe_offset() + size_t(entries) * sizeof(abi::RecvWqe); }

}  // namespace

int QueueVerbs::create_srq(Context* ctx, uint32_t pd_handle, const ibv_srq_attr& attr, Srq** out) {
  Pd* pd = dev_.tables().owned(dev_.pds_, ctx, pd_handle);
  if (!pd) return EINVAL;
  if (attr.max_wr < 1 || attr.max_wr > DeviceLimits::kMaxSrqWr || attr.max_sge > abi::kMaxSge)
    return dev_.journal().refuse(EINVAL, "max_wr " + std::to_string(attr.max_wr) + ", max_sge " +
                                             std::to_string(attr.max_sge) + ": an SRQ takes 1 to " +
                                             std::to_string(DeviceLimits::kMaxSrqWr) +
                                             " work requests (max_srq_wr) of at most " + std::to_string(abi::kMaxSge) +
                                             " SGEs (max_srq_sge)");
  if (int e =
          dev_.budgets().check_room(ctx, dev_.srqs_.size(), &Context::srqs, DeviceLimits::kMaxSrq, "SRQs", "max_srq"))
    return e;
  auto srq = dev_.make_object<Srq>(ctx);
  srq->pd = pd;
  srq->entries = round_up_pow2(attr.max_wr);
  srq->attr.max_wr = srq->entries;
  srq->attr.max_sge = abi::kMaxSge;
  srq->attr.srq_limit = attr.srq_limit;
  const size_t off = srq_wqe_offset(), bytes = srq_bytes(srq->entries);
  if (int e = dev_.budgets().map_queue_memory(ctx, bytes, bytes, "simnic-srq", &srq->mem)) return e;
  srq->shm = new (srq->mem.addr) abi::SrqShared();
  srq->shm->limit.store(attr.srq_limit);
  srq->slots = reinterpret_cast<abi::RecvWqe*>(static_cast<uint8_t*>(srq->mem.addr) + off);
  pd->users++;
  *out = dev_.insert_object(dev_.srqs_, ctx->srqs, std::move(srq));
  return 0;
}

int QueueVerbs::modify_srq(Context* ctx, uint32_t handle, const ibv_srq_attr& attr, int mask) {
  Srq* srq = dev_.tables().owned(dev_.srqs_, ctx, handle);
  if (!srq) return EINVAL;
  if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) return EINVAL;
  if (mask & IBV_SRQ_MAX_WR) return EOPNOTSUPP;  // resizing: not yet
  if (mask & IBV_SRQ_LIMIT) {
    if (attr.srq_limit > srq->attr.max_wr) return EINVAL;
    srq->attr.srq_limit = attr.srq_limit;
    srq->shm->limit.store(attr.srq_limit);
  }
  return 0;
}

int QueueVerbs::query_srq(Context* ctx, uint32_t handle, ibv_srq_attr* attr) {
  Srq* srq = dev_.tables().owned(dev_.srqs_, ctx, handle);
  if (!srq) return EINVAL;
  *attr = srq->attr;
  return 0;
}

int QueueVerbs::destroy_srq(Context* ctx, uint32_t handle) {
  Srq* srq = dev_.tables().owned(dev_.srqs_, ctx, handle);
  if (!srq) return EINVAL;
  if (srq->users)
    return dev_.journal().refuse(EBUSY, std::to_string(srq->users) + " QP(s) still use SRQ " + std::to_string(handle) +
                                            ": ibv_destroy_qp them first");
  if (srq->xrcd) dev_.xrc_verbs().xrc_release_srq(*srq);
  srq->pd->users--;
  dev_.budgets().unmap_queue_memory(ctx, srq_bytes(srq->entries), srq->mem);
  dev_.erase_object(dev_.srqs_, ctx->srqs, handle);
  return 0;
}

}  // namespace simnic::core
