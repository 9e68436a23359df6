// Link layers and addresses: the GID tables simnic lists (simple, rxe, mlx5, an InfiniBand
// port's), which entries it can send from, the LID registry's format, and LID routing in
// InfiniBand mode (RC and UD address vectors without a GRH reach the NIC their DLID names).
#include <gtest/gtest.h>

#include <map>

#include "qp_pair.h"
#include "simnic/abi/lid_map.h"
#include "simnic/core/port/gid_table.h"

namespace simnic::testing {
namespace {

using core::GidTableKind;

// --- GID tables ---

constexpr uint32_t kIp = 0x7f000001;  // 127.0.0.1

core::GidTable table(GidTableKind kind, bool ib = false) {
  const uint64_t guid_be = htobe64(0x02534e7f00000101ull);  // simnic's node GUID for 127.0.0.1
  return core::build_gid_table(kind, ib, kIp, guid_be);
}

std::vector<std::string> listing(const core::GidTable& t) {
  std::vector<std::string> out;
  for (const auto& e : t.entries) out.push_back(core::gid_string(e.gid) + " " + core::gid_type_name(e.type));
  return out;
}

TEST(GidTable, SimpleHasOneEntryTheIpv4MappedRoceV2Gid) {
  core::GidTable t = table(GidTableKind::kSimple);
  EXPECT_EQ(listing(t), (std::vector<std::string>{"::ffff:127.0.0.1 RoCE v2"}));
  EXPECT_EQ(t.length, 1u);
  EXPECT_EQ(core::usable_gid_index(t), 0);
}

// rxe supports RoCE v2 only: the default GID (fe80:: and the EUI-64 of the MAC 02:53:7f:00:00:01)
// comes first, then the IPv4 address; RXE_PORT_GID_TBL_LEN is 1024.
TEST(GidTable, RxeListsTheLinkLocalDefaultGidThenTheAddress) {
  core::GidTable t = table(GidTableKind::kRxe);
  EXPECT_EQ(listing(t), (std::vector<std::string>{"fe80::53:7fff:fe00:1 RoCE v2", "::ffff:127.0.0.1 RoCE v2"}));
  EXPECT_EQ(t.length, 1024u);
  EXPECT_EQ(core::usable_gid_index(t), 1);
}

// ConnectX: v1 and v2 of the default GID, then v1 and v2 of the address ("GID index 3").
TEST(GidTable, Mlx5ListsRoceV1AndV2OfEachAddressWithTheIpv4RoceV2AtIndex3) {
  core::GidTable t = table(GidTableKind::kMlx5);
  EXPECT_EQ(listing(t), (std::vector<std::string>{"fe80::53:7fff:fe00:1 RoCE v1", "fe80::53:7fff:fe00:1 RoCE v2",
                                                  "::ffff:127.0.0.1 RoCE v1", "::ffff:127.0.0.1 RoCE v2"}));
  EXPECT_EQ(t.length, 256u);
  EXPECT_EQ(core::usable_gid_index(t), 3);
}

TEST(GidTable, AnInfiniBandPortHasOneGidTheSubnetPrefixAndItsPortGuid) {
  for (GidTableKind kind : {GidTableKind::kSimple, GidTableKind::kMlx5}) {
    core::GidTable t = table(kind, /*ib=*/true);
    EXPECT_EQ(listing(t), (std::vector<std::string>{"fe80::253:4e7f:0:101 IB"}));
    EXPECT_EQ(t.length, 1u);
    uint32_t ip = 0;
    EXPECT_TRUE(core::is_simnic_ib_gid(t.entries[0].gid, &ip));
    EXPECT_EQ(ip, kIp) << "the GUID carries the address";
  }
}

TEST(GidTable, RoceV1AndIpv6EntriesCannotBeCarriedAndSayWhy) {
  core::GidTable t = table(GidTableKind::kMlx5);
  EXPECT_NE(core::gid_entry_unusable(t.entries[0]).find("RoCE v1"), std::string::npos);
  EXPECT_NE(core::gid_entry_unusable(t.entries[1]).find("IPv6 link-local"), std::string::npos);
  EXPECT_NE(core::gid_entry_unusable(t.entries[2]).find("RoCE v1"), std::string::npos);
  EXPECT_EQ(core::gid_entry_unusable(t.entries[3]), "");
}

TEST(GidTable, KindNamesRoundTrip) {
  for (const char* name : {"simple", "rxe", "mlx5"}) {
    GidTableKind k;
    ASSERT_TRUE(core::parse_gid_table_kind(name, &k)) << name;
    EXPECT_STREQ(core::gid_table_kind_name(k), name);
  }
  GidTableKind k;
  EXPECT_FALSE(core::parse_gid_table_kind("cx7", &k));
}

// --- the LID registry ---

TEST(LidMap, ParsesLidsInDecimalOrHexSkippingCommentsAndNamingBadLines) {
  std::vector<std::string> errors;
  auto entries = abi::parse_lid_map(
      "# fabric\n1 127.0.0.1 simnic0\n0x2 10.0.0.7   # another host\n\n"
      "0 10.0.0.8\n0xc001 10.0.0.9\n3 not-an-address\n1 10.0.0.10\n4 127.0.0.1\n5 10.0.0.11 a b\n",
      &errors);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].lid, 1);
  EXPECT_EQ(entries[0].ipv4, 0x7f000001u);
  EXPECT_EQ(entries[0].name, "simnic0");
  EXPECT_EQ(entries[1].lid, 2);
  EXPECT_EQ(entries[1].ipv4, 0x0a000007u);
  EXPECT_EQ(entries[1].name, "");
  ASSERT_EQ(errors.size(), 6u);
  EXPECT_EQ(errors[0].rfind("line 5: '0' is not a unicast LID", 0), 0u) << errors[0];
  EXPECT_EQ(errors[1].rfind("line 6: '0xc001' is not a unicast LID", 0), 0u) << errors[1];
  EXPECT_EQ(errors[2].rfind("line 7: 'not-an-address'", 0), 0u) << errors[2];
  EXPECT_EQ(errors[3], "line 8: LID or address listed twice");
  EXPECT_EQ(errors[4], "line 9: LID or address listed twice");
  EXPECT_EQ(errors[5], "line 10: more than LID, ADDRESS and NAME");
}

