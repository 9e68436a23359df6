// Issue 17's verbs in the shim: rereg and DM (mr_ext.cc), thread and parent domains
// (domains.cc), the hooks the older files call into them with.
#pragma once
#include <cstdint>
#include <vector>

#include "shim/shim.h"

namespace simnic::shim {

// The resource_type a parent domain's allocator is called with for each ring simnic shares
// with the NIC (rdma-core leaves the values to providers, as mlx5dv.h's MLX5DV_RES_TYPE_*).
constexpr uint64_t kSimnicDriverId = 0x534e;  // "SN"
constexpr uint64_t kResTypeQp = kSimnicDriverId << 32 | 1;
constexpr uint64_t kResTypeSrq = kSimnicDriverId << 32 | 4;
constexpr uint64_t kResTypeCq = kSimnicDriverId << 32 | 5;

void fill_mr_ext_ops(ShimContext* c);        // mr_ext.cc: alloc_dm, free_dm, reg_dm_mr, query_rt_values
void fill_domain_ops(ShimContext* c);        // domains.cc: alloc_td, dealloc_td, alloc_parent_domain
void fill_odp_ops(ShimContext* c);           // odp.cc: advise_mr
void fill_odp_caps(ibv_device_attr_ex* ex);  // odp.cc: odp_caps, xrc_odp_caps for ibv_query_device_ex
inline void fill_verbs_ext_ops(ShimContext* c) {
  fill_mr_ext_ops(c);
  fill_domain_ops(c);
}

// CLOCK_REALTIME minus the NIC's clock, in ns, measured now by one QueryClock. 0 or an errno.
int nic_clock_offset(ibv_context* context, int64_t* offset_ns);

// ibv_import_mr's MRs (mr_type IBV_MR_TYPE_IMPORTED_MR): ibv_rereg_mr refuses them.
bool is_imported_mr(ibv_mr* mr);
void set_imported_mr(ibv_mr* mr, bool imported);

// The memory of a ring (a QP's, SRQ's or CQ's memfd from simnicd) for an object created on
// `pd`: mapped where the parent domain's allocator put it if `pd` is one with allocators
// (MAP_FIXED over the application's allocation), else anywhere. Closes the memfd. nullptr with
// errno set on failure.
void* map_ring(ibv_pd* pd, uint64_t resource_type, std::vector<int>& fds, size_t bytes);
// Undoes map_ring: a custom allocation gets private memory back and goes to the domain's free().
void unmap_ring(void* mem, size_t bytes);

// ibv_dealloc_pd's first step: -1 when `pd` is a plain PD no parent domain contains (the NIC
// frees it); else the verb's result (a parent domain is freed here; a PD inside one: EBUSY).
int dealloc_domain_pd(ibv_pd* pd);
// The protection domain a parent domain contains, or nullptr when `pd` is no parent domain.
ibv_pd* parent_domain_protection(ibv_pd* pd);

}  // namespace simnic::shim
