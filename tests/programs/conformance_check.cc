// simnic-conformance-check: where a verb's outcome is rdma-core's and rxe's to define, not
// simnic's (issue 28): the errno every failing verb leaves, what a destroy through a handle that
// names nothing answers, completion channels and the arming of a CQ, completion vectors, and
// the limits ibv_query_device advertises. A plain verbs program (the system libibverbs; on
// simnic through `simnic run`). One process, two RC QPs on one device: A sends to B.
//
//   simnic-conformance-check [-d DEV] [STEP...]   prints "ok STEP" per step, then "PASS"
//   (exit 0), or "FAIL ..." (exit 1). Steps: errno handles notify vectors cqex limits (all by
//   default).
#include <endian.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "check_util.h"

namespace {

// errno before every call that is to fail: a leftover from an earlier call must not pass.
constexpr int kStale = EXDEV;
// A handle no object of the program has: uverbs looks it up and finds nothing.
constexpr uint32_t kUnknownHandle = 0x7ffffff0;

struct Nic {
  ibv_context* ctx = nullptr;
  ibv_device_attr attr{};
  ibv_pd* pd = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(1 << 16);
  ibv_mr* mr = nullptr;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* send_cq = nullptr;  // A's
  ibv_cq* recv_cq = nullptr;  // B's, on the channel
  ibv_qp* a = nullptr;
  ibv_qp* b = nullptr;
  ibv_gid gid{};
};

// `rc` is `want`, and so is errno (set to kStale before the call).
#define CHECK_ERR(rc, want, what)                                                                             \
  CHECK((rc) == (want) && errno == (want), "%s: returned %d (%s), errno %d (%s); expected %s", what, int(rc), \
        std::strerror(int(rc) > 0 ? int(rc) : 0), errno, std::strerror(errno), std::strerror(want))

ibv_qp* make_qp(Nic& n, ibv_cq* send_cq, ibv_cq* recv_cq) {
  ibv_qp_init_attr init{};
  init.send_cq = send_cq;
  init.recv_cq = recv_cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 16;
  init.cap.max_recv_wr = 16;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  return ibv_create_qp(n.pd, &init);
}

bool setup(Nic& n, const char* dev) {
  n.ctx = check::open_dev(dev);
  CHECK(n.ctx, "cannot open device %s", dev ? dev : "(first)");
  CHECK(ibv_query_device(n.ctx, &n.attr) == 0, "ibv_query_device");
  n.pd = ibv_alloc_pd(n.ctx);
  CHECK(n.pd, "ibv_alloc_pd");
  n.mr = ibv_reg_mr(n.pd, n.buf.data(), n.buf.size(), int(IBV_ACCESS_LOCAL_WRITE));
  CHECK(n.mr, "ibv_reg_mr");
  n.channel = ibv_create_comp_channel(n.ctx);
  CHECK(n.channel, "ibv_create_comp_channel");
  n.send_cq = ibv_create_cq(n.ctx, 16, nullptr, nullptr, 0);
  n.recv_cq = ibv_create_cq(n.ctx, 16, nullptr, n.channel, 0);
  CHECK(n.send_cq && n.recv_cq, "ibv_create_cq");
  n.a = make_qp(n, n.send_cq, n.send_cq);
  n.b = make_qp(n, n.send_cq, n.recv_cq);
  CHECK(n.a && n.b, "ibv_create_qp");
  CHECK(ibv_query_gid(n.ctx, 1, 0, &n.gid) == 0, "ibv_query_gid");
  CHECK(check::connect_qp(n.a, n.b->qp_num, n.gid, 0), "connect A");
  CHECK(check::connect_qp(n.b, n.a->qp_num, n.gid, 0), "connect B");
  return true;
}

ibv_ah* make_ah(Nic& n) {
  ibv_ah_attr at{};
  at.is_global = 1;
  at.grh.dgid = n.gid;
  at.grh.hop_limit = 1;
  at.port_num = 1;
  return ibv_create_ah(n.pd, &at);
}

// 2. A verb that returns an error number leaves it in errno too (rdma-core's are the errno of
// the failed uverbs write), whatever errno held before.
bool errno_follows_the_return(Nic& n) {
  errno = kStale;
  int rc = ibv_dealloc_pd(n.pd);  // MRs, QPs use it
  CHECK_ERR(rc, EBUSY, "ibv_dealloc_pd of a PD in use");
  errno = kStale;
  rc = ibv_destroy_cq(n.send_cq);  // QPs use it
  CHECK_ERR(rc, EBUSY, "ibv_destroy_cq of a CQ in use");
  errno = kStale;
  rc = ibv_destroy_comp_channel(n.channel);  // a CQ uses it
  CHECK_ERR(rc, EBUSY, "ibv_destroy_comp_channel of a channel in use");
  errno = kStale;
  rc = ibv_resize_cq(n.recv_cq, 0);
  CHECK_ERR(rc, EINVAL, "ibv_resize_cq(0)");
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;  // RTS -> INIT is no transition
  errno = kStale;
  rc = ibv_modify_qp(n.a, &at, IBV_QP_STATE);
  CHECK_ERR(rc, EINVAL, "ibv_modify_qp RTS->INIT");
  ibv_ah* ah = make_ah(n);
  CHECK(ah, "ibv_create_ah");
  const uint32_t handle = ah->handle;
  ah->handle = kUnknownHandle;
  errno = kStale;
  rc = ibv_destroy_ah(ah);
  CHECK_ERR(rc, ENOENT, "ibv_destroy_ah of a garbled AH");
  ah->handle = handle;
  CHECK(ibv_destroy_ah(ah) == 0, "ibv_destroy_ah with its own handle");
  return true;
}

// One object of each kind a destroy verb takes, made to be destroyed through a wrong handle.
struct Victim {
  const char* name;
  uint32_t* handle;  // the object's handle field, which the program garbles
  int (*destroy)(void* obj);
  void* obj;
};

// 3. Destroying through a handle that names none of the program's objects is ENOENT, through
// one that names an object of another kind EINVAL (the kernel's uverbs: rdma_core.c); the
// object is intact and goes with its own handle.
bool destroy_through_wrong_handle(const Victim& v, uint32_t other_kinds_handle) {
  const uint32_t own = *v.handle;
  *v.handle = kUnknownHandle;
  errno = kStale;
  int rc = v.destroy(v.obj);
  CHECK_ERR(rc, ENOENT, (std::string("destroying a ") + v.name + " through an unknown handle").c_str());
  *v.handle = other_kinds_handle;
  errno = kStale;
  rc = v.destroy(v.obj);
  CHECK_ERR(rc, EINVAL, (std::string("destroying a ") + v.name + " through another kind's handle").c_str());
  *v.handle = own;
  rc = v.destroy(v.obj);
  CHECK(rc == 0, "destroying the %s through its own handle: %s", v.name, std::strerror(rc));
  return true;
}

bool unknown_handles(Nic& n) {
  ibv_pd* pd = ibv_alloc_pd(n.ctx);
  ibv_mr* mr = ibv_reg_mr(n.pd, n.buf.data(), 4096, int(IBV_ACCESS_LOCAL_WRITE));
  ibv_mw* mw = ibv_alloc_mw(n.pd, IBV_MW_TYPE_1);
  ibv_cq* cq = ibv_create_cq(n.ctx, 4, nullptr, nullptr, 0);
  ibv_cq_init_attr_ex cq_attr{};
  cq_attr.cqe = 4;
  cq_attr.wc_flags = IBV_WC_STANDARD_FLAGS;
  ibv_cq_ex* cqx = ibv_create_cq_ex(n.ctx, &cq_attr);
  ibv_srq_init_attr srq_attr{};
  srq_attr.attr.max_wr = 4;
  srq_attr.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(n.pd, &srq_attr);
  ibv_ah* ah = make_ah(n);
  ibv_qp* qp = make_qp(n, n.send_cq, n.send_cq);
  CHECK(pd && mr && mw && cq && cqx && srq && ah && qp, "creating one object of each kind");
  ibv_cq* cq_ex = ibv_cq_ex_to_cq(cqx);
  // req_notify_cq goes through the kernel on rxe (ibv_cmd_req_notify_cq), which fails the
  // lookup of a garbled CQ handle with EINVAL.
  const uint32_t cq_handle = cq->handle;
  cq->handle = kUnknownHandle;
  errno = kStale;
  int rc = ibv_req_notify_cq(cq, 0);
  CHECK_ERR(rc, EINVAL, "ibv_req_notify_cq on a garbled CQ");
  cq->handle = cq_handle;
  CHECK(ibv_req_notify_cq(cq, 0) == 0, "ibv_req_notify_cq on the CQ with its own handle");

  const Victim victims[] = {
      {"PD", &pd->handle, [](void* o) { return ibv_dealloc_pd(static_cast<ibv_pd*>(o)); }, pd},
      {"MR", &mr->handle, [](void* o) { return ibv_dereg_mr(static_cast<ibv_mr*>(o)); }, mr},
      {"MW", &mw->handle, [](void* o) { return ibv_dealloc_mw(static_cast<ibv_mw*>(o)); }, mw},
      {"CQ", &cq->handle, [](void* o) { return ibv_destroy_cq(static_cast<ibv_cq*>(o)); }, cq},
      {"CQ_EX", &cq_ex->handle, [](void* o) { return ibv_destroy_cq(static_cast<ibv_cq*>(o)); }, cq_ex},
      {"SRQ", &srq->handle, [](void* o) { return ibv_destroy_srq(static_cast<ibv_srq*>(o)); }, srq},
      {"AH", &ah->handle, [](void* o) { return ibv_destroy_ah(static_cast<ibv_ah*>(o)); }, ah},
      {"QP", &qp->handle, [](void* o) { return ibv_destroy_qp(static_cast<ibv_qp*>(o)); }, qp},
  };
  // Another kind's handle: the long-lived PD's, or (for the PD itself) the long-lived MR's.
  for (const Victim& v : victims)
    if (!destroy_through_wrong_handle(v, v.obj == pd ? n.mr->handle : n.pd->handle)) return false;
  return true;
}

void post_recv(Nic& n, uint64_t wr_id) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(n.buf.data()) + 32768, 64, n.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  ibv_post_recv(n.b, &wr, &bad);
}

