// The shim's view of the objects it hands to applications.
//
// Each verbs object an application sees (ibv_device, ibv_context, ibv_cq, ...) is the first
// member of a shim object that adds what the shim needs: the daemon's handle, the mapped
// shared-memory rings, a lock. Applications only ever hold pointers to the verbs part, and
// the shim gets back to its own object with the to_*() casts below, like rdma-core's
// providers do with container_of.
#pragma once
#include <infiniband/verbs.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "simnic/abi/control.h"
#include "simnic/abi/daemon_alive.h"
#include "simnic/abi/rings.h"
#include "simnic/abi/seqpacket.h"

// verbs.h turns these into macros that pick between ABI variants; the shim defines the
// real functions, so it needs the plain names.
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace simnic::shim {

struct ShimDevice {
  ibv_device dev;         // first: applications hold &dev
  char socket_path[256];  // the NIC's control socket
  uint64_t node_guid_be;
  int index;  // stable for the process' lifetime, for ibv_get_device_index
};

struct ShimCq;
struct ShimQp;
struct ShimSrq;

struct ShimContext {
  verbs_context vctx;    // first: ibv_context is vctx.context (verbs.h requires it last)
  int ctl_fd = -1;       // control socket (the slow path)
  int doorbell_fd = -1;  // eventfd shared with simnicd
  pid_t daemon_pid = 0;
  std::mutex ctl_mu;                // one request/reply at a time on ctl_fd
  std::mutex objs_mu;               // guards the handle maps
  std::map<uint32_t, ShimCq*> cqs;  // to turn daemon handles in events into objects
  std::map<uint32_t, ShimQp*> qps;
  std::map<uint32_t, ShimSrq*> srqs;
  // The NIC is gone (simnicd died, or closed this context's connection): posts fail with EIO,
  // ibv_poll_cq returns -1 once the CQ is empty, ibv_get_async_event reports
  // IBV_EVENT_DEVICE_FATAL once; as rdma-core does for a device that was removed.
  std::atomic<bool> lost{false};
  std::atomic<bool> fatal_reported{false};
  std::atomic<uint32_t> fast_calls{0};       // fast-path calls, to space out liveness checks
  std::atomic<int64_t> notices_asked_ns{0};  // when the NIC's notices were last fetched (explain.cc)
  abi::ContextShared* page = nullptr;        // shared with simnicd: the sequence idle pollers sleep on
  size_t page_bytes = 0;
  const abi::DaemonAlive* alive = nullptr;  // simnicd's alive page, read-only (abi/daemon_alive.h)
  // The NIC's UDP socket, its address and port, for posts that send themselves (direct_send.cc);
  // -1 when the NIC lends nothing.
  int direct_fd = -1;
  uint32_t direct_src_ip = 0;
  uint16_t direct_port = 0;
  pthread_mutex_t* ctl_shared_mu = nullptr;  // ctl_fd across the processes a fork shares it with (context.cc)
};

// One request/reply at a time on a context's control socket, across the processes that share
// it since a fork (as they share a uverbs file: each command is the caller's own system call
// there). Without it a child's reply can reach its parent (EPROTO, or another call's answer).
class CtlExchange {
 public:
  explicit CtlExchange(ShimContext* c);
  ~CtlExchange();
  CtlExchange(const CtlExchange&) = delete;
  CtlExchange& operator=(const CtlExchange&) = delete;

 private:
  std::lock_guard<std::mutex> threads_;
  pthread_mutex_t* processes_;
};

struct ShimCq {
  ibv_cq_ex cqx;  // first; starts with the ibv_cq applications see (ibv_cq_ex_to_cq)
  void* mem = nullptr;
  size_t mem_bytes = 0;
  abi::CqShared* shm = nullptr;
  ibv_wc* slots = nullptr;
  const uint64_t* timestamps = nullptr;  // per slot, written by simnicd with the CQE
  uint32_t entries = 0;
  std::mutex poll_mu;
  std::mutex arm_mu;        // req_notify_cq against ibv_resize_cq: an arming never lands in a dropped ring
  uint32_t poll_index = 0;  // the CQE start_poll/next_poll are looking at
  bool poll_has = false;    // ... and whether there is one
  // Issue 17 (cq.cc): the parent domain whose allocator holds the ring (ibv_create_cq_ex with
  // IBV_CQ_INIT_ATTR_MASK_PD), and IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK's conversion.
  ibv_pd* parent_domain = nullptr;
  bool wallclock = false;
  int64_t wallclock_offset_ns = 0;  // CLOCK_REALTIME minus the NIC's clock
  int64_t wallclock_synced_at = 0;  // CLOCK_MONOTONIC ns of the last measurement (0: never)
  ibv_cq* base() { return reinterpret_cast<ibv_cq*>(&cqx); }
};

struct ShimQp {
  ibv_qp_ex qpx;  // first; qpx.qp_base is the ibv_qp applications see
  void* mem = nullptr;
  size_t mem_bytes = 0;
  abi::QpShared* shm = nullptr;
  abi::SendWqe* sq = nullptr;
  abi::RecvWqe* rq = nullptr;
  uint32_t sq_entries = 0, rq_entries = 0;
  ibv_qp_cap cap{};
  std::mutex sq_mu, rq_mu;
  // The wr_* API (ibv_qp_to_qp_ex): between wr_start and wr_complete/wr_abort, sq_mu is held,
  // WQEs are built at wr_prod, and the first error is remembered for wr_complete.
  bool ex = false;
  uint32_t wr_start_prod = 0, wr_prod = 0;
  int wr_err = 0;
  abi::SendWqe* wr_cur = nullptr;
};

struct ShimSrq {
  ibv_srq srq;  // first
  void* mem = nullptr;
  size_t mem_bytes = 0;
  abi::SrqShared* shm = nullptr;
  abi::RecvWqe* slots = nullptr;
  uint32_t entries = 0;
  uint32_t max_wr = 0, max_sge = 0;
  std::mutex mu;
  uint32_t srq_num = 0;  // an XRC SRQ's number (ibv_get_srq_num); 0 for a basic SRQ
};

// An XRC domain (xrc.cc). The same daemon handle comes back to every open of a shared domain.
struct ShimXrcd {
  ibv_xrcd xrcd;  // first
  uint32_t handle = 0;
};

struct ShimChannel {
  ibv_comp_channel ch;  // first
  uint32_t handle = 0;
};

inline ShimContext* to_shim(ibv_context* c) { return reinterpret_cast<ShimContext*>(verbs_get_ctx(c)); }
inline ShimDevice* to_shim(ibv_device* d) { return reinterpret_cast<ShimDevice*>(d); }
inline ShimCq* to_shim(ibv_cq* c) { return reinterpret_cast<ShimCq*>(c); }
inline ShimQp* to_shim(ibv_qp* q) { return reinterpret_cast<ShimQp*>(q); }
inline ShimSrq* to_shim(ibv_srq* s) { return reinterpret_cast<ShimSrq*>(s); }
inline ShimChannel* to_shim(ibv_comp_channel* c) { return reinterpret_cast<ShimChannel*>(c); }

// How verbs that return an error number end: with errno set to it too (0 leaves errno alone).
// rdma-core's are the return of a failed write() or ioctl() on the uverbs file, which set errno
// to the same value, and programs print either (`perror`, `strerror(ret)`).
inline int fail_errno(int err) {
  if (err) errno = err;
  return err;
}

// Marks the NIC behind `c` gone (once: true the first time) and lets go of its UDP socket,
// which this process holds for posts that send themselves (direct_send.cc): a program that
// outlives its NIC must not keep the NIC's address bound, or `simnic up` could not take it again.
bool mark_nic_lost(ShimContext* c);

// A slow-path call on the context's control socket. Returns 0 or an errno, also
// left in errno.
template <class Req, class Reply>
int rpc(ShimContext* c, abi::Op op, const Req& req, Reply* reply, std::vector<int>* fds_out = nullptr,
        std::initializer_list<int> fds_in = {}) {
  CtlExchange lock(c);
  int st = abi::call_fixed(c->ctl_fd, op, req, reply, std::span<const int>(fds_in.begin(), fds_in.size()), fds_out);
  if (st == ECONNRESET || st == EPIPE || st == ENOTCONN) {
    mark_nic_lost(c);
    st = EIO;  // what a verb gets from a removed device's uverbs file
  }
  return fail_errno(st);  // as the uverbs write() of rdma-core's ibv_cmd_*
}

// True once the NIC behind `c` is gone: the flag, else a zero-timeout poll() of the control
// socket (simnicd's end closes when it dies or drops this context).
bool nic_lost(ShimContext* c);
// The same for the fast path (empty polls, posts): the flag, and only every
// kLostCheckInterval-th call the system call.
bool nic_lost_sampled(ShimContext* c);

// Sends a request whose reply has no body (destroy, modify).
template <class Req>
int rpc_status(ShimContext* c, abi::Op op, const Req& req) {
  return rpc<Req, abi::HandleReply>(c, op, req, nullptr);
}

// A slow-path call whose reply (or refusal) is text: 0 or an errno, *text either way.
template <class Req>
int rpc_text(ShimContext* c, abi::Op op, const Req& req, std::string* text) {
  CtlExchange lock(c);
  std::vector<uint8_t> body;
  int st = abi::call(c->ctl_fd, op, &req, sizeof req, body);
  text->assign(body.begin(), body.end());
  if (st == ECONNRESET || st == EPIPE || st == ENOTCONN) {
    mark_nic_lost(c);
    st = EIO;
  }
  return fail_errno(st);
}

// shared_pages.cc: moves the pages of a registration onto a sealed memfd simnicd can map (see
// the file). {-1, 0} when they stay as they are; the descriptor stays the shim's.
struct SharedPages {
  int fd = -1;
  uint64_t base = 0;  // where the memfd's offset 0 is mapped
};
SharedPages share_pages(const void* addr, size_t length, unsigned access);

// explain.cc: why a verb was refused or a work request failed, on the program's stderr
// (under `simnic run`; each distinct line once).
bool explaining();
void explain(const std::string& line);
// `verb` names the call, e.g. "ibv_alloc_pd" or "ibv_query_gid(simnic0, port 1, index 1)"; an
// empty `why` (simnicd gave none) is explained as far as the shim can.
void explain_refusal(const std::string& verb, int err, const std::string& why);
void explain_completion(ibv_context* context, const ibv_wc& wc);
// While a program polls and nothing completes (an RNR storm, a peer that never answers), what
// the NIC noticed is fetched about once a second and explained.
void explain_while_waiting(ibv_context* context);

// Wakes simnicd after new WQEs were published: the doorbell of a real RNIC.
void ring_doorbell(ShimContext* c);

// direct_send.cc: posts that send themselves (abi/direct_send.h). open_direct_send asks simnicd
// for its socket once per context. note_local_mr/forget_local_mr keep the MRs whose bytes a post
// may read (ibv_reg_mr's; forgotten before ibv_dereg_mr and ibv_rereg_mr). A post of one WQE at
// SQ index `index` calls prepare_direct_send before it publishes the WQE (the packet is built
// under the lend on offer), then send_direct_packet after (the PSN taken, the packet sent): true
// when the NIC needs no doorbell for it.
struct DirectPacket {
  abi::DirectLend lend;
  size_t bytes = 0;
};
void open_direct_send(ShimContext* c);
void release_direct_send(ShimContext* c);
void note_local_mr(const ibv_mr* mr, uint64_t iova, unsigned access);
void forget_local_mr(const ibv_mr* mr);
bool prepare_direct_send(ShimContext* c, ShimQp* qp, const abi::SendWqe& w, uint32_t index, DirectPacket* out);
bool send_direct_packet(ShimContext* c, ShimQp* qp, const DirectPacket& p);

// poll_wait.cc: an empty poll spins briefly, then sleeps until simnicd writes a CQE for the
// context. Read the sequence before looking at the ring; call note_completions_found(n) when a
// poll returned n CQEs, idle_after_empty_poll() when it found none, and note_posts(n) for
// every n work requests a thread posts (a thread that streams spins less: poll_wait.cc).
uint32_t completion_sequence(ShimContext* c);
void note_completions_found(int found);
void note_posts(int posted);
void idle_after_empty_poll(ShimContext* c, uint32_t sequence_before);
// context.cc: maps the context's page (abi::ContextShared); without it empty polls yield.
void map_context_page(ShimContext* c);

// cq.cc: removes the completions of QP `qp_num` still waiting on `cq` (after the QP was reset).
void remove_completions_of_qp(ibv_cq* cq, uint32_t qp_num);

// Maps the rings of a QP or SRQ simnicd just created (through the allocator of `pd` when it
// is a parent domain: domains.cc); on failure asks simnicd to destroy the object again and
// returns nullptr with errno set (context.cc).
void* map_rings_or_destroy(ShimContext* c, std::vector<int>& fds, size_t bytes, abi::Op destroy, uint32_t handle,
                           ibv_pd* pd = nullptr, uint64_t resource_type = 0);

// The ibv_mr an application gets for an MR simnicd registered (ibv_reg_mr, ibv_reg_dm_mr,
// ibv_import_mr; released by ibv_dereg_mr or ibv_unimport_mr). resources.cc.
ibv_mr* new_ibv_mr(ibv_pd* pd, void* addr, size_t length, uint32_t handle, uint32_t lkey, uint32_t rkey);

// Maps a memfd received from simnicd and closes it. Returns nullptr with errno set.
void* map_shared(std::vector<int>& fds, size_t bytes);

// Sets errno and returns nullptr: how pointer-returning verbs fail.
template <class T = void>
T* fail_null(int err) {
  errno = err;
  return nullptr;
}

// Diagnostics on stderr when SIMNIC_DEBUG is set (and always for fatal set-up problems).
void debug(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void warn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

void fill_context_ops(ShimContext* c);  // fast-path entry points into ibv_context.ops / vctx
void fill_xrc_ops(ShimContext* c);      // xrc.cc: open/close_xrcd, create_srq_ex, get_srq_num
ibv_qp* create_xrc_qp(ibv_context* context, ibv_qp_init_attr_ex* attr);  // xrc.cc
ibv_qp* create_xrc_qp_on_pd(ibv_pd* pd, ibv_qp_init_attr* init);         // xrc.cc: from ibv_create_qp

}  // namespace simnic::shim