TEST(LidMap, FormatsWhatItParsesAndGivesTheLowestFreeLid) {
  std::vector<abi::LidEntry> entries = {{1, 0x7f000001, "simnic0"}, {3, 0x7f000003, "simnic2"}};
  std::vector<std::string> errors;
  auto back = abi::parse_lid_map(abi::format_lid_map(entries), &errors);
  EXPECT_TRUE(errors.empty());
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].lid, 3);
  EXPECT_EQ(back[1].ipv4, 0x7f000003u);
  EXPECT_EQ(back[1].name, "simnic2");
  EXPECT_EQ(abi::lowest_free_lid(entries), 2);
  EXPECT_EQ(abi::lid_of_address(entries, 0x7f000003), 3);
  EXPECT_EQ(abi::lid_of_address(entries, 0x7f000002), 0);
}

// --- a Device's port and GIDs ---

class Addressing : public QpPair {
 protected:
  // The subnet manager's view for the two hosts (LID 1 is A, 2 is B), as simnicd reads it.
  class MapDirectory : public core::LidDirectory {
   public:
    bool address_of(uint16_t lid, uint32_t* ip) override {
      auto it = by_lid.find(lid);
      if (it == by_lid.end()) return false;
      *ip = it->second;
      return true;
    }
    uint16_t lid_of(uint32_t ip) override {
      for (auto& [lid, addr] : by_lid)
        if (addr == ip) return lid;
      return 0;
    }
    std::map<uint16_t, uint32_t> by_lid = {{1, kIpA}, {2, kIpB}};
  };

