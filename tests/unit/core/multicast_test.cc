// UD multicast (IBA 10.5): QPs attach to a group; a datagram sent to the group's address goes
// out once, with DestQP 0xFFFFFF, to the IP group the MGID maps to, and every attached QP of
// every member NIC (the sender's own NIC included) receives it, checked by Q_Key like any UD
// datagram. ibv_attach_mcast/ibv_detach_mcast fail with the kernel's errnos, and the limits
// ibv_query_device reports are enforced with ENOMEM.
#include <gtest/gtest.h>

#include <map>

#include "qp_pair.h"
#include "simnic/core/objects/multicast.h"

namespace simnic::testing {
namespace {

constexpr uint32_t kGroupIp = 0xef010203;  // 239.1.2.3

ibv_gid v4_gid(uint32_t ip) {
  ibv_gid g{};
  g.raw[10] = g.raw[11] = 0xff;
  for (int i = 0; i < 4; ++i) g.raw[12 + i] = uint8_t(ip >> (24 - 8 * i));
  return g;
}

const ibv_gid kGroup = v4_gid(kGroupIp);

class Multicast : public QpPair {
 protected:
  void SetUp() override { start(HostOptions{.type = IBV_QPT_UD}); }

  // Another UD QP on `h`'s NIC, in RTS with the same Q_Key, sharing the host's CQ.
  core::Qp* extra_qp(Host& h, ibv_qp_type type = IBV_QPT_UD) {
    ibv_qp_init_attr init{};
    init.qp_type = type;
    init.cap.max_send_wr = 16;
    init.cap.max_recv_wr = 16;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    core::Qp* qp = nullptr;
    EXPECT_EQ(h.dev.queue_verbs().create_qp(h.ctx, init, h.pd, h.cq->handle, h.cq->handle, 0, &qp), 0);
    if (type != IBV_QPT_UD) return qp;
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qkey = kQkey;
    EXPECT_EQ(h.dev.queue_verbs().modify_qp(h.ctx, qp->handle, at,
                                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, now),
              0);
    at = {};
    at.qp_state = IBV_QPS_RTR;
    EXPECT_EQ(h.dev.queue_verbs().modify_qp(h.ctx, qp->handle, at, IBV_QP_STATE, now), 0);
    at.qp_state = IBV_QPS_RTS;
    EXPECT_EQ(h.dev.queue_verbs().modify_qp(h.ctx, qp->handle, at, IBV_QP_STATE | IBV_QP_SQ_PSN, now), 0);
    return qp;
  }
  int attach(Host& h, core::Qp* qp, const ibv_gid& g = kGroup) {
    return h.dev.queue_verbs().attach_mcast(h.ctx, qp->handle, g, 0xc001);
  }
  int detach(Host& h, core::Qp* qp, const ibv_gid& g = kGroup) {
    return h.dev.queue_verbs().detach_mcast(h.ctx, qp->handle, g, 0xc001);
  }
  void recv_on(Host& h, core::Qp* qp, uint64_t wr_id, size_t off, uint32_t len) {
    auto& ring = qp->shm->rq;
    uint32_t p = ring.producer.value.load();
    abi::RecvWqe& w = qp->rq[p & (qp->rq_entries - 1)];
    w = {};
    w.wr_id = wr_id;
    w.num_sge = 1;
    w.sge[0] = {mem.addr(h.pid, off), len, h.mr->lkey};
    ring.producer.value.store(p + 1);
  }
  // A SEND from `h`'s first QP to the group, through an AH whose DGID is the MGID.
  abi::SendWqe group_send(Host& h, uint64_t wr_id, size_t off, uint32_t len, const ibv_gid& g = kGroup,
                          uint32_t qkey = kQkey) {
    ibv_ah_attr attr{};
    attr.is_global = 1;
    attr.port_num = 1;
    attr.dlid = 0xc001;
    attr.grh.dgid = g;
    uint32_t ah = 0;
    EXPECT_EQ(h.dev.memory_verbs().create_ah(h.ctx, h.pd, attr, &ah), 0);
    abi::SendWqe w = wqe(h, IBV_WR_SEND, wr_id, off, len);
    w.ah = ah;
    w.remote_qpn = core::kMulticastQpn;
    w.remote_qkey = qkey;
    return w;
  }
  // The completions of `h`'s CQ, by QPN.
  std::map<uint32_t, std::vector<ibv_wc>> poll_by_qp(Host& h) {
    std::map<uint32_t, std::vector<ibv_wc>> out;
    for (const ibv_wc& wc : poll(h)) out[wc.qp_num].push_back(wc);
    return out;
  }
  // A received datagram: success, from `a`'s first QP, `len` bytes behind the GRH, whose IPv4
  // header shows the group as its destination.
  void expect_datagram(const ibv_wc& wc, Host& h, size_t buf, size_t src_off, uint32_t len) {
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.opcode, IBV_WC_RECV);
    EXPECT_EQ(wc.byte_len, 40 + len);
    EXPECT_EQ(wc.src_qp, a->qp->qpn);
    EXPECT_TRUE(same(*a, src_off, h, buf + 40, len));
    const uint8_t group[4] = {239, 1, 2, 3};
    EXPECT_EQ(std::memcmp(mem.ptr(h.pid, buf) + 20 + 16, group, 4), 0) << "the GRH's destination is the group";
  }
};

TEST_F(Multicast, EveryAttachedQpOnEveryMemberNicGetsEachDatagramButTheUnattachedSenderDoesNot) {
  core::Qp* b2 = extra_qp(*b);
  core::Qp* a2 = extra_qp(*a);  // on the sender's own NIC
  for (auto [h, qp] : {std::pair{b.get(), b->qp}, {b.get(), b2}, {a.get(), a2}}) ASSERT_EQ(attach(*h, qp), 0);
  EXPECT_EQ(fabric.groups[kGroupIp], (std::set<uint32_t>{kIpA, kIpB})) << "both ports joined 239.1.2.3";
  for (uint64_t i = 0; i < 2; ++i) {
    recv_on(*b, b->qp, 10 + i, 100000 + i * 8192, 4096);
    recv_on(*b, b2, 20 + i, 200000 + i * 8192, 4096);
    recv_on(*a, a2, 30 + i, 300000 + i * 8192, 4096);
    recv_on(*a, a->qp, 40 + i, 400000 + i * 8192, 4096);  // the sender's: it is not attached
  }
  fill(*a, 0, 1000, 3);
  fill(*a, 4096, 700, 9);
  post_sends(*a, {group_send(*a, 1, 0, 1000), group_send(*a, 2, 4096, 700)});
  ASSERT_EQ(fabric.queue.size(), 2u) << "one packet per datagram, whatever the number of members";
  fabric.deliver_all(now);

  auto at_b = poll_by_qp(*b);
  auto at_a = poll_by_qp(*a);
  for (auto [h, qp, wcs, buf] :
       {std::tuple{b.get(), b->qp, at_b, 100000}, {b.get(), b2, at_b, 200000}, {a.get(), a2, at_a, 300000}}) {
    const std::vector<ibv_wc>& got = wcs[qp->qpn];
    ASSERT_EQ(got.size(), 2u) << "QP " << qp->qpn;
    expect_datagram(got[0], *h, buf, 0, 1000);
    expect_datagram(got[1], *h, buf + 8192, 4096, 700);
  }
  ASSERT_EQ(at_a[a->qp->qpn].size(), 2u);
  for (const ibv_wc& wc : at_a[a->qp->qpn]) EXPECT_EQ(wc.opcode, IBV_WC_SEND) << "only its own send completions";
  EXPECT_EQ(counter(*b, "mcast_deliveries"), 4u);
  EXPECT_EQ(counter(*a, "mcast_deliveries"), 2u);
  EXPECT_EQ(counter(*a, "mcast_tx_packets"), 2u);
}

TEST_F(Multicast, ADetachedQpGetsNothingAndTheLastDetachLeavesTheIpGroup) {
  core::Qp* b2 = extra_qp(*b);
  ASSERT_EQ(attach(*b, b->qp), 0);
  ASSERT_EQ(attach(*b, b2), 0);
  ASSERT_EQ(detach(*b, b2), 0);
  recv_on(*b, b->qp, 10, 100000, 4096);
  recv_on(*b, b2, 20, 200000, 4096);
  fill(*a, 0, 64, 5);
  post_send(*a, group_send(*a, 1, 0, 64));
  fabric.deliver_all(now);
  auto got = poll_by_qp(*b);
  ASSERT_EQ(got[b->qp->qpn].size(), 1u);
  expect_datagram(got[b->qp->qpn][0], *b, 100000, 0, 64);
  EXPECT_TRUE(got[b2->qpn].empty()) << "detached: its receive WQE stays posted";

  ASSERT_EQ(detach(*b, b->qp), 0);
  EXPECT_EQ(fabric.groups.count(kGroupIp), 0u) << "no member left on B: the port left 239.1.2.3";
  recv_on(*b, b->qp, 11, 110000, 4096);
  post_send(*a, group_send(*a, 2, 0, 64));
  fabric.deliver_all(now);
  EXPECT_TRUE(poll_by_qp(*b).empty());
  EXPECT_EQ(counter(*b, "mcast_deliveries"), 1u);
}

TEST_F(Multicast, AWrongQkeyIsDroppedAndCountedAndTheNextDatagramStillArrives) {
  ASSERT_EQ(attach(*b, b->qp), 0);
  recv_on(*b, b->qp, 10, 100000, 4096);
  fill(*a, 0, 32, 1);
  post_send(*a, group_send(*a, 1, 0, 32, kGroup, 0x2222));  // not the receiver's Q_Key (IBA 10.2.5)
  fabric.deliver_all(now);
  EXPECT_TRUE(poll(*b).empty());
  EXPECT_EQ(counter(*b, "rx_drop_qkey"), 1u);
  post_send(*a, group_send(*a, 2, 0, 32));
  fabric.deliver_all(now);
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 10u) << "the dropped datagram took no receive WQE";
  expect_datagram(wcs[0], *b, 100000, 0, 32);
}

