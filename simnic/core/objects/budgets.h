// Budgets: what one context and the whole NIC may hold. Queue memory (the rings and the NIC's
// per-WQE state) is charged to the context and the NIC (ContextLimits, DeviceLimits); objects
// are counted against the NIC's totals and, while several users share the NIC, each user's
// UserShares. A part of Device (device.h); the verb classes ask it before they create.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "simnic/core/env.h"

namespace simnic::core {

class Device;
struct Context;

class Budgets {
 public:
  explicit Budgets(Device& dev);

  bool queue_memory_fits(const Context* ctx, uint64_t bytes) const;  // under the context's and the NIC's limits
  bool charge_queue_memory(Context* ctx, uint64_t bytes);            // false (nothing charged) past a limit
  void refund_queue_memory(Context* ctx, uint64_t bytes);
  // A queue's shared memory: `charged` bytes counted against ctx and the NIC (the rings and the
  // NIC's own per-WQE state), `bytes` of them mapped. 0, ENOMEM past a limit, or the
  // allocator's errno; nothing is charged then.
  int map_queue_memory(Context* ctx, uint64_t charged, size_t bytes, const char* name, ShmRegion* out);
  void unmap_queue_memory(Context* ctx, uint64_t charged, ShmRegion& mem);
  // A QP handed to another context takes its charge along: past the limit if need be, as the
  // QP exists already.
  void hand_over_queue_memory(Context* from, Context* to, uint64_t bytes);
  uint64_t queue_bytes() const { return queue_bytes_; }  // charged to all contexts

  // Room for one more object of a kind on the NIC: 0, or ENOMEM with the reason when the NIC
  // holds all `total` of them (`in_use`), or when ctx's user already holds its UserShares of
  // them (`held`: that kind's handles in a context) while another user is here.
  int check_room(const Context* ctx, size_t in_use, std::vector<uint32_t> Context::*held, size_t total,
                 const char* objects, const char* attr);

 private:
  int check_user_share(const Context* ctx, std::vector<uint32_t> Context::*held, size_t total, const char* objects,
                       const char* attr);

  Device& dev_;
  uint64_t queue_bytes_ = 0;  // charged to all contexts
};

}  // namespace simnic::core
