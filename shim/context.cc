// Opening a device (one control connection per ibv_context, like one open of /dev/infiniband/
// uverbsN), the queries, and asynchronous events.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <endian.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "shim/shim.h"
#include "shim/verbs_ext.h"
#include "simnic/abi/daemon_alive.h"
#include "simnic/abi/state_dir.h"
#include "simnic/abi/wr_opcodes.h"

namespace simnic::shim {

using namespace simnic::abi;

// Through the doorbell gate (abi::doorbell_must_ring): no system call while simnicd has a
// doorbell it has not begun to answer, as the look that answers it will see this WQE too.
void ring_doorbell(ShimContext* c) {
  if (!abi::doorbell_must_ring(c->page)) return;
  uint64_t one = 1;
  // An eventfd write only fails if the counter would overflow, which a reader prevents.
  [[maybe_unused]] ssize_t n = ::write(c->doorbell_fd, &one, sizeof one);
}

namespace {
constexpr uint32_t kLostCheckInterval = 128;  // fast-path calls between two looks at the socket

bool control_socket_closed(int fd) {
  pollfd p{fd, 0, 0};  // no events asked: POLLHUP/POLLERR are always reported
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}
}  // namespace

bool mark_nic_lost(ShimContext* c) {
  if (c->lost.exchange(true)) return false;
  release_direct_send(c);
  return true;
}

bool nic_lost(ShimContext* c) {
  if (c->lost.load(std::memory_order_relaxed)) return true;
  if (!control_socket_closed(c->ctl_fd)) return false;
  if (mark_nic_lost(c)) debug("%s: simnicd is gone (control connection closed)", c->vctx.context.device->name);
  return true;
}

// Every call: the kernel cleared simnicd's alive word when its main thread exited (a load,
// no system call: abi/daemon_alive.h). Every kLostCheckInterval-th call: the control socket,
// which also says that simnicd dropped this context while it lives on.
bool nic_lost_sampled(ShimContext* c) {
  if (c->lost.load(std::memory_order_relaxed)) return true;
  if (c->alive && !daemon_alive(c->alive)) {
    if (mark_nic_lost(c)) debug("%s: simnicd is gone (its alive word was cleared)", c->vctx.context.device->name);
    return true;
  }
  if (c->fast_calls.fetch_add(1, std::memory_order_relaxed) % kLostCheckInterval != kLostCheckInterval - 1)
    return false;
  return nic_lost(c);
}

void* map_shared(std::vector<int>& fds, size_t bytes) {
  if (fds.size() != 1) {
    for (int fd : fds) ::close(fd);
    errno = EPROTO;
    return nullptr;
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
  int e = errno;
  ::close(fds[0]);
  fds.clear();
  if (p == MAP_FAILED) {
    errno = e;
    return nullptr;
  }
  return p;
}

// The rings of an object simnicd just created (QP, SRQ), mapped; if they cannot be, the
// object is destroyed again (`destroy` is its Op) and errno says why.
void* map_rings_or_destroy(ShimContext* c, std::vector<int>& fds, size_t bytes, abi::Op destroy, uint32_t handle,
                           ibv_pd* pd, uint64_t resource_type) {
  void* mem = map_ring(pd, resource_type, fds, bytes);
  if (!mem) {
    int e = errno;
    rpc_status(c, destroy, abi::HandleReq{handle, 0});
    errno = e;
  }
  return mem;
}

namespace {
// simnicd's alive page: read-only (it is sealed against writes); without it, a dead NIC is
// seen by the sampled check of the control socket only.
void map_daemon_alive(ShimContext* c, std::vector<int>& fds, uint32_t bytes) {
  if (fds.size() != 1 || bytes < kDaemonAliveBytes) {
    for (int fd : fds) ::close(fd);
    return;
  }
  void* p = ::mmap(nullptr, kDaemonAliveBytes, PROT_READ, MAP_SHARED, fds[0], 0);
  ::close(fds[0]);
  if (p != MAP_FAILED) c->alive = static_cast<const DaemonAlive*>(p);
}
}  // namespace

void map_context_page(ShimContext* c) {
  MapContextPageReply rep{};
  std::vector<int> fds;
  // An older simnicd refuses the op (EINVAL): empty polls then yield as they used to.
  if (rpc(c, Op::MapContextPage, HandleReq{}, &rep, &fds) != 0) return;
  if (rep.bytes < sizeof(ContextShared)) {
    for (int fd : fds) ::close(fd);
    return;
  }
  std::vector<int> alive_fds;
  if (fds.size() == 2) alive_fds.push_back(fds.back()), fds.pop_back();
  if (void* p = map_shared(fds, rep.bytes)) {
    c->page = static_cast<ContextShared*>(p);
    c->page_bytes = rep.bytes;
  }
  map_daemon_alive(c, alive_fds, rep.alive_bytes);
}

namespace {

// Why simnicd refused to open the device: its own reason (e.g. the user's share of the NIC's
// connections, EMFILE), or what the errno means here.
std::string hello_refusal(ibv_device* device, int st) {
  const std::string verb = std::string("ibv_open_device(") + device->name + "): ";
  if (!last_refusal().empty()) return verb + last_refusal();
  if (st == EPROTO)
    return verb +
           "simnicd speaks another version of the shim's protocol: the shim (libibverbs.so.1 on "
           "LD_LIBRARY_PATH) and simnicd come from different builds; run both from one (`simnic run`)";
  return verb + std::strerror(st) + " (`simnic logs " + device->name + "` shows what the NIC logged)";
}

// simnicd "DMAs" with process_vm_readv/writev, which Yama restricts to a process' ancestors
// unless the process names its tracer. Name the daemon; with two daemons (two devices open
// in one process) only "any" covers both.
int allow_daemon_access(pid_t daemon_pid) {
  static std::mutex mu;
  static pid_t named = 0;
  std::lock_guard lock(mu);
  int scope = 0;
  std::ifstream("/proc/sys/kernel/yama/ptrace_scope") >> scope;
  if (scope >= 2) {
    warn(
        "kernel.yama.ptrace_scope is %d, which forbids simnicd (pid %d) from reading and writing "
        "this program's memory regions. Allow it with: sudo sysctl kernel.yama.ptrace_scope=1",
        scope, int(daemon_pid));
    return EPERM;
  }
  if (named == daemon_pid) return 0;
  unsigned long who = named == 0 ? static_cast<unsigned long>(daemon_pid) : PR_SET_PTRACER_ANY;
  // EINVAL means the kernel has no Yama, which then needs nothing.
  if (::prctl(PR_SET_PTRACER, who, 0, 0, 0) != 0 && errno != EINVAL) {
    int e = errno;
    warn(
        "ibv_open_device: prctl(PR_SET_PTRACER) failed (%s), so simnicd (pid %d) could not reach this "
        "program's memory regions",
        std::strerror(e), int(daemon_pid));
    return e;
  }
  named = named == 0 ? daemon_pid : -1;
  return 0;
}

}  // namespace

// A robust, process-shared mutex in a MAP_SHARED page: a fork inherits the page shared, so the
// processes that share the context's control socket share the lock too. nullptr if there is no
// page (then threads alone are serialized, as before).
static pthread_mutex_t* new_shared_ctl_mutex() {
  void* p = ::mmap(nullptr, sizeof(pthread_mutex_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* mu = static_cast<pthread_mutex_t*>(p);
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);  // a process may die holding it
  pthread_mutex_init(mu, &attr);
  pthread_mutexattr_destroy(&attr);
  return mu;
}

CtlExchange::CtlExchange(ShimContext* c) : threads_(c->ctl_mu), processes_(c->ctl_shared_mu) {
  if (processes_ && pthread_mutex_lock(processes_) == EOWNERDEAD) pthread_mutex_consistent(processes_);
}

CtlExchange::~CtlExchange() {
  if (processes_) pthread_mutex_unlock(processes_);
}

namespace {

// "ibv_query_gid(simnic0, port 1, index 1)": the call, with the arguments that were refused.
std::string call_on(const char* verb, ibv_context* context, uint32_t port_num, const std::string& more = "") {
  return std::string(verb) + "(" + context->device->name + ", port " + std::to_string(port_num) + more + ")";
}
std::string call_on(const char* verb, ibv_context* context, uint32_t port_num, int64_t index) {
  return call_on(verb, context, port_num, ", index " + std::to_string(index));
}

}  // namespace

// Port queries: a wrong port is explained (simnicd's reason names the one port there is).
static int query_port_attr(ibv_context* context, const char* verb, uint32_t port_num, QueryPortReply* rep) {
  int st = rpc(to_shim(context), Op::QueryPort, QueryPortReq{port_num, 0}, rep);
  explain_refusal(call_on(verb, context, port_num), st, last_refusal());
  return st;
}

// GID queries: ENODATA is an empty slot below gid_tbl_len, which programs walking the table
// meet on purpose (ibv_devinfo -v), so only the other refusals (past the table, no such port)
// are explained.
static int query_gid_entry(ibv_context* context, const char* verb, uint32_t port_num, uint32_t index,
                           QueryGidReply* rep) {
  int st = rpc(to_shim(context), Op::QueryGid, QueryGidReq{port_num, index}, rep);
  if (st != ENODATA) explain_refusal(call_on(verb, context, port_num, int64_t(index)), st, last_refusal());
  return st;
}

}  // namespace simnic::shim

using namespace simnic::shim;
using namespace simnic::abi;

extern "C" {

struct ibv_context* ibv_open_device(struct ibv_device* device) {
  ShimDevice* d = to_shim(device);
  std::string why;
  // The peer is checked before any descriptor of ours goes to it: a socket planted by another
  // user would otherwise receive our doorbell and event sockets.
  int ctl = connect_nic(d->socket_path, &why);
  if (ctl < 0) {
    int e = errno;
    if (!why.empty()) warn("%s", why.c_str());
    else warn("%s is not running (%s: %s); start it with `simnic up`", device->name, d->socket_path, std::strerror(e));
    return fail_null<ibv_context>(e == ENOENT || e == ECONNREFUSED ? ENODEV : e);
  }
  int doorbell = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  int async[2] = {-1, -1};
  if (doorbell < 0 || ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, async) != 0) {
    int e = errno;
    ::close(ctl);
    if (doorbell >= 0) ::close(doorbell);
    return fail_null<ibv_context>(e);
  }
  HelloReply hello{};
  std::vector<int> none;
  int st = call_fixed(ctl, Op::Hello, HelloReq{kAbiVersion, uint32_t(ctl)}, &hello,
                      std::span<const int>({doorbell, async[1]}));
  ::close(async[1]);  // simnicd has its own copy now
  // A refused Hello says why (e.g. the user's share of the NIC's connections, EMFILE).
  if (st != 0) warn("%s", hello_refusal(device, st).c_str());
  if (st == 0) st = allow_daemon_access(pid_t(hello.daemon_pid));
  if (st != 0) {
    ::close(ctl);
    ::close(doorbell);
    ::close(async[0]);
    return fail_null<ibv_context>(st);
  }

  auto* c = new ShimContext;
  // The NIC's notices are first fetched after a second of waiting (explain_while_waiting).
  c->notices_asked_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::memset(&c->vctx, 0, sizeof c->vctx);
  c->ctl_fd = ctl;
  c->doorbell_fd = doorbell;
  c->daemon_pid = pid_t(hello.daemon_pid);
  ibv_context& ctx = c->vctx.context;
  ctx.device = device;
  ctx.cmd_fd = ctl;
  ctx.async_fd = async[0];
  ctx.num_comp_vectors = int(hello.num_comp_vectors);
  ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
  pthread_mutex_init(&ctx.mutex, nullptr);
  c->vctx.sz = sizeof(verbs_context);
  fill_context_ops(c);
  map_context_page(c);
  open_direct_send(c);
  c->ctl_shared_mu = new_shared_ctl_mutex();
  debug("opened %s (simnicd pid %u)", device->name, hello.daemon_pid);
  return &ctx;
}

int ibv_close_device(struct ibv_context* context) {
  ShimContext* c = to_shim(context);
  // Closing the control connection makes simnicd free whatever the application left behind.
  ::close(c->ctl_fd);
  ::close(c->doorbell_fd);
  if (c->direct_fd >= 0) ::close(c->direct_fd);
  ::close(context->async_fd);
  if (c->page) ::munmap(c->page, c->page_bytes);
  if (c->alive) ::munmap(const_cast<DaemonAlive*>(c->alive), kDaemonAliveBytes);
  if (c->ctl_shared_mu) ::munmap(c->ctl_shared_mu, sizeof(pthread_mutex_t));
  pthread_mutex_destroy(&context->mutex);
  delete c;
  return 0;
}

int ibv_query_device(struct ibv_context* context, struct ibv_device_attr* device_attr) {
  QueryDeviceReply rep{};
  int st = rpc(to_shim(context), Op::QueryDevice, HandleReq{}, &rep);
  if (st == 0) *device_attr = rep.attr;
  return fail_errno(st);
}

// The exported ibv_query_port takes the pre-1.3 ("compat") layout, which ends before
// port_cap_flags2; current binaries come through verbs_context.query_port instead.
int ibv_query_port(struct ibv_context* context, uint8_t port_num, struct _compat_ibv_port_attr* port_attr) {
  QueryPortReply rep{};
  int st = query_port_attr(context, "ibv_query_port", port_num, &rep);
  if (st == 0) std::memcpy(port_attr, &rep.attr, offsetof(ibv_port_attr, port_cap_flags2));
  return fail_errno(st);
}

int ibv_query_gid(struct ibv_context* context, uint8_t port_num, int index, union ibv_gid* gid) {
  if (index < 0) {
    explain_refusal(call_on("ibv_query_gid", context, port_num, int64_t(index)), EINVAL, "a GID index is 0 or more");
    return EINVAL;
  }
  QueryGidReply rep{};
  int st = query_gid_entry(context, "ibv_query_gid", port_num, uint32_t(index), &rep);
  if (st == ENODATA) std::memset(gid, 0, sizeof *gid);  // an empty slot reads as the zero GID
  else if (st == 0) *gid = rep.gid;
  return st == 0 || st == ENODATA ? 0 : -1;  // rdma-core returns -1 here, not an errno
}

// IBVERBS_PRIVATE_34; the real type is enum ibv_gid_type_sysfs from infiniband/driver.h,
// where 0 means IB or RoCE v1 and 1 RoCE v2. As in rdma-core, an empty slot reads as 0 and
// an index beyond the table fails with -1.
int ibv_query_gid_type(struct ibv_context* context, uint8_t port_num, unsigned int index, uint32_t* type) {
  QueryGidReply rep{};
  int st = query_gid_entry(context, "ibv_query_gid_type", port_num, index, &rep);
  if (st != 0 && st != ENODATA) return -1;
  *type = st == 0 && rep.gid_type == IBV_GID_TYPE_ROCE_V2 ? 1 : 0;
  return 0;
}

int _ibv_query_gid_ex(struct ibv_context* context, uint32_t port_num, uint32_t gid_index, struct ibv_gid_entry* entry,
                      uint32_t flags, size_t entry_size) {
  if (flags || entry_size < sizeof(ibv_gid_entry)) {
    explain_refusal(call_on("ibv_query_gid_ex", context, port_num, int64_t(gid_index)), EINVAL,
                    flags ? "flags must be 0" : "entry_size is smaller than struct ibv_gid_entry");
    return fail_errno(EINVAL);
  }
  QueryGidReply rep{};
  int st = query_gid_entry(context, "ibv_query_gid_ex", port_num, gid_index, &rep);
  if (st != 0) return fail_errno(st);
  std::memset(entry, 0, sizeof *entry);
  entry->gid = rep.gid;
  entry->gid_index = gid_index;
  entry->port_num = port_num;
  entry->gid_type = rep.gid_type;
  entry->ndev_ifindex = rep.ndev_ifindex;
  return 0;
}

ssize_t _ibv_query_gid_table(struct ibv_context* context, struct ibv_gid_entry* entries, size_t max_entries,
                             uint32_t flags, size_t entry_size) {
  const std::string verb = std::string("ibv_query_gid_table(") + context->device->name + ")";
  if (flags || entry_size < sizeof(ibv_gid_entry)) {
    explain_refusal(verb, EINVAL, flags ? "flags must be 0" : "entry_size is smaller than struct ibv_gid_entry");
    return -EINVAL;
  }
  ibv_device_attr dev{};
  if (int st = ibv_query_device(context, &dev)) return -st;
  size_t n = 0;
  for (uint32_t port = 1; port <= dev.phys_port_cnt; ++port) {
    ibv_port_attr pa{};
    QueryPortReply rep{};
    if (int st = rpc(to_shim(context), Op::QueryPort, QueryPortReq{port, 0}, &rep)) return -st;
    pa = rep.attr;
    for (int i = 0; i < pa.gid_tbl_len; ++i) {
      ibv_gid_entry e;
      int st = _ibv_query_gid_ex(context, port, uint32_t(i), &e, 0, sizeof e);
      if (st == ENODATA) continue;  // only the valid entries are listed
      if (st != 0) return -st;
      if (n == max_entries) {  // rdma-core: the caller's table is too small
        explain_refusal(verb, EINVAL,
                        "max_entries " + std::to_string(max_entries) +
                            " is too few: the table has more valid entries (ibv_query_port's "
                            "gid_tbl_len bounds them)");
        return -EINVAL;
      }
      std::memcpy(reinterpret_cast<uint8_t*>(entries) + n * entry_size, &e, sizeof e);
      ++n;
    }
  }
  return ssize_t(n);
}

int ibv_query_pkey(struct ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
  QueryPortReply rep{};
  if (rpc(to_shim(context), Op::QueryPort, QueryPortReq{port_num, 0}, &rep) != 0) return -1;
  if (index < 0 || index >= int(rep.attr.pkey_tbl_len)) return -1;
  *pkey = htobe16(0xffff);  // RoCE: the default full-membership P_Key only
  return 0;
}

int ibv_get_pkey_index(struct ibv_context* context, uint8_t port_num, __be16 pkey) {
  __be16 p;
  if (ibv_query_pkey(context, port_num, 0, &p) == 0 && p == pkey) return 0;
  return -1;
}

int ibv_get_async_event(struct ibv_context* context, struct ibv_async_event* event) {
  ShimContext* c = to_shim(context);
  AsyncEventMsg msg{};
  ssize_t n = ::recv(context->async_fd, &msg, sizeof msg, 0);
  if (n != ssize_t(sizeof msg)) {
    // EOF: simnicd died or dropped this context. A non-blocking async fd may also find
    // nothing to read after a poll_cq/post noticed the loss.
    bool gone = n >= 0 || ((errno == EAGAIN || errno == EWOULDBLOCK) && nic_lost(c));
    if (!gone) return -1;
    mark_nic_lost(c);
    if (c->fatal_reported.exchange(true)) {  // reported once; then, as a removed device's file
      errno = EIO;
      return -1;
    }
    std::memset(event, 0, sizeof *event);
    event->event_type = IBV_EVENT_DEVICE_FATAL;
    event->element.port_num = 0;
    return 0;
  }
  std::memset(event, 0, sizeof *event);
  event->event_type = ibv_event_type(msg.event_type);
  std::lock_guard lock(c->objs_mu);
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR:
      if (auto it = c->cqs.find(msg.handle); it != c->cqs.end()) event->element.cq = it->second->base();
      break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      if (auto it = c->srqs.find(msg.handle); it != c->srqs.end()) event->element.srq = &it->second->srq;
      break;
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_GID_CHANGE: event->element.port_num = int(msg.handle); break;
    case IBV_EVENT_DEVICE_FATAL: break;
    default:  // the QP events
      if (auto it = c->qps.find(msg.handle); it != c->qps.end()) event->element.qp = &it->second->qpx.qp_base;
      break;
  }
  return 0;
}

void ibv_ack_async_event(struct ibv_async_event*) {}

}  // extern "C"

