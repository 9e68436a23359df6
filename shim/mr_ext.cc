// ibv_rereg_mr, device memory (ibv_alloc_dm, ibv_free_dm, ibv_memcpy_to_dm/from_dm,
// ibv_reg_dm_mr) and the NIC's clock (ibv_query_rt_values_ex). All but ibv_rereg_mr are
// inline in verbs.h and reach us through verbs_context (fill_verbs_ext_ops).
#include <sys/mman.h>

#include <cstring>
#include <ctime>
#include <mutex>
#include <set>

#include "shim/shim.h"
#include "shim/verbs_ext.h"

using namespace simnic::shim;
using namespace simnic::abi;

namespace {

// rdma-core's input checks (libibverbs/verbs.c), in its order; EINVAL, or 0.
int check_rereg_input(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  if (is_imported_mr(mr)) return EINVAL;  // mr_type IBV_MR_TYPE_IMPORTED_MR
  if (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) return EINVAL;
  if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!length || !addr)) return EINVAL;
  if (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) return EINVAL;
  if ((flags & IBV_REREG_MR_CHANGE_PD) && !pd) return EINVAL;  // rdma-core would crash on it
  // (A PD of another context goes to the NIC, which does not know it: IBV_REREG_MR_ERR_CMD.)
  return 0;
}

// Device memory: the daemon's memfd, mapped here. ibv_memcpy_* are plain copies into it.
struct ShimDm {
  ibv_dm dm;  // first
  void* map = nullptr;
  size_t map_bytes = 0;
  uint64_t length = 0;
};
ShimDm* to_shim_dm(ibv_dm* dm) { return reinterpret_cast<ShimDm*>(dm); }

// As mlx5's mlx5_access_dm, the provider with device memory: beyond the DM is EFAULT; an
// offset or length that is not a multiple of 4 is EINVAL (a limit of its hardware, which
// rdma-core's tests and programs written for it expect; simnic keeps it so they behave alike).
int dm_access_error(const char* verb, const ShimDm* dm, uint64_t off, size_t len) {
  int err = 0;
  std::string why;
  if (off > dm->length || len > dm->length - off) {
    err = EFAULT;
    why = "[" + std::to_string(off) + ", +" + std::to_string(len) + ") is not within the device memory's " +
          std::to_string(dm->length) + " bytes";
  } else if ((off & 3) || (len & 3)) {
    err = EINVAL;
    why = "offset " + std::to_string(off) + " and length " + std::to_string(len) +
          " must be multiples of 4 (device memory is accessed in 4-byte words, as on mlx5)";
  }
  if (err) explain_refusal(verb, err, why);
  return err;
}

int memcpy_to_dm(ibv_dm* ibdm, uint64_t off, const void* host, size_t len) {
  ShimDm* dm = to_shim_dm(ibdm);
  if (int e = dm_access_error("ibv_memcpy_to_dm", dm, off, len)) return e;
  std::memcpy(static_cast<uint8_t*>(dm->map) + off, host, len);
  return 0;
}

int memcpy_from_dm(void* host, ibv_dm* ibdm, uint64_t off, size_t len) {
  ShimDm* dm = to_shim_dm(ibdm);
  if (int e = dm_access_error("ibv_memcpy_from_dm", dm, off, len)) return e;
  std::memcpy(host, static_cast<const uint8_t*>(dm->map) + off, len);
  return 0;
}

ibv_dm* alloc_dm(ibv_context* context, ibv_alloc_dm_attr* attr) {
  if (!attr) return fail_null<ibv_dm>(EINVAL);
  AllocDmReq req{attr->length, attr->log_align_req, attr->comp_mask};
  AllocDmReply rep{};
  std::vector<int> fds;
  if (int st = rpc(to_shim(context), Op::AllocDm, req, &rep, &fds)) {
    explain_refusal("ibv_alloc_dm", st, last_refusal());
    return fail_null<ibv_dm>(st);
  }
  void* map = map_shared(fds, rep.mem_bytes);
  if (!map) {
    int e = errno;
    rpc_status(to_shim(context), Op::FreeDm, HandleReq{rep.handle, 0});
    return fail_null<ibv_dm>(e);
  }
  auto* dm = new ShimDm{};
  dm->dm.context = context;
  dm->dm.memcpy_to_dm = memcpy_to_dm;
  dm->dm.memcpy_from_dm = memcpy_from_dm;
  dm->dm.handle = rep.handle;
  dm->map = map;
  dm->map_bytes = rep.mem_bytes;
  dm->length = attr->length;
  return &dm->dm;
}

