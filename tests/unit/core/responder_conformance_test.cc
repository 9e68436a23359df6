// The responder against rxe and the IBA (issue 28): which receive bytes are checked, which PD
// an SRQ's WQEs are checked against, the async event of an R_Key violation, a UD datagram too
// long for its receive WQE, and a WRITE with immediate that is RNR NAKed or has a bad rkey.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "qp_pair.h"

namespace simnic::testing {
namespace {

using namespace simnic::proto;

class ResponderConformance : public QpPair {
 protected:
  void post_srq_recv(core::Srq* srq, uint64_t wr_id, ibv_sge sge) {
    auto& ring = srq->shm->ring;
    uint32_t p = ring.producer.value.load();
    abi::RecvWqe& w = srq->slots[p & (srq->entries - 1)];
    w = {};
    w.wr_id = wr_id;
    w.num_sge = 1;
    w.sge[0] = sge;
    ring.producer.value.store(p + 1);
  }
  // B's QP replaced by one that receives from an SRQ of a second PD; B's own MR stays in the
  // QP's PD, `srq_mr` is in the SRQ's.
  void start_with_srq_of_another_pd(ibv_qp_type type = IBV_QPT_RC) {
    make_hosts({.type = type});
    ASSERT_EQ(b->dev.memory_verbs().alloc_pd(b->ctx, &srq_pd), 0);
    ASSERT_EQ(b->dev.memory_verbs().reg_mr(b->ctx, srq_pd, mem.addr(b->pid, 1 << 21), 1 << 16,
                                           mem.addr(b->pid, 1 << 21), IBV_ACCESS_LOCAL_WRITE, &srq_mr),
              0);
    ibv_srq_attr attr{};
    attr.max_wr = 16;
    attr.max_sge = 1;
    ASSERT_EQ(b->dev.queue_verbs().create_srq(b->ctx, srq_pd, attr, &srq), 0);
    ibv_qp_init_attr init{};
    init.qp_type = type;
    init.cap.max_send_wr = 16;
    init.cap.max_send_sge = 4;
    init.cap.max_recv_sge = 4;
    ASSERT_EQ(b->dev.queue_verbs().create_qp(b->ctx, init, b->pd, b->cq->handle, b->cq->handle, srq->handle, &b->qp),
              0);
    connect_both();
  }
  bool has_async(Host& h, ibv_event_type type) {
    for (auto& [t, handle] : h.notifier.async)
      if (t == uint32_t(type) && handle == h.qp->handle) return true;
    return false;
  }
  // Delivers everything and lets every due timer fire, `rounds` times, 10 ms apart.
  void run_rounds(int rounds) {
    for (int i = 0; i < rounds; ++i) {
      fabric.deliver_all(now);
      now += 10 * kMs;
      a->dev.on_timer(now);
      b->dev.on_timer(now);
    }
  }
  uint32_t srq_pd = 0;
  core::Mr* srq_mr = nullptr;
  core::Srq* srq = nullptr;
};

// --- B: a receive SGE is checked for the bytes placed in it, not for its whole length ---

// Receive: a 1-byte SEND into a receive WQE whose 4-byte SGE lies in a 1-byte MR.
// Expect: success, the byte delivered (rxe's copy_data checks only the bytes it copies;
// ConnectX does the same).
TEST_F(ResponderConformance, ReceiveSgeLargerThanItsMrTakesAMessageThatFits) {
  start();
  core::Mr* tiny = reg_mr(*b, 65536, 1, IBV_ACCESS_LOCAL_WRITE);
  post_recv_sge(*b, 70, {mem.addr(b->pid, 65536), 4, tiny->lkey});
  mem.ptr(a->pid, 0)[0] = 0x5a;
  mem.ptr(b->pid, 65536)[0] = 0;
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 1));
  fabric.deliver_all(now);
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].wr_id, 70u);
  EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(rwc[0].byte_len, 1u);
  EXPECT_EQ(mem.ptr(b->pid, 65536)[0], 0x5a);
  auto swc = poll(*a);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(b->qp->state, IBV_QPS_RTS);
}

