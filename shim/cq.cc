// Completion queues and completion channels. ibv_poll_cq reads CQEs that simnicd wrote into
// the shared ring: no system call, as with a real RNIC. Events arrive on the channel's socket.
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "shim/shim.h"
#include "shim/verbs_ext.h"

using namespace simnic::shim;
using namespace simnic::abi;

namespace simnic::shim {

// A QP moved to RESET leaves no completions behind on its CQs, as on mlx5 (the provider's
// mlx5_cq_clean, the kernel's __mlx5_ib_cq_clean): a program that resets a QP after an error
// and brings it back (rdma-core's tests/test_mr.py restate_qps) finds its next completion, not
// the failed and flushed ones of before. The CQEs of other QPs keep their order: walking from
// the newest to the oldest, each is moved up over the removed ones, then the consumer index
// skips the slots freed at the bottom. simnicd writes only past the producer index it published,
// and writes nothing more for a QP in RESET, so the slots between the two indexes are the shim's.
void remove_completions_of_qp(ibv_cq* ibcq, uint32_t qp_num) {
  if (!ibcq) return;
  ShimCq* cq = to_shim(ibcq);
  std::lock_guard lock(cq->poll_mu);
  auto& ring = cq->shm->ring;
  const uint32_t cons = ring.consumer.value.load(std::memory_order_relaxed);
  const uint32_t prod = ring.producer.value.load(std::memory_order_acquire);
  const uint32_t mask = cq->entries - 1;
  auto* stamps = const_cast<uint64_t*>(cq->timestamps);
  uint32_t removed = 0;
  for (uint32_t k = prod - cons; k-- > 0;) {
    const uint32_t from = (cons + k) & mask;
    if (cq->slots[from].qp_num == qp_num) {
      ++removed;
      continue;
    }
    if (!removed) continue;
    const uint32_t to = (cons + k + removed) & mask;
    cq->slots[to] = cq->slots[from];
    if (stamps) stamps[to] = stamps[from];
  }
  if (removed) ring.consumer.value.store(cons + removed, std::memory_order_release);
}

int poll_cq(ibv_cq* ibcq, int num_entries, ibv_wc* wc) {
  ShimCq* cq = to_shim(ibcq);
  if (num_entries < 0) return -1;
  ShimContext* ctx = to_shim(ibcq->context);
  const uint32_t sequence = completion_sequence(ctx);
  std::unique_lock lock(cq->poll_mu);
  auto& ring = cq->shm->ring;
  uint32_t cons = ring.consumer.value.load(std::memory_order_relaxed);
  uint32_t prod = ring.producer.value.load(std::memory_order_acquire);
  int n = 0;
  bool failed = false;
  for (; n < num_entries && cons != prod; ++n, ++cons) {
    wc[n] = cq->slots[cons & (cq->entries - 1)];
    failed |= wc[n].status != IBV_WC_SUCCESS;
  }
  ring.consumer.value.store(cons, std::memory_order_release);
  lock.unlock();
  if (failed && explaining())
    for (int i = 0; i < n; ++i) explain_completion(ibcq->context, wc[i]);
  if (n == 0) {
    // Every CQE the NIC wrote has been returned; with the NIC gone no more will come, and a
    // negative return (rdma-core's error) lets a polling program stop instead of spinning.
    if (nic_lost_sampled(to_shim(ibcq->context))) {
      errno = EIO;
      return -1;
    }
    if (to_shim(ibcq->context)->fast_calls.load(std::memory_order_relaxed) % 1024 == 0)
      explain_while_waiting(ibcq->context);
    idle_after_empty_poll(ctx, sequence);  // lets the NIC run; back when it writes a CQE
  } else {
    note_completions_found(n);
  }
  return n;
}

// Creates the CQ both ibv_create_cq and ibv_create_cq_ex return.
ShimCq* create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel, int comp_vector,
                  ibv_pd* parent_domain = nullptr) {
  if (comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
    // The kernel's create_cq: EINVAL for a vector the device does not have.
    explain_refusal("ibv_create_cq", EINVAL,
                    "comp_vector " + std::to_string(comp_vector) + " does not exist: the NIC has " +
                        std::to_string(context->num_comp_vectors) +
                        " completion vectors (ibv_context.num_comp_vectors), 0 to " +
                        std::to_string(context->num_comp_vectors - 1));
    return fail_null<ShimCq>(EINVAL);
  }
  ShimContext* c = to_shim(context);
  CreateCqReq req{cqe, channel ? to_shim(channel)->handle : 0, uint32_t(comp_vector), 0};
  CreateCqReply rep{};
  std::vector<int> fds;
  if (int st = rpc(c, Op::CreateCq, req, &rep, &fds)) {
    explain_refusal("ibv_create_cq", st, last_refusal());
    return fail_null<ShimCq>(st);
  }
  void* mem = map_ring(parent_domain, kResTypeCq, fds, rep.mem_bytes);
  if (!mem) {
    int e = errno;
    rpc_status(c, Op::DestroyCq, HandleReq{rep.handle, 0});
    return fail_null<ShimCq>(e);
  }
  auto* cq = new ShimCq;
  std::memset(&cq->cqx, 0, sizeof cq->cqx);
  cq->base()->context = context;
  cq->base()->channel = channel;
  cq->base()->cq_context = cq_context;
  cq->base()->handle = rep.handle;
  cq->base()->cqe = rep.cqe;
  pthread_mutex_init(&cq->base()->mutex, nullptr);
  pthread_cond_init(&cq->base()->cond, nullptr);
  cq->parent_domain = parent_domain;
  cq->mem = mem;
  cq->mem_bytes = rep.mem_bytes;
  cq->shm = static_cast<CqShared*>(mem);
  cq->slots = reinterpret_cast<ibv_wc*>(static_cast<uint8_t*>(mem) + cqe_offset());
  cq->entries = rep.entries;
  if (rep.mem_bytes >= cq_bytes(rep.entries))
    cq->timestamps = reinterpret_cast<const uint64_t*>(static_cast<uint8_t*>(mem) + cqe_timestamp_offset(rep.entries));
  if (channel) ++channel->refcnt;
  std::lock_guard lock(c->objs_mu);
  c->cqs[rep.handle] = cq;
  return cq;
}

