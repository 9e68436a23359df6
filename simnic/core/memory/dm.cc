// Device memory: ibv_alloc_dm, ibv_free_dm, ibv_reg_dm_mr, with the kernel's checks
// (ib_uverbs_handler_UVERBS_METHOD_DM_ALLOC and _REG_DM_MR) and errnos.
#include "simnic/core/device.h"
#include "simnic/core/text.h"

#include <cerrno>

namespace simnic::core {

int MemoryVerbs::alloc_dm(Context* ctx, uint64_t length, uint32_t log_align, Dm** out) {
  if (length == 0 || length > DmLimits::kMaxDmSize)
    return dev_.journal().refuse(EINVAL, "device memory of " + std::to_string(length) +
                                             " bytes: 0, or more than max_dm_size (" +
                                             std::to_string(DmLimits::kMaxDmSize) + ")");
  if (log_align > DmLimits::kMaxLogAlign)
    return dev_.journal().refuse(EINVAL, "log_align_req " + std::to_string(log_align) +
                                             ": simnic aligns device memory to a page (12)");
  const uint64_t size = (length + 4095) / 4096 * 4096;
  if (dm_bytes_ + size > DmLimits::kMaxDmSize)
    return dev_.journal().refuse(ENOMEM, "the NIC's device memory is used up (" + std::to_string(dm_bytes_) + " of " +
                                             std::to_string(DmLimits::kMaxDmSize) + " bytes allocated)");
  auto dm = std::make_unique<Dm>();
  int err = 0;
  if (!dev_.env_.shm.allocate(size, "simnic-dm", &dm->mem, &err)) return err ? err : ENOMEM;
  dm->handle = dev_.new_handle();
  dm->ctx = ctx;
  dm->length = length;
  dm_bytes_ += size;
  dev_.tracer_.event(TraceKind::kDmCreate).u("ctx", ctx->id).u("dm", dm->handle).u("length", length);
  *out = dm.get();
  dms_[dm->handle] = std::move(dm);
  return 0;
}

int MemoryVerbs::free_dm(Context* ctx, uint32_t handle) {
  Dm* dm = dev_.tables().owned(dms_, ctx, handle);
  if (!dm) return EINVAL;
  for (auto& [mr, of] : dm_mrs_)
    if (of == handle && dev_.mrs_.count(mr))
      return dev_.journal().refuse(EBUSY, "MRs over device memory " + hex(handle) + " remain: ibv_dereg_mr them first");
  dev_.tracer_.event(TraceKind::kDmDestroy).u("ctx", ctx->id).u("dm", handle);
  dm_bytes_ -= dm->mem.size;
  dev_.env_.shm.release(dm->mem);
  dms_.erase(handle);
  return 0;
}

// The caller's mapping of the DM is a region of its own memory, registered zero-based.
int MemoryVerbs::reg_dm_mr(Context* ctx, const DmMrReg& req, Mr** out) {
  Dm* dm = dev_.tables().owned(dms_, ctx, req.dm);
  if (!dm) return dev_.journal().refuse(EINVAL, "no such device memory");
  if (!(req.access & IBV_ACCESS_ZERO_BASED))
    return dev_.journal().refuse(EINVAL,
                                 "ibv_reg_dm_mr needs IBV_ACCESS_ZERO_BASED (an MR over device memory is zero-based)");
  if (req.access & ~DmLimits::kAccess)
    return dev_.journal().refuse(EINVAL, "access " + access_string(req.access) + " on device memory");
  if (req.dm_offset > dm->length || req.length > dm->length - req.dm_offset)
    return dev_.journal().refuse(EINVAL, "[" + std::to_string(req.dm_offset) + ", +" + std::to_string(req.length) +
                                             ") is not within the device memory's " + std::to_string(dm->length) +
                                             " bytes");
  if (int e = reg_dm_range(ctx, req, out)) return e;
  dm_mrs_[(*out)->handle] = dm->handle;
  return 0;
}

// The kernel's REG_DM_MR checks only that [dm_offset, +length) lies within the DM; a length of
// 0 passes, and mlx5 registers it (mlx5_ib_reg_dm_mr makes an mkey of that length). rxe has no
// device memory. So a zero-length DM MR is registered (at the DM's start as anywhere in it),
// unlike a zero-length ibv_reg_mr at a page boundary (covers_no_page): it serves zero-byte
// accesses only.
int MemoryVerbs::reg_dm_range(Context* ctx, const DmMrReg& req, Mr** out) {
  const uint64_t addr = req.mapped_at + req.dm_offset;
  if (req.length) return reg_mr(ctx, req.pd, addr, req.length, 0, req.access, out);
  Pd* pd = dev_.tables().owned(dev_.pds_, ctx, req.pd);
  if (!pd) return EINVAL;
  if (int e = check_mr_access(req.access)) return e;
  return add_mr(ctx, pd, addr, 0, 0, req.access, out);
}

bool MemoryVerbs::is_dm_mr(uint32_t mr_handle) const {
  auto it = dm_mrs_.find(mr_handle);
  return it != dm_mrs_.end() && dev_.mrs_.count(mr_handle);
}

// A closing context's device memory goes back to the NIC (after its MRs: close_context).
void MemoryVerbs::free_dms(Context* ctx) {
  for (auto it = dm_mrs_.begin(); it != dm_mrs_.end();)
    it = dev_.mrs_.count(it->first) ? std::next(it) : dm_mrs_.erase(it);
  std::vector<uint32_t> mine;
  for (auto& [h, dm] : dms_)
    if (dm->ctx == ctx) mine.push_back(h);
  for (uint32_t h : mine) free_dm(ctx, h);
}

}  // namespace simnic::core
