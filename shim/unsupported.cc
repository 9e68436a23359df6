// Verbs simnic does not offer (yet). Each fails the way rdma-core fails on a device without
// the feature: an errno (EOPNOTSUPP) or NULL with errno set, never a crash.
#include "shim/shim.h"

using simnic::shim::fail_errno;

extern "C" {

// Real RoCE devices resolve MACs through the kernel's neighbour table; simnic has no Ethernet.
int ibv_resolve_eth_l2_from_gid(struct ibv_context*, struct ibv_ah_attr*, uint8_t[], uint16_t*) {
  return fail_errno(EOPNOTSUPP);
}

// Device memory is not shared between processes (import.cc shares PDs and MRs).
struct ibv_dm* ibv_import_dm(struct ibv_context*, uint32_t) {
  return simnic::shim::fail_null<ibv_dm>(EOPNOTSUPP);
}
void ibv_unimport_dm(struct ibv_dm*) {}

int ibv_query_ece(struct ibv_qp*, struct ibv_ece*) { return fail_errno(EOPNOTSUPP); }
int ibv_set_ece(struct ibv_qp*, struct ibv_ece*) { return fail_errno(EOPNOTSUPP); }

struct ibv_mr* ibv_reg_dmabuf_mr(struct ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  return simnic::shim::fail_null<ibv_mr>(EOPNOTSUPP);
}

// 0: no promise that data lands in order beyond what the IB ordering rules give.
int ibv_query_qp_data_in_order(struct ibv_qp*, enum ibv_wr_opcode, uint32_t) { return 0; }

}  // extern "C"