// Receive: a 2-byte SEND into the same WQE: its second byte lands outside the MR.
// Expect: the receive fails with LOC_PROT_ERR and the sender hears REM_OP_ERR, as before.
TEST_F(ResponderConformance, ReceiveBytesBeyondTheSgesMrAreStillRefused) {
  start();
  core::Mr* tiny = reg_mr(*b, 65536, 1, IBV_ACCESS_LOCAL_WRITE);
  post_recv_sge(*b, 70, {mem.addr(b->pid, 65536), 4, tiny->lkey});
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 2));
  fabric.deliver_all(now);
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].status, IBV_WC_LOC_PROT_ERR);
  auto swc = poll(*a);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, IBV_WC_REM_OP_ERR);
}

// Receive: a zero-length SEND into a WQE whose SGE names no MR.
// Expect: success: no byte is placed, so no key is checked (as rxe).
TEST_F(ResponderConformance, ZeroLengthSendChecksNoReceiveKey) {
  start();
  post_recv_sge(*b, 70, {mem.addr(b->pid, 65536), 16, b->mr->lkey ^ 0x100});
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 0));
  fabric.deliver_all(now);
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(rwc[0].byte_len, 0u);
}

// --- 8: an SRQ's receive WQEs are checked against the SRQ's PD ---

// Receive: a SEND on a QP of PD 1 whose SRQ is of PD 2, into a WQE whose lkey is of PD 2.
// Expect: success and the bytes in place (IBA 10.2.9: the SRQ's PD; siw too, rxe checks the QP's).
TEST_F(ResponderConformance, SrqWqeIsCheckedAgainstTheSrqsPd) {
  start_with_srq_of_another_pd();
  fill(*a, 0, 100, 9);
  post_srq_recv(srq, 70, {mem.addr(b->pid, 1 << 21), 256, srq_mr->lkey});
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 100));
  fabric.deliver_all(now);
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(rwc[0].byte_len, 100u);
  EXPECT_TRUE(same(*a, 0, *b, 1 << 21, 100));
  auto swc = poll(*a);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
}

// Receive: the same, into an SRQ WQE whose lkey is of the QP's PD, not the SRQ's.
// Expect: LOC_PROT_ERR on the receive, REM_OP_ERR at the sender.
TEST_F(ResponderConformance, SrqWqeWithAnLkeyOfTheQpsPdIsAProtectionError) {
  start_with_srq_of_another_pd();
  post_srq_recv(srq, 70, {mem.addr(b->pid, 65536), 256, b->mr->lkey});
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 100));
  fabric.deliver_all(now);
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_TRUE(b->logger.contains("another PD than the SRQ's"));
  auto swc = poll(*a);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, IBV_WC_REM_OP_ERR);
}

// --- 9b: a UD datagram too long for an SRQ's WQE ---

// Receive: a UD datagram longer than the SRQ WQE it takes (the RQ case: uc_ud_test.cc).
// Expect: the WQE, taken from the shared queue, completes with LOC_LEN_ERR (rxe's class E,
// which rxe reports as REM_INV_REQ_ERR), and the QP stays in RTS and receives the next one.
TEST_F(ResponderConformance, UdDatagramTooLongForAnSrqWqeCompletesItAndTheQpGoesOn) {
  start_with_srq_of_another_pd(IBV_QPT_UD);
  post_srq_recv(srq, 70, {mem.addr(b->pid, 1 << 21), 100, srq_mr->lkey});  // 40 + 100 needed
  post_srq_recv(srq, 71, {mem.addr(b->pid, 1 << 21), 256, srq_mr->lkey});
  ibv_ah_attr attr{};
  attr.is_global = 1;
  attr.port_num = 1;
  attr.grh.dgid = b->dev.addressing().gid0();
  uint32_t ah = 0;
  ASSERT_EQ(a->dev.memory_verbs().create_ah(a->ctx, a->pd, attr, &ah), 0);
  auto ud_send = [&](uint64_t wr_id, uint32_t len) {
    post_send(*a, ud_wqe(*a, ah, *b, wr_id, 0, len));
    fabric.deliver_all(now);
  };
  ud_send(1, 100);
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].wr_id, 70u);
  EXPECT_EQ(rwc[0].status, IBV_WC_LOC_LEN_ERR);
  EXPECT_EQ(b->qp->state, IBV_QPS_RTS);
  fill(*a, 0, 100, 3);
  ud_send(2, 100);
  rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].wr_id, 71u);
  EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, (1 << 21) + 40, 100));
}

