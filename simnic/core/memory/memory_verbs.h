// MemoryVerbs: the verbs on a PD and on memory (IBA 10.6, 11.2.8): PDs, MRs (reg, rereg, dereg,
// device memory and MRs over it, ibv_advise_mr for ODP MRs), memory windows (alloc, dealloc;
// binding is the requester's work) and address handles. A part of Device (device.h): the
// objects live in Device's tables, which it reaches through Device.
#pragma once
#include <cstdint>
#include <map>
#include <memory>

#include <infiniband/verbs.h>

#include "simnic/core/memory/device_memory.h"
#include "simnic/core/memory/mr_verbs.h"

namespace simnic::core {

class Device;
struct Context;
struct Mr;
struct Mw;
struct Pd;

// Each verb returns 0 or a positive errno, as the kernel's uverbs would.
class MemoryVerbs {
 public:
  explicit MemoryVerbs(Device& dev);

  // pd_mr.cc: PDs, MRs, MWs, AHs
  int alloc_pd(Context* ctx, uint32_t* handle);
  int dealloc_pd(Context* ctx, uint32_t handle);
  int reg_mr(Context* ctx, uint32_t pd, uint64_t addr, uint64_t length, uint64_t iova, uint32_t access, Mr** out);
  int dereg_mr(Context* ctx, uint32_t handle);
  // Shared pages (HostMemory::share_pages): after ibv_reg_mr, the memfd (or -1) the program
  // sent with it. 0, or an errno that only means the NIC reaches the MR by pid as before.
  int share_pages(const Mr& mr, int fd, uint64_t fd_base);
  int alloc_mw(Context* ctx, uint32_t pd, ibv_mw_type type, Mw** out);
  int dealloc_mw(Context* ctx, uint32_t handle);
  int create_ah(Context* ctx, uint32_t pd, const ibv_ah_attr& attr, uint32_t* handle);
  int destroy_ah(Context* ctx, uint32_t handle);
  // rereg.cc: ibv_rereg_mr: what req.flags names changes in place; handle and keys stay.
  int rereg_mr(Context* ctx, const MrRereg& req, Mr** out);
  // dm.cc: device memory (device_memory.h): a memfd of at least `length` bytes the caller maps.
  int alloc_dm(Context* ctx, uint64_t length, uint32_t log_align, Dm** out);
  int free_dm(Context* ctx, uint32_t handle);  // EBUSY while MRs over it remain
  int reg_dm_mr(Context* ctx, const DmMrReg& req, Mr** out);
  bool is_dm_mr(uint32_t mr_handle) const;
  void free_dms(Context* ctx);  // a closing context's, after the MRs over them
  // odp_verbs.cc: ibv_advise_mr: checks the advice, flags and every SGE; with
  // IBV_ADVISE_MR_FLAG_FLUSH a prefetch also checks that every page exists now. Nothing is
  // pinned: there is nothing to fetch. The arguments are ibv_advise_mr(3)'s: sge[0, num_sge),
  // num_sge at most kMaxAdviseSge.
  int advise_mr(Context* ctx, uint32_t pd, uint32_t advice, uint32_t flags, const ibv_sge* sge, uint32_t num_sge);

 private:
  int check_mr_access(uint32_t access);
  int check_mr_range(Context* ctx, uint64_t addr, uint64_t length, uint32_t access);
  int check_pinnable(Context* ctx, uint64_t addr, uint64_t length, uint32_t access);
  // A registration that passed its verb's checks becomes an MR with a fresh key.
  int add_mr(Context* ctx, Pd* pd, uint64_t addr, uint64_t length, uint64_t iova, uint32_t access, Mr** out);
  int reg_dm_range(Context* ctx, const DmMrReg& req, Mr** out);  // the MR of reg_dm_mr, length 0 too
  int check_rereg(Context* ctx, const Mr& mr, const MrRereg& req, Pd** new_pd);
  // ibv_reg_mr's range rules for an IBV_ACCESS_ON_DEMAND MR (explicit, or implicit: NULL, SIZE_MAX).
  int check_odp_range(uint64_t addr, uint64_t length, uint64_t iova);

  Device& dev_;
  std::map<uint32_t, std::unique_ptr<Dm>> dms_;
  std::map<uint32_t, uint32_t> dm_mrs_;  // MR handle -> the DM it lies in (entries of dead MRs are stale)
  uint64_t dm_bytes_ = 0;                // pages of device memory allocated, all contexts
};

}  // namespace simnic::core