TEST_F(Multicast, TheWireCarriesDestQpFfffffToTheGroupAddressWithAnIcrcOverIt) {
  ASSERT_EQ(attach(*b, b->qp), 0);
  abi::SendWqe w = group_send(*a, 1, 0, 16);
  w.remote_qpn = b->qp->qpn;  // a unicast QPN in the WR: the NIC still sends to 0xFFFFFF
  post_send(*a, w);
  ASSERT_EQ(fabric.queue.size(), 1u);
  const WirePacket& p = fabric.queue.front();
  EXPECT_EQ(p.dst_ip, kGroupIp);
  proto::ParsedPacket pkt = parse(p);  // the ICRC verifies over a header addressed to the group
  EXPECT_EQ(pkt.h.bth.opcode, proto::kUdSendOnly);
  EXPECT_EQ(pkt.h.bth.dest_qp, 0xffffffu);
  EXPECT_EQ(pkt.h.deth.src_qp, a->qp->qpn);
  EXPECT_EQ(pkt.h.deth.qkey, kQkey);
}

TEST_F(Multicast, ADatagramToTheGroupWithAUnicastDestQpIsDroppedAndCounted) {
  ASSERT_EQ(attach(*b, b->qp), 0);
  recv_on(*b, b->qp, 10, 100000, 4096);
  proto::PacketHeaders h{};
  h.bth.opcode = proto::kUdSendOnly;
  h.bth.pkey = 0xffff;
  h.bth.dest_qp = b->qp->qpn;
  h.deth.qkey = kQkey;
  h.deth.src_qp = a->qp->qpn;
  const std::vector<uint8_t> payload(8, 0x5a);
  const std::vector<uint8_t> bytes = packet_bytes(h, payload, proto::IpUdpInfo{kIpA, kGroupIp});
  ASSERT_GT(bytes.size(), 0u);
  b->dev.on_packet(kIpA, 4791, bytes, now, kGroupIp);
  EXPECT_TRUE(poll(*b).empty());
  EXPECT_EQ(counter(*b, "rx_drop_mcast"), 1u);
}

