// Protocol tests: two Devices on an in-memory fabric with a manual clock. Each test posts
// WQEs into the shared rings exactly as the shim does, moves packets under test control
// (dropping or duplicating some), and checks what arrived in memory and in the CQs.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include "qp_pair.h"

namespace simnic::testing {
namespace {

class RcProtocol : public QpPair {
 protected:
  void SetUp() override { make_hosts(); }
  void connect(uint32_t psn = 0, uint8_t retry = 7, uint8_t rnr_retry = 7, ibv_mtu mtu = IBV_MTU_1024) {
    connect_both(LinkOptions{psn, retry, rnr_retry, mtu});
  }
};

TEST_F(RcProtocol, SendCompletesOnlyAfterAck) {
  connect();
  fill(*a, 0, 100, 1);
  post_recv(*b, 7, 4096, 4096);
  post_send(*a, wqe(*a, IBV_WR_SEND, 42, 0, 100));
  // Receive: one SEND ONLY with AckReq. Expect: no send completion before the ACK.
  ASSERT_EQ(fabric.queue.size(), 1u);
  auto req = parse(fabric.queue.front());
  EXPECT_EQ(req.h.bth.opcode, proto::kRcSendOnly);
  EXPECT_TRUE(req.h.bth.ack_req);
  EXPECT_EQ(req.h.bth.dest_qp, b->qp->qpn);
  WirePacket p = fabric.queue.front();
  fabric.queue.pop_front();
  b->dev.on_packet(p.src_ip, 4791, p.bytes, now);
  run_pending();  // the end of B's event: its ACK leaves (coalesced ACKs wait for it)
  EXPECT_TRUE(poll(*a).empty()) << "a SEND must not complete before it is acknowledged";
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(rwc[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(rwc[0].wr_id, 7u);
  EXPECT_EQ(rwc[0].byte_len, 100u);
  EXPECT_EQ(rwc[0].qp_num, b->qp->qpn);
  EXPECT_EQ(rwc[0].src_qp, a->qp->qpn);
  EXPECT_EQ(std::memcmp(mem.ptr(kPidA, 0), mem.ptr(kPidB, 4096), 100), 0);
  // Receive the ACK. Expect the send completion.
  ASSERT_EQ(fabric.queue.size(), 1u);
  EXPECT_EQ(parse(fabric.queue.front()).h.bth.opcode, proto::kRcAcknowledge);
  fabric.deliver_all(now);
  auto swc = poll(*a);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].wr_id, 42u);
  EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(swc[0].opcode, IBV_WC_SEND);
}

TEST_F(RcProtocol, LongSendIsSegmentedToPathMtu) {
  connect();
  fill(*a, 0, 10000, 3);
  post_recv(*b, 1, 65536, 16384);
  post_send(*a, wqe(*a, IBV_WR_SEND, 2, 0, 10000));
  std::vector<uint8_t> ops;
  std::vector<size_t> sizes;
  for (auto& p : fabric.queue) {
    auto pkt = parse(p);
    ops.push_back(pkt.h.bth.opcode);
    sizes.push_back(pkt.payload.size());
  }
  ASSERT_EQ(ops.size(), 10u);  // ceil(10000 / 1024)
  EXPECT_EQ(ops.front(), proto::kRcSendFirst);
  for (size_t i = 1; i + 1 < ops.size(); ++i) EXPECT_EQ(ops[i], proto::kRcSendMiddle);
  EXPECT_EQ(ops.back(), proto::kRcSendLast);
  EXPECT_EQ(sizes.front(), 1024u);
  EXPECT_EQ(sizes.back(), 10000u - 9 * 1024);
  fabric.deliver_all(now);
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].byte_len, 10000u);
  EXPECT_EQ(std::memcmp(mem.ptr(kPidA, 0), mem.ptr(kPidB, 65536), 10000), 0);
  ASSERT_EQ(poll(*a).size(), 1u);
}