// --- 5: an R_Key violation with no receive WQE to carry it raises IBV_EVENT_QP_ACCESS_ERR ---

// Receive: a WRITE with a bad rkey. Expect: NAK remote access error, B in ERR, and the event
// (IBA 9.9.3.1.3, C9-222.1.1; rxe).
TEST_F(ResponderConformance, WriteWithBadRkeyRaisesQpAccessErrAtTheResponder) {
  start();
  abi::SendWqe w = rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, 10, 0);
  w.rkey ^= 0x100;
  post_send(*a, w);
  fabric.deliver_all(now);
  auto swc = poll(*a);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(b->qp->state, IBV_QPS_ERR);
  ASSERT_EQ(b->notifier.async.size(), 1u);
  EXPECT_TRUE(has_async(*b, IBV_EVENT_QP_ACCESS_ERR));
  EXPECT_TRUE(a->notifier.async.empty()) << "the requester learns it from its completion";
}

TEST_F(ResponderConformance, ReadWithBadRkeyRaisesQpAccessErrAtTheResponder) {
  start();
  abi::SendWqe w = rdma(*a, *b, IBV_WR_RDMA_READ, 1, 0, 10, 0);
  w.remote_addr = mem.addr(b->pid, (1 << 20) - 4);  // runs past the end of B's MR
  post_send(*a, w);
  fabric.deliver_all(now);
  auto swc = poll(*a);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(has_async(*b, IBV_EVENT_QP_ACCESS_ERR));
}

// Receive: a request refused for another reason than access (misaligned atomic).
// Expect: no QP_ACCESS_ERR (rxe raises it for R_Key violations only).
TEST_F(ResponderConformance, InvalidRequestRaisesNoAccessEvent) {
  start();
  abi::SendWqe w = rdma(*a, *b, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 0, 8, 4);
  post_send(*a, w);
  fabric.deliver_all(now);
  auto swc = poll(*a);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, IBV_WC_REM_INV_REQ_ERR);
  EXPECT_FALSE(has_async(*b, IBV_EVENT_QP_ACCESS_ERR));
}

// --- 14b: a WRITE with immediate and a bad rkey completes its receive WQE with the error ---

