// On-demand paging in the shim: the ODP capabilities ibv_query_device_ex reports, and
// ibv_advise_mr (an inline of verbs.h that reaches us through verbs_context). simnicd never
// pins memory (every DMA is a process_vm_readv/writev at the time of the access), so ODP is
// its natural mode: every transport and operation works on an IBV_ACCESS_ON_DEMAND MR, and an
// MR over the whole address space (implicit ODP) is offered too. See docs/shim.md, "ODP".
#include <algorithm>
#include <cerrno>

#include "shim/shim.h"
#include "shim/verbs_ext.h"

using namespace simnic::abi;

namespace simnic::shim {

namespace {

// What each transport can do on an ODP MR: whatever it can do at all, since the NIC's DMA is
// the same for pinned and ODP memory. UC has no READ or atomics; UD only SEND and RECV.
constexpr uint32_t kRcOdp = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                            IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
constexpr uint32_t kUcOdp = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
                            IBV_ODP_SUPPORT_SRQ_RECV;
constexpr uint32_t kUdOdp = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
// An XRC TGT QP receives only through its XRC SRQ (as mlx5 reports it: no RECV bit).
constexpr uint32_t kXrcOdp = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                             IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;

// ibv_advise_mr(3). The NIC checks the advice, the flags and each SGE; the list goes in pieces
// of kMaxAdviseSge (the verb itself has no limit).
int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list, uint32_t num_sge) {
  // The kernel's SGE list attribute needs at least one entry.
  if (!pd || !num_sge || !sg_list) return EINVAL;
  if (ibv_pd* inner = parent_domain_protection(pd)) pd = inner;
  for (uint32_t done = 0; done < num_sge;) {
    AdviseMrReq req{pd->handle, uint32_t(advice), flags, std::min(num_sge - done, kMaxAdviseSge), {}};
    std::copy_n(sg_list + done, req.num_sge, req.sge);
    if (int st = rpc_status(to_shim(pd->context), Op::AdviseMr, req)) {
      explain_refusal("ibv_advise_mr", st, last_refusal());
      return st;
    }
    done += req.num_sge;
  }
  return 0;
}

}  // namespace

void fill_odp_caps(ibv_device_attr_ex* ex) {
  ex->odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
  ex->odp_caps.per_transport_caps.rc_odp_caps = kRcOdp;
  ex->odp_caps.per_transport_caps.uc_odp_caps = kUcOdp;
  ex->odp_caps.per_transport_caps.ud_odp_caps = kUdOdp;
  ex->xrc_odp_caps = kXrcOdp;
}

void fill_odp_ops(ShimContext* c) { c->vctx.advise_mr = advise_mr; }

}  // namespace simnic::shim
