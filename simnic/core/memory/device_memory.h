// Device memory (ibv_alloc_dm): memory "on the NIC" that programs copy to and from with
// ibv_memcpy_to_dm/from_dm and register with ibv_reg_dm_mr. simnicd holds it as a memfd the
// program maps; an MR over it is a zero-based MR over that mapping, so DMA reaches it as it
// reaches any MR (process_vm_readv/writev on the program, with the same per-access checks).
#pragma once
#include <cstdint>

#include <infiniband/verbs.h>

#include "simnic/core/env.h"

namespace simnic::core {

struct Context;

struct Dm {
  uint32_t handle = 0;
  Context* ctx = nullptr;
  uint64_t length = 0;  // what was asked for; mem.size is that rounded up to a page
  ShmRegion mem;
};

struct DmLimits {
  // max_dm_size: all of a NIC's device memory (the service layer checks that the shim's
  // abi::kMaxDmSize, which ibv_query_device_ex reports, says the same).
  static constexpr uint64_t kMaxDmSize = 4ull << 20;
  static constexpr uint32_t kMaxLogAlign = 12;  // the memfd's mapping is page aligned
  static constexpr uint32_t kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                      IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED;
};

// ib_umem_get (and ib_init_umem_odp for ODP) pins or tracks the pages [addr, addr + length)
// touches, rounded out to whole pages, and refuses a range that touches none with EINVAL
// (npages == 0). So a zero-length MR is EINVAL at a page boundary and, anywhere else, covers
// the one page addr lies in: rxe registers it (through ib_umem_get), and it serves zero-byte
// accesses only.
inline bool covers_no_page(uint64_t addr, uint64_t length) { return length == 0 && addr % 4096 == 0; }

}  // namespace simnic::core
