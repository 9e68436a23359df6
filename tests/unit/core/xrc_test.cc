// XRC (IBA Annex A14) between two NICs: an INI QP on A sends to a TGT QP on B, and each
// request lands in the XRC SRQ its XRCETH names, provided that SRQ is in the TGT QP's XRC
// domain. Checked: the bytes in the SRQ's buffer, the CQE on the SRQ's CQ (qp_num the TGT QP,
// src_qp the INI QP), the XRCETH on the wire, XRC responses, the NAK for an SRQ of another
// domain or none, XRC domains shared by file between contexts, and what a TGT QP refuses.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <random>
#include <tuple>

#include "qp_pair.h"
#include "simnic/core/objects/qp_state_table.h"
#include "simnic/proto/wire.h"

namespace simnic::testing {
namespace {

using proto::kXrcBase;

// An XRC SRQ of `h` with its own CQ, in XRC domain `xrcd`.
struct XrcSrq {
  core::Srq* srq = nullptr;
  core::Cq* cq = nullptr;
};

class Xrc : public QpPair {
 protected:
  void SetUp() override {
    make_hosts();
    ASSERT_EQ(b->dev.xrc_verbs().open_xrcd(b->ctx, false, 0, 0, 0, &xrcd), 0);
    srq1 = make_srq(*b, xrcd);
    srq2 = make_srq(*b, xrcd);
    ibv_qp_init_attr init{};
    init.qp_type = IBV_QPT_XRC_SEND;
    init.cap.max_send_wr = 16;
    ASSERT_EQ(a->dev.xrc_verbs().create_xrc_qp(a->ctx, init, a->pd, a->cq->handle, 0, &ini), 0);
    init = {};
    init.qp_type = IBV_QPT_XRC_RECV;
    ASSERT_EQ(b->dev.xrc_verbs().create_xrc_qp(b->ctx, init, 0, 0, xrcd, &tgt), 0);
    connect(*a, ini, *b, tgt->qpn, false);
    connect(*b, tgt, *a, ini->qpn, true);
  }
  XrcSrq make_srq(Host& h, uint32_t domain) {
    XrcSrq s;
    EXPECT_EQ(h.dev.queue_verbs().create_cq(h.ctx, 64, 0, &s.cq), 0);
    ibv_srq_attr attr{};
    attr.max_wr = 8;
    attr.max_sge = 1;
    EXPECT_EQ(h.dev.xrc_verbs().create_xrc_srq(h.ctx, h.pd, domain, s.cq->handle, attr, &s.srq), 0);
    return s;
  }
  // The XRC columns of the QP state table: an INI QP takes no responder attributes, a TGT QP
  // no requester ones beyond TIMEOUT and SQ_PSN (the kernel's qp_state_table).
  void connect(Host& h, core::Qp* qp, Host& peer, uint32_t peer_qpn, bool tgt) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qp_access_flags = tgt ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ : 0;
    ASSERT_EQ(h.dev.queue_verbs().modify_qp(h.ctx, qp->handle, at,
                                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, now),
              0);
    at = {};
    at.qp_state = IBV_QPS_RTR;
    at.path_mtu = IBV_MTU_1024;
    at.dest_qp_num = peer_qpn;
    at.rq_psn = 100;
    at.max_dest_rd_atomic = 4;
    at.min_rnr_timer = 1;
    at.ah_attr.is_global = 1;
    at.ah_attr.grh.dgid = peer.dev.addressing().gid0();
    at.ah_attr.port_num = 1;
    const int responder = tgt ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0;
    ASSERT_EQ(h.dev.queue_verbs().modify_qp(h.ctx, qp->handle, at,
                                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                                IBV_QP_RQ_PSN | responder,
                                            now),
              0);
    at = {};
    at.qp_state = IBV_QPS_RTS;
    at.sq_psn = 100;
    at.timeout = 14;
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 4;
    const int requester = tgt ? 0 : IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    ASSERT_EQ(h.dev.queue_verbs().modify_qp(h.ctx, qp->handle, at,
                                            IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN | requester, now),
              0);
  }
  void post_srq_recv(Host& h, core::Srq* srq, uint64_t wr_id, size_t off, uint32_t len) {
    auto& ring = srq->shm->ring;
    uint32_t p = ring.producer.value.load();
    abi::RecvWqe& w = srq->slots[p & (srq->entries - 1)];
    w = {};
    w.wr_id = wr_id;
    w.num_sge = 1;
    w.sge[0] = {mem.addr(h.pid, off), len, h.mr->lkey};
    ring.producer.value.store(p + 1);
  }
  void post_ini(abi::SendWqe w, uint32_t srqn) {
    w.remote_srqn = srqn;
    auto& ring = ini->shm->sq;
    uint32_t p = ring.producer.value.load();
    ini->sq[p & (ini->sq_entries - 1)] = w;
    ring.producer.value.store(p + 1);
    a->dev.on_doorbell(a->ctx, now);
  }
  std::vector<ibv_wc> poll_cq(core::Cq* cq) {
    std::vector<ibv_wc> out;
    auto& ring = cq->shm->ring;
    uint32_t c = ring.consumer.value.load(), p = ring.producer.value.load();
    for (; c != p; ++c) out.push_back(cq->slots[c & (cq->entries - 1)]);
    ring.consumer.value.store(c);
    return out;
  }