// A SEND from A to B, solicited or not; waits for A's completion (B's receive is done by then).
bool send(Nic& n, uint64_t wr_id, bool solicited) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(n.buf.data()), 64, n.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED | (solicited ? IBV_SEND_SOLICITED : 0);
  ibv_send_wr* bad = nullptr;
  CHECK(ibv_post_send(n.a, &wr, &bad) == 0, "ibv_post_send");
  ibv_wc wc{};
  CHECK(check::poll_one(n.send_cq, &wc), "SEND %llu completion", static_cast<unsigned long long>(wr_id));
  CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == wr_id, "SEND %llu: %s", static_cast<unsigned long long>(wr_id),
        ibv_wc_status_str(wc.status));
  return true;
}

// Whether the channel delivers an event for B's CQ within `ms` (poll() on channel->fd, as an
// event loop does); the event is taken, acknowledged, and B's completion polled.
bool event_within(Nic& n, int ms, bool* got) {
  pollfd p{n.channel->fd, POLLIN, 0};
  int r = ::poll(&p, 1, ms);
  CHECK(r >= 0, "poll on the channel: %s", std::strerror(errno));
  *got = r == 1;
  if (!*got) return true;
  ibv_cq* cq = nullptr;
  void* cq_context = nullptr;
  CHECK(ibv_get_cq_event(n.channel, &cq, &cq_context) == 0, "ibv_get_cq_event");
  CHECK(cq == n.recv_cq, "the event names another CQ");
  ibv_ack_cq_events(cq, 1);
  return true;
}

