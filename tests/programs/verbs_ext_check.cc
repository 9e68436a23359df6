// simnic-verbs-ext-check: issue 17's verbs between two processes, as a plain verbs program
// (linked against the system libibverbs). The server (device -b) puts its QP and CQ on a
// parent domain with a thread domain and its own allocators, registers an MR it later
// re-registers (ibv_rereg_mr: new translation, then no remote write), and device memory
// (ibv_alloc_dm, ibv_memcpy_to_dm, ibv_reg_dm_mr). The client (device -a, a child process)
// writes and reads all of it with RDMA; every byte is compared, every completion checked
// (including the wall-clock and NIC-clock CQE timestamps of ibv_create_cq_ex). Run it with
// `simnic run -- ...`.
//
//   simnic-verbs-ext-check [-a DEV_A] [-b DEV_B]
//   simnic-verbs-ext-check -i [-a DEV]     (ibv_import_device/pd/mr between two processes)
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <getopt.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <vector>

#include "check_util.h"

namespace {

using namespace check;

constexpr size_t kBuf = 16384;
constexpr int kAccess = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
constexpr size_t kDm = 8192;
constexpr uint64_t kRecvMagic = 0x5ec0de0000000000ull;

// What the two processes tell each other over their socket.
struct Msg {
  uint32_t step;
  uint32_t qpn;
  ibv_gid gid;
  uint64_t addr;  // server: where the MR is (its iova)
  uint32_t rkey;
  uint32_t dm_rkey;
  int32_t status;  // client: the completion status of the step's last work request
  uint32_t seed;
};

int64_t realtime_ns() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// One completion through the extended API, with the fields the CQ was created to carry.
struct Cqe {
  uint64_t wr_id;
  ibv_wc_status status;
  ibv_wc_opcode opcode;
  uint32_t byte_len, qp_num, src_qp, imm, wc_flags;
  uint64_t nic_ts, wall_ns;
};

bool poll_one(ibv_cq_ex* cq, Cqe* out) {
  ibv_poll_cq_attr attr{};
  int st = ENOENT;
  for (int spins = 0; st == ENOENT && spins < 20'000'000; ++spins) st = ibv_start_poll(cq, &attr);
  CHECK(st == 0, "ibv_start_poll: %d", st);
  *out = Cqe{cq->wr_id,
             cq->status,
             ibv_wc_read_opcode(cq),
             ibv_wc_read_byte_len(cq),
             ibv_wc_read_qp_num(cq),
             ibv_wc_read_src_qp(cq),
             0,
             ibv_wc_read_wc_flags(cq),
             ibv_wc_read_completion_ts(cq),
             ibv_wc_read_completion_wallclock_ns(cq)};
  if (out->wc_flags & IBV_WC_WITH_IMM) out->imm = ntohl(ibv_wc_read_imm_data(cq));
  ibv_end_poll(cq);
  return true;
}

constexpr uint64_t kWcFlags = uint64_t(IBV_WC_STANDARD_FLAGS) | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                              IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;

ibv_cq_ex* make_cq(ibv_context* ctx, ibv_pd* parent_domain) {
  ibv_cq_init_attr_ex a{};
  a.cqe = 64;
  a.wc_flags = kWcFlags;
  if (parent_domain) a.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD, a.parent_domain = parent_domain;
  return ibv_create_cq_ex(ctx, &a);
}

ibv_qp* make_qp(ibv_context* ctx, ibv_pd* pd, ibv_cq_ex* cq) {
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_RC;
  a.send_cq = a.recv_cq = ibv_cq_ex_to_cq(cq);
  a.cap = {16, 16, 1, 1, 0};
  a.comp_mask = IBV_QP_INIT_ATTR_PD;
  a.pd = pd;
  return ibv_create_qp_ex(ctx, &a);
}

bool post(ibv_qp* qp, ibv_wr_opcode op, uint64_t wr_id, void* local, uint32_t len, uint32_t lkey, uint64_t raddr,
          uint32_t rkey, uint32_t imm = 0) {
  ibv_sge sge{uint64_t(uintptr_t(local)), len, lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  return ibv_post_send(qp, &wr, &bad) == 0;
}

bool post_recv(ibv_qp* qp, uint64_t wr_id, void* buf, uint32_t len, uint32_t lkey) {
  ibv_sge sge{uint64_t(uintptr_t(buf)), len, lkey};
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return ibv_post_recv(qp, &wr, &bad) == 0;
}

// ---- the parent domain's allocators: page-aligned memory, counted per resource type ----
struct Allocations {
  std::map<uint64_t, int> live;  // resource_type -> allocations not yet freed
  std::map<uint64_t, int> total;
  std::vector<std::pair<void*, size_t>> blocks;
};
Allocations allocs;

void* pd_alloc(ibv_pd*, void* pd_context, size_t size, size_t alignment, uint64_t type) {
  if (pd_context != &allocs) return nullptr;
  void* p = nullptr;
  if (posix_memalign(&p, alignment, size) != 0) return nullptr;
  allocs.live[type]++, allocs.total[type]++;
  allocs.blocks.emplace_back(p, size);
  return p;
}

void pd_free(ibv_pd*, void*, void* p, uint64_t type) {
  allocs.live[type]--;
  for (auto it = allocs.blocks.begin(); it != allocs.blocks.end(); ++it)
    if (it->first == p) {
      allocs.blocks.erase(it);
      break;
    }
  std::free(p);
}

// True if some allocation holds the 8 bytes of `v` (a WQE the shim wrote into our memory).
bool allocations_hold(uint64_t v) {
  for (auto& [p, n] : allocs.blocks)
    if (memmem(p, n, &v, sizeof v)) return true;
  return false;
}

int live_allocations() {
  int n = 0;
  for (auto& [t, c] : allocs.live) n += c;
  return n;
}

struct Server;
bool server_refusals(Server& s);

// ---- the server ----
struct Server {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_td* td = nullptr;
  ibv_pd* domain = nullptr;  // the parent domain
  ibv_cq_ex* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_srq* srq = nullptr;  // on the parent domain too, its ring in our allocation
  std::vector<uint8_t> buf1 = std::vector<uint8_t>(kBuf), buf2 = std::vector<uint8_t>(kBuf),
                       rx = std::vector<uint8_t>(4096);
  ibv_mr* mr = nullptr;
  ibv_mr* rx_mr = nullptr;
  ibv_dm* dm = nullptr;
  ibv_mr* dm_mr = nullptr;
};

bool server_domains(Server& s) {
  ibv_td_init_attr ta{};
  s.td = ibv_alloc_td(s.ctx, &ta);
  CHECK(s.td, "ibv_alloc_td");
  ibv_parent_domain_init_attr pa{};
  pa.pd = s.pd;
  pa.td = s.td;
  pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  pa.alloc = pd_alloc;
  pa.free = pd_free;
  pa.pd_context = &allocs;
  s.domain = ibv_alloc_parent_domain(s.ctx, &pa);
  CHECK(s.domain, "ibv_alloc_parent_domain");
  s.cq = make_cq(s.ctx, s.domain);
  CHECK(s.cq, "ibv_create_cq_ex on the parent domain");
  s.qp = make_qp(s.ctx, s.domain, s.cq);
  CHECK(s.qp, "ibv_create_qp_ex on the parent domain");
  CHECK(s.qp->pd == s.domain, "qp->pd is the parent domain");
  ibv_srq_init_attr sa{};
  sa.attr = {8, 1, 0};
  s.srq = ibv_create_srq(s.domain, &sa);
  CHECK(s.srq, "ibv_create_srq on the parent domain");
  CHECK(live_allocations() == 3 && allocs.live[0x534e00000001] == 1 && allocs.live[0x534e00000004] == 1 &&
            allocs.live[0x534e00000005] == 1,
        "the QP's, SRQ's and CQ's rings came from our allocator, each with its resource type (%d)", live_allocations());
  return true;
}

bool server_memory(Server& s) {
  const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  s.mr = ibv_reg_mr(s.pd, s.buf1.data(), kBuf, rw);
  s.rx_mr = ibv_reg_mr(s.domain, s.rx.data(), s.rx.size(), int(IBV_ACCESS_LOCAL_WRITE));  // an MR on the parent domain
  CHECK(s.mr && s.rx_mr, "ibv_reg_mr");
  ibv_alloc_dm_attr da{kDm, 3, 0};
  s.dm = ibv_alloc_dm(s.ctx, &da);
  CHECK(s.dm, "ibv_alloc_dm");
  std::vector<uint8_t> pattern(kDm);
  fill(pattern.data(), kDm, 77);
  CHECK(ibv_memcpy_to_dm(s.dm, 0, pattern.data(), kDm) == 0, "ibv_memcpy_to_dm");
  CHECK(ibv_memcpy_to_dm(s.dm, kDm - 4, pattern.data(), 8) == EFAULT, "ibv_memcpy_to_dm past the end");
  CHECK(!ibv_reg_dm_mr(s.pd, s.dm, 0, kDm, rw) && errno == EINVAL, "ibv_reg_dm_mr without ZERO_BASED");
  s.dm_mr = ibv_reg_dm_mr(s.pd, s.dm, 0, kDm, rw | IBV_ACCESS_ZERO_BASED);
  CHECK(s.dm_mr && !s.dm_mr->addr, "ibv_reg_dm_mr");
  return server_refusals(s);
}

// rdma-core's input errors (IBV_REREG_MR_ERR_INPUT) and the NIC's (IBV_REREG_MR_ERR_CMD).
bool server_refusals(Server& s) {
  const uint32_t lkey = s.mr->lkey;
  errno = 0;
  CHECK(ibv_rereg_mr(s.mr, 1 << 3, nullptr, nullptr, 0, 0) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL,
        "unknown flag");
  CHECK(ibv_rereg_mr(s.mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr, 4096, 0) == IBV_REREG_MR_ERR_INPUT &&
            errno == EINVAL,
        "translation without an address");
  CHECK(ibv_rereg_mr(s.mr, IBV_REREG_MR_CHANGE_PD, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE) ==
                IBV_REREG_MR_ERR_INPUT &&
            errno == EINVAL,
        "access without IBV_REREG_MR_CHANGE_ACCESS");
  CHECK(ibv_rereg_mr(s.mr, 0, nullptr, nullptr, 0, 0) == IBV_REREG_MR_ERR_CMD && errno == EINVAL,
        "no flag: the NIC's EINVAL");
  CHECK(ibv_rereg_mr(s.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_REMOTE_WRITE) ==
                IBV_REREG_MR_ERR_CMD &&
            errno == EINVAL,
        "remote write without local write");
  CHECK(ibv_rereg_mr(s.dm_mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED) == IBV_REREG_MR_ERR_CMD &&
            errno == EINVAL,
        "an MR over device memory");
  CHECK(s.mr->lkey == lkey && s.mr->addr == s.buf1.data() && s.mr->length == kBuf, "the MR is unchanged");
  std::printf("rereg refusals: as rdma-core and the kernel\n");
  return true;
}

// Waits for the client's SEND with immediate `imm`, checking every field the CQ carries.
bool server_wait_send(Server& s, uint32_t imm, uint32_t client_qpn) {
  const int64_t before = realtime_ns();
  Cqe c{};
  if (!poll_one(s.cq, &c)) return false;
  const int64_t after = realtime_ns();
  CHECK(c.status == IBV_WC_SUCCESS && c.opcode == IBV_WC_RECV, "receive: status %d opcode %d", c.status, c.opcode);
  CHECK((c.wr_id & ~0xffull) == kRecvMagic && (c.wc_flags & IBV_WC_WITH_IMM) && c.imm == imm, "imm %u", c.imm);
  CHECK(c.byte_len == 64 && c.qp_num == s.qp->qp_num && c.src_qp == client_qpn, "byte_len %u src_qp %u", c.byte_len,
        c.src_qp);
  // The wall clock of the CQE: written before we saw it, after the client was told to go.
  CHECK(int64_t(c.wall_ns) <= after + 50'000'000 && int64_t(c.wall_ns) >= before - 10'000'000'000,
        "wallclock %lld not within [%lld, %lld]", (long long)c.wall_ns, (long long)before, (long long)after);
  CHECK(c.nic_ts > 0, "NIC timestamp");
  return post_recv(s.qp, kRecvMagic | (imm + 1), s.rx.data(), 4096, s.rx_mr->lkey);
}

bool server_teardown(Server& s) {
  CHECK(ibv_free_dm(s.dm) == EBUSY, "ibv_free_dm with an MR over it");
  CHECK(ibv_dereg_mr(s.dm_mr) == 0 && ibv_free_dm(s.dm) == 0, "device memory freed");
  CHECK(ibv_dealloc_td(s.td) == EBUSY, "ibv_dealloc_td under a parent domain");
  CHECK(ibv_dealloc_pd(s.pd) == EBUSY, "ibv_dealloc_pd of a PD in a parent domain");
  CHECK(ibv_dealloc_pd(s.domain) == EBUSY, "ibv_dealloc_pd of a parent domain with a QP");
  CHECK(ibv_destroy_qp(s.qp) == 0 && ibv_destroy_srq(s.srq) == 0 && ibv_destroy_cq(ibv_cq_ex_to_cq(s.cq)) == 0,
        "destroy QP, SRQ and CQ");
  CHECK(live_allocations() == 0, "every ring went back through our free() (%d left)", live_allocations());
  CHECK(ibv_dereg_mr(s.mr) == 0 && ibv_dereg_mr(s.rx_mr) == 0, "dereg");
  CHECK(ibv_dealloc_pd(s.domain) == 0 && ibv_dealloc_td(s.td) == 0 && ibv_dealloc_pd(s.pd) == 0, "dealloc");
  std::printf("parent domain: rings of 1 QP, 1 SRQ and 1 CQ in our allocations, all freed\n");
  return ibv_close_device(s.ctx) == 0;
}

bool server_steps(Server& s, int fd, const Msg& hello) {
  Msg m{};
  // Step 1: the client wrote buf1 through the first translation.
  CHECK(server_wait_send(s, 1, hello.qpn), "step 1");
  std::vector<uint8_t> want(kBuf);
  fill(want.data(), kBuf, 1);
  CHECK(std::memcmp(s.buf1.data(), want.data(), kBuf) == 0, "buf1 holds the client's bytes");
  // Step 2: the MR moves to buf2, keys unchanged.
  const uint32_t rkey = s.mr->rkey;
  CHECK(ibv_rereg_mr(s.mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, s.buf2.data(), kBuf, 0) == 0, "rereg translation");
  CHECK(s.mr->rkey == rkey && s.mr->addr == s.buf2.data(), "same keys, new address");
  m = Msg{2, 0, {}, uint64_t(uintptr_t(s.buf2.data())), s.mr->rkey, 0, 0, 2};
  CHECK(send_msg(fd, m), "send step 2");
  CHECK(server_wait_send(s, 2, hello.qpn), "step 2");
  fill(want.data(), kBuf, 2);
  CHECK(std::memcmp(s.buf2.data(), want.data(), kBuf) == 0, "buf2 holds the client's bytes");
  fill(want.data(), kBuf, 1);
  CHECK(std::memcmp(s.buf1.data(), want.data(), kBuf) == 0, "buf1 untouched after the move");
  std::printf("rereg translation: %zu bytes landed in the new buffer under rkey 0x%x\n", kBuf, rkey);
  // Step 3: the client read and wrote the device memory.
  CHECK(server_wait_send(s, 3, hello.qpn), "step 3");
  std::vector<uint8_t> dm(kDm), dm_want(kDm);
  fill(dm_want.data(), kDm, 77);
  fill(dm_want.data() + 1024, 2048, 3);
  CHECK(ibv_memcpy_from_dm(dm.data(), s.dm, 0, kDm) == 0 && dm == dm_want, "device memory holds the client's write");
  std::printf("device memory: %zu bytes read and 2048 written by RDMA\n", kDm);
  // Step 4: no more remote write.
  CHECK(ibv_rereg_mr(s.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE) == 0,
        "rereg access");
  m.step = 4;
  CHECK(send_msg(fd, m) && recv_msg(fd, &m), "step 4");
  CHECK(m.status == IBV_WC_REM_ACCESS_ERR, "the client's WRITE completed with %s",
        ibv_wc_status_str(ibv_wc_status(m.status)));
  fill(want.data(), kBuf, 2);
  CHECK(std::memcmp(s.buf2.data(), want.data(), kBuf) == 0, "nothing written without the right");
  std::printf("rereg access: a WRITE without the right completed with %s\n",
              ibv_wc_status_str(ibv_wc_status(m.status)));
  return server_teardown(s);
}

bool run_server(const char* dev, int fd) {
  Server s;
  s.ctx = open_dev(dev);
  CHECK(s.ctx, "open %s", dev);
  s.pd = ibv_alloc_pd(s.ctx);
  CHECK(s.pd && server_domains(s) && server_memory(s), "server set-up");
  Msg m{1, s.qp->qp_num, {}, uint64_t(uintptr_t(s.buf1.data())), s.mr->rkey, s.dm_mr->rkey, 0, 1};
  CHECK(ibv_query_gid(s.ctx, 1, 0, &m.gid) == 0, "gid");
  Msg hello{};
  CHECK(send_msg(fd, m) && recv_msg(fd, &hello), "exchange");
  CHECK(connect_qp(s.qp, hello.qpn, hello.gid, kAccess), "connect");
  for (uint32_t i = 1; i <= 3; ++i)
    CHECK(post_recv(s.qp, kRecvMagic | i, s.rx.data(), 4096, s.rx_mr->lkey), "post_recv");
  CHECK(allocations_hold(kRecvMagic | 1), "the receive WQE is in our allocation");
  ibv_sge sge{uint64_t(uintptr_t(s.rx.data())), 64, s.rx_mr->lkey};
  ibv_recv_wr wr{kRecvMagic | 0x77, nullptr, &sge, 1}, *bad = nullptr;
  CHECK(ibv_post_srq_recv(s.srq, &wr, &bad) == 0 && allocations_hold(kRecvMagic | 0x77),
        "the SRQ's WQE is in our allocation");
  CHECK(send_msg(fd, m), "ready");
  return server_steps(s, fd, hello);
}

// ---- the client ----
struct Client {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq_ex* cq = nullptr;
  ibv_qp* qp = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(kBuf + kDm);
  ibv_mr* mr = nullptr;
};

// One RDMA operation and its completion; returns the status (checked by the caller).
ibv_wc_status client_op(Client& c, ibv_wr_opcode op, uint64_t wr_id, void* local, uint32_t len, uint64_t raddr,
                        uint32_t rkey, uint32_t imm = 0) {
  if (!post(c.qp, op, wr_id, local, len, c.mr->lkey, raddr, rkey, imm)) return IBV_WC_GENERAL_ERR;
  Cqe e{};
  if (!poll_one(c.cq, &e) || e.wr_id != wr_id) return IBV_WC_GENERAL_ERR;
  return e.status;
}

bool client_refusals(Client& c) {
  ibv_cq_init_attr_ex a{};
  a.cqe = 4;
  a.wc_flags = IBV_WC_EX_WITH_CVLAN;
  CHECK(!ibv_create_cq_ex(c.ctx, &a) && errno == EOPNOTSUPP, "IBV_WC_EX_WITH_CVLAN");
  a.wc_flags = IBV_WC_EX_WITH_FLOW_TAG;
  CHECK(!ibv_create_cq_ex(c.ctx, &a) && errno == EOPNOTSUPP, "IBV_WC_EX_WITH_FLOW_TAG");
  a.wc_flags = 0;
  a.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
  a.parent_domain = c.pd;
  CHECK(!ibv_create_cq_ex(c.ctx, &a) && errno == EINVAL, "a CQ on a PD that is no parent domain");
  ibv_values_ex v1{IBV_VALUES_MASK_RAW_CLOCK, {}}, v2 = v1;
  CHECK(ibv_query_rt_values_ex(c.ctx, &v1) == 0 && ibv_query_rt_values_ex(c.ctx, &v2) == 0, "ibv_query_rt_values_ex");
  CHECK(v1.raw_clock.tv_nsec > 0 && v2.raw_clock.tv_nsec >= v1.raw_clock.tv_nsec, "the NIC's clock runs");
  ibv_td_init_attr ta{1};
  CHECK(!ibv_alloc_td(c.ctx, &ta) && errno == EINVAL, "ibv_alloc_td with an unknown comp_mask");
  ibv_parent_domain_init_attr pa{};
  CHECK(!ibv_alloc_parent_domain(c.ctx, &pa) && errno == EINVAL, "a parent domain without a PD");
  return true;
}

bool client_steps(Client& c, int fd, Msg m) {
  const uint32_t dm_rkey = m.dm_rkey;
  uint8_t* out = c.buf.data();
  fill(out, kBuf, 1);
  CHECK(client_op(c, IBV_WR_RDMA_WRITE, 10, out, kBuf, m.addr, m.rkey) == IBV_WC_SUCCESS, "step 1 write");
  CHECK(client_op(c, IBV_WR_SEND_WITH_IMM, 11, out, 64, 0, 0, 1) == IBV_WC_SUCCESS, "step 1 send");
  CHECK(recv_msg(fd, &m) && m.step == 2, "step 2");
  fill(out, kBuf, 2);
  CHECK(client_op(c, IBV_WR_RDMA_WRITE, 20, out, kBuf, m.addr, m.rkey) == IBV_WC_SUCCESS, "step 2 write");
  CHECK(client_op(c, IBV_WR_SEND_WITH_IMM, 21, out, 64, 0, 0, 2) == IBV_WC_SUCCESS, "step 2 send");
  uint8_t* in = c.buf.data() + kBuf;
  CHECK(client_op(c, IBV_WR_RDMA_READ, 30, in, kDm, 0, dm_rkey) == IBV_WC_SUCCESS, "step 3 read of the DM");
  std::vector<uint8_t> want(kDm);
  fill(want.data(), kDm, 77);
  CHECK(std::memcmp(in, want.data(), kDm) == 0, "the DM's bytes, read by RDMA");
  fill(out, 2048, 3);
  CHECK(client_op(c, IBV_WR_RDMA_WRITE, 31, out, 2048, 1024, dm_rkey) == IBV_WC_SUCCESS, "step 3 write to the DM");
  CHECK(client_op(c, IBV_WR_SEND_WITH_IMM, 32, out, 64, 0, 0, 3) == IBV_WC_SUCCESS, "step 3 send");
  CHECK(recv_msg(fd, &m) && m.step == 4, "step 4");
  m.status = client_op(c, IBV_WR_RDMA_WRITE, 40, out, 128, m.addr, m.rkey);
  return send_msg(fd, m);
}

bool run_client(const char* dev, int fd) {
  Client c;
  c.ctx = open_dev(dev);
  CHECK(c.ctx, "open %s", dev);
  c.pd = ibv_alloc_pd(c.ctx);
  c.cq = c.pd ? make_cq(c.ctx, nullptr) : nullptr;
  c.qp = c.cq ? make_qp(c.ctx, c.pd, c.cq) : nullptr;
  c.mr = c.qp ? ibv_reg_mr(c.pd, c.buf.data(), c.buf.size(), int(IBV_ACCESS_LOCAL_WRITE)) : nullptr;
  CHECK(c.mr && client_refusals(c), "client set-up");
  Msg srv{}, m{1, c.qp->qp_num, {}, 0, 0, 0, 0, 0};
  CHECK(ibv_query_gid(c.ctx, 1, 0, &m.gid) == 0, "gid");
  CHECK(recv_msg(fd, &srv) && send_msg(fd, m), "exchange");
  CHECK(connect_qp(c.qp, srv.qpn, srv.gid, kAccess), "connect");
  CHECK(recv_msg(fd, &m), "ready");
  return client_steps(c, fd, srv);
}

// ---- ibv_import_device: the exporter (device -a) hands its cmd_fd to a child ----
struct ImportMsg {
  uint32_t pd_handle, mr_handle, lkey, rkey;
  uint64_t addr, length;
};

bool send_fd(int sock, int fd, const ImportMsg& m) {
  char ctrl[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{const_cast<ImportMsg*>(&m), sizeof m};
  msghdr h{};
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  h.msg_control = ctrl;
  h.msg_controllen = sizeof ctrl;
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  return ::sendmsg(sock, &h, 0) == ssize_t(sizeof m);
}

int recv_fd(int sock, ImportMsg* m) {
  char ctrl[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{m, sizeof *m};
  msghdr h{};
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  h.msg_control = ctrl;
  h.msg_controllen = sizeof ctrl;
  if (::recvmsg(sock, &h, 0) != ssize_t(sizeof *m)) return -1;
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  int fd = -1;
  if (c && c->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

// Two QPs of the importer, on the imported PD, connected to each other on the same NIC.
struct Loop {
  ibv_cq_ex* cq = nullptr;
  ibv_qp* q1 = nullptr;
  ibv_qp* q2 = nullptr;
};

bool make_loop(ibv_context* ctx, ibv_pd* pd, Loop* l) {
  l->cq = make_cq(ctx, nullptr);
  l->q1 = l->cq ? make_qp(ctx, pd, l->cq) : nullptr;
  l->q2 = l->q1 ? make_qp(ctx, pd, l->cq) : nullptr;
  ibv_gid gid{};
  CHECK(l->q2 && ibv_query_gid(ctx, 1, 0, &gid) == 0, "loop QPs on the imported PD");
  return connect_qp(l->q1, l->q2->qp_num, gid, kAccess) && connect_qp(l->q2, l->q1->qp_num, gid, kAccess);
}

ibv_wc_status loop_write(Loop& l, uint64_t wr_id, uint64_t local, uint32_t len, uint32_t lkey, uint64_t raddr,
                         uint32_t rkey) {
  if (!post(l.q1, IBV_WR_RDMA_WRITE, wr_id, reinterpret_cast<void*>(local), len, lkey, raddr, rkey))
    return IBV_WC_GENERAL_ERR;
  Cqe e{};
  return poll_one(l.cq, &e) && e.wr_id == wr_id ? e.status : IBV_WC_GENERAL_ERR;
}

bool importer_refusals(ibv_context* ctx, ibv_mr* mr) {
  CHECK(!ibv_import_pd(ctx, 0xfffff) && errno == EINVAL, "ibv_import_pd of no such PD");
  CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE) ==
                IBV_REREG_MR_ERR_INPUT &&
            errno == EINVAL,
        "ibv_rereg_mr of an imported MR");
  int p[2];
  CHECK(pipe(p) == 0 && !ibv_import_device(p[0]), "ibv_import_device of a pipe");
  ::close(p[0]), ::close(p[1]);
  return true;
}

// The child: imports, then moves bytes out of and into the exporter's MR with its own QPs.
bool run_importer(int sock) {
  ImportMsg m{};
  const int fd = recv_fd(sock, &m);
  CHECK(fd >= 0, "the exporter's cmd_fd");
  ibv_context* ctx = ibv_import_device(fd);
  CHECK(ctx, "ibv_import_device");
  ibv_pd* pd = ibv_import_pd(ctx, m.pd_handle);
  ibv_mr* mr = pd ? ibv_import_mr(pd, m.mr_handle) : nullptr;
  CHECK(mr && mr->lkey == m.lkey && mr->rkey == m.rkey && mr->length == m.length && !mr->addr, "ibv_import_mr");
  if (!importer_refusals(ctx, mr)) return false;
  std::vector<uint8_t> own(kBuf);
  ibv_mr* own_mr = ibv_reg_mr(pd, own.data(), kBuf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  Loop l;
  CHECK(own_mr && make_loop(ctx, pd, &l), "importer set-up");
  // Gathered from the exporter's memory through the imported MR, into ours.
  CHECK(loop_write(l, 1, m.addr, 4096, mr->lkey, uint64_t(uintptr_t(own.data())), own_mr->rkey) == IBV_WC_SUCCESS,
        "write 1");
  std::vector<uint8_t> want(4096);
  fill(want.data(), 4096, 5);
  CHECK(std::memcmp(own.data(), want.data(), 4096) == 0, "the exporter's bytes, read through its imported MR");
  // Ours, into the exporter's memory through the imported MR's rkey.
  fill(own.data(), 4096, 6);
  CHECK(loop_write(l, 2, uint64_t(uintptr_t(own.data())), 4096, own_mr->lkey, m.addr + 8192, mr->rkey) ==
            IBV_WC_SUCCESS,
        "write 2");
  CHECK(ibv_destroy_qp(l.q1) == 0 && ibv_destroy_qp(l.q2) == 0 && ibv_destroy_cq(ibv_cq_ex_to_cq(l.cq)) == 0 &&
            ibv_dereg_mr(own_mr) == 0,
        "importer teardown");
  ibv_unimport_mr(mr);
  ibv_unimport_pd(pd);
  CHECK(ibv_close_device(ctx) == 0, "close");
  return send_msg(sock, Msg{9, 0, {}, 0, 0, 0, 0, 0});
}

bool run_import(const char* dev) {
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0, "socketpair");
  pid_t child = fork();
  if (child == 0) {
    ::close(sv[0]);
    _exit(run_importer(sv[1]) ? 0 : 1);
  }
  ::close(sv[1]);
  ibv_context* ctx = open_dev(dev);
  ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
  std::vector<uint8_t> buf(kBuf);
  fill(buf.data(), kBuf, 5);
  ibv_mr* mr = pd ? ibv_reg_mr(pd, buf.data(), kBuf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : nullptr;
  CHECK(mr, "exporter set-up");
  ImportMsg m{pd->handle, mr->handle, mr->lkey, mr->rkey, uint64_t(uintptr_t(buf.data())), kBuf};
  Msg done{};
  CHECK(send_fd(sv[0], ctx->cmd_fd, m) && recv_msg(sv[0], &done) && done.step == 9, "the importer finished");
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the importer's checks");
  std::vector<uint8_t> want(kBuf);
  fill(want.data(), kBuf, 5);
  fill(want.data() + 8192, 4096, 6);
  CHECK(std::memcmp(buf.data(), want.data(), kBuf) == 0, "the importer's bytes landed in our MR, and only there");
  CHECK(ibv_dereg_mr(mr) == 0 && ibv_dealloc_pd(pd) == 0 && ibv_close_device(ctx) == 0, "exporter teardown");
  std::printf("import: another process shared our PD and MR: 4096 bytes read from it and 4096 written to it\n");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const char* a = "simnic0";
  const char* b = "simnic1";
  bool import_only = false;
  for (int o; (o = getopt(argc, argv, "a:b:i")) != -1;) {
    if (o == 'a') a = optarg;
    else if (o == 'b') b = optarg;
    else if (o == 'i') import_only = true;
    else return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (import_only) {
    bool ok = run_import(a);
    std::printf("%s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  }
  return run_pair([&](int fd) { return run_client(a, fd); }, [&](int fd) { return run_server(b, fd); });
}