  uint32_t xrcd = 0;
  XrcSrq srq1, srq2;
  core::Qp* ini = nullptr;
  core::Qp* tgt = nullptr;
};

TEST_F(Xrc, SendLandsInTheSrqItsXrcethNamesAndCompletesOnThatSrqsCq) {
  fill(*a, 0, 3000, 11);
  post_srq_recv(*b, srq1.srq, 71, 100000, 4096);
  post_srq_recv(*b, srq2.srq, 72, 200000, 4096);
  // Send: a 3-packet SEND (MTU 1024) to the second SRQ.
  post_ini(wqe(*a, IBV_WR_SEND, 5, 0, 3000), srq2.srq->srqn);
  fabric.deliver_all(now);
  // Expect: the bytes in srq2's buffer, its CQE on srq2's CQ naming the TGT QP and the INI QP.
  EXPECT_TRUE(same(*a, 0, *b, 200000, 3000));
  auto wcs = poll_cq(srq2.cq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 72u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(wcs[0].byte_len, 3000u);
  EXPECT_EQ(wcs[0].qp_num, tgt->qpn);
  EXPECT_EQ(wcs[0].src_qp, ini->qpn);
  // srq1 was not touched: its WQE is still posted and its CQ empty.
  EXPECT_TRUE(poll_cq(srq1.cq).empty());
  EXPECT_EQ(srq1.srq->shm->ring.consumer.value.load(), 0u);
  // The sender's WQE completed once the XRC ACK came back.
  auto sent = poll(*a);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(sent[0].qp_num, ini->qpn);
}

TEST_F(Xrc, RequestsCarryTheXrcethRightAfterTheBthAndResponsesAreXrcOpcodesWithoutOne) {
  post_srq_recv(*b, srq1.srq, 71, 100000, 64);
  fill(*a, 0, 10, 3);
  post_ini(wqe(*a, IBV_WR_SEND_WITH_IMM, 5, 0, 10), srq1.srq->srqn | 0xab000000);  // 24 bits go out
  ASSERT_EQ(queued_opcodes(kIpA), (std::vector<uint8_t>{uint8_t(kXrcBase | proto::kRcSendOnlyImm)}));
  const std::vector<uint8_t>& bytes = fabric.queue.front().bytes;
  // BTH (12 bytes), XRCETH: 8 reserved bits, then the SRQ number; then ImmDt, then the payload.
  ASSERT_EQ(bytes.size(), 12u + 4 + 4 + 12 + 4);
  EXPECT_EQ(bytes[12], 0);
  EXPECT_EQ(proto::load_be32(&bytes[12]), srq1.srq->srqn);
  EXPECT_EQ(parse(fabric.queue.front()).h.xrc_srqn, srq1.srq->srqn);
  deliver_one();
  // The TGT QP answers with XRC ACKNOWLEDGE (0xb1): BTH and AETH, no XRCETH.
  ASSERT_EQ(queued_opcodes(kIpB), (std::vector<uint8_t>{proto::kXrcAcknowledge}));
  EXPECT_EQ(fabric.queue.front().bytes.size(), 12u + 4 + 4);
  deliver_one();
  auto wcs = poll_cq(srq1.cq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_TRUE(wcs[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(poll(*a).size(), 1u);
}

TEST_F(Xrc, AnSrqOfAnotherXrcDomainIsRefusedWithNakInvalidRequest) {
  uint32_t other = 0;
  ASSERT_EQ(b->dev.xrc_verbs().open_xrcd(b->ctx, false, 0, 0, 0, &other), 0);
  ASSERT_NE(other, xrcd);
  XrcSrq foreign = make_srq(*b, other);
  post_srq_recv(*b, foreign.srq, 80, 300000, 64);
  fill(*a, 0, 10, 3);
  post_ini(wqe(*a, IBV_WR_SEND, 6, 0, 10), foreign.srq->srqn);
  deliver_one();
  // Expect: NAK invalid request (AETH syndrome 011 00001), nothing written, the SRQ WQE kept.
  ASSERT_EQ(queued_opcodes(kIpB), (std::vector<uint8_t>{proto::kXrcAcknowledge}));
  proto::ParsedPacket nak = parse(fabric.queue.front());
  EXPECT_EQ(nak.h.aeth.syndrome, proto::aeth_nak(proto::kNakInvalidRequest));
  EXPECT_EQ(foreign.srq->shm->ring.consumer.value.load(), 0u);
  EXPECT_TRUE(poll_cq(foreign.cq).empty());
  EXPECT_EQ(tgt->state, IBV_QPS_ERR);
  EXPECT_TRUE(b->logger.contains("another XRC domain"));
  deliver_one();
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_REM_INV_REQ_ERR);
}

TEST_F(Xrc, AnSrqNumberNoSrqHasIsRefusedWithNakInvalidRequest) {
  uint32_t unused = (srq1.srq->srqn + 1) & 0xffffff;
  if (unused == srq2.srq->srqn) unused = (unused + 1) & 0xffffff;
  post_ini(wqe(*a, IBV_WR_SEND, 6, 0, 10), unused);
  fabric.deliver_all(now);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_REM_INV_REQ_ERR);
  EXPECT_TRUE(b->logger.contains("no XRC SRQ has that number"));
}

TEST_F(Xrc, RdmaWriteThroughATgtQpIsCheckedAgainstTheNamedSrqsPd) {
  fill(*a, 0, 2500, 9);
  post_ini(rdma(*a, *b, IBV_WR_RDMA_WRITE, 7, 0, 2500, 400000), srq1.srq->srqn);
  fabric.deliver_all(now);
  EXPECT_TRUE(same(*a, 0, *b, 400000, 2500));
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  // An rkey of another PD than the SRQ's is a remote access error.
  uint32_t pd2 = 0;
  ASSERT_EQ(b->dev.memory_verbs().alloc_pd(b->ctx, &pd2), 0);
  core::Mr* mr2 = nullptr;
  ASSERT_EQ(b->dev.memory_verbs().reg_mr(b->ctx, pd2, mem.addr(kPidB, 500000), 4096, mem.addr(kPidB, 500000),
                                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &mr2),
            0);
  abi::SendWqe w = rdma(*a, *b, IBV_WR_RDMA_WRITE, 8, 0, 16, 500000);
  w.rkey = mr2->rkey;
  post_ini(w, srq1.srq->srqn);
  fabric.deliver_all(now);
  wcs = poll(*a);
  ASSERT_FALSE(wcs.empty());
  EXPECT_EQ(wcs[0].status, IBV_WC_REM_ACCESS_ERR);
}

TEST_F(Xrc, ReadThroughATgtQpComesBackAsXrcReadResponses) {
  fill(*b, 600000, 2100, 4);
  post_ini(rdma(*a, *b, IBV_WR_RDMA_READ, 9, 50000, 2100, 600000), srq1.srq->srqn);
  std::vector<uint8_t> seen;
  fabric.deliver_all(now, [&](const WirePacket& p) {
    if (p.src_ip == kIpB) seen.push_back(p.bytes[0]);
    return true;
  });
  EXPECT_EQ(seen, (std::vector<uint8_t>{uint8_t(kXrcBase | proto::kRcReadResponseFirst),
                                        uint8_t(kXrcBase | proto::kRcReadResponseMiddle),
                                        uint8_t(kXrcBase | proto::kRcReadResponseLast)}));
  EXPECT_TRUE(same(*a, 50000, *b, 600000, 2100));
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_RDMA_READ);
}

TEST_F(Xrc, DestroyingTheSrqOfAMessageInProgressLosesItAndTheNextPacketIsRefused) {
  post_srq_recv(*b, srq1.srq, 71, 100000, 4096);
  fill(*a, 0, 3000, 1);
  post_ini(wqe(*a, IBV_WR_SEND, 5, 0, 3000), srq1.srq->srqn);
  deliver_one();  // SEND FIRST: the TGT QP now delivers into srq1
  ASSERT_EQ(b->dev.queue_verbs().destroy_srq(b->ctx, srq1.srq->handle), 0);
  fabric.deliver_all(now);
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_REM_INV_REQ_ERR);
  EXPECT_EQ(srq1.cq->users, 0u);  // the SRQ let go of its CQ
}

TEST_F(Xrc, ATgtQpSendsNothingEvenWhenItsRingIsWritten) {
  // A program writing into the TGT QP's (unused) send ring and ringing: nothing goes out.
  abi::SendWqe w = wqe(*b, IBV_WR_SEND, 1, 0, 8);
  tgt->sq[0] = w;
  tgt->shm->sq.producer.value.store(1);
  b->dev.on_doorbell(b->ctx, now);
  EXPECT_TRUE(queued_opcodes(kIpB).empty());
  ASSERT_EQ(b->dev.queue_verbs().modify_qp(b->ctx, tgt->handle, ibv_qp_attr{.qp_state = IBV_QPS_ERR}, IBV_QP_STATE,
                                           now),
            0);
  b->dev.on_doorbell(b->ctx, now);  // flushes without a send CQ to write to
  EXPECT_EQ(tgt->state, IBV_QPS_ERR);
}

TEST_F(Xrc, XrcStateTableTakesTheInitiatorAndTargetColumns) {
  std::string why;
  EXPECT_TRUE(core::qp_modify_is_ok(IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPT_XRC_SEND,
                                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
                                    &why));
  EXPECT_FALSE(core::qp_modify_is_ok(IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPT_XRC_SEND,
                                     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                         IBV_QP_MAX_DEST_RD_ATOMIC,
                                     &why));
  EXPECT_FALSE(core::qp_modify_is_ok(IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPT_XRC_RECV,
                                     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
                                     &why));
  EXPECT_NE(why.find("IBV_QP_MAX_DEST_RD_ATOMIC"), std::string::npos);
  EXPECT_TRUE(core::qp_modify_is_ok(IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPT_XRC_RECV,
                                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN, &why));
  EXPECT_FALSE(core::qp_modify_is_ok(IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPT_XRC_SEND,
                                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN, &why));
  EXPECT_FALSE(core::qp_modify_is_ok(IBV_QPS_SQE, IBV_QPS_RTS, IBV_QPT_XRC_SEND, IBV_QP_STATE, &why));
  // What uverbs drops before the check (modify_qp_mask): an RC-minded program's extra bits pass.
  EXPECT_EQ(core::xrc_ignored_attrs_removed(IBV_QPT_XRC_SEND,
                                            IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_MAX_DEST_RD_ATOMIC),
            uint32_t(IBV_QP_STATE));
  EXPECT_EQ(core::xrc_ignored_attrs_removed(IBV_QPT_XRC_RECV, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                                                  IBV_QP_MAX_QP_RD_ATOMIC),
            uint32_t(IBV_QP_TIMEOUT));
  EXPECT_EQ(core::xrc_ignored_attrs_removed(IBV_QPT_RC, IBV_QP_MIN_RNR_TIMER), uint32_t(IBV_QP_MIN_RNR_TIMER));
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_RTS;
  at.retry_cnt = 7;           // ignored: a TGT QP sends no requests
  at.max_dest_rd_atomic = 3;  // ignored: an INI QP answers no requests
  ASSERT_EQ(b->dev.queue_verbs().modify_qp(b->ctx, tgt->handle, at, IBV_QP_STATE | IBV_QP_RETRY_CNT, now), 0);
  ASSERT_EQ(a->dev.queue_verbs().modify_qp(a->ctx, ini->handle, at, IBV_QP_STATE | IBV_QP_MAX_DEST_RD_ATOMIC, now), 0);
  EXPECT_EQ(ini->attr.max_dest_rd_atomic, 0);
}

// Bad input on XRC: thousands of well-framed XRC packets with random opcodes, SRQ numbers (ours,
// another domain's, made up), PSNs, keys and lengths, at the TGT QP and the INI QP. Nothing
// crashes, no byte outside an MR is written, and afterwards a SEND still lands.
TEST_F(Xrc, RandomXrcPacketsNeitherCrashNorTouchUnregisteredMemory) {
  constexpr size_t kGuard = 2 << 20;
  constexpr uint32_t kGuardLen = 1 << 20;
  std::memset(mem.ptr(kPidB, kGuard), 0xa5, kGuardLen);
  uint32_t other = 0;
  ASSERT_EQ(b->dev.xrc_verbs().open_xrcd(b->ctx, false, 0, 0, 0, &other), 0);
  XrcSrq foreign = make_srq(*b, other);
  std::mt19937 rng(4242);
  auto pick = [&](uint64_t n) { return uint64_t(rng()) % n; };
  for (int i = 0; i < 20000; ++i) {
    proto::PacketHeaders h{};
    h.bth.opcode = pick(4) ? uint8_t(kXrcBase + pick(0x18)) : uint8_t(rng());
    h.bth.dest_qp = pick(6) ? tgt->qpn : pick(2) ? ini->qpn : uint32_t(rng()) & 0xffffff;
    h.bth.psn = (tgt->resp.epsn + uint32_t(pick(8)) - 4) & 0xffffff;
    h.bth.ack_req = pick(2);
    const uint32_t srqns[] = {srq1.srq->srqn, srq2.srq->srqn, foreign.srq->srqn, uint32_t(rng())};
    h.xrc_srqn = srqns[pick(4)];
    const uint32_t keys[] = {b->mr->rkey, uint32_t(rng()), 0};
    h.reth = {mem.addr(kPidB, pick(1 << 21)), keys[pick(3)], uint32_t(pick(5000))};
    h.atomic = {mem.addr(kPidB, pick(1 << 21) & ~7ull), keys[pick(3)], rng(), rng()};
    h.aeth.syndrome = uint8_t(rng());
    std::vector<uint8_t> payload((proto::opcode_info(h.bth.opcode).mask & proto::kHasPayload) ? pick(1025) : 0);
    for (auto& x : payload) x = uint8_t(rng());
    std::vector<uint8_t> out = packet_bytes(h, payload, proto::IpUdpInfo{kIpA, kIpB, 4791, 4791});
    if (out.empty()) out.resize(pick(100));
    b->dev.on_packet(kIpA, 4791, out, now);
    if (i % 32 == 31) {
      if (tgt->state == IBV_QPS_ERR) {
        ASSERT_EQ(b->dev.queue_verbs().modify_qp(b->ctx, tgt->handle, ibv_qp_attr{.qp_state = IBV_QPS_RESET},
                                                 IBV_QP_STATE, now),
                  0);
        connect(*b, tgt, *a, ini->qpn, true);
      }
      for (core::Srq* q : {srq1.srq, srq2.srq, foreign.srq})
        while (q->shm->ring.producer.value.load() - q->shm->ring.consumer.value.load() < 4)
          post_srq_recv(*b, q, 9, 65536, 8192);
      for (core::Cq* cq : {srq1.cq, srq2.cq, foreign.cq}) poll_cq(cq);
      fabric.queue.clear();
    }
  }
  for (size_t i = 0; i < kGuardLen; ++i)
    ASSERT_EQ(mem.ptr(kPidB, kGuard)[i], 0xa5) << "byte " << i << " of unregistered memory was written";
  EXPECT_GT(mem.writes, 0);  // some random requests were valid and executed
  // Still serving: both ends reset and connected again, a SEND lands in srq2.
  for (auto [h, qp, peer, peer_qpn, t] :
       {std::tuple{a.get(), ini, b.get(), tgt->qpn, false}, std::tuple{b.get(), tgt, a.get(), ini->qpn, true}}) {
    ASSERT_EQ(h->dev.queue_verbs().modify_qp(h->ctx, qp->handle, ibv_qp_attr{.qp_state = IBV_QPS_RESET}, IBV_QP_STATE,
                                             now),
              0);
    connect(*h, qp, *peer, peer_qpn, t);
  }
  poll(*a);
  for (core::Cq* cq : {srq1.cq, srq2.cq}) poll_cq(cq);
  // The SEND takes the next of the receive WQEs still posted on srq2 (buffer at 65536).
  fill(*a, 0, 2000, 5);
  post_ini(wqe(*a, IBV_WR_SEND, 1, 0, 2000), srq2.srq->srqn);
  fabric.deliver_all(now);
  auto wcs = poll_cq(srq2.cq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].byte_len, 2000u);
  EXPECT_TRUE(same(*a, 0, *b, 65536, 2000));
}