TEST_F(RcProtocol, PsnWrapsAt24Bits) {
  connect(0xfffffd);
  fill(*a, 0, 8192, 5);
  post_recv(*b, 1, 65536, 8192);
  post_send(*a, wqe(*a, IBV_WR_SEND, 2, 0, 8192));
  std::vector<uint32_t> psns;
  for (auto& p : fabric.queue) psns.push_back(parse(p).h.bth.psn);
  EXPECT_EQ(psns, (std::vector<uint32_t>{0xfffffd, 0xfffffe, 0xffffff, 0, 1, 2, 3, 4}));
  fabric.deliver_all(now);
  ASSERT_EQ(poll(*b).size(), 1u);
  auto swc = poll(*a);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(mem.ptr(kPidA, 0), mem.ptr(kPidB, 65536), 8192), 0);
}

TEST_F(RcProtocol, LostMiddlePacketRecoveredByNakSequenceError) {
  connect();
  fill(*a, 0, 10000, 9);
  post_recv(*b, 1, 65536, 16384);
  post_send(*a, wqe(*a, IBV_WR_SEND, 2, 0, 10000));
  bool dropped = false;
  fabric.deliver_all(now, [&](const WirePacket& p) {
    auto pkt = parse(p);
    if (!dropped && pkt.h.bth.psn == 3 && pkt.h.bth.opcode == proto::kRcSendMiddle) return !(dropped = true);
    return true;
  });
  EXPECT_TRUE(dropped);
  EXPECT_GE(b->dev.counters().naks_sent, 1u);
  EXPECT_GE(a->dev.counters().retransmits, 1u);
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].byte_len, 10000u);
  EXPECT_EQ(std::memcmp(mem.ptr(kPidA, 0), mem.ptr(kPidB, 65536), 10000), 0);
  auto swc = poll(*a);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
}

TEST_F(RcProtocol, LostTailRecoveredByAckTimeout) {
  connect();
  fill(*a, 0, 3000, 11);
  post_recv(*b, 1, 65536, 4096);
  post_send(*a, wqe(*a, IBV_WR_SEND, 2, 0, 3000));
  bool dropped = false;
  fabric.deliver_all(now, [&](const WirePacket& p) {
    if (!dropped && parse(p).h.bth.opcode == proto::kRcSendLast) return !(dropped = true);
    return true;
  });
  EXPECT_TRUE(poll(*b).empty());
  EXPECT_TRUE(poll(*a).empty());
  uint64_t due = a->dev.next_deadline();
  ASSERT_GT(due, now);
  a->dev.on_timer(due - 1);  // not yet
  EXPECT_TRUE(fabric.queue.empty());
  now = due;
  a->dev.on_timer(now);
  EXPECT_EQ(a->dev.counters().timeouts, 1u);
  fabric.deliver_all(now);
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].byte_len, 3000u);
  EXPECT_EQ(std::memcmp(mem.ptr(kPidA, 0), mem.ptr(kPidB, 65536), 3000), 0);
  ASSERT_EQ(poll(*a).size(), 1u);
}

TEST_F(RcProtocol, RetryExhaustionFailsWithRetryExcErrAndFlushes) {
  connect(0, /*retry=*/2);
  post_recv(*b, 1, 65536, 4096);
  post_send(*a, wqe(*a, IBV_WR_SEND, 10, 0, 100));
  post_send(*a, wqe(*a, IBV_WR_SEND, 11, 0, 100));
  for (int round = 0; round < 4; ++round) {
    fabric.deliver_all(now, [](const WirePacket&) { return false; });  // a dead link
    now = a->dev.next_deadline();
    ASSERT_GT(now, 0u) << "round " << round;
    a->dev.on_timer(now);
    if (a->qp->state == IBV_QPS_ERR) break;
  }
  auto wc = poll(*a);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].wr_id, 10u);
  EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(wc[1].wr_id, 11u);
  EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(a->qp->state, IBV_QPS_ERR);
  EXPECT_EQ(a->dev.counters().timeouts, 3u);  // the first try and retry_cnt=2 retries
}

TEST_F(RcProtocol, RnrNakThenRetrySucceedsOnceReceivePosted) {
  connect();
  fill(*a, 0, 64, 13);
  post_send(*a, wqe(*a, IBV_WR_SEND, 5, 0, 64));
  fabric.deliver_all(now);
  EXPECT_EQ(b->dev.counters().rnr_naks_sent, 1u);
  EXPECT_TRUE(poll(*a).empty());
  post_recv(*b, 6, 65536, 64);
  now = a->dev.next_deadline();
  ASSERT_GT(now, 0u);
  a->dev.on_timer(now);
  fabric.deliver_all(now);
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].wr_id, 6u);
  EXPECT_EQ(std::memcmp(mem.ptr(kPidA, 0), mem.ptr(kPidB, 65536), 64), 0);
  auto swc = poll(*a);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
}