// ibv_cq_ex polling: start_poll/next_poll make one CQE current, the read_* accessors read it,
// end_poll releases the ring. Like poll_cq, no system call.
namespace {

ShimCq* to_shim_ex(ibv_cq_ex* cq) { return reinterpret_cast<ShimCq*>(cq); }
const ibv_wc& current(ibv_cq_ex* cq) {
  ShimCq* c = to_shim_ex(cq);
  return c->slots[c->poll_index & (c->entries - 1)];
}

int load_current(ShimCq* c) {
  uint32_t prod = c->shm->ring.producer.value.load(std::memory_order_acquire);
  c->poll_has = c->poll_index != prod;
  if (!c->poll_has) return ENOENT;
  const ibv_wc& wc = c->slots[c->poll_index & (c->entries - 1)];
  c->cqx.status = wc.status;
  c->cqx.wr_id = wc.wr_id;
  return 0;
}

int64_t monotonic_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// The wall clock of a CQE is its NIC time plus (CLOCK_REALTIME - NIC clock), measured by a
// QueryClock at most 100 ms before: the NIC's clock stands still while step mode pauses it.
void sync_wallclock(ShimCq* c) {
  const int64_t now = monotonic_ns();
  if (c->wallclock_synced_at && now - c->wallclock_synced_at < 100'000'000) return;
  int64_t offset = 0;
  if (nic_clock_offset(c->base()->context, &offset) == 0) c->wallclock_offset_ns = offset, c->wallclock_synced_at = now;
}

int start_poll(ibv_cq_ex* cq, ibv_poll_cq_attr* attr) {
  if (attr && attr->comp_mask) return EINVAL;
  ShimCq* c = to_shim_ex(cq);
  ShimContext* ctx = to_shim(c->base()->context);
  const uint32_t sequence = completion_sequence(ctx);
  c->poll_mu.lock();
  if (c->wallclock) sync_wallclock(c);
  c->poll_index = c->shm->ring.consumer.value.load(std::memory_order_relaxed);
  int st = load_current(c);
  if (st) c->poll_mu.unlock();  // ENOENT: rdma-core's rule is that end_poll is not called then
  if (st == ENOENT && nic_lost_sampled(ctx)) return EIO;
  if (st == ENOENT) idle_after_empty_poll(ctx, sequence);
  else note_completions_found(1);
  return st;
}

int next_poll(ibv_cq_ex* cq) {
  ShimCq* c = to_shim_ex(cq);
  ++c->poll_index;
  c->shm->ring.consumer.value.store(c->poll_index, std::memory_order_release);
  return load_current(c);
}

void end_poll(ibv_cq_ex* cq) {
  ShimCq* c = to_shim_ex(cq);
  if (c->poll_has) c->shm->ring.consumer.value.store(c->poll_index + 1, std::memory_order_release);
  c->poll_has = false;
  c->poll_mu.unlock();
}

ibv_wc_opcode read_opcode(ibv_cq_ex* cq) { return current(cq).opcode; }
uint32_t read_vendor_err(ibv_cq_ex* cq) { return current(cq).vendor_err; }
uint32_t read_byte_len(ibv_cq_ex* cq) { return current(cq).byte_len; }
__be32 read_imm_data(ibv_cq_ex* cq) { return current(cq).imm_data; }
uint32_t read_qp_num(ibv_cq_ex* cq) { return current(cq).qp_num; }
uint32_t read_src_qp(ibv_cq_ex* cq) { return current(cq).src_qp; }
unsigned int read_wc_flags(ibv_cq_ex* cq) { return current(cq).wc_flags; }
uint32_t read_slid(ibv_cq_ex* cq) { return current(cq).slid; }
uint8_t read_sl(ibv_cq_ex* cq) { return current(cq).sl; }
uint8_t read_dlid_path_bits(ibv_cq_ex* cq) { return current(cq).dlid_path_bits; }
// The NIC's clock when it wrote the CQE, in cycles of hca_core_clock (1 GHz: nanoseconds of
// simulated time, which stands still while a NIC is paused in step mode).
uint64_t read_completion_ts(ibv_cq_ex* cq) {
  ShimCq* c = to_shim_ex(cq);
  return c->timestamps ? c->timestamps[c->poll_index & (c->entries - 1)] : 0;
}
// CLOCK_REALTIME ns when the NIC wrote the CQE (see sync_wallclock).
uint64_t read_completion_wallclock_ns(ibv_cq_ex* cq) {
  return read_completion_ts(cq) + uint64_t(to_shim_ex(cq)->wallclock_offset_ns);
}

std::string hex_string(uint64_t v) {
  char s[24];
  std::snprintf(s, sizeof s, "0x%llx", static_cast<unsigned long long>(v));
  return s;
}

}  // namespace

ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  // Not offered: IBV_WC_EX_WITH_CVLAN (no VLANs: simnic's wire is RoCEv2 over loopback UDP),
  // _FLOW_TAG (no flow steering) and _TM_INFO (no tag matching).
  constexpr uint64_t kFlags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                              IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
                              IBV_WC_EX_WITH_DLID_PATH_BITS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                              IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
  if (attr->comp_mask & ~uint32_t(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) {
    explain_refusal("ibv_create_cq_ex", EINVAL,
                    "comp_mask " + hex_string(attr->comp_mask) +
                        " has bits other than IBV_CQ_INIT_ATTR_MASK_FLAGS and _PD");
    return fail_null<ibv_cq_ex>(EINVAL);
  }
  if (attr->wc_flags & ~kFlags) {
    explain_refusal("ibv_create_cq_ex", EOPNOTSUPP,
                    "wc_flags " + hex_string(attr->wc_flags & ~kFlags) +
                        ": simnic has no CVLAN, FLOW_TAG or TM_INFO completion fields (no VLANs, flow steering or "
                        "tag matching)");
    return fail_null<ibv_cq_ex>(EOPNOTSUPP);
  }
  // IBV_CQ_INIT_ATTR_MASK_PD: a parent domain (mlx5: EINVAL for a plain PD or none).
  ibv_pd* domain = (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) ? attr->parent_domain : nullptr;
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) && (!domain || !parent_domain_protection(domain))) {
    explain_refusal("ibv_create_cq_ex", EINVAL,
                    "IBV_CQ_INIT_ATTR_MASK_PD needs parent_domain to be a parent domain (ibv_alloc_parent_domain), "
                    "not a plain PD or NULL");
    return fail_null<ibv_cq_ex>(EINVAL);
  }
  ShimCq* cq = create_cq(context, int(attr->cqe), attr->cq_context, attr->channel, int(attr->comp_vector), domain);
  if (!cq) return nullptr;
  cq->wallclock = attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
  ibv_cq_ex& x = cq->cqx;
  x.comp_mask = 0;
  x.start_poll = start_poll;
  x.next_poll = next_poll;
  x.end_poll = end_poll;
  x.read_opcode = read_opcode;
  x.read_vendor_err = read_vendor_err;
  x.read_byte_len = read_byte_len;
  x.read_imm_data = read_imm_data;
  x.read_qp_num = read_qp_num;
  x.read_src_qp = read_src_qp;
  x.read_wc_flags = read_wc_flags;
  x.read_slid = read_slid;
  x.read_sl = read_sl;
  x.read_dlid_path_bits = read_dlid_path_bits;
  x.read_completion_ts = read_completion_ts;
  x.read_completion_wallclock_ns = read_completion_wallclock_ns;
  return &x;
}