// --- XRC domains ---

class XrcDomains : public QpPair {
 protected:
  void SetUp() override { make_hosts(); }
};

TEST_F(XrcDomains, ContextsOpeningTheSameFileShareOneDomainAndTheLastCloseFreesIt) {
  core::Context* other = b->dev.context_verbs().open_context(3003, 0, -1, -1);
  uint32_t x1 = 0, x2 = 0, x3 = 0, priv = 0;
  // No domain on the file yet and no O_CREAT: EAGAIN (ib_uverbs_open_xrcd).
  EXPECT_EQ(b->dev.xrc_verbs().open_xrcd(b->ctx, true, 8, 77, 0, &x1), EAGAIN);
  ASSERT_EQ(b->dev.xrc_verbs().open_xrcd(b->ctx, true, 8, 77, O_CREAT, &x1), 0);
  ASSERT_EQ(b->dev.xrc_verbs().open_xrcd(other, true, 8, 77, O_CREAT, &x2), 0);
  EXPECT_EQ(x1, x2);
  EXPECT_EQ(b->dev.xrc_verbs().open_xrcd(other, true, 8, 77, O_CREAT | O_EXCL, &x3), EINVAL);
  ASSERT_EQ(b->dev.xrc_verbs().open_xrcd(other, true, 8, 78, O_CREAT, &x3), 0);  // another file, another domain
  EXPECT_NE(x3, x1);
  ASSERT_EQ(b->dev.xrc_verbs().open_xrcd(other, false, 0, 0, 0, &priv), 0);  // no file: a domain of its own
  EXPECT_NE(priv, x1);
  EXPECT_NE(priv, x3);
  // An SRQ made by one context in the shared domain; the other context's TGT QP can reach it.
  core::Cq* cq = nullptr;
  ASSERT_EQ(b->dev.queue_verbs().create_cq(b->ctx, 16, 0, &cq), 0);
  core::Srq* srq = nullptr;
  ASSERT_EQ(b->dev.xrc_verbs().create_xrc_srq(b->ctx, b->pd, x1, cq->handle,
                                              ibv_srq_attr{.max_wr = 4, .max_sge = 1, .srq_limit = 0}, &srq),
            0);
  // A context cannot use a domain it did not open.
  core::Cq* cq2 = nullptr;
  uint32_t pd2 = 0;
  ASSERT_EQ(b->dev.memory_verbs().alloc_pd(other, &pd2), 0);
  ASSERT_EQ(b->dev.queue_verbs().create_cq(other, 16, 0, &cq2), 0);
  core::Srq* s2 = nullptr;
  core::Context* third = b->dev.context_verbs().open_context(3004, 0, -1, -1);
  EXPECT_EQ(b->dev.xrc_verbs().create_xrc_srq(other, pd2, 999999, cq2->handle,
                                              ibv_srq_attr{.max_wr = 4, .max_sge = 1, .srq_limit = 0}, &s2),
            EINVAL);
  uint32_t unused = 0;
  ibv_qp_init_attr init{};
  init.qp_type = IBV_QPT_XRC_RECV;
  core::Qp* q = nullptr;
  EXPECT_EQ(b->dev.xrc_verbs().create_xrc_qp(third, init, 0, 0, x1, &q), EINVAL);
  (void)unused;
  // Closing: the other context's close leaves the domain; the last close while it holds an SRQ is EBUSY.
  EXPECT_EQ(b->dev.xrc_verbs().close_xrcd(other, x1), 0);
  EXPECT_EQ(b->dev.xrc_verbs().close_xrcd(other, x1), EINVAL);  // it has no open left
  EXPECT_EQ(b->dev.xrc_verbs().close_xrcd(b->ctx, x1), EBUSY);
  ASSERT_EQ(b->dev.queue_verbs().destroy_srq(b->ctx, srq->handle), 0);
  EXPECT_EQ(b->dev.xrc_verbs().close_xrcd(b->ctx, x1), 0);
  // Gone: opening the file again without O_CREAT finds nothing.
  EXPECT_EQ(b->dev.xrc_verbs().open_xrcd(b->ctx, true, 8, 77, 0, &x1), EAGAIN);
  b->dev.context_verbs().close_context(third);
  b->dev.context_verbs().close_context(other);
}