TEST_F(RcProtocol, RnrRetryZeroFailsWithRnrRetryExcErr) {
  connect(0, 7, /*rnr_retry=*/0);
  post_send(*a, wqe(*a, IBV_WR_SEND, 5, 0, 64));
  fabric.deliver_all(now);
  auto wc = poll(*a);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
  EXPECT_EQ(a->qp->state, IBV_QPS_ERR);
}

TEST_F(RcProtocol, RdmaWriteLandsAndWriteWithImmConsumesReceive) {
  connect();
  fill(*a, 0, 5000, 17);
  auto w = wqe(*a, IBV_WR_RDMA_WRITE, 20, 0, 5000);
  w.remote_addr = mem.addr(kPidB, 200000);
  w.rkey = b->mr->rkey;
  post_send(*a, w);
  fabric.deliver_all(now);
  auto swc = poll(*a);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(swc[0].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(std::memcmp(mem.ptr(kPidA, 0), mem.ptr(kPidB, 200000), 5000), 0);
  EXPECT_TRUE(poll(*b).empty()) << "a plain WRITE makes no receive completion";

  post_recv(*b, 30, 0, 0);
  w = wqe(*a, IBV_WR_RDMA_WRITE_WITH_IMM, 21, 0, 2000);
  w.remote_addr = mem.addr(kPidB, 300000);
  w.rkey = b->mr->rkey;
  w.imm_data = htonl(0x1234);
  post_send(*a, w);
  fabric.deliver_all(now);
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(rwc[0].byte_len, 2000u);
  EXPECT_TRUE(rwc[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(rwc[0].imm_data), 0x1234u);
}

TEST_F(RcProtocol, RdmaReadReturnsRemoteBytes) {
  connect();
  fill(*b, 100000, 5000, 23);
  auto w = wqe(*a, IBV_WR_RDMA_READ, 40, 500000, 5000);
  w.remote_addr = mem.addr(kPidB, 100000);
  w.rkey = b->mr->rkey;
  post_send(*a, w);
  int responses = 0;
  fabric.deliver_all(now, [&](const WirePacket& p) {
    if (parse(p).mask & proto::kIsReadResp) ++responses;
    return true;
  });
  EXPECT_EQ(responses, 5);
  auto wc = poll(*a);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc[0].byte_len, 5000u);
  EXPECT_EQ(std::memcmp(mem.ptr(kPidA, 500000), mem.ptr(kPidB, 100000), 5000), 0);
}

TEST_F(RcProtocol, LostReadResponseIsRequestedAgain) {
  connect();
  fill(*b, 100000, 5000, 29);
  auto w = wqe(*a, IBV_WR_RDMA_READ, 40, 500000, 5000);
  w.remote_addr = mem.addr(kPidB, 100000);
  w.rkey = b->mr->rkey;
  post_send(*a, w);
  bool dropped = false;
  fabric.deliver_all(now, [&](const WirePacket& p) {
    auto pkt = parse(p);
    if (!dropped && pkt.h.bth.opcode == proto::kRcReadResponseMiddle) return !(dropped = true);
    return true;
  });
  auto wc = poll(*a);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(mem.ptr(kPidA, 500000), mem.ptr(kPidB, 100000), 5000), 0);
  // One re-request for the gap: the three responses behind it do not each ask again (that
  // would restart the responder's stream once per packet in flight).
  EXPECT_EQ(a->dev.counters().retransmits, 1u);
  EXPECT_EQ(b->dev.counters().duplicates, 1u) << "B re-executed the READ once";
}

