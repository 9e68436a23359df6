// The arguments of the MR verbs that take more than a parameter list holds well: ibv_rereg_mr
// and ibv_reg_dm_mr, as the core's own structs (the control protocol's requests are the service
// layer's business: simnic/service decodes them into these), and ibv_advise_mr's per-call limit.
#pragma once
#include <cstdint>

namespace simnic::core {

// ibv_rereg_mr (IBA 11.2.8.3): only what `flags` (enum ibv_rereg_mr_flags) names changes: the
// PD, the translation (addr, length; the new iova is addr, as rdma-core's providers send), the
// access.
struct MrRereg {
  uint32_t mr = 0;  // the MR's handle
  uint32_t flags = 0;
  uint32_t pd = 0;      // IBV_REREG_MR_CHANGE_PD
  uint32_t access = 0;  // IBV_REREG_MR_CHANGE_ACCESS
  uint64_t addr = 0;    // IBV_REREG_MR_CHANGE_TRANSLATION
  uint64_t length = 0;
};

// ibv_reg_dm_mr: an MR over [dm_offset, dm_offset + length) of device memory `dm`, always
// zero-based. mapped_at: where the caller mapped the DM's memfd; the MR is one over that mapping.
struct DmMrReg {
  uint32_t pd = 0;
  uint32_t dm = 0;
  uint64_t dm_offset = 0;
  uint64_t length = 0;
  uint32_t access = 0;
  uint64_t mapped_at = 0;
};

// ibv_advise_mr: SGEs per call. The verb has no limit of its own; the shim sends a longer list
// in pieces of this many (the control request's capacity), and the NIC refuses more in one.
constexpr uint32_t kMaxAdviseSge = 32;

}  // namespace simnic::core