namespace {

// rxe's provider arms through the kernel (ibv_cmd_req_notify_cq), whose lookup of a handle that
// names no CQ of the context fails with EINVAL (ib_uverbs_req_notify_cq); here the shim's own
// table of the context's CQs answers, without a system call.
bool names_this_cq(ShimCq* cq) {
  ShimContext* c = to_shim(cq->base()->context);
  std::lock_guard lock(c->objs_mu);
  auto it = c->cqs.find(cq->base()->handle);
  return it != c->cqs.end() && it->second == cq;
}

}  // namespace

// Arms the CQ for one completion event. An arming for any completion that is still pending is
// not narrowed by a later "solicited only" one: the wider request stands until an event
// consumes it (IBA 11.4.2.2; rxe_req_notify_cq keeps IB_CQ_NEXT_COMP). simnicd
// disarms with a compare-exchange when it sends the event, so a CAS here cannot lose an arming
// the NIC has not consumed.
int req_notify_cq(ibv_cq* ibcq, int solicited_only) {
  ShimCq* cq = to_shim(ibcq);
  if (!names_this_cq(cq)) {
    explain_refusal("ibv_req_notify_cq", EINVAL,
                    "cq->handle " + std::to_string(ibcq->handle) + " names no CQ of this context (uverbs: EINVAL)");
    return fail_errno(EINVAL);
  }
  const uint32_t want = solicited_only ? kCqArmSolicited : kCqArmNext;
  std::lock_guard lock(cq->arm_mu);
  uint32_t armed = cq->shm->arm.load(std::memory_order_acquire);
  do {
    if (armed == kCqArmNext) return 0;  // already armed for every completion
  } while (!cq->shm->arm.compare_exchange_weak(armed, want, std::memory_order_acq_rel));
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
  if (channel->refcnt) return fail_errno(EBUSY);  // CQs still use it
  ShimChannel* ch = to_shim(channel);
  int st = rpc_status(to_shim(channel->context), Op::DestroyCompChannel, HandleReq{ch->handle, 0});
  if (st != 0) return fail_errno(st);
  ::close(channel->fd);
  delete ch;
  return 0;
}