namespace simnic::shim {
namespace {

int query_port_ex(ibv_context* context, uint8_t port_num, ibv_port_attr* port_attr, size_t len) {
  QueryPortReply rep{};
  int st = query_port_attr(context, "ibv_query_port", port_num, &rep);
  if (st != 0) return fail_errno(st);
  std::memset(port_attr, 0, len);
  std::memcpy(port_attr, &rep.attr, std::min(len, sizeof rep.attr));
  return 0;
}

int query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                    size_t attr_size) {
  if (input && input->comp_mask) return fail_errno(EINVAL);
  ibv_device_attr_ex ex{};
  if (int st = ibv_query_device(context, &ex.orig_attr)) return fail_errno(st);
  ex.max_dm_size = 0;
  // CQE timestamps (ibv_wc_read_completion_ts) count the NIC's simulated nanoseconds.
  ex.completion_timestamp_mask = ~uint64_t(0);
  ex.hca_core_clock = simnic::abi::kNicClockKhz;
  ex.max_dm_size = simnic::abi::kMaxDmSize;  // ibv_alloc_dm (issue 17)
  ex.phys_port_cnt_ex = ex.orig_attr.phys_port_cnt;
  // The kernel's 64-bit capability word: the 32 of ibv_query_device, and IBTA 1.5 RDMA ATOMIC
  // WRITE (IB_UVERBS_DEVICE_ATOMIC_WRITE, 1 << 40 in the kernel's ib_user_verbs.h; rdma-core
  // 44's copy predates it), which librpma and rdma-core's tests look for.
  ex.device_cap_flags_ex = ex.orig_attr.device_cap_flags | simnic::abi::kDeviceCapAtomicWrite;
  fill_odp_caps(&ex);  // on-demand paging (issue 17)
  std::memset(attr, 0, attr_size);
  std::memcpy(attr, &ex, std::min(attr_size, sizeof ex));
  return 0;
}

}  // namespace

