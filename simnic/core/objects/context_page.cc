// A context's page shared with its application (abi::ContextShared): the word an idle
// ibv_poll_cq sleeps on, so that a polling program leaves the CPUs to the NICs while it waits
// and still learns of a CQE at once (the shim's half is in shim/cq.cc). Also the other promise
// made to a context once: that it may send its QPs' lent PSNs itself (engines/direct_send.h).
#include "simnic/core/device.h"

namespace simnic::core {

int ContextVerbs::map_context_page(Context* ctx, ShmRegion** page) {
  if (ctx->shared) return EALREADY;  // its memfd went to the client the first time
  int err = 0;
  if (!dev_.env_.shm.allocate(sizeof(abi::ContextShared), "simnic-context", &ctx->page, &err)) return err;
  ctx->shared = new (ctx->page.addr) abi::ContextShared;
  // This NIC keeps the doorbell gate: Requester::on_doorbell opens it before every look.
  ctx->shared->doorbell_gate.store(abi::kDoorbellGateOn, std::memory_order_relaxed);
  *page = &ctx->page;
  return 0;
}

int ContextVerbs::allow_direct_send(Context* ctx) {
  if (ctx->direct_send) return EALREADY;  // the socket went to the client the first time
  ctx->direct_send = true;
  return 0;
}

void ContextVerbs::release_context_page(Context* ctx) {
  if (!ctx->shared) return;
  ctx->shared = nullptr;
  dev_.env_.shm.release(ctx->page);
}

}  // namespace simnic::core
