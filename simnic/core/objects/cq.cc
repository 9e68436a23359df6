// Device: completion channels and CQs (create, resize, destroy).
#include "simnic/core/device.h"

#include <cerrno>

namespace simnic::core {

int QueueVerbs::create_channel(Context* ctx, int fd, uint32_t* handle) {
  if (ctx->channels.size() >= ContextLimits::kMaxChannel) return ENOMEM;
  auto ch = dev_.make_object<Channel>(ctx);
  ch->fd = fd;
  *handle = dev_.insert_object(dev_.channels_, ctx->channels, std::move(ch))->handle;
  return 0;
}

int QueueVerbs::destroy_channel(Context* ctx, uint32_t handle) {
  Channel* ch = dev_.tables().owned(dev_.channels_, ctx, handle);
  if (!ch) return EINVAL;
  if (ch->users)
    return dev_.journal().refuse(EBUSY, std::to_string(ch->users) + " CQ(s) still use completion channel " +
                                            std::to_string(handle) + ": ibv_destroy_cq them first");
  dev_.env_.notifier.release_fd(ch->fd);
  dev_.erase_object(dev_.channels_, ctx->channels, handle);
  return 0;
}

int QueueVerbs::create_cq(Context* ctx, int cqe, uint32_t channel, Cq** out) {
  if (cqe < 1 || cqe > DeviceLimits::kMaxCqe)
    return dev_.journal().refuse(EINVAL, "cqe " + std::to_string(cqe) + ": a CQ holds 1 to " +
                                             std::to_string(DeviceLimits::kMaxCqe) +
                                             " entries (max_cqe of ibv_query_device)");
  if (int e = dev_.budgets().check_room(ctx, dev_.cqs_.size(), &Context::cqs, DeviceLimits::kMaxCq, "CQs", "max_cq"))
    return e;
  Channel* ch = nullptr;
  if (channel) {
    ch = dev_.tables().owned(dev_.channels_, ctx, channel);
    if (!ch)
      return dev_.journal().refuse(EINVAL, "channel " + std::to_string(channel) +
                                               " is no completion channel of this program "
                                               "(ibv_create_comp_channel makes one)");
  }
  auto cq = dev_.make_object<Cq>(ctx);
  cq->channel = ch;
  cq->entries = round_up_pow2(uint32_t(cqe) + 1);
  cq->cqe = int(cq->entries) - 1;
  const size_t bytes = abi::cq_bytes(cq->entries);
  if (int e = dev_.budgets().map_queue_memory(ctx, bytes, bytes, "simnic-cq", &cq->mem)) return e;
  cq->shm = new (cq->mem.addr) abi::CqShared();
  cq->slots = reinterpret_cast<ibv_wc*>(static_cast<uint8_t*>(cq->mem.addr) + abi::cqe_offset());
  cq->timestamps =
      reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(cq->mem.addr) + abi::cqe_timestamp_offset(cq->entries));
  if (ch) ch->users++;
  dev_.tracer_.event(TraceKind::kCqCreate)
      .u("ctx", ctx->id)
      .u("cq", cq->handle)
      .u("cqe", uint64_t(cq->cqe))
      .u("entries", cq->entries);
  *out = dev_.insert_object(dev_.cqs_, ctx->cqs, std::move(cq));
  return 0;
}

int QueueVerbs::destroy_cq(Context* ctx, uint32_t handle) {
  Cq* cq = dev_.tables().owned(dev_.cqs_, ctx, handle);
  if (!cq) return EINVAL;
  if (cq->users)
    return dev_.journal().refuse(EBUSY, "QPs still use CQ " + std::to_string(handle) + " (" +
                                            std::to_string(cq->users) +
                                            " times as send_cq or recv_cq): ibv_destroy_qp them first");
  dev_.tracer_.event(TraceKind::kCqDestroy)
      .u("ctx", ctx->id)
      .u("cq", handle)
      .u("cqe", uint64_t(cq->cqe))
      .u("entries", cq->entries);
  if (cq->channel) cq->channel->users--;
  dev_.budgets().unmap_queue_memory(ctx, abi::cq_bytes(cq->entries), cq->mem);
  dev_.erase_object(dev_.cqs_, ctx->cqs, handle);
  return 0;
}

// rxe's rules (rxe_cq_chk_attr, rxe_cq_resize_queue): 1..max_cqe entries, no fewer than the
// completions waiting to be polled, rounded up as at creation. simnicd is single-threaded, so
// no CQE is written while the pending ones move; the shim holds its poll lock from the request
// until it has mapped the new ring, so the consumer index cannot move either.
int QueueVerbs::resize_cq(Context* ctx, uint32_t handle, int cqe, Cq** out) {
  Cq* cq = dev_.tables().owned(dev_.cqs_, ctx, handle);
  if (!cq || cqe < 1 || cqe > DeviceLimits::kMaxCqe) return EINVAL;
  const uint32_t prod = cq->shm->ring.producer.value.load(std::memory_order_relaxed);
  const uint32_t cons = cq->shm->ring.consumer.value.load(std::memory_order_acquire);
  const uint32_t pending = prod - cons;  // more than the ring holds: a consumer index the app broke
  if (pending > cq->entries || uint32_t(cqe) < pending) return EINVAL;
  const uint32_t entries = round_up_pow2(uint32_t(cqe) + 1);
  const size_t bytes = abi::cq_bytes(entries);
  ShmRegion mem;
  if (int e = dev_.budgets().map_queue_memory(ctx, bytes, bytes, "simnic-cq", &mem)) return e;
  auto* shm = new (mem.addr) abi::CqShared();
  auto* slots = reinterpret_cast<ibv_wc*>(static_cast<uint8_t*>(mem.addr) + abi::cqe_offset());
  auto* stamps = reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(mem.addr) + abi::cqe_timestamp_offset(entries));
  // The indices keep counting where they were, so a viewer's CQE index stays the same CQE.
  for (uint32_t i = cons; i != prod; ++i) {
    slots[i & (entries - 1)] = cq->slots[i & (cq->entries - 1)];
    stamps[i & (entries - 1)] = cq->timestamps[i & (cq->entries - 1)];
  }
  shm->ring.consumer.value.store(cons, std::memory_order_relaxed);
  shm->ring.producer.value.store(prod, std::memory_order_release);
  shm->arm.store(cq->shm->arm.load(std::memory_order_acquire));
  shm->overrun.store(cq->shm->overrun.load());
  dev_.budgets().unmap_queue_memory(ctx, abi::cq_bytes(cq->entries), cq->mem);
  cq->mem = mem;
  cq->shm = shm;
  cq->slots = slots;
  cq->timestamps = stamps;
  cq->entries = entries;
  cq->cqe = int(entries) - 1;
  dev_.tracer_.event(TraceKind::kCqResize)
      .u("ctx", ctx->id)
      .u("cq", handle)
      .u("cqe", uint64_t(cq->cqe))
      .u("entries", entries)
      .u("pending", pending);
  *out = cq;
  return 0;
}

}  // namespace simnic::core
