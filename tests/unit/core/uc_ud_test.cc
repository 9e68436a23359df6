// UC and UD (IBA 9.8): no ACKs, a send completes once its packets are out; UC discards a
// message with a gap and resynchronises on the next first packet; UD carries one-packet
// messages checked by Q_Key, lands them behind a 40-byte GRH, and loses them silently when no
// receive WQE is posted. A local send error stops only the send queue (SQE) and
// modify_qp SQE->RTS resumes it. Each test checks bytes, completions, counters and states.
#include <gtest/gtest.h>

#include "qp_pair.h"

namespace simnic::testing {
namespace {

class Datagram : public QpPair {
 protected:
  void start_ud() { start(HostOptions{.type = IBV_QPT_UD}); }
  void start_uc() { start(HostOptions{.type = IBV_QPT_UC}); }
  // An AH on `h`'s NIC towards `peer`.
  uint32_t ah_to(Host& h, Host& peer, uint8_t traffic_class = 0) {
    ibv_ah_attr attr{};
    attr.is_global = 1;
    attr.port_num = 1;
    attr.grh.dgid = peer.dev.addressing().gid0();
    attr.grh.traffic_class = traffic_class;
    uint32_t handle = 0;
    EXPECT_EQ(h.dev.memory_verbs().create_ah(h.ctx, h.pd, attr, &handle), 0);
    return handle;
  }
  abi::SendWqe ud_send(Host& h, Host& peer, uint64_t wr_id, size_t off, uint32_t len, uint32_t qkey = kQkey) {
    return ud_wqe(h, ah_to(h, peer), peer, wr_id, off, len, qkey);
  }
  void deliver_all() {
    fabric.deliver_all(now);
    run_pending();
  }
};

// --- UD ---

TEST_F(Datagram, UdSendLandsBehindAGrhWithTheSourceQpAndCompletesWithoutAnAck) {
  start_ud();
  fill(*a, 0, 100, 7);
  post_recv(*b, 70, 65536, 40 + 100);
  post_send(*a, ud_send(*a, *b, 1, 0, 100));
  auto wcs = poll(*a);  // complete once on the wire
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_SEND);
  ASSERT_EQ(queued_opcodes(kIpA), (std::vector<uint8_t>{proto::kUdSendOnly}));
  proto::ParsedPacket p = parse(fabric.queue.front());
  EXPECT_EQ(p.h.deth.qkey, kQkey);
  EXPECT_EQ(p.h.deth.src_qp, a->qp->qpn);
  EXPECT_FALSE(p.h.bth.ack_req);
  deliver_all();
  EXPECT_TRUE(queued_opcodes(kIpB).empty()) << "UD is never acknowledged";
  wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(wcs[0].byte_len, 140u);
  EXPECT_EQ(wcs[0].src_qp, a->qp->qpn);
  EXPECT_TRUE(wcs[0].wc_flags & IBV_WC_GRH);
  EXPECT_TRUE(same(*a, 0, *b, 65536 + 40, 100));
  const uint8_t* grh = mem.ptr(b->pid, 65536);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(grh[i], 0) << i;
  EXPECT_EQ(grh[20], 0x45) << "an IPv4 header, IHL 5, at offset 20";
  EXPECT_EQ(grh[20 + 9], 17) << "protocol UDP";
  const uint8_t src[4] = {127, 0, 0, 1}, dst[4] = {127, 0, 0, 2};
  EXPECT_EQ(std::memcmp(grh + 20 + 12, src, 4), 0);
  EXPECT_EQ(std::memcmp(grh + 20 + 16, dst, 4), 0);
}

// On RoCE, ConnectX reports the datagram's L3 header type in wc.sl (2 = IPv4), and UCX's
// ud_verbs reads it to find the destination IPv4 address at GRH-area bytes 36..39
// (uct_ud_iface_check_grh); with sl 0 it compares 16 bytes of an IPv6 dgid and drops everything.
// An AH made back from that completion (ibv_init_ah_from_wc copies sl) is still accepted.
TEST_F(Datagram, UdReceiveOnRoceReportsTheIpv4L3TypeInSlAndTheDestinationAtGrh36) {
  start_ud();
  fill(*a, 0, 32, 4);
  post_recv(*b, 70, 65536, 40 + 32);
  post_send(*a, ud_send(*a, *b, 1, 0, 32));
  deliver_all();
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].sl, 2) << "RoCE L3 type IPv4, as ConnectX";
  const uint8_t dst[4] = {127, 0, 0, 2};
  EXPECT_EQ(std::memcmp(mem.ptr(b->pid, 65536 + 36), dst, 4), 0) << "the IPv4 daddr UCX compares";
  ibv_ah_attr back{};
  back.is_global = 1;
  back.port_num = 1;
  back.sl = wcs[0].sl;
  back.grh.dgid = a->dev.addressing().gid0();
  uint32_t ah = 0;
  EXPECT_EQ(b->dev.memory_verbs().create_ah(b->ctx, b->pd, back, &ah), 0) << b->dev.journal().take_refusal();
}