  void make(HostOptions o) {
    make_hosts(o);
    a->dev.addressing().set_lid_directory(&lids);
    b->dev.addressing().set_lid_directory(&lids);
  }
  static ibv_ah_attr lid_av(uint16_t dlid) {
    ibv_ah_attr av{};
    av.dlid = dlid;
    av.port_num = 1;
    return av;
  }
  static ibv_ah_attr grh_av(const ibv_gid& dgid, uint8_t sgid_index) {
    ibv_ah_attr av{};
    av.is_global = 1;
    av.port_num = 1;
    av.grh.dgid = dgid;
    av.grh.sgid_index = sgid_index;
    av.grh.hop_limit = 64;
    return av;
  }
  void to_init(Host& h) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    ASSERT_EQ(h.dev.queue_verbs().modify_qp(h.ctx, h.qp->handle, at,
                                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, now),
              0);
  }
  // INIT -> RTR with `av`: the modify's result.
  int rtr(Host& h, Host& peer, const ibv_ah_attr& av) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_RTR;
    at.path_mtu = IBV_MTU_1024;
    at.dest_qp_num = peer.qp->qpn;
    at.max_dest_rd_atomic = 1;
    at.min_rnr_timer = 1;
    at.ah_attr = av;
    return h.dev.queue_verbs().modify_qp(h.ctx, h.qp->handle, at,
                                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                                         now);
  }
  int to_rtr(Host& h, Host& peer, const ibv_ah_attr& av) {
    to_init(h);
    return rtr(h, peer, av);
  }
  void to_rts(Host& h) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_RTS;
    at.timeout = 14;
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 1;
    ASSERT_EQ(h.dev.queue_verbs().modify_qp(h.ctx, h.qp->handle, at,
                                            IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                                IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
                                            now),
              0);
  }
  void connect(const ibv_ah_attr& a_to_b, const ibv_ah_attr& b_to_a) {
    ASSERT_EQ(to_rtr(*a, *b, a_to_b), 0) << a->dev.journal().take_refusal();
    ASSERT_EQ(to_rtr(*b, *a, b_to_a), 0) << b->dev.journal().take_refusal();
    to_rts(*a);
    to_rts(*b);
  }
  // A SEND of `len` bytes from A to B and a WRITE back from B to A, both checked byte for byte.
  void exchange(uint32_t len) {
    fill(*a, 0, len, 3);
    fill(*b, 8192, len, 91);
    post_recv(*b, 7, 4096, len);
    post_send(*a, wqe(*a, IBV_WR_SEND, 1, 0, len));
    post_send(*b, rdma(*b, *a, IBV_WR_RDMA_WRITE, 2, 8192, len, 12288));
    fabric.deliver_all(now);
    auto wa = poll(*a), wb = poll(*b);
    ASSERT_EQ(wa.size(), 1u);
    EXPECT_EQ(wa[0].status, IBV_WC_SUCCESS);
    ASSERT_EQ(wb.size(), 2u);
    for (auto& wc : wb) EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc.wr_id;
    EXPECT_TRUE(same(*a, 0, *b, 4096, len));
    EXPECT_TRUE(same(*b, 8192, *a, 12288, len));
  }

  MapDirectory lids;
};

