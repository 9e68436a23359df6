// On-demand paging (ODP). simnicd never pins memory: every DMA reaches the application with
// process_vm_readv/writev at the time of the access, so an IBV_ACCESS_ON_DEMAND MR is simply
// one whose pages need not exist at registration. A page still missing at an access is a
// fault that cannot be resolved (there is no page to fault in): the access fails cleanly, as
// on rxe and mlx5 when the application has unmapped the memory. ODP is outside the IBA; the
// rules here are rdma-core's (ibv_reg_mr(3), ibv_advise_mr(3)) and the kernel's
// (ib_uverbs_reg_mr, ib_umem_odp_get, mlx5_ib_reg_user_mr, mlx5_ib_advise_mr).
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "simnic/core/device.h"
#include "simnic/core/text.h"

namespace simnic::core {

bool is_odp_mr(const Mr& mr) { return mr.access & IBV_ACCESS_ON_DEMAND; }

bool is_implicit_odp_mr(const Mr& mr) { return is_odp_mr(mr) && mr.addr == 0 && mr.length == UINT64_MAX; }

void Device::note_odp_fault(const Qp& qp, const Mr& mr, uint64_t va, uint64_t len, bool remote) {
  tracer_.event(TraceKind::kOdpFault)
      .u("qp", qp.qpn)
      .u("mr", mr.handle)
      .u("key", remote ? mr.rkey : mr.lkey)
      .hex("addr", va)
      .u("length", len)
      .s("side", remote ? "remote" : "local");
  journal_.log_limited(LogLevel::kWarn, "odp_fault", qp.qpn, [&] {
    return "QP " + hex(qp.qpn) + ": " + (remote ? "remote" : "local") + " access to [" + hex(va) + ", +" +
           std::to_string(len) + ") of ODP MR " + hex(mr.lkey) + " met a page with no mapping in the program";
  });
}

void Device::remote_dma_failed(Qp& qp, const Mr& mr, uint64_t va, uint64_t len, uint32_t psn, const std::string& what,
                               int err) {
  ++counters_.dma_errors;
  if (!is_odp_mr(mr) || err != EFAULT) {
    responder_error(qp, Error::kRemoteDmaFailed, psn, what + " failed: " + std::strerror(err));
    return;
  }
  note_odp_fault(qp, mr, va, len, true);
  responder_error(qp, Error::kOdpPageFault, psn,
                  what + ": page fault in [" + hex(va) + ", +" + std::to_string(len) + ") of an ODP MR (lkey " +
                      hex(mr.lkey) + ")" + ", a page the program has not mapped");
}

}  // namespace simnic::core