TEST_F(XrcDomains, AClosingContextLetsGoOfItsDomainsAndTheirObjects) {
  core::Context* other = b->dev.context_verbs().open_context(3003, 0, -1, -1);
  uint32_t pd = 0, x = 0;
  core::Cq* cq = nullptr;
  core::Srq* srq = nullptr;
  core::Qp* q = nullptr;
  ASSERT_EQ(b->dev.memory_verbs().alloc_pd(other, &pd), 0);
  ASSERT_EQ(b->dev.queue_verbs().create_cq(other, 16, 0, &cq), 0);
  ASSERT_EQ(b->dev.xrc_verbs().open_xrcd(other, true, 1, 2, O_CREAT, &x), 0);
  ASSERT_EQ(b->dev.xrc_verbs().create_xrc_srq(other, pd, x, cq->handle,
                                              ibv_srq_attr{.max_wr = 4, .max_sge = 1, .srq_limit = 0}, &srq),
            0);
  ibv_qp_init_attr init{};
  init.qp_type = IBV_QPT_XRC_RECV;
  ASSERT_EQ(b->dev.xrc_verbs().create_xrc_qp(other, init, 0, 0, x, &q), 0);
  const size_t qps = b->dev.qps().size();
  b->dev.context_verbs().close_context(other);
  EXPECT_EQ(b->dev.qps().size(), qps - 1);
  uint32_t again = 0;
  EXPECT_EQ(b->dev.xrc_verbs().open_xrcd(b->ctx, true, 1, 2, 0, &again), EAGAIN);  // the domain went with it
}