// RoCEv2 carries the GRH's traffic class as the IPv4 TOS byte (IBA Annex A17; rxe's
// prepare_ipv4_hdr), and the receiver's GRH area is the IPv4 header as it arrived (rxe copies
// ip_hdr(skb)): the AH's traffic class reaches byte 1 of it, where ibv_init_ah_from_wc reads it.
TEST_F(Datagram, UdTrafficClassTravelsAsTheIpv4TosAndShowsInTheReceiversGrh) {
  start_ud();
  fill(*a, 0, 64, 3);
  post_recv(*b, 71, 65536, 40 + 64);
  abi::SendWqe w = ud_send(*a, *b, 2, 0, 64);
  w.ah = ah_to(*a, *b, 252);
  post_send(*a, w);
  ASSERT_EQ(fabric.queue.size(), 1u);
  EXPECT_EQ(fabric.queue.front().tos, 252) << "the datagram's IPv4 TOS";
  deliver_all();
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, 65536 + 40, 64));
  const uint8_t* ip = mem.ptr(b->pid, 65536 + 20);
  EXPECT_EQ(ip[0], 0x45);
  EXPECT_EQ(ip[1], 252) << "the TOS byte of the IPv4 header in the GRH area";
  uint32_t sum = 0;  // the header checksum covers the TOS: the 20 bytes still sum to 0xffff
  for (int i = 0; i < 20; i += 2) sum += uint32_t(ip[i] << 8 | ip[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  EXPECT_EQ(sum, 0xffffu);
  // An AH without a traffic class sends TOS 0 and the GRH shows 0.
  post_recv(*b, 72, 65536, 40 + 64);
  post_send(*a, ud_send(*a, *b, 3, 0, 64));
  ASSERT_EQ(fabric.queue.size(), 1u);
  EXPECT_EQ(fabric.queue.front().tos, 0);
  deliver_all();
  ASSERT_EQ(poll(*b).size(), 1u);
  EXPECT_EQ(mem.ptr(b->pid, 65536 + 20)[1], 0);
}

TEST_F(Datagram, UdMessageOfAFullPortMtuIsOnePacket) {
  start_ud();  // port MTU 4096
  fill(*a, 0, 4096, 8);
  post_recv(*b, 70, 65536, 40 + 4096);
  post_send(*a, ud_send(*a, *b, 1, 0, 4096));
  EXPECT_EQ(queued_opcodes(kIpA), (std::vector<uint8_t>{proto::kUdSendOnly}));
  deliver_all();
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].byte_len, 40u + 4096);
  EXPECT_TRUE(same(*a, 0, *b, 65536 + 40, 4096));
}

TEST_F(Datagram, UdWrongQkeyIsDroppedAndTheHighBitMeansTheQpsOwn) {
  start_ud();
  post_recv(*b, 70, 65536, 256);
  post_send(*a, ud_send(*a, *b, 1, 0, 10, 0x22222222));
  deliver_all();
  EXPECT_TRUE(poll(*b).empty());
  EXPECT_EQ(counter(*b, "rx_drop_qkey"), 1u);
  post_send(*a, ud_send(*a, *b, 2, 0, 10, 0x80000000));  // a's own Q_Key, which is b's too
  deliver_all();
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 70u);
  EXPECT_EQ(wcs[0].byte_len, 50u);
}

TEST_F(Datagram, UdWithoutAReceiveWqeLosesTheDatagramAndKeepsGoing) {
  start_ud();
  post_send(*a, ud_send(*a, *b, 1, 0, 10));
  deliver_all();
  EXPECT_EQ(counter(*b, "rx_drop_no_wqe"), 1u);
  EXPECT_EQ(b->qp->state, IBV_QPS_RTS);
  EXPECT_TRUE(queued_opcodes(kIpB).empty()) << "no RNR NAK on UD";
  post_recv(*b, 70, 65536, 256);
  post_send(*a, ud_send(*a, *b, 2, 0, 10));
  deliver_all();
  EXPECT_EQ(poll(*b).size(), 1u);
}