bool drain_recv(Nic& n, int count) {
  for (int i = 0; i < count; ++i) {
    ibv_wc wc{};
    CHECK(check::poll_one(n.recv_cq, &wc), "receive completion %d", i);
    CHECK(wc.status == IBV_WC_SUCCESS, "receive: %s", ibv_wc_status_str(wc.status));
  }
  return true;
}

// 6 and 14. IBA 11.4.2.2: a CQ armed for the next completion stays so when it is armed again for
// solicited ones only (rxe_req_notify_cq). A CQ without a channel arms as any (rxe: 0).
bool notify(Nic& n) {
  ibv_cq* lonely = ibv_create_cq(n.ctx, 4, nullptr, nullptr, 0);
  CHECK(lonely, "ibv_create_cq without a channel");
  errno = 0;
  CHECK(ibv_req_notify_cq(lonely, 0) == 0 && ibv_req_notify_cq(lonely, 1) == 0,
        "ibv_req_notify_cq on a CQ without a channel fails (%s); rxe's returns 0", std::strerror(errno));
  CHECK(ibv_destroy_cq(lonely) == 0, "ibv_destroy_cq");

  bool got = false;
  // Solicited only: an unsolicited SEND raises no event, a solicited one does.
  post_recv(n, 1);
  post_recv(n, 2);
  CHECK(ibv_req_notify_cq(n.recv_cq, 1) == 0, "arming solicited only");
  if (!send(n, 1, false) || !event_within(n, 300, &got)) return false;
  CHECK(!got, "an unsolicited SEND raised an event on a CQ armed for solicited ones only");
  if (!send(n, 2, true) || !event_within(n, 5000, &got)) return false;
  CHECK(got, "a solicited SEND raised no event on a CQ armed for solicited ones");
  if (!drain_recv(n, 2)) return false;
  // Any, then solicited only: the unsolicited SEND still raises the event.
  post_recv(n, 3);
  CHECK(ibv_req_notify_cq(n.recv_cq, 0) == 0, "arming for any completion");
  CHECK(ibv_req_notify_cq(n.recv_cq, 1) == 0, "arming again, solicited only");
  if (!send(n, 3, false) || !event_within(n, 5000, &got)) return false;
  CHECK(got,
        "armed for any completion, then solicited only: an unsolicited SEND raised no event "
        "(IBA 11.4.2.2 keeps the wider request)");
  if (!drain_recv(n, 1)) return false;
  // The event consumed the arming: the next SEND raises none until the CQ is armed again.
  post_recv(n, 4);
  if (!send(n, 4, false) || !event_within(n, 300, &got)) return false;
  CHECK(!got, "an event without an arming");
  return drain_recv(n, 1);
}