// ibv_open_qp: a TGT QP is shared by the contexts of its domain, and lives while a handle does.
TEST_F(XrcDomains, AnOpenedTgtQpOutlivesItsCreatorsHandleAndDiesWithTheLast) {
  core::Context* other = b->dev.context_verbs().open_context(3003, 0, -1, -1);
  uint32_t x1 = 0, x2 = 0, opened = 0, wrong = 0;
  ASSERT_EQ(b->dev.xrc_verbs().open_xrcd(b->ctx, true, 5, 6, O_CREAT, &x1), 0);
  ASSERT_EQ(b->dev.xrc_verbs().open_xrcd(other, true, 5, 6, O_CREAT, &x2), 0);
  ASSERT_EQ(b->dev.xrc_verbs().open_xrcd(other, false, 0, 0, 0, &wrong), 0);
  ibv_qp_init_attr init{};
  init.qp_type = IBV_QPT_XRC_RECV;
  core::Qp* tgt = nullptr;
  ASSERT_EQ(b->dev.xrc_verbs().create_xrc_qp(b->ctx, init, 0, 0, x1, &tgt), 0);
  const uint32_t qpn = tgt->qpn, creator_handle = tgt->handle;
  core::Qp* q = nullptr;
  EXPECT_EQ(b->dev.xrc_verbs().open_xrc_qp(other, wrong, qpn, &opened, &q), EINVAL);  // not through another domain
  EXPECT_EQ(b->dev.xrc_verbs().open_xrc_qp(other, x2, a->qp->qpn ^ 1, &opened, &q), EINVAL);
  ASSERT_EQ(b->dev.xrc_verbs().open_xrc_qp(other, x2, qpn, &opened, &q), 0);
  EXPECT_EQ(q, tgt);
  // The opener may drive it: RESET -> INIT through its own handle.
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.port_num = 1;
  ASSERT_EQ(b->dev.queue_verbs().modify_qp(other, opened, at,
                                           IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, now),
            0);
  EXPECT_EQ(tgt->state, IBV_QPS_INIT);
  // The creator destroys its handle: the QP goes on, now the opener's, under the opener's handle.
  ASSERT_EQ(b->dev.queue_verbs().destroy_qp(b->ctx, creator_handle), 0);
  core::Qp* still = b->dev.tables().find_qp_by_qpn(qpn);
  ASSERT_NE(still, nullptr);
  EXPECT_EQ(still->ctx, other);
  EXPECT_EQ(still->handle, opened);
  EXPECT_EQ(b->dev.queue_verbs().destroy_qp(b->ctx, creator_handle), EINVAL);
  // The last handle goes with its context: the QP too, then the domain.
  b->dev.context_verbs().close_context(other);
  EXPECT_EQ(b->dev.tables().find_qp_by_qpn(qpn), nullptr);
  EXPECT_EQ(b->dev.xrc_verbs().close_xrcd(b->ctx, x1), 0);
}

