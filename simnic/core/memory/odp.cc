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

}  // namespace simnic::core
