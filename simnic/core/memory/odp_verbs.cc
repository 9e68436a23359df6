// The on-demand paging verbs: ibv_reg_mr's range rules for an IBV_ACCESS_ON_DEMAND MR and
// ibv_advise_mr (odp.cc has the rest of ODP: what an access through such an MR does).
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "simnic/core/device.h"
#include "simnic/core/text.h"

namespace simnic::core {

namespace {

constexpr uint64_t kPage = 4096;
// The end of the user address space on x86-64 (TASK_SIZE_MAX): the kernel refuses an explicit
// ODP range beyond it with EFAULT (access_ok in ib_umem_odp_get).
constexpr uint64_t kUserSpaceEnd = 0x00007ffffffff000ull;

bool in_mr(const Mr& mr, uint64_t va, uint64_t len) {
  return va >= mr.iova && len <= mr.length && va - mr.iova <= mr.length - len;
}

// One request probes at most this many pages (256 MiB), a read each: simnicd's event loop must
// not stall on an advice (a scatter list can name 32 x 4 GiB). Pages past it are not checked;
// they fault at access as any ODP page does.
constexpr uint64_t kMaxProbedPages = 65536;

// IBV_ADVISE_MR_FLAG_FLUSH: the prefetch is synchronous, and fails if a page is not there.
// `budget` counts down the pages this request may still probe.
int probe_pages(HostMemory& memory, pid_t pid, uint64_t addr, uint64_t len, uint64_t* budget) {
  uint8_t byte;
  for (uint64_t at = addr; at - addr < len && *budget; at = (at | (kPage - 1)) + 1, --*budget)
    if (memory.read(pid, at, &byte, 1)) return EFAULT;
  return 0;
}

}  // namespace

int MemoryVerbs::check_odp_range(uint64_t addr, uint64_t length, uint64_t iova) {
  // Implicit ODP: NULL and SIZE_MAX name the whole address space; its iova must be 0
  // (mlx5_ib_reg_user_mr refuses any other with EINVAL).
  if (addr == 0 && length == UINT64_MAX) {
    if (iova != 0)
      return dev_.journal().refuse(EINVAL, "implicit ODP (addr NULL, length SIZE_MAX) needs iova 0, not " + hex(iova));
    return 0;
  }
  if (covers_no_page(addr, length) || length > DeviceLimits::kMaxMrSize || addr + length < addr)
    return dev_.journal().refuse(
        EINVAL, "length " + std::to_string(length) + " at " + hex(addr) +
                    " covers no page (0 at a page boundary), wraps around, or is more than max_mr_size");
  // ib_uverbs_reg_mr: the address and the iova must lie at the same offset in their pages.
  if ((addr ^ iova) & (kPage - 1))
    return dev_.journal().refuse(EINVAL, "addr " + hex(addr) + " and iova " + hex(iova) +
                                             " are at different offsets in a page");
  if (addr + length > kUserSpaceEnd)
    return dev_.journal().refuse(EFAULT, "[" + hex(addr) + ", +" + std::to_string(length) +
                                             ") reaches beyond the user address space");
  return 0;  // nothing need be mapped now: pages are looked for at each access
}

// ibv_advise_mr(3)'s errors: EINVAL for a bad PD or flags, EOPNOTSUPP for an unknown advice,
// EFAULT for an lkey that is invalid, not ODP, without LOCAL_WRITE for PREFETCH_WRITE, or a
// range outside its MR or not mapped (FLUSH), EPERM for another program's lkey.
int MemoryVerbs::advise_mr(Context* ctx, uint32_t pd_handle, uint32_t advice, uint32_t flags, const ibv_sge* sge,
                           uint32_t num_sge) {
  Pd* pd = dev_.tables().owned(dev_.pds_, ctx, pd_handle);
  if (!pd) return dev_.journal().refuse(EINVAL, "ibv_advise_mr: no such PD");
  if (advice > IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
    return dev_.journal().refuse(EOPNOTSUPP, "ibv_advise_mr: advice " + std::to_string(advice) + " is not a prefetch");
  if (flags & ~uint32_t(IBV_ADVISE_MR_FLAG_FLUSH))
    return dev_.journal().refuse(EINVAL, "ibv_advise_mr: flags " + hex(flags) +
                                             " include bits other than IBV_ADVISE_MR_FLAG_FLUSH");
  if (num_sge == 0 || num_sge > kMaxAdviseSge) return dev_.journal().refuse(EINVAL, "ibv_advise_mr: num_sge is 0");
  uint64_t budget = kMaxProbedPages;
  for (uint32_t i = 0; i < num_sge; ++i) {
    const ibv_sge& s = sge[i];
    const Mr* mr = dev_.tables().find_mr_by_key(s.lkey);
    const std::string where = "ibv_advise_mr: sge " + std::to_string(i) + ": lkey " + hex(s.lkey);
    if (mr && mr->ctx != ctx && !dev_.context_verbs().shares(mr->ctx, ctx))
      return dev_.journal().refuse(EPERM, where + " is another program's");
    if (!mr || mr->pd != pd) return dev_.journal().refuse(EFAULT, where + " names no MR of this PD");
    if (!is_odp_mr(*mr)) return dev_.journal().refuse(EFAULT, where + " is not an IBV_ACCESS_ON_DEMAND MR");
    if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE && !(mr->access & IBV_ACCESS_LOCAL_WRITE))
      return dev_.journal().refuse(EFAULT, where + ": PREFETCH_WRITE on an MR without IBV_ACCESS_LOCAL_WRITE");
    if (s.addr + s.length < s.addr || !in_mr(*mr, s.addr, s.length))
      return dev_.journal().refuse(EFAULT, where + ": [" + hex(s.addr) + ", +" + std::to_string(s.length) +
                                               ") is outside the MR");
    // PREFETCH_NO_FAULT maps only what is present: it never fails on a missing page.
    const bool must_exist = (flags & IBV_ADVISE_MR_FLAG_FLUSH) && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT;
    if (must_exist && s.length &&
        probe_pages(dev_.env_.memory, ctx->pid, mr->addr + (s.addr - mr->iova), s.length, &budget))
      return dev_.journal().refuse(EFAULT, where + ": [" + hex(s.addr) + ", +" + std::to_string(s.length) +
                                               ") has pages the program has not mapped");
  }
  return 0;
}
}  // namespace simnic::core
