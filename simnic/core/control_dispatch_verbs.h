// The control requests of issue 17's verbs (rereg MR, NIC clock, device memory, import).
#pragma once
#include <span>
#include <vector>

#include "simnic/core/control_dispatch.h"

namespace simnic::core {

// Ops ReregMr .. ImportMr of `ctx`; EOPNOTSUPP for any other.
ControlReply handle_verbs_op(Device& dev, Context* ctx, abi::Op op, std::span<const uint8_t> body);
// JoinContext (ibv_import_device): fds[0] is another context's command socket.
ControlReply join_context(Device& dev, Context* ctx, const std::vector<int>& fds,
                          const std::function<bool(pid_t, int, int)>& same_file);

}  // namespace simnic::core
