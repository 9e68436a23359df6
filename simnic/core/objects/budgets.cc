// Budgets: the queue memory each context and the NIC may map, and per-user shares of a NIC's
// objects. Per-user shares (issue 29 point 7): rxe's pools are per device and any
// program may fill them (rxe_pool.c); simnic keeps that for a NIC one user has to itself (a
// laptop, or a class where each student runs their own NICs), and holds each user to 3/4 of
// each total while another user has a context on the NIC (UserShares in device.h).
#include "simnic/core/objects/budgets.h"
#include "simnic/core/device.h"

#include <optional>

namespace simnic::core {

Budgets::Budgets(Device& dev) : dev_(dev) {}

bool Budgets::queue_memory_fits(const Context* ctx, uint64_t bytes) const {
  return ctx->queue_bytes + bytes <= ContextLimits::kMaxQueueBytes &&
         queue_bytes_ + bytes <= DeviceLimits::kMaxQueueBytes;
}

bool Budgets::charge_queue_memory(Context* ctx, uint64_t bytes) {
  if (!queue_memory_fits(ctx, bytes)) return false;
  ctx->queue_bytes += bytes;
  queue_bytes_ += bytes;
  return true;
}

void Budgets::refund_queue_memory(Context* ctx, uint64_t bytes) {
  ctx->queue_bytes -= bytes;
  queue_bytes_ -= bytes;
}

int Budgets::map_queue_memory(Context* ctx, uint64_t charged, size_t bytes, const char* name, ShmRegion* out) {
  if (!charge_queue_memory(ctx, charged)) return ENOMEM;
  int err = 0;
  if (dev_.env_.shm.allocate(bytes, name, out, &err)) return 0;
  refund_queue_memory(ctx, charged);
  return err ? err : ENOMEM;
}

void Budgets::unmap_queue_memory(Context* ctx, uint64_t charged, ShmRegion& mem) {
  refund_queue_memory(ctx, charged);
  dev_.env_.shm.release(mem);
}
void Budgets::hand_over_queue_memory(Context* from, Context* to, uint64_t bytes) {
  refund_queue_memory(from, bytes);
  to->queue_bytes += bytes;
  queue_bytes_ += bytes;
}

int Budgets::check_room(const Context* ctx, size_t in_use, std::vector<uint32_t> Context::*held, size_t total,
                        const char* objects, const char* attr) {
  if (in_use >= total)
    return dev_.journal().refuse(ENOMEM,
                                 "the NIC's " + std::to_string(total) + " " + objects + " (" + attr +
                                     " of ibv_query_device) are all in use; destroy some, in this program or another");
  return check_user_share(ctx, held, total, objects, attr);
}

int Budgets::check_user_share(const Context* ctx, std::vector<uint32_t> Context::*held, size_t total,
                              const char* objects, const char* attr) {
  // Control path only (a create verb): one pass over the contexts, no per-packet cost.
  size_t mine = 0;
  std::optional<uid_t> other;
  for (const auto& [id, c] : dev_.contexts_) {
    if (c->uid == ctx->uid) mine += ((*c).*held).size();
    else if (!other) other = c->uid;
  }
  const size_t share = UserShares::share_of(total);
  if (!other || mine < share) return 0;
  return dev_.journal().refuse(
      ENOMEM, "uid " + std::to_string(ctx->uid) + " already holds " + std::to_string(mine) + " of the NIC's " +
                  std::to_string(total) + " " + objects + " (" + attr + "): while another user (uid " +
                  std::to_string(*other) +
                  ") also has a context on this NIC, one user may hold at most 3/4 of "
                  "each total (" +
                  std::to_string(share) +
                  "), so that the others keep a quarter "
                  "(simnic's per-user share, docs/security.md); destroy some, or use a NIC of your own");
}

}  // namespace simnic::core