extern ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr);
extern ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr);
extern int poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
extern int req_notify_cq(ibv_cq* cq, int solicited_only);
extern int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
extern int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
extern int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);
extern ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type);
extern int dealloc_mw(ibv_mw* mw);
extern int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind);

void fill_context_ops(ShimContext* c) {
  ibv_context_ops& ops = c->vctx.context.ops;
  ops._compat_query_device = ibv_query_device;
  ops._compat_query_port = ibv_query_port;
  ops.poll_cq = poll_cq;
  ops.req_notify_cq = req_notify_cq;
  ops.post_send = post_send;
  ops.post_recv = post_recv;
  ops.post_srq_recv = post_srq_recv;
  ops.alloc_mw = alloc_mw;
  ops.dealloc_mw = dealloc_mw;
  ops.bind_mw = bind_mw;
  // Left NULL, as for a provider without them: verbs.h's inline wrappers then fail with
  // EOPNOTSUPP (WQs, flows, counters, ...).
  c->vctx.query_port = query_port_ex;
  c->vctx.query_device_ex = query_device_ex;
  c->vctx.create_qp_ex = create_qp_ex;
  c->vctx.create_cq_ex = create_cq_ex;
  fill_xrc_ops(c);
  fill_verbs_ext_ops(c);  // rereg, DM, clock, TD and parent domains (issue 17)
  fill_odp_ops(c);        // ibv_advise_mr (issue 17)
}

}  // namespace simnic::shim

#include "shim/symver.h"
SIMNIC_DEFAULT_VERSION_1_1(ibv_open_device);
SIMNIC_DEFAULT_VERSION_1_1(ibv_close_device);
SIMNIC_DEFAULT_VERSION_1_1(ibv_query_device);
SIMNIC_DEFAULT_VERSION_1_1(ibv_query_port);
SIMNIC_DEFAULT_VERSION_1_1(ibv_query_gid);
SIMNIC_DEFAULT_VERSION_1_1(ibv_query_pkey);
SIMNIC_DEFAULT_VERSION_1_1(ibv_get_async_event);
SIMNIC_DEFAULT_VERSION_1_1(ibv_ack_async_event);