TEST_F(RcProtocol, DuplicateAtomicIsReplayedNotReapplied) {
  connect();
  uint64_t v = 100;
  std::memcpy(mem.ptr(kPidB, 8192), &v, 8);
  auto w = wqe(*a, IBV_WR_ATOMIC_FETCH_AND_ADD, 50, 16384, 8);
  w.remote_addr = mem.addr(kPidB, 8192);
  w.rkey = b->mr->rkey;
  w.compare_add = 5;
  post_send(*a, w);
  // Receive the request, lose the atomic ACK: the requester times out and sends it again.
  bool dropped = false;
  fabric.deliver_all(now, [&](const WirePacket& p) {
    if (!dropped && parse(p).h.bth.opcode == proto::kRcAtomicAcknowledge) return !(dropped = true);
    return true;
  });
  ASSERT_TRUE(dropped);
  now = a->dev.next_deadline();
  a->dev.on_timer(now);
  fabric.deliver_all(now);
  std::memcpy(&v, mem.ptr(kPidB, 8192), 8);
  EXPECT_EQ(v, 105u) << "the duplicate atomic must not be applied twice";
  uint64_t orig;
  std::memcpy(&orig, mem.ptr(kPidA, 16384), 8);
  EXPECT_EQ(orig, 100u);
  auto wc = poll(*a);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_FETCH_ADD);
  EXPECT_GE(b->dev.counters().duplicates, 1u);
}

TEST_F(RcProtocol, BadRkeyIsRemoteAccessErrorWithReadableLog) {
  connect();
  auto w = wqe(*a, IBV_WR_RDMA_WRITE, 60, 0, 100);
  w.remote_addr = mem.addr(kPidB, 0);
  w.rkey = b->mr->rkey + 0x100;
  post_send(*a, w);
  post_send(*a, wqe(*a, IBV_WR_SEND, 61, 0, 10));
  fabric.deliver_all(now);
  auto wc = poll(*a);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].wr_id, 60u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(a->qp->state, IBV_QPS_ERR);
  EXPECT_TRUE(b->logger.contains("names no MR")) << "the responder says which rule was broken";
}

TEST_F(RcProtocol, WriteBeyondMrBoundsIsRemoteAccessError) {
  connect();
  auto w = wqe(*a, IBV_WR_RDMA_WRITE, 62, 0, 100);
  w.remote_addr = mem.addr(kPidB, (1 << 20) - 50);  // runs 50 bytes past the MR
  w.rkey = b->mr->rkey;
  post_send(*a, w);
  fabric.deliver_all(now);
  auto wc = poll(*a);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(b->logger.contains("outside the MR"));
}

TEST_F(RcProtocol, BadLkeyIsLocalProtectionError) {
  connect();
  auto w = wqe(*a, IBV_WR_SEND, 63, 0, 100);
  w.sge[0].lkey ^= 0x300;
  post_send(*a, w);
  auto wc = poll(*a);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_TRUE(fabric.queue.empty()) << "nothing goes on the wire for a bad lkey";
}

