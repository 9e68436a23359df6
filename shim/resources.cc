// Protection domains, memory regions and address handles: pure slow path, no shared memory.
#include <cstring>

#include "shim/shim.h"
#include "shim/verbs_ext.h"

using namespace simnic::shim;
using namespace simnic::abi;

namespace simnic::shim {

ibv_mr* new_ibv_mr(ibv_pd* pd, void* addr, size_t length, uint32_t handle, uint32_t lkey, uint32_t rkey) {
  auto* mr = new ibv_mr{};
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  mr->handle = handle;
  mr->lkey = lkey;
  mr->rkey = rkey;
  return mr;
}

}  // namespace simnic::shim

namespace {

ibv_mr* reg_mr(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  if (!pd) {
    explain_refusal("ibv_reg_mr", EINVAL, "pd is NULL (ibv_alloc_pd returned NULL earlier?)");
    return fail_null<ibv_mr>(EINVAL);
  }
  const SharedPages pages = share_pages(addr, length, access);
  RegMrReq req{pd->handle, access, reinterpret_cast<uint64_t>(addr), length, iova, pages.base};
  RegMrReply rep{};
  ShimContext* c = to_shim(pd->context);
  if (int st = pages.fd >= 0 ? rpc(c, Op::RegMr, req, &rep, nullptr, {pages.fd}) : rpc(c, Op::RegMr, req, &rep)) {
    explain_refusal("ibv_reg_mr", st, simnic::abi::last_refusal());
    return fail_null<ibv_mr>(st);
  }
  ibv_mr* mr = new_ibv_mr(pd, addr, length, rep.handle, rep.lkey, rep.rkey);
  note_local_mr(mr, iova, access);
  return mr;
}

}  // namespace

extern "C" {

struct ibv_pd* ibv_alloc_pd(struct ibv_context* context) {
  HandleReply rep{};
  if (int st = rpc(to_shim(context), Op::AllocPd, HandleReq{}, &rep)) {
    explain_refusal("ibv_alloc_pd", st, simnic::abi::last_refusal());  // e.g. the NIC's max_pd
    return fail_null<ibv_pd>(st);
  }
  auto* pd = new ibv_pd{};
  pd->context = context;
  pd->handle = rep.handle;
  return pd;
}

int ibv_dealloc_pd(struct ibv_pd* pd) {
  if (int st = dealloc_domain_pd(pd); st >= 0) return fail_errno(st);  // a parent domain, or a PD inside one
  int st = rpc_status(to_shim(pd->context), Op::DeallocPd, HandleReq{pd->handle, 0});
  if (st == 0) delete pd;
  // EBUSY while MRs, QPs or AHs still use it, as the kernel says; ENOENT for a handle that
  // names no PD of this program.
  explain_refusal("ibv_dealloc_pd", st, simnic::abi::last_refusal());
  return fail_errno(st);
}

struct ibv_mr* ibv_reg_mr(struct ibv_pd* pd, void* addr, size_t length, int access) {
  return reg_mr(pd, addr, length, reinterpret_cast<uintptr_t>(addr), unsigned(access));
}

struct ibv_mr* ibv_reg_mr_iova(struct ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return reg_mr(pd, addr, length, iova, unsigned(access));
}

// The optional-access flags (relaxed ordering, ...) are hints a device may ignore.
struct ibv_mr* ibv_reg_mr_iova2(struct ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
  return reg_mr(pd, addr, length, iova, access & ~unsigned(IBV_ACCESS_OPTIONAL_RANGE));
}

int ibv_dereg_mr(struct ibv_mr* mr) {
  forget_local_mr(mr);  // before the NIC forgets it: no post reads it past its deregistration
  int st = rpc_status(to_shim(mr->context), Op::DeregMr, HandleReq{mr->handle, 0});
  if (st) explain_refusal("ibv_dereg_mr", st, simnic::abi::last_refusal());  // e.g. windows still bound
  if (st == 0) set_imported_mr(mr, false), delete mr;
  explain_refusal("ibv_dereg_mr", st, simnic::abi::last_refusal());
  return fail_errno(st);
}

struct ibv_ah* ibv_create_ah(struct ibv_pd* pd, struct ibv_ah_attr* attr) {
  CreateAhReq req{pd->handle, 0, *attr};
  HandleReply rep{};
  if (int st = rpc(to_shim(pd->context), Op::CreateAh, req, &rep)) {
    explain_refusal("ibv_create_ah", st, simnic::abi::last_refusal());
    return fail_null<ibv_ah>(st);
  }
  auto* ah = new ibv_ah{};
  ah->context = pd->context;
  ah->pd = pd;
  ah->handle = rep.handle;
  return ah;
}

int ibv_destroy_ah(struct ibv_ah* ah) {
  int st = rpc_status(to_shim(ah->context), Op::DestroyAh, HandleReq{ah->handle, 0});
  if (st == 0) delete ah;
  explain_refusal("ibv_destroy_ah", st, simnic::abi::last_refusal());
  return fail_errno(st);
}

}  // extern "C"