TEST_F(XrcDomains, AnOpenerThatGoesAwayLeavesTheQpToItsCreator) {
  core::Context* other = b->dev.context_verbs().open_context(3003, 0, -1, -1);
  uint32_t x1 = 0, x2 = 0, opened = 0;
  ASSERT_EQ(b->dev.xrc_verbs().open_xrcd(b->ctx, true, 5, 6, O_CREAT, &x1), 0);
  ASSERT_EQ(b->dev.xrc_verbs().open_xrcd(other, true, 5, 6, O_CREAT, &x2), 0);
  ibv_qp_init_attr init{};
  init.qp_type = IBV_QPT_XRC_RECV;
  core::Qp* tgt = nullptr;
  core::Qp* q = nullptr;
  ASSERT_EQ(b->dev.xrc_verbs().create_xrc_qp(b->ctx, init, 0, 0, x1, &tgt), 0);
  ASSERT_EQ(b->dev.xrc_verbs().open_xrc_qp(other, x2, tgt->qpn, &opened, &q), 0);
  const uint32_t qpn = tgt->qpn;
  b->dev.context_verbs().close_context(other);
  ASSERT_NE(b->dev.tables().find_qp_by_qpn(qpn), nullptr);
  EXPECT_EQ(b->dev.queue_verbs().destroy_qp(b->ctx, tgt->handle), 0);  // no opener left to hand it to
  EXPECT_EQ(b->dev.tables().find_qp_by_qpn(qpn), nullptr);
}

}  // namespace
}  // namespace simnic::testing