TEST_F(Addressing, AnInfiniBandPortReportsItsLidTheSmLidAndOneGid) {
  make({.infiniband = true});
  ibv_port_attr p = b->dev.addressing().port_attr();
  EXPECT_EQ(p.link_layer, IBV_LINK_LAYER_INFINIBAND);
  EXPECT_EQ(p.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(p.lid, 2);
  EXPECT_EQ(p.sm_lid, 1);
  EXPECT_EQ(p.lmc, 0);
  EXPECT_EQ(p.gid_tbl_len, 1);
  EXPECT_FALSE(p.port_cap_flags & IBV_PORT_IP_BASED_GIDS);
  core::GidEntry e;
  ASSERT_EQ(b->dev.addressing().query_gid(0, &e), 0);
  EXPECT_EQ(e.type, IBV_GID_TYPE_IB);
  EXPECT_EQ(b->dev.addressing().query_gid(1, &e), EINVAL);
}

TEST_F(Addressing, AnEmptySlotOfTheGidTableIsEnodataAndBeyondItEinval) {
  make({.gid_table = GidTableKind::kMlx5});
  core::GidEntry e;
  ASSERT_EQ(a->dev.addressing().query_gid(3, &e), 0);
  EXPECT_EQ(core::gid_string(e.gid), "::ffff:127.0.0.1");
  EXPECT_EQ(e.type, IBV_GID_TYPE_ROCE_V2);
  EXPECT_EQ(a->dev.addressing().query_gid(4, &e), ENODATA);
  EXPECT_EQ(a->dev.addressing().query_gid(255, &e), ENODATA);
  EXPECT_EQ(a->dev.addressing().query_gid(256, &e), EINVAL);
  EXPECT_EQ(a->dev.addressing().port_attr().gid_tbl_len, 256);
  EXPECT_EQ(a->dev.addressing().port_attr().link_layer, IBV_LINK_LAYER_ETHERNET);
}

// IB mode: no GRH, the DLID names the peer; the LID registry says where it is.
TEST_F(Addressing, RcConnectsByDlidAloneInInfiniBandMode) {
  make({.infiniband = true});
  connect(lid_av(2), lid_av(1));
  EXPECT_EQ(a->qp->remote_ip, kIpB);
  EXPECT_EQ(b->qp->remote_ip, kIpA);
  exchange(3000);
}

// A GRH still works in IB mode, with the port's IB GID (or an IPv4-mapped one) as dgid.
TEST_F(Addressing, RcConnectsByTheIbGidWithAGrhInInfiniBandMode) {
  make({.infiniband = true});
  connect(grh_av(b->dev.addressing().gid_table().entries[0].gid, 0), grh_av(core::ipv4_mapped_gid(kIpA), 0));
  EXPECT_EQ(a->qp->remote_ip, kIpB);
  exchange(1500);
}

TEST_F(Addressing, ADlidNoPortHasOrNotUnicastIsRefusedAtRtr) {
  make({.infiniband = true});
  EXPECT_EQ(to_rtr(*a, *b, lid_av(9)), EINVAL);
  EXPECT_NE(a->dev.journal().take_refusal().find("dlid 0x9 names no port of the fabric"), std::string::npos);
  EXPECT_TRUE(a->logger.contains("dlid 0x9 names no port")) << "the refusal is logged too";
  for (uint16_t dlid : {0, 0xc001, 0xffff}) {
    EXPECT_EQ(rtr(*a, *b, lid_av(dlid)), EINVAL) << dlid;
    EXPECT_NE(a->dev.journal().take_refusal().find("is not a unicast LID"), std::string::npos) << dlid;
  }
  EXPECT_EQ(a->qp->state, IBV_QPS_INIT);
}

// RoCE (the default) keeps refusing an address vector without a GRH, as rxe does.
TEST_F(Addressing, RoceRefusesADlidWithoutAGrh) {
  make({});
  EXPECT_EQ(to_rtr(*a, *b, lid_av(2)), EINVAL);
  EXPECT_NE(a->dev.journal().take_refusal().find("has no GRH"), std::string::npos);
}

// mlx5's table: index 3 sends; 0, 1 and 2 are refused naming index 3; 4 is an empty slot.
TEST_F(Addressing, OnTheMlx5TableGidIndex3WorksAndTheOthersAreRefusedNamingIt) {
  make({.gid_table = GidTableKind::kMlx5});
  const ibv_gid peer = core::ipv4_mapped_gid(kIpB);
  to_init(*a);
  for (uint8_t index : {0, 1, 2, 4}) {
    ASSERT_EQ(rtr(*a, *b, grh_av(peer, index)), EINVAL) << int(index);
    const std::string why = a->dev.journal().take_refusal();
    EXPECT_NE(why.find("sgid_index " + std::to_string(index) + " is "), std::string::npos) << why;
    EXPECT_NE(why.find("use sgid_index 3 (::ffff:127.0.0.1, RoCE v2)"), std::string::npos) << why;
  }
  ASSERT_EQ(rtr(*a, *b, grh_av(peer, 3)), 0);
  ASSERT_EQ(to_rtr(*b, *a, grh_av(core::ipv4_mapped_gid(kIpA), 3)), 0);
  to_rts(*a);
  to_rts(*b);
  exchange(2048);
}

TEST_F(Addressing, AnAhFromAnUncarriableGidIsRefusedNamingTheUsableIndex) {
  make({.type = IBV_QPT_UD, .gid_table = GidTableKind::kRxe});
  uint32_t ah = 0;
  EXPECT_EQ(a->dev.memory_verbs().create_ah(a->ctx, a->pd, grh_av(core::ipv4_mapped_gid(kIpB), 0), &ah), EINVAL);
  EXPECT_NE(a->dev.journal().take_refusal().find("use sgid_index 1"), std::string::npos);
  EXPECT_EQ(a->dev.memory_verbs().create_ah(a->ctx, a->pd, grh_av(core::ipv4_mapped_gid(kIpB), 1), &ah), 0);
}

// IB mode UD: an AH by DLID; the receiver sees the sender's LID in wc.slid and no GRH.
TEST_F(Addressing, UdDatagramsGoByDlidAndArriveWithTheSendersLidAndNoGrh) {
  make({.type = IBV_QPT_UD, .infiniband = true});
  connect_ud(*a);
  connect_ud(*b);
  uint32_t ah = 0;
  ASSERT_EQ(a->dev.memory_verbs().create_ah(a->ctx, a->pd, lid_av(2), &ah), 0);
  fill(*a, 0, 200, 5);
  std::memset(mem.ptr(b->pid, 65536), 0xab, 40);
  post_recv(*b, 70, 65536, 40 + 200);
  post_send(*a, ud_wqe(*a, ah, *b, 1, 0, 200));
  fabric.deliver_all(now);
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].byte_len, 240u) << "the 40 bytes reserved for a GRH count, present or not";
  EXPECT_EQ(wcs[0].slid, 1);
  EXPECT_FALSE(wcs[0].wc_flags & IBV_WC_GRH);
  EXPECT_TRUE(same(*a, 0, *b, 65536 + 40, 200));
  for (int i = 0; i < 40; ++i) ASSERT_EQ(mem.ptr(b->pid, 65536)[i], 0xab) << "no GRH written at " << i;
  EXPECT_EQ(a->dev.memory_verbs().create_ah(a->ctx, a->pd, lid_av(77), &ah), EINVAL);
}

// InfiniBand mode has no GRH and so no RoCE L3 type: wc.sl stays 0 (simnic carries no SL).
TEST_F(Addressing, UdReceiveInInfiniBandModeReportsSlZero) {
  make({.type = IBV_QPT_UD, .infiniband = true});
  connect_ud(*a);
  connect_ud(*b);
  uint32_t ah = 0;
  ASSERT_EQ(a->dev.memory_verbs().create_ah(a->ctx, a->pd, lid_av(2), &ah), 0);
  fill(*a, 0, 16, 6);
  post_recv(*b, 70, 65536, 40 + 16);
  post_send(*a, ud_wqe(*a, ah, *b, 1, 0, 16));
  fabric.deliver_all(now);
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].sl, 0);
}

}  // namespace
}  // namespace simnic::testing