TEST_F(Multicast, AnIpv6MulticastGidTravelsToIts239GroupAndIsDelivered) {
  ibv_gid g6{};
  g6.raw[0] = 0xff;
  g6.raw[1] = 0x0e;
  g6.raw[13] = 0x0a, g6.raw[14] = 0x0b, g6.raw[15] = 0x0c;
  ASSERT_EQ(attach(*b, b->qp, g6), 0);
  EXPECT_EQ(fabric.groups.count(0xef0a0b0c), 1u) << "ff0e::a:b0c is carried as 239.10.11.12";
  recv_on(*b, b->qp, 10, 100000, 4096);
  fill(*a, 0, 48, 2);
  post_send(*a, group_send(*a, 1, 0, 48, g6));
  EXPECT_EQ(fabric.queue.front().dst_ip, 0xef0a0b0cu);
  fabric.deliver_all(now);
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(*a, 0, *b, 100000 + 40, 48));
}

TEST_F(Multicast, AttachAndDetachFailWithTheKernelsErrnos) {
  core::Qp* rc = extra_qp(*b, IBV_QPT_RC);
  EXPECT_EQ(attach(*b, rc), EINVAL) << "only UD QPs join groups";
  EXPECT_EQ(attach(*b, b->qp, a->dev.addressing().gid0()), EINVAL) << "a unicast GID";
  EXPECT_EQ(attach(*b, b->qp, v4_gid(0x0a000001)), EINVAL) << "::ffff:10.0.0.1 is not multicast";
  EXPECT_EQ(detach(*b, b->qp), EINVAL) << "never attached";
  EXPECT_EQ(b->dev.queue_verbs().attach_mcast(b->ctx, 999999, kGroup, 0), EINVAL) << "no such QP";
  ASSERT_EQ(attach(*b, b->qp), 0);
  EXPECT_EQ(attach(*b, b->qp), 0) << "attaching twice is no error (uverbs)";
  EXPECT_EQ(b->dev.queue_verbs().destroy_qp(b->ctx, b->qp->handle), EBUSY)
      << "attached QPs cannot be destroyed (uverbs)";
  EXPECT_NE(b->dev.journal().take_refusal().find("ibv_detach_mcast"), std::string::npos);
  EXPECT_EQ(detach(*b, b->qp), 0);
  EXPECT_EQ(detach(*b, b->qp), EINVAL) << "the second attach added nothing to detach";
  EXPECT_EQ(b->dev.queue_verbs().destroy_qp(b->ctx, b->qp->handle), 0);
  b->qp = nullptr;
  ibv_device_attr attr = b->dev.addressing().device_attr();
  EXPECT_EQ(attr.max_mcast_grp, int(core::DeviceLimits::kMaxMcastGrp));
  EXPECT_EQ(attr.max_mcast_qp_attach, int(core::DeviceLimits::kMaxMcastQpAttach));
  EXPECT_EQ(attr.max_total_mcast_qp_attach, int(core::DeviceLimits::kMaxTotalMcastQpAttach));
}

