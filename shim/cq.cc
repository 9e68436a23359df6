// Completion queues and completion channels. ibv_poll_cq reads CQEs that simnicd wrote into
// the shared ring: no system call, as with a real RNIC. Events arrive on the channel's socket.
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "shim/shim.h"

using namespace simnic::shim;
using namespace simnic::abi;

namespace simnic::shim {

int poll_cq(ibv_cq* ibcq, int num_entries, ibv_wc* wc) {
  ShimCq* cq = to_shim(ibcq);
  if (num_entries < 0) return -1;
  std::lock_guard lock(cq->poll_mu);
  auto& ring = cq->shm->ring;
  uint32_t cons = ring.consumer.value.load(std::memory_order_relaxed);
  uint32_t prod = ring.producer.value.load(std::memory_order_acquire);
  int n = 0;
  for (; n < num_entries && cons != prod; ++n, ++cons) wc[n] = cq->slots[cons & (cq->entries - 1)];
  ring.consumer.value.store(cons, std::memory_order_release);
  return n;
}

int req_notify_cq(ibv_cq* ibcq, int solicited_only) {
  ShimCq* cq = to_shim(ibcq);
  cq->shm->arm.store(solicited_only ? kCqArmSolicited : kCqArmNext, std::memory_order_release);
  return 0;
}

}  // namespace simnic::shim

extern "C" {

struct ibv_comp_channel* ibv_create_comp_channel(struct ibv_context* context) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return nullptr;
  HandleReply rep{};
  int st = rpc(to_shim(context), Op::CreateCompChannel, HandleReq{}, &rep, nullptr, {sv[1]});
  ::close(sv[1]);
  if (st != 0) {
    ::close(sv[0]);
    return fail_null<ibv_comp_channel>(st);
  }
  auto* ch = new ShimChannel{};
  ch->ch.context = context;
  ch->ch.fd = sv[0];
  ch->ch.refcnt = 0;
  ch->handle = rep.handle;
  return &ch->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel* channel) {
  if (channel->refcnt) return EBUSY;  // CQs still use it
  ShimChannel* ch = to_shim(channel);
  int st = rpc_status(to_shim(channel->context), Op::DestroyCompChannel, HandleReq{ch->handle, 0});
  if (st != 0) return st;
  ::close(channel->fd);
  delete ch;
  return 0;
}

struct ibv_cq* ibv_create_cq(struct ibv_context* context, int cqe, void* cq_context,
                             struct ibv_comp_channel* channel, int comp_vector) {
  if (comp_vector < 0 || comp_vector >= context->num_comp_vectors) return fail_null<ibv_cq>(EINVAL);
  ShimContext* c = to_shim(context);
  CreateCqReq req{cqe, channel ? to_shim(channel)->handle : 0, uint32_t(comp_vector), 0};
  CreateCqReply rep{};
  std::vector<int> fds;
  if (int st = rpc(c, Op::CreateCq, req, &rep, &fds)) return fail_null<ibv_cq>(st);
  void* mem = map_shared(fds, rep.mem_bytes);
  if (!mem) {
    int e = errno;
    rpc_status(c, Op::DestroyCq, HandleReq{rep.handle, 0});
    return fail_null<ibv_cq>(e);
  }
  auto* cq = new ShimCq;
  std::memset(&cq->cq, 0, sizeof cq->cq);
  cq->cq.context = context;
  cq->cq.channel = channel;
  cq->cq.cq_context = cq_context;
  cq->cq.handle = rep.handle;
  cq->cq.cqe = rep.cqe;
  pthread_mutex_init(&cq->cq.mutex, nullptr);
  pthread_cond_init(&cq->cq.cond, nullptr);
  cq->mem = mem;
  cq->mem_bytes = rep.mem_bytes;
  cq->shm = static_cast<CqShared*>(mem);
  cq->slots = reinterpret_cast<ibv_wc*>(static_cast<uint8_t*>(mem) + cqe_offset());
  cq->entries = rep.entries;
  if (channel) ++channel->refcnt;
  std::lock_guard lock(c->objs_mu);
  c->cqs[rep.handle] = cq;
  return &cq->cq;
}

int ibv_destroy_cq(struct ibv_cq* ibcq) {
  ShimCq* cq = to_shim(ibcq);
  ShimContext* c = to_shim(ibcq->context);
  int st = rpc_status(c, Op::DestroyCq, HandleReq{ibcq->handle, 0});
  if (st != 0) return st;  // EBUSY while a QP uses it
  {
    std::lock_guard lock(c->objs_mu);
    c->cqs.erase(ibcq->handle);
  }
  if (ibcq->channel) --ibcq->channel->refcnt;
  ::munmap(cq->mem, cq->mem_bytes);
  pthread_mutex_destroy(&ibcq->mutex);
  pthread_cond_destroy(&ibcq->cond);
  delete cq;
  return 0;
}

int ibv_resize_cq(struct ibv_cq*, int) { return EOPNOTSUPP; }

int ibv_get_cq_event(struct ibv_comp_channel* channel, struct ibv_cq** cq, void** cq_context) {
  ShimContext* c = to_shim(channel->context);
  for (;;) {
    CqEventMsg msg{};
    ssize_t n = ::recv(channel->fd, &msg, sizeof msg, 0);
    if (n != ssize_t(sizeof msg)) {
      if (n >= 0) errno = ENODEV;  // simnicd went away
      return -1;
    }
    std::lock_guard lock(c->objs_mu);
    auto it = c->cqs.find(msg.cq);
    if (it == c->cqs.end()) continue;  // an event for a CQ destroyed since
    *cq = &it->second->cq;
    *cq_context = (*cq)->cq_context;
    return 0;
  }
}

void ibv_ack_cq_events(struct ibv_cq* cq, unsigned int nevents) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

}  // extern "C"

#include "shim/symver.h"
SIMNIC_DEFAULT_VERSION_1_1(ibv_create_cq);
SIMNIC_DEFAULT_VERSION_1_1(ibv_destroy_cq);
SIMNIC_DEFAULT_VERSION_1_1(ibv_resize_cq);
SIMNIC_DEFAULT_VERSION_1_1(ibv_get_cq_event);
SIMNIC_DEFAULT_VERSION_1_1(ibv_ack_cq_events);
