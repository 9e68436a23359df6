// The RNR NAK timer (IBA 9.7.5.2.8, Table 45): how long a requester waits after an RNR NAK
// before it resends. Field 0 is the longest wait, 655.36 ms, not a thousand times that: rdma_cm
// sets min_rnr_timer 0 on every connection (as the kernel's cma does), so a wrong value froze
// any rdma_cm QP that met an empty receive queue for eleven minutes.
#include <gtest/gtest.h>

#include "qp_pair.h"

namespace simnic::testing {
namespace {

class RnrTimer : public QpPair {
 protected:
  // B answers RNR NAKs with `field` as its timer (RTS->RTS may change it: IBA 11.2.4.2).
  void set_b_min_rnr_timer(uint8_t field) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_RTS;
    at.min_rnr_timer = field;
    ASSERT_EQ(b->dev.queue_verbs().modify_qp(b->ctx, b->qp->handle, at, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER, now), 0);
  }
  // A sends 8 bytes to B, which has no receive WQE: B RNR-NAKs, A takes the NAK.
  void send_into_empty_receive_queue() {
    fill(*a, 0, 8, 3);
    post_send(*a, wqe(*a, IBV_WR_SEND, 7, 0, 8));
    deliver_one();  // the SEND reaches B: RNR NAK
    deliver_one();  // the NAK reaches A: the RNR wait starts
    ASSERT_TRUE(fabric.queue.empty());
  }
  // Moves time to `t` and fires whatever timers are due on A.
  void advance_a_to(uint64_t t) {
    now = t;
    a->dev.on_timer(now);
    run_pending();
  }
};

// The wait each field value arms (IBA Table 45): 0.01 ms for 1, 1.28 ms for 14, 491.52 ms for
// 31, and 655.36 ms for 0.
TEST_F(RnrTimer, EachFieldArmsTheWaitOfIbaTable45) {
  start();
  for (auto [field, ns] :
       {std::pair<uint8_t, uint64_t>{1, 10'000}, {14, 1'280'000}, {31, 491'520'000}, {0, 655'360'000}}) {
    now += 5 * kMs;  // B took its last receive long ago: RNR NAK at once, no wait (receive_wait.cc)
    set_b_min_rnr_timer(field);
    const uint64_t nak_time = now;
    send_into_empty_receive_queue();
    EXPECT_EQ(a->dev.next_deadline(), nak_time + ns) << "field " << int(field);
    post_recv(*b, 9, 4096, 64);
    advance_a_to(nak_time + ns);  // the SEND goes again and completes
    fabric.deliver_all(now);
    run_pending();
    auto at_a = poll(*a);
    ASSERT_EQ(at_a.size(), 1u) << "field " << int(field);
    EXPECT_EQ(at_a[0].status, IBV_WC_SUCCESS);
    ASSERT_EQ(poll(*b).size(), 1u);
  }
}

TEST_F(RnrTimer, FieldZeroResendsAfter655MillisecondsAndTheSendCompletes) {
  start();
  set_b_min_rnr_timer(0);
  const uint64_t nak_time = now;
  send_into_empty_receive_queue();
  EXPECT_EQ(a->dev.next_deadline(), nak_time + 655'360'000u);
  post_recv(*b, 9, 4096, 64);
  advance_a_to(nak_time + 655 * kMs);  // still waiting: nothing resent
  EXPECT_TRUE(fabric.queue.empty());
  advance_a_to(nak_time + 655'360 * kUs);  // due: the SEND goes again
  ASSERT_EQ(queued_opcodes(kIpA), std::vector<uint8_t>{proto::kRcSendOnly});
  fabric.deliver_all(now);
  run_pending();
  auto at_a = poll(*a), at_b = poll(*b);
  ASSERT_EQ(at_a.size(), 1u);
  EXPECT_EQ(at_a[0].status, IBV_WC_SUCCESS);
  ASSERT_EQ(at_b.size(), 1u);
  EXPECT_EQ(at_b[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(at_b[0].byte_len, 8u);
  EXPECT_TRUE(same(*a, 0, *b, 4096, 8));
}

}  // namespace
}  // namespace simnic::testing