TEST_F(Multicast, TheLimitsIbvQueryDeviceReportsAreEnforcedWithEnomem) {
  std::vector<core::Qp*> qps{b->qp};
  ASSERT_EQ(attach(*b, b->qp), 0);
  while (qps.size() < core::DeviceLimits::kMaxMcastQpAttach) {
    qps.push_back(extra_qp(*b));
    ASSERT_EQ(attach(*b, qps.back()), 0) << qps.size();
  }
  EXPECT_EQ(attach(*b, extra_qp(*b)), ENOMEM) << "max_mcast_qp_attach QPs in one group";
  uint32_t g = 0;
  for (; g + 1 < core::DeviceLimits::kMaxMcastGrp; ++g) ASSERT_EQ(attach(*b, b->qp, v4_gid(0xef000000 + g)), 0) << g;
  EXPECT_EQ(attach(*b, b->qp, v4_gid(0xef000000 + g)), ENOMEM) << "max_mcast_grp groups on this NIC";
  EXPECT_EQ(fabric.groups.size(), size_t(core::DeviceLimits::kMaxMcastGrp));
}

TEST_F(Multicast, AProgramThatDiesAttachedLeavesItsGroups) {
  core::Qp* b2 = extra_qp(*b);
  ASSERT_EQ(attach(*b, b->qp), 0);
  ASSERT_EQ(attach(*b, b2), 0);
  b->dev.context_verbs().close_context(b->ctx);
  b->ctx = nullptr;
  EXPECT_EQ(b->dev.qps().size(), 0u);
  EXPECT_EQ(fabric.groups.count(kGroupIp), 0u);
  post_send(*a, group_send(*a, 1, 0, 16));
  fabric.deliver_all(now);  // nobody listens: the fabric hands it to no NIC
  EXPECT_EQ(counter(*b, "mcast_deliveries"), 0u);
}