TEST_F(Datagram, UdMessageBeyondTheMtuStopsTheSendQueueOnlyUntilSqeToRts) {
  start_ud();
  post_sends(*a, {ud_send(*a, *b, 1, 0, 5000), ud_send(*a, *b, 2, 0, 10)});
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, IBV_WC_LOC_LEN_ERR);
  EXPECT_EQ(wcs[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(a->query().qp_state, IBV_QPS_SQE);
  EXPECT_TRUE(a->logger.contains("a UD message must fit in one packet"));
  EXPECT_TRUE(fabric.queue.empty());
  // Posting in SQE flushes; receiving goes on.
  post_send(*a, ud_send(*a, *b, 3, 0, 10));
  wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_WR_FLUSH_ERR);
  post_recv(*a, 80, 65536, 256);
  fill(*b, 0, 10, 3);
  post_send(*b, ud_send(*b, *a, 9, 0, 10));
  ASSERT_EQ(poll(*b).size(), 1u);  // b's own send completion
  deliver_all();
  wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 80u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*b, 0, *a, 65536 + 40, 10));
  // SQE -> RTS: sending works again.
  ASSERT_EQ(a->modify_state(IBV_QPS_RTS, 0, 0, now), 0);
  post_recv(*b, 71, 65536, 256);
  post_send(*a, ud_send(*a, *b, 4, 0, 10));
  wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  deliver_all();
  EXPECT_EQ(poll(*b).size(), 1u);
}

// A datagram longer than the receive WQE (IBA 9.9.3, Table 63: class D for UD; rxe: drop_msg):
// dropped silently, nothing consumed, the QP stays in RTS. (This test used to expect
// LOC_LEN_ERR and the QP in ERR.)
TEST_F(Datagram, UdReceiveBufferWithoutRoomForTheGrhDropsTheDatagramAndKeepsTheWqe) {
  start_ud();
  post_recv(*b, 70, 65536, 100);  // 40 + 100 needed
  post_send(*a, ud_send(*a, *b, 1, 0, 100));
  deliver_all();
  EXPECT_TRUE(poll(*b).empty());
  EXPECT_EQ(b->qp->state, IBV_QPS_RTS);
  EXPECT_EQ(counter(*b, "rx_drop_ud_too_long"), 1u);
  EXPECT_TRUE(b->logger.contains("40 of GRH"));
  EXPECT_EQ(b->qp->shm->rq.consumer.value.load(), 0u) << "the receive WQE is still posted";
  // The WQE takes the next datagram that fits.
  fill(*a, 0, 60, 8);
  post_send(*a, ud_send(*a, *b, 2, 0, 60));
  deliver_all();
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 70u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].byte_len, 100u);
  EXPECT_TRUE(same(*a, 0, *b, 65536 + 40, 60));
}

// --- UC ---

TEST_F(Datagram, UcSendAndWriteWithImmArriveWithoutAcks) {
  start_uc();
  fill(*a, 0, 3000, 5);
  fill(*a, 8192, 2500, 6);
  post_recv(*b, 70, 65536, 4096);
  post_recv(*b, 71, 0, 0);
  abi::SendWqe wr = rdma(*a, *b, IBV_WR_RDMA_WRITE_WITH_IMM, 2, 8192, 2500, 32768);
  wr.imm_data = 0x01020304;
  post_sends(*a, {wqe(*a, IBV_WR_SEND, 1, 0, 3000), wr});
  auto wcs = poll(*a);
  ASSERT_EQ(wr_ids(wcs), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(wcs[1].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(queued_opcodes(kIpA),
            (std::vector<uint8_t>{proto::kUcSendFirst, proto::kUcSendMiddle, proto::kUcSendLast, proto::kUcWriteFirst,
                                  proto::kUcWriteMiddle, proto::kUcWriteLastImm}));
  deliver_all();
  EXPECT_TRUE(queued_opcodes(kIpB).empty()) << "UC is never acknowledged";
  wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 70u);
  EXPECT_EQ(wcs[0].byte_len, 3000u);
  EXPECT_EQ(wcs[1].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wcs[1].imm_data, 0x01020304u);
  EXPECT_EQ(wcs[1].byte_len, 2500u);
  EXPECT_TRUE(same(*a, 0, *b, 65536, 3000));
  EXPECT_TRUE(same(*a, 8192, *b, 32768, 2500));
}

TEST_F(Datagram, UcLostPacketDiscardsItsMessageAndTheNextMessageUsesTheSameReceive) {
  start_uc();
  fill(*a, 0, 3000, 5);
  fill(*a, 8192, 100, 6);
  post_recv(*b, 70, 65536, 4096);
  post_recv(*b, 71, 73728, 4096);
  post_sends(*a, {wqe(*a, IBV_WR_SEND, 1, 0, 3000), wqe(*a, IBV_WR_SEND, 2, 8192, 100)});
  ASSERT_EQ(fabric.queue.size(), 4u);
  fabric.queue.erase(fabric.queue.begin() + 1);  // SEND MIDDLE is lost
  deliver_all();
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 70u) << "the abandoned message's WQE takes the next one";
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].byte_len, 100u);
  EXPECT_TRUE(same(*a, 8192, *b, 65536, 100));
  EXPECT_EQ(counter(*b, "rx_drop_uc_message"), 1u);
  EXPECT_TRUE(b->logger.contains("UC message discarded"));
  EXPECT_EQ(poll(*a).size(), 2u) << "the sender never knows";
}