// Receive: WRITE ONLY with immediate, bad rkey, two receive WQEs posted.
// Expect: the first WQE completes with REM_ACCESS_ERR (rxe: do_complete after
// RESPST_ERR_RKEY_VIOLATION), the second is flushed; no async event (the WQE carries it).
TEST_F(ResponderConformance, WriteWithImmAndBadRkeyCompletesItsReceiveWqeWithTheError) {
  start();
  post_recv(*b, 70, 65536, 64);
  post_recv(*b, 71, 65536, 64);
  abi::SendWqe w = rdma(*a, *b, IBV_WR_RDMA_WRITE_WITH_IMM, 1, 0, 10, 0);
  w.rkey ^= 0x100;
  post_send(*a, w);
  fabric.deliver_all(now);
  auto swc = poll(*a);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, IBV_WC_REM_ACCESS_ERR);
  auto rwc = poll(*b);
  ASSERT_EQ(wr_ids(rwc), (std::vector<uint64_t>{70, 71}));
  EXPECT_EQ(rwc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(rwc[0].qp_num, b->qp->qpn);
  EXPECT_EQ(rwc[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(b->qp->state, IBV_QPS_ERR);
  EXPECT_FALSE(has_async(*b, IBV_EVENT_QP_ACCESS_ERR));
}

// --- 14a: an RNR-NAKed WRITE with immediate leaves no state at the responder ---

// Receive: WRITE ONLY with immediate and no receive WQE, rnr_retry = 2.
// Expect: the first try and two retries, each RNR NAKed (never "a WRITE FIRST/ONLY arrived
// while the previous WRITE was unfinished"), then RNR_RETRY_EXC_ERR at the requester.
TEST_F(ResponderConformance, RnrNakedWriteWithImmIsRetriedUntilRnrRetryRunsOut) {
  LinkOptions l;
  l.rnr_retry = 2;
  start({}, l);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE_WITH_IMM, 1, 0, 10, 0));
  run_rounds(20);
  EXPECT_EQ(b->dev.counters().rnr_naks_sent, 3u);
  EXPECT_EQ(b->dev.counters().naks_sent, 0u) << "no invalid-request NAK";
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
  EXPECT_EQ(b->qp->state, IBV_QPS_RTS);
  EXPECT_FALSE(b->logger.contains("previous WRITE was unfinished"));
}

// Receive: the same, single and multi-packet, with a receive posted after the first RNR NAK.
// Expect: the retry succeeds: the bytes in place, the immediate and the length delivered.
TEST_F(ResponderConformance, RnrNakedWriteWithImmSucceedsOnceAReceiveIsPosted) {
  start();
  for (uint32_t len : {10u, 3000u}) {
    SCOPED_TRACE(len);
    fill(*a, 0, len, uint8_t(len));
    abi::SendWqe w = rdma(*a, *b, IBV_WR_RDMA_WRITE_WITH_IMM, len, 0, len, 8192);
    w.imm_data = htonl(0xabc00000 | len);
    post_send(*a, w);
    fabric.deliver_all(now);
    const uint64_t rnr = b->dev.counters().rnr_naks_sent;
    EXPECT_GE(rnr, 1u);
    EXPECT_TRUE(poll(*b).empty());
    post_recv(*b, 70 + len, 65536, 64);
    run_rounds(5);
    auto rwc = poll(*b);
    ASSERT_EQ(rwc.size(), 1u);
    EXPECT_EQ(rwc[0].wr_id, 70 + len);
    EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(rwc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(rwc[0].byte_len, len);
    EXPECT_TRUE(rwc[0].wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ(rwc[0].imm_data, htonl(0xabc00000 | len));
    EXPECT_TRUE(same(*a, 0, *b, 8192, len));
    auto swc = poll(*a);
    ASSERT_EQ(swc.size(), 1u);
    EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(b->qp->state, IBV_QPS_RTS);
  }
}

// Receive: a UD datagram into an SRQ's WQE on RoCE.
// Expect: wc.sl 2, the RoCE L3 type IPv4, as on a QP's own RQ (uc_ud_test.cc).
TEST_F(ResponderConformance, UdReceiveFromAnSrqReportsTheIpv4L3TypeInSl) {
  start_with_srq_of_another_pd(IBV_QPT_UD);
  post_srq_recv(srq, 70, {mem.addr(b->pid, 1 << 21), 256, srq_mr->lkey});
  ibv_ah_attr attr{};
  attr.is_global = 1;
  attr.port_num = 1;
  attr.grh.dgid = b->dev.addressing().gid0();
  uint32_t ah = 0;
  ASSERT_EQ(a->dev.memory_verbs().create_ah(a->ctx, a->pd, attr, &ah), 0);
  fill(*a, 0, 64, 5);
  post_send(*a, ud_wqe(*a, ah, *b, 1, 0, 64));
  fabric.deliver_all(now);
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(rwc[0].sl, 2);
  EXPECT_TRUE(same(*a, 0, *b, (1 << 21) + 40, 64));
}

}  // namespace
}  // namespace simnic::testing