// A READ or an atomic is sent before its local buffer is looked at (rxe's requester sends it,
// its completer fails copy_data): the responder executes it, and the requester completes the
// WQE with LOC_PROT_ERR when the response cannot be placed, then goes to ERR.
TEST_F(RcProtocol, AtomicWithABadLkeyIsExecutedRemotelyAndFailsWhenItsResultLands) {
  connect();
  uint64_t target = 5, mine = 0x1111;
  std::memcpy(mem.ptr(kPidB, 8192), &target, 8);
  std::memcpy(mem.ptr(kPidA, 64), &mine, 8);
  auto w = rdma(*a, *b, IBV_WR_ATOMIC_CMP_AND_SWP, 64, 64, 8, 8192);
  w.compare_add = 5;
  w.swap = 77;
  w.sge[0].lkey ^= 0x300;  // names no MR
  post_send(*a, w);
  ASSERT_EQ(queued_opcodes(kIpA), (std::vector<uint8_t>{proto::kRcCompareSwap}))
      << "the compare-and-swap goes on the wire whatever its lkey";
  deliver_one();  // the responder executes it
  uint64_t now_target = 0;
  std::memcpy(&now_target, mem.ptr(kPidB, 8192), 8);
  EXPECT_EQ(now_target, 77u) << "the remote compare-and-swap happened";
  ASSERT_EQ(queued_opcodes(kIpB), (std::vector<uint8_t>{proto::kRcAtomicAcknowledge}));
  fabric.deliver_all(now);
  auto wc = poll(*a);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 64u);
  EXPECT_EQ(wc[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(wc[0].opcode, IBV_WC_COMP_SWAP);
  uint64_t local = 0;
  std::memcpy(&local, mem.ptr(kPidA, 64), 8);
  EXPECT_EQ(local, 0x1111u) << "nothing was written through the bad lkey";
  EXPECT_EQ(a->qp->state, IBV_QPS_ERR);
  EXPECT_TRUE(a->logger.contains("cannot be placed"));
}

TEST_F(RcProtocol, ReadIntoAnMrWithoutLocalWriteIsRequestedAndFailsWhenTheDataArrives) {
  connect();
  core::Mr* ro = reg_mr(*a, 0x40000, 4096, 0);  // no IBV_ACCESS_LOCAL_WRITE: a READ cannot land here
  fill(*b, 0x8000, 3000, 9);
  std::memset(mem.ptr(kPidA, 0x40000), 0xEE, 3000);
  auto w = rdma(*a, *b, IBV_WR_RDMA_READ, 80, 0x40000, 3000, 0x8000);
  w.sge[0].lkey = ro->lkey;
  post_send(*a, w);
  ASSERT_EQ(queued_opcodes(kIpA), (std::vector<uint8_t>{proto::kRcReadRequest}));
  fabric.deliver_all(now);
  auto wc = poll(*a);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 80u);
  EXPECT_EQ(wc[0].status, IBV_WC_LOC_PROT_ERR);
  for (uint32_t i = 0; i < 3000; ++i) ASSERT_EQ(mem.ptr(kPidA, 0x40000)[i], 0xEE) << "byte " << i;
  EXPECT_EQ(a->qp->state, IBV_QPS_ERR);
  EXPECT_EQ(b->qp->state, IBV_QPS_RTS) << "the responder did nothing wrong";
}

// A connected QP's packets carry its path's traffic class as their IPv4 TOS, requests and
// responses alike (rxe builds both from the QP's address vector, qp->pri_av).
TEST_F(RcProtocol, ThePathsTrafficClassIsTheTosOfRequestsAndResponses) {
  connect_both(LinkOptions{.traffic_class = 0x68});
  fill(*b, 0x8000, 100, 4);
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_READ, 90, 0x40000, 100, 0x8000));
  ASSERT_EQ(fabric.queue.size(), 1u);
  EXPECT_EQ(fabric.queue.front().tos, 0x68) << "the READ request";
  deliver_one();
  ASSERT_EQ(fabric.queue.size(), 1u);
  EXPECT_EQ(fabric.queue.front().tos, 0x68) << "the READ response";
  fabric.deliver_all(now);
  auto wc = poll(*a);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0x40000, *b, 0x8000, 100));
}

TEST_F(RcProtocol, ReceiveTooSmallIsLocalLengthErrorAndRemoteInvalidRequest) {
  connect();
  post_recv(*b, 70, 65536, 50);
  post_send(*a, wqe(*a, IBV_WR_SEND, 71, 0, 100));
  fabric.deliver_all(now);
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].status, IBV_WC_LOC_LEN_ERR);
  auto swc = poll(*a);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, IBV_WC_REM_INV_REQ_ERR);
}