struct ibv_cq* ibv_create_cq(struct ibv_context* context, int cqe, void* cq_context, struct ibv_comp_channel* channel,
                             int comp_vector) {
  ShimCq* cq = simnic::shim::create_cq(context, cqe, cq_context, channel, comp_vector);
  return cq ? cq->base() : nullptr;
}
int ibv_destroy_cq(struct ibv_cq* ibcq) {
  ShimCq* cq = to_shim(ibcq);
  ShimContext* c = to_shim(ibcq->context);
  int st = rpc_status(c, Op::DestroyCq, HandleReq{ibcq->handle, 0});
  if (st != 0) {  // EBUSY while a QP uses it; ENOENT for a handle that names no CQ of this program
    explain_refusal("ibv_destroy_cq", st, last_refusal());
    return fail_errno(st);
  }
  {
    std::lock_guard lock(c->objs_mu);
    c->cqs.erase(ibcq->handle);
  }
  if (ibcq->channel) --ibcq->channel->refcnt;
  unmap_ring(cq->mem, cq->mem_bytes);
  pthread_mutex_destroy(&ibcq->mutex);
  pthread_cond_destroy(&ibcq->cond);
  delete cq;
  return 0;
}

// simnicd builds the new ring and moves the pending CQEs into it (QueueVerbs::resize_cq). The poll
// lock is held from the request until the new ring is mapped, so no poll reads the old ring or
// moves its consumer index meanwhile (as rdma-core's providers hold the CQ lock); the arm lock,
// so that an ibv_req_notify_cq meanwhile is not written into the old ring after simnicd copied
// its arming. Not to be called between ibv_start_poll and ibv_end_poll on the same CQ (that
// thread holds the poll lock).
int ibv_resize_cq(struct ibv_cq* ibcq, int cqe) {
  ShimCq* cq = to_shim(ibcq);
  std::scoped_lock lock(cq->poll_mu, cq->arm_mu);
  CreateCqReply rep{};
  std::vector<int> fds;
  if (int st = rpc(to_shim(ibcq->context), Op::ResizeCq, ResizeCqReq{ibcq->handle, cqe}, &rep, &fds))
    return fail_errno(st);
  void* mem = map_ring(cq->parent_domain, kResTypeCq, fds, rep.mem_bytes);
  if (!mem) return fail_errno(errno ? errno : ENOMEM);  // simnicd writes to the new ring only: the CQ is lost
  unmap_ring(cq->mem, cq->mem_bytes);
  cq->mem = mem;
  cq->mem_bytes = rep.mem_bytes;
  cq->shm = static_cast<CqShared*>(mem);
  cq->slots = reinterpret_cast<ibv_wc*>(static_cast<uint8_t*>(mem) + cqe_offset());
  cq->entries = rep.entries;
  cq->timestamps =
      rep.mem_bytes >= cq_bytes(rep.entries)
          ? reinterpret_cast<const uint64_t*>(static_cast<uint8_t*>(mem) + cqe_timestamp_offset(rep.entries))
          : nullptr;
  ibcq->cqe = rep.cqe;
  return 0;
}

int ibv_get_cq_event(struct ibv_comp_channel* channel, struct ibv_cq** cq, void** cq_context) {
  ShimContext* c = to_shim(channel->context);
  for (;;) {
    CqEventMsg msg{};
    ssize_t n = ::recv(channel->fd, &msg, sizeof msg, 0);
    if (n != ssize_t(sizeof msg)) {
      if (n >= 0) {  // simnicd went away: EIO, as a removed device's event file reads
        mark_nic_lost(c);
        errno = EIO;
      }
      return -1;
    }
    std::lock_guard lock(c->objs_mu);
    auto it = c->cqs.find(msg.cq);
    if (it == c->cqs.end()) continue;  // an event for a CQ destroyed since
    *cq = it->second->base();
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