struct LineSink : core::TraceSink {
  void write_line(const std::string& line) override { lines.push_back(line); }
  // The lines of one kind that contain `text`.
  size_t count(const std::string& kind, const std::string& text = "") const {
    size_t n = 0;
    for (const auto& l : lines)
      if (l.find("\"kind\":\"" + kind + "\"") != std::string::npos && l.find(text) != std::string::npos) ++n;
    return n;
  }
  std::vector<std::string> lines;
};

// What simnic-viz reads: attaches, the send to the group, one reception per member NIC and one
// delivery per attached QP; a viewer that attaches later learns the attachments from the snapshot.
TEST_F(Multicast, TheTraceShowsAttachesTheSendToTheGroupAndEachDelivery) {
  LineSink ta, tb;
  a->dev.tracer().set_sink(&ta);
  b->dev.tracer().set_sink(&tb);
  core::Qp* b2 = extra_qp(*b);
  ASSERT_EQ(attach(*b, b->qp), 0);
  ASSERT_EQ(attach(*b, b2), 0);
  EXPECT_EQ(tb.count("mcast_attach", "\"mgid\":\"::ffff:239.1.2.3\",\"group\":\"239.1.2.3\""), 2u);
  recv_on(*b, b->qp, 10, 100000, 4096);
  recv_on(*b, b2, 20, 200000, 4096);
  post_send(*a, group_send(*a, 1, 0, 16));
  fabric.deliver_all(now);
  EXPECT_EQ(ta.count("pkt_tx", "\"dst\":\"239.1.2.3\",\"opcode\":\"UD_SEND_ONLY\""), 1u);
  EXPECT_EQ(ta.count("pkt_tx", "\"dest_qp\":16777215"), 1u);
  EXPECT_EQ(tb.count("pkt_rx", "\"dst\":\"239.1.2.3\""), 1u) << "one reception per NIC";
  EXPECT_EQ(tb.count("mcast_deliver"), 2u) << "one delivery per attached QP";
  tb.lines.clear();
  b->dev.trace_points().trace_snapshot();
  EXPECT_EQ(tb.count("mcast_attach"), 2u);
  ASSERT_EQ(detach(*b, b2), 0);
  EXPECT_EQ(tb.count("mcast_detach", "\"members\":1"), 1u);
  a->dev.tracer().set_sink(nullptr);
  b->dev.tracer().set_sink(nullptr);
}

}  // namespace
}  // namespace simnic::testing
