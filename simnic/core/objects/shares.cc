// Per-user shares of a NIC's objects (issue 29 point 7). rxe's pools are per device and any
// program may fill them (rxe_pool.c); simnic keeps that for a NIC one user has to itself (a
// laptop, or a class where each student runs their own NICs), and holds each user to 3/4 of
// each total while another user has a context on the NIC (UserShares in device.h).
#include "simnic/core/device.h"

#include <optional>

namespace simnic::core {

int Device::check_room(const Context* ctx, size_t in_use, std::vector<uint32_t> Context::*held, size_t total,
                       const char* objects, const char* attr) {
  if (in_use >= total)
    return journal_.refuse(ENOMEM,
                           "the NIC's " + std::to_string(total) + " " + objects + " (" + attr +
                               " of ibv_query_device) are all in use; destroy some, in this program or another");
  return check_user_share(ctx, held, total, objects, attr);
}

int Device::check_user_share(const Context* ctx, std::vector<uint32_t> Context::*held, size_t total,
                             const char* objects, const char* attr) {
  // Control path only (a create verb): one pass over the contexts, no per-packet cost.
  size_t mine = 0;
  std::optional<uid_t> other;
  for (const auto& [id, c] : contexts_) {
    if (c->uid == ctx->uid) mine += ((*c).*held).size();
    else if (!other) other = c->uid;
  }
  const size_t share = UserShares::share_of(total);
  if (!other || mine < share) return 0;
  return journal_.refuse(ENOMEM,
                         "uid " + std::to_string(ctx->uid) + " already holds " + std::to_string(mine) +
                             " of the NIC's " + std::to_string(total) + " " + objects + " (" + attr +
                             "): while another user (uid " + std::to_string(*other) +
                             ") also has a context on this NIC, one user may hold at most 3/4 of "
                             "each total (" +
                             std::to_string(share) +
                             "), so that the others keep a quarter "
                             "(simnic's per-user share, docs/security.md); destroy some, or use a NIC of your own");
}

}  // namespace simnic::core