TEST_F(RcProtocol, ErrorStateFlushesPostedReceives) {
  connect();
  post_recv(*b, 80, 0, 64);
  post_recv(*b, 81, 64, 64);
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(b->dev.queue_verbs().modify_qp(b->ctx, b->qp->handle, at, IBV_QP_STATE, now), 0);
  auto wc = poll(*b);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].wr_id, 80u);
  EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(wc[1].wr_id, 81u);
  post_recv(*b, 82, 0, 64);  // posted in ERR: flushed too
  wc = poll(*b);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 82u);
  EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(RcProtocol, ResetForgetsTransportStateSoTheQpConnectsAgain) {
  connect();
  fill(*a, 0, 64, 5);
  for (uint64_t i = 0; i < 3; ++i) {
    post_recv(*b, i, 4096, 64);
    post_send(*a, wqe(*a, IBV_WR_SEND, i, 0, 64));
    fabric.deliver_all(now);
  }
  ASSERT_EQ(poll(*a).size(), 3u);
  ASSERT_EQ(poll(*b).size(), 3u);
  ASSERT_EQ(b->qp->resp.msn, 3u);
  // Both sides go through RESET and connect again at another PSN (IBA 10.3.1.1: RESET
  // returns the QP to the state it had when created).
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_RESET;
  for (Host* h : {a.get(), b.get()})
    ASSERT_EQ(h->dev.queue_verbs().modify_qp(h->ctx, h->qp->handle, at, IBV_QP_STATE, now), 0);
  EXPECT_EQ(a->qp->req.msn_started, 0u);
  EXPECT_EQ(b->qp->resp.msn, 0u);
  connect(500);
  post_recv(*b, 9, 4096, 64);
  post_send(*a, wqe(*a, IBV_WR_SEND, 10, 0, 64));
  ASSERT_EQ(fabric.queue.size(), 1u);
  EXPECT_EQ(parse(fabric.queue.front()).h.bth.psn, 500u);
  WirePacket p = fabric.queue.front();
  fabric.queue.pop_front();
  b->dev.on_packet(p.src_ip, 4791, p.bytes, now);
  run_pending();
  // The ACK counts the first message since the reset: MSN 1 (IBA 9.7.5.1.3), not 4.
  ASSERT_EQ(fabric.queue.size(), 1u);
  auto ack = parse(fabric.queue.front());
  EXPECT_EQ(ack.h.bth.opcode, proto::kRcAcknowledge);
  EXPECT_EQ(ack.h.aeth.msn, 1u);
  fabric.deliver_all(now);
  auto swc = poll(*a);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].wr_id, 10u);
  EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
  auto rwc = poll(*b);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0].wr_id, 9u);
  EXPECT_EQ(std::memcmp(mem.ptr(kPidA, 0), mem.ptr(kPidB, 4096), 64), 0);
}

TEST_F(RcProtocol, CorruptedPacketIsCountedAndDropped) {
  connect();
  post_recv(*b, 1, 65536, 4096);
  post_send(*a, wqe(*a, IBV_WR_SEND, 2, 0, 100));
  ASSERT_EQ(fabric.queue.size(), 1u);
  fabric.queue.front().bytes[20] ^= 1;  // a payload bit
  fabric.deliver_all(now);
  EXPECT_EQ(b->dev.counters().rx_drop_icrc, 1u);
  EXPECT_TRUE(poll(*b).empty());
  // The requester's timer resends it, intact.
  now = a->dev.next_deadline();
  a->dev.on_timer(now);
  fabric.deliver_all(now);
  ASSERT_EQ(poll(*b).size(), 1u);
}

TEST_F(RcProtocol, ModifyQpRejectsMissingAttributesAndAvWithoutGrh) {
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.port_num = 1;
  // RESET->INIT without IBV_QP_ACCESS_FLAGS: EINVAL, like the kernel.
  EXPECT_EQ(a->dev.queue_verbs().modify_qp(a->ctx, a->qp->handle, at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT,
                                           now),
            EINVAL);
  EXPECT_EQ(a->qp->state, IBV_QPS_RESET);
  ASSERT_EQ(a->dev.queue_verbs().modify_qp(a->ctx, a->qp->handle, at,
                                           IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, now),
            0);
  at = {};
  at.qp_state = IBV_QPS_RTR;
  at.path_mtu = IBV_MTU_1024;
  at.dest_qp_num = b->qp->qpn;
  at.ah_attr.is_global = 0;  // no GRH: not routable on RoCE
  EXPECT_EQ(a->dev.queue_verbs().modify_qp(a->ctx, a->qp->handle, at,
                                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                               IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                                           now),
            EINVAL);
  EXPECT_TRUE(a->logger.contains("GRH"));
  EXPECT_EQ(a->qp->state, IBV_QPS_INIT);
}

TEST_F(RcProtocol, ClosingAContextFreesEverything) {
  connect();
  a->dev.context_verbs().close_context(a->ctx);
  EXPECT_EQ(a->dev.qps().size(), 0u);
  EXPECT_EQ(a->dev.tables().context_count(), 0u);
  // The peer keeps working for others: a packet to the dead QP is counted and dropped.
  post_send(*b, wqe(*b, IBV_WR_SEND, 1, 0, 10));
  fabric.deliver_all(now);
  EXPECT_EQ(a->dev.counters().rx_drop_no_qp, 1u);
}

}  // namespace
}  // namespace simnic::testing
