// Device memory (ibv_alloc_dm): memory "on the NIC" that programs copy to and from with
// ibv_memcpy_to_dm/from_dm and register with ibv_reg_dm_mr. simnicd holds it as a memfd the
// program maps; an MR over it is a zero-based MR over that mapping, so DMA reaches it as it
// reaches any MR (process_vm_readv/writev on the program, with the same per-access checks).
#pragma once
#include <cstdint>

#include "simnic/abi/control.h"
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
  static constexpr uint64_t kMaxDmSize = abi::kMaxDmSize;
  static constexpr uint32_t kMaxLogAlign = 12;        // the memfd's mapping is page aligned
  static constexpr uint32_t kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                      IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED;
};

}  // namespace simnic::core