// 11. Completion vectors: the kernel's create_cq takes 0 .. num_comp_vectors - 1 and refuses
// the rest with EINVAL. rxe offers one per CPU.
bool vectors(Nic& n) {
  const int count = n.ctx->num_comp_vectors;
  CHECK(count >= 1, "num_comp_vectors %d", count);
  std::printf("%d completion vectors\n", count);
  for (int v = 0; v < count; ++v) {
    ibv_cq* cq = ibv_create_cq(n.ctx, 4, nullptr, nullptr, v);
    CHECK(cq, "ibv_create_cq on comp_vector %d of %d: %s", v, count, std::strerror(errno));
    CHECK(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
  }
  errno = kStale;
  ibv_cq* cq = ibv_create_cq(n.ctx, 4, nullptr, nullptr, count);
  CHECK(!cq && errno == EINVAL, "ibv_create_cq on comp_vector %d of %d: %s, errno %s", count, count,
        cq ? "created" : "refused", std::strerror(errno));
  return true;
}

// 13. Extended CQs, as rxe's provider offers them (RXE_SUP_WC_FLAGS: the standard fields and
// both completion timestamps), on the last completion vector and a channel: a SEND from QP C to
// QP D completes on it twice, and every field reads back through the ibv_wc_read_* accessors.
bool extended_cq(Nic& n) {
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 16;
  ca.channel = n.channel;
  ca.comp_vector = uint32_t(n.ctx->num_comp_vectors - 1);
  ca.wc_flags = uint64_t(IBV_WC_STANDARD_FLAGS) | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                uint64_t(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK);
  ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
  ca.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
  ibv_cq_ex* cqx = ibv_create_cq_ex(n.ctx, &ca);
  CHECK(cqx, "ibv_create_cq_ex with rxe's wc_flags on comp_vector %u: %s", ca.comp_vector, std::strerror(errno));
  ibv_cq* cq = ibv_cq_ex_to_cq(cqx);
  ibv_qp* c = make_qp(n, cq, cq);
  ibv_qp* d = make_qp(n, n.send_cq, cq);
  CHECK(c && d, "ibv_create_qp on the extended CQ");
  CHECK(check::connect_qp(c, d->qp_num, n.gid, 0) && check::connect_qp(d, c->qp_num, n.gid, 0), "connect C and D");
  ibv_sge rsge{reinterpret_cast<uintptr_t>(n.buf.data() + 4096), 64, n.mr->lkey};
  ibv_recv_wr rwr{}, *bad_r = nullptr;
  rwr.wr_id = 71, rwr.sg_list = &rsge, rwr.num_sge = 1;
  CHECK(ibv_post_recv(d, &rwr, &bad_r) == 0, "ibv_post_recv on D");
  std::memcpy(n.buf.data(), "extended", 8);
  ibv_sge ssge{reinterpret_cast<uintptr_t>(n.buf.data()), 8, n.mr->lkey};
  ibv_send_wr swr{}, *bad_s = nullptr;
  swr.wr_id = 70, swr.sg_list = &ssge, swr.num_sge = 1, swr.opcode = IBV_WR_SEND_WITH_IMM,
  swr.send_flags = IBV_SEND_SIGNALED;
  swr.imm_data = htobe32(0x1234);
  CHECK(ibv_post_send(c, &swr, &bad_s) == 0, "ibv_post_send on C");
  int seen_send = 0, seen_recv = 0;
  for (int spins = 0; seen_send + seen_recv < 2 && spins < 2000000; ++spins) {
    ibv_poll_cq_attr pa{};
    int rc = ibv_start_poll(cqx, &pa);
    if (rc == ENOENT) continue;
    CHECK(rc == 0, "ibv_start_poll: %d", rc);
    do {
      CHECK(cqx->status == IBV_WC_SUCCESS, "wr %llu: %s", (unsigned long long)cqx->wr_id,
            ibv_wc_status_str(cqx->status));
      CHECK(ibv_wc_read_completion_ts(cqx) != 0 && ibv_wc_read_completion_wallclock_ns(cqx) != 0, "no completion time");
      if (cqx->wr_id == 70) {
        CHECK(ibv_wc_read_opcode(cqx) == IBV_WC_SEND && ibv_wc_read_qp_num(cqx) == c->qp_num, "C's SEND completion");
        ++seen_send;
      } else {
        CHECK(cqx->wr_id == 71 && ibv_wc_read_opcode(cqx) == IBV_WC_RECV && ibv_wc_read_byte_len(cqx) == 8 &&
                  ibv_wc_read_qp_num(cqx) == d->qp_num && ibv_wc_read_src_qp(cqx) == c->qp_num &&
                  (ibv_wc_read_wc_flags(cqx) & IBV_WC_WITH_IMM) && be32toh(ibv_wc_read_imm_data(cqx)) == 0x1234,
              "D's receive completion: opcode %d byte_len %u qp 0x%x src 0x%x", int(ibv_wc_read_opcode(cqx)),
              ibv_wc_read_byte_len(cqx), ibv_wc_read_qp_num(cqx), ibv_wc_read_src_qp(cqx));
        ++seen_recv;
      }
    } while (ibv_next_poll(cqx) == 0);
    ibv_end_poll(cqx);
  }
  CHECK(seen_send == 1 && seen_recv == 1, "completions on the extended CQ: %d SEND, %d RECV", seen_send, seen_recv);
  CHECK(std::memcmp(n.buf.data() + 4096, "extended", 8) == 0, "the bytes D received");
  CHECK(ibv_destroy_qp(c) == 0 && ibv_destroy_qp(d) == 0 && ibv_destroy_cq(cq) == 0, "destroy C, D and the CQ");
  return true;
}

// Creates objects with `make` until it fails; returns how many it made and errno then.
template <typename Make, typename Free>
bool fill_to_limit(const char* what, int advertised, Make make, Free release) {
  std::vector<void*> made;
  errno = kStale;
  for (void* o; made.size() <= size_t(advertised) && (o = make()) != nullptr;) made.push_back(o);
  const int err = errno;
  const size_t got = made.size();
  for (void* o : made) release(o);
  CHECK(got == size_t(advertised) && err == ENOMEM,
        "%s: one program made %zu of the %d ibv_query_device advertises, "
        "then errno %s (expected ENOMEM past the limit)",
        what, got, advertised, std::strerror(err));
  std::printf("%s: %d, as advertised\n", what, advertised);
  return true;
}

// 7 and 14. One program reaches what ibv_query_device advertises, as on rxe (its pools are per
// device); past it, ENOMEM. max_ah is rxe's (32767), above the 16384 a conformance run creates.
bool limits(Nic& n) {
  CHECK(n.attr.max_ah >= 16384, "max_ah %d: fewer than 16384 address handles", n.attr.max_ah);
  // The limits are the NIC's: less what setup() holds (one PD, two CQs).
  const int pds = n.attr.max_pd - 1, cqs = n.attr.max_cq - 2;
  if (!fill_to_limit(
          "PDs", pds, [&] { return static_cast<void*>(ibv_alloc_pd(n.ctx)); },
          [](void* o) { ibv_dealloc_pd(static_cast<ibv_pd*>(o)); }))
    return false;
  if (!fill_to_limit(
          "CQs", cqs, [&] { return static_cast<void*>(ibv_create_cq(n.ctx, 1, nullptr, nullptr, 0)); },
          [](void* o) { ibv_destroy_cq(static_cast<ibv_cq*>(o)); }))
    return false;
  return fill_to_limit(
      "address handles", n.attr.max_ah, [&] { return static_cast<void*>(make_ah(n)); },
      [](void* o) { ibv_destroy_ah(static_cast<ibv_ah*>(o)); });
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* dev = nullptr;
  std::vector<std::string> steps;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-d") == 0 && i + 1 < argc) dev = argv[++i];
    else steps.push_back(argv[i]);
  }
  if (steps.empty()) steps = {"errno", "handles", "notify", "vectors", "cqex", "limits"};
  Nic n;
  if (!setup(n, dev)) return 1;
  struct Step {
    const char* name;
    bool (*run)(Nic&);
  };
  const Step all[] = {{"errno", errno_follows_the_return},
                      {"handles", unknown_handles},
                      {"notify", notify},
                      {"vectors", vectors},
                      {"cqex", extended_cq},
                      {"limits", limits}};
  for (const std::string& s : steps) {
    const Step* step = nullptr;
    for (const Step& candidate : all)
      if (s == candidate.name) step = &candidate;
    if (!step) {
      std::fprintf(stderr, "FAIL unknown step %s\n", s.c_str());
      return 1;
    }
    if (!step->run(n)) {
      std::printf("FAIL %s\n", step->name);
      return 1;
    }
    std::printf("ok %s\n", step->name);
  }
  std::printf("PASS\n");
  return 0;
}