extern "C" {

// UD replies: the address vector back to a datagram's sender. With a GRH (RoCE always has
// one) from the sender's GID; without one (InfiniBand mode) by its LID alone, as in rdma-core.
int ibv_init_ah_from_wc(struct ibv_context* context, uint8_t port_num, struct ibv_wc* wc, struct ibv_grh* grh,
                        struct ibv_ah_attr* ah_attr) {
  std::memset(ah_attr, 0, sizeof *ah_attr);
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  if (!(wc->wc_flags & IBV_WC_GRH)) return 0;
  if (!grh) return -1;
  ah_attr->is_global = 1;
  union ibv_gid dgid;  // where the datagram was sent: one of our GIDs
  const auto* raw = reinterpret_cast<const uint8_t*>(grh);
  if ((raw[0] >> 4) != 6 && (raw[20] >> 4) == 4) {
    // RoCE v2 over IPv4: bytes 20..39 hold the IPv4 header (as rdma-core reads it).
    auto mapped = [](const uint8_t* ip4, ibv_gid* g) {
      std::memset(g, 0, sizeof *g);
      g->raw[10] = g->raw[11] = 0xff;
      std::memcpy(g->raw + 12, ip4, 4);
    };
    mapped(raw + 20 + 12, &ah_attr->grh.dgid);  // the sender's address
    mapped(raw + 20 + 16, &dgid);
    ah_attr->grh.traffic_class = raw[21];
    ah_attr->grh.hop_limit = raw[20 + 8];  // the TTL, as rdma-core's set_ah_attr_by_ipv4
  } else {
    ah_attr->grh.dgid = grh->sgid;
    uint32_t flow = be32toh(grh->version_tclass_flow);
    ah_attr->grh.flow_label = flow & 0xfffff;
    ah_attr->grh.traffic_class = uint8_t(flow >> 20);
    ah_attr->grh.hop_limit = grh->hop_limit;
    dgid = grh->dgid;
  }
  // The index of the local RoCE v2 GID the datagram was sent to (rdma-core's
  // ibv_find_gid_index): 0 in the simple table, 1 in rxe's, 3 in mlx5's.
  // The table's entries come first; the first empty slot (ENODATA) or its end (EINVAL) stops.
  for (uint32_t i = 0; i < 256; ++i) {
    QueryGidReply rep{};
    if (rpc(to_shim(context), Op::QueryGid, QueryGidReq{port_num, i}, &rep) != 0) break;
    if (rep.gid_type == IBV_GID_TYPE_ROCE_V2 && std::memcmp(&rep.gid, &dgid, sizeof dgid) == 0) {
      ah_attr->grh.sgid_index = uint8_t(i);
      return 0;
    }
  }
  return -1;
}

struct ibv_ah* ibv_create_ah_from_wc(struct ibv_pd* pd, struct ibv_wc* wc, struct ibv_grh* grh, uint8_t port_num) {
  ibv_ah_attr attr;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr)) return fail_null<ibv_ah>(EINVAL);
  return ibv_create_ah(pd, &attr);
}

}  // extern "C"

#include "shim/symver.h"
SIMNIC_DEFAULT_VERSION_1_1(ibv_alloc_pd);
SIMNIC_DEFAULT_VERSION_1_1(ibv_dealloc_pd);
SIMNIC_DEFAULT_VERSION_1_1(ibv_reg_mr);
SIMNIC_DEFAULT_VERSION_1_1(ibv_dereg_mr);
SIMNIC_DEFAULT_VERSION_1_1(ibv_create_ah);
SIMNIC_DEFAULT_VERSION_1_1(ibv_destroy_ah);