TEST_F(Datagram, UcBadRkeyDropsTheWriteSilentlyAndTheQpCarriesOn) {
  start_uc();
  std::memset(mem.ptr(b->pid, 32768), 0x77, 64);
  fill(*a, 0, 64, 9);
  abi::SendWqe bad = rdma(*a, *b, IBV_WR_RDMA_WRITE, 1, 0, 64, 32768);
  bad.rkey ^= 0x5a5a00;
  post_send(*a, bad);
  deliver_all();
  EXPECT_EQ(poll(*a).size(), 1u);
  EXPECT_EQ(mem.ptr(b->pid, 32768)[0], 0x77);
  EXPECT_EQ(b->qp->state, IBV_QPS_RTS);
  EXPECT_TRUE(b->logger.contains("names no MR or memory window"));
  post_send(*a, rdma(*a, *b, IBV_WR_RDMA_WRITE, 2, 0, 64, 32768));
  deliver_all();
  EXPECT_TRUE(same(*a, 0, *b, 32768, 64));
}

TEST_F(Datagram, UcSendWithoutAReceiveWqeIsLostNotRnrNaked) {
  start_uc();
  post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, 2000));
  deliver_all();
  EXPECT_TRUE(queued_opcodes(kIpB).empty());
  EXPECT_EQ(counter(*b, "rx_drop_no_wqe"), 1u);
  EXPECT_EQ(b->qp->state, IBV_QPS_RTS);
  post_recv(*b, 70, 65536, 4096);
  fill(*a, 0, 2000, 4);
  post_send(*a, wqe(*a, IBV_WR_SEND, 2, 0, 2000));
  deliver_all();
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].byte_len, 2000u);
  EXPECT_TRUE(same(*a, 0, *b, 65536, 2000));
}

TEST_F(Datagram, UcBadLkeyPutsTheQpInSqeAndReceivesGoOn) {
  start_uc();
  abi::SendWqe w = wqe(*a, IBV_WR_SEND, 1, 0, 64);
  w.sge[0].lkey ^= 0x100;
  post_sends(*a, {w, wqe(*a, IBV_WR_SEND, 2, 0, 64)});
  auto wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(wcs[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(a->query().qp_state, IBV_QPS_SQE);
  post_recv(*a, 80, 65536, 256);
  fill(*b, 0, 64, 2);
  post_send(*b, wqe(*b, IBV_WR_SEND, 9, 0, 64));
  ASSERT_EQ(poll(*b).size(), 1u);  // b's own send completion
  deliver_all();
  wcs = poll(*a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*b, 0, *a, 65536, 64));
  ASSERT_EQ(a->modify_state(IBV_QPS_RTS, 0, 0, now), 0);
  post_recv(*b, 70, 65536, 256);
  post_send(*a, wqe(*a, IBV_WR_SEND, 3, 0, 64));
  deliver_all();
  EXPECT_EQ(poll(*b).size(), 1u);
  EXPECT_EQ(poll(*a).size(), 1u);
}

TEST_F(Datagram, UcQpBindsAWindowThatTheRemoteWritesThrough) {
  start_uc();
  core::Mr* wmr = reg_mr(*b, 0, 1 << 20, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_2);
  post_send(*b, bind_wqe(*b, mw, wmr, 40960, 4096, IBV_ACCESS_REMOTE_WRITE, 5));
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  fill(*a, 0, 2000, 3);
  abi::SendWqe w = wqe(*a, IBV_WR_RDMA_WRITE, 1, 0, 2000);
  w.remote_addr = mem.addr(b->pid, 40960 + 1000);
  w.rkey = mw->rkey;
  post_send(*a, w);
  deliver_all();
  EXPECT_TRUE(same(*a, 0, *b, 40960 + 1000, 2000));
  post_send(*b, local_inv_wqe(mw->rkey, 6));
  wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_LOCAL_INV);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  // Through the invalidated key, a UC WRITE is silently dropped.
  std::memset(mem.ptr(b->pid, 40960), 0, 4096);
  post_send(*a, w);
  deliver_all();
  EXPECT_EQ(mem.ptr(b->pid, 41960)[0], 0);
  EXPECT_TRUE(b->logger.contains("that is not bound"));
}

}  // namespace
}  // namespace simnic::testing