int free_dm(ibv_dm* ibdm) {
  ShimDm* dm = to_shim_dm(ibdm);
  if (int st = rpc_status(to_shim(ibdm->context), Op::FreeDm, HandleReq{ibdm->handle, 0})) return st;  // EBUSY: MRs
  ::munmap(dm->map, dm->map_bytes);
  delete dm;
  return 0;
}

// As rdma-core's ibv_cmd_reg_dm_mr: zero-based only, addr NULL in the ibv_mr.
ibv_mr* reg_dm_mr(ibv_pd* pd, ibv_dm* ibdm, uint64_t offset, size_t length, unsigned int access) {
  if (!(access & IBV_ACCESS_ZERO_BASED)) return fail_null<ibv_mr>(EINVAL);
  ShimDm* dm = to_shim_dm(ibdm);
  RegDmMrReq req{pd->handle, ibdm->handle, offset, length, access, 0, reinterpret_cast<uint64_t>(dm->map)};
  RegMrReply rep{};
  if (int st = rpc(to_shim(pd->context), Op::RegDmMr, req, &rep)) {
    explain_refusal("ibv_reg_dm_mr", st, last_refusal());
    return fail_null<ibv_mr>(st);
  }
  return new_ibv_mr(pd, nullptr, length, rep.handle, rep.lkey, rep.rkey);
}

// IBV_VALUES_MASK_RAW_CLOCK: the NIC's clock in cycles of hca_core_clock (1 GHz), as mlx5
// reports it (tv_sec 0, tv_nsec the cycles).
int query_rt_values(ibv_context* context, ibv_values_ex* values) {
  if (values->comp_mask & ~uint32_t(IBV_VALUES_MASK_RAW_CLOCK)) return EINVAL;
  if (!(values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK)) return 0;
  QueryClockReply rep{};
  if (int st = rpc(to_shim(context), Op::QueryClock, HandleReq{}, &rep)) return st;
  values->raw_clock.tv_sec = 0;
  values->raw_clock.tv_nsec = long(rep.nic_ns);
  return 0;
}

}  // namespace

namespace simnic::shim {

int nic_clock_offset(ibv_context* context, int64_t* offset_ns) {
  timespec before{}, after{};
  QueryClockReply rep{};
  ::clock_gettime(CLOCK_REALTIME, &before);
  if (int st = rpc(to_shim(context), Op::QueryClock, HandleReq{}, &rep)) return st;
  ::clock_gettime(CLOCK_REALTIME, &after);
  auto ns = [](const timespec& t) { return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec; };
  *offset_ns = (ns(before) + ns(after)) / 2 - int64_t(rep.nic_ns);  // the reply's moment, halfway
  return 0;
}

void fill_mr_ext_ops(ShimContext* c) {
  c->vctx.alloc_dm = alloc_dm;
  c->vctx.free_dm = free_dm;
  c->vctx.reg_dm_mr = reg_dm_mr;
  c->vctx.query_rt_values = query_rt_values;
}

}  // namespace simnic::shim

extern "C" {

// IBA 11.2.8.3. Input errors return IBV_REREG_MR_ERR_INPUT, the NIC's refusals
// IBV_REREG_MR_ERR_CMD, each with errno set; the MR is then unchanged (rdma-core's contract).
int ibv_rereg_mr(struct ibv_mr* mr, int flags, struct ibv_pd* pd, void* addr, size_t length, int access) {
  if (int e = check_rereg_input(mr, flags, pd, addr, length, access)) {
    errno = e;
    return IBV_REREG_MR_ERR_INPUT;
  }
  forget_local_mr(mr);  // its posts go to the NIC from now on
  ReregMrReq req{mr->handle,
                 uint32_t(flags),
                 (flags & IBV_REREG_MR_CHANGE_PD) ? pd->handle : 0,
                 uint32_t(access),
                 reinterpret_cast<uint64_t>(addr),
                 length};
  RegMrReply rep{};
  if (int st = rpc(to_shim(mr->context), Op::ReregMr, req, &rep)) {
    explain_refusal("ibv_rereg_mr", st, last_refusal());
    errno = st;
    return IBV_REREG_MR_ERR_CMD;
  }
  mr->lkey = rep.lkey;
  mr->rkey = rep.rkey;
  if (flags & IBV_REREG_MR_CHANGE_PD) mr->pd = pd;
  if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) mr->addr = addr, mr->length = length;
  return 0;
}

}  // extern "C"

namespace simnic::shim {

namespace {
std::mutex imported_mu;
std::set<ibv_mr*> imported;
}  // namespace

bool is_imported_mr(ibv_mr* mr) {
  std::lock_guard lock(imported_mu);
  return imported.count(mr) != 0;
}

void set_imported_mr(ibv_mr* mr, bool on) {
  std::lock_guard lock(imported_mu);
  if (on) imported.insert(mr);
  else imported.erase(mr);
}

}  // namespace simnic::shim
