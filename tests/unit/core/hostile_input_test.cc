// Bad input never crashes the NIC or corrupts memory it was not allowed to touch: thousands of
// well-framed packets (valid ICRC) with random opcodes, PSNs, keys, addresses, lengths and
// syndromes, plus raw garbage, are fed to an RC, a UC and a UD QP whose memory has a guarded
// region no key grants. Afterwards the guard is intact, every drop was counted, and a plain
// SEND between fresh connections still delivers every byte. Deterministic (fixed seeds).
#include <gtest/gtest.h>

#include <random>

#include "qp_pair.h"
#include "simnic/proto/psn.h"

namespace simnic::testing {
namespace {

constexpr size_t kGuard = 2 << 20;  // [2 MiB, 3 MiB) of B's memory: in no MR
constexpr uint32_t kGuardLen = 1 << 20;

class HostileInput : public QpPair, public ::testing::WithParamInterface<ibv_qp_type> {
 protected:
  // A random packet with a valid ICRC, aimed mostly at B's QP and near its expected PSN.
  std::vector<uint8_t> random_packet(std::mt19937& rng) {
    auto pick = [&](uint64_t n) { return uint64_t(rng()) % n; };
    proto::PacketHeaders h{};
    // Half the time an opcode of the QP's own transport, else any byte at all.
    const ibv_qp_type t = b->qp->type;
    h.bth.opcode = pick(2) ? (t == IBV_QPT_RC   ? uint8_t(pick(0x18))
                              : t == IBV_QPT_UC ? uint8_t(0x20 + pick(0x0c))
                                                : uint8_t(0x64 + pick(2)))
                           : uint8_t(rng());
    h.bth.dest_qp = pick(8) ? b->qp->qpn : uint32_t(rng()) & proto::kPsnMask;
    h.bth.psn = (b->qp->resp.epsn + uint32_t(pick(8)) - 4) & proto::kPsnMask;
    h.bth.ack_req = pick(2);
    h.bth.solicited = pick(2);
    h.bth.pkey = 0xffff;
    const uint32_t keys[] = {b->mr->rkey, b->mr->lkey ^ 0x100, uint32_t(rng()), mw_rkey, 0};
    h.reth.rkey = keys[pick(5)];
    h.reth.va = pick(2) ? mem.addr(b->pid, pick(1 << 21)) : uint64_t(rng()) << 20;
    h.reth.dma_len = pick(4) ? uint32_t(pick(5000)) : uint32_t(rng());
    h.atomic.rkey = keys[pick(5)];
    h.atomic.va = mem.addr(b->pid, pick(1 << 21));
    h.atomic.swap_add = rng();
    h.aeth.syndrome = uint8_t(rng());
    h.aeth.msn = rng() & proto::kPsnMask;
    h.deth.qkey = pick(2) ? kQkey : uint32_t(rng());
    h.deth.src_qp = rng() & proto::kPsnMask;
    h.ieth_rkey = keys[pick(5)];
    // Mostly a payload the opcode may carry, within the MTU; sometimes anything.
    const bool carries = proto::opcode_info(h.bth.opcode).mask & proto::kHasPayload;
    std::vector<uint8_t> payload(pick(8) == 0 ? pick(5000) : carries ? pick(1025) : 0);
    for (auto& x : payload) x = uint8_t(rng());
    std::vector<uint8_t> out = packet_bytes(h, payload, proto::IpUdpInfo{kIpA, kIpB, 4791, 4791});
    if (out.empty()) {  // an opcode with no layout: send garbage of some length instead
      out.resize(pick(200));
      for (auto& x : out) x = uint8_t(rng());
    }
    return out;
  }

  uint32_t mw_rkey = 0;
};

TEST_P(HostileInput, RandomPacketsNeitherCrashNorTouchUnregisteredMemoryAndServiceResumes) {
  start(HostOptions{.type = GetParam()});
  // On the RC run, a bound type 2 window on B, to make rkey confusion interesting.
  if (GetParam() == IBV_QPT_RC) {
    core::Mr* wmr = reg_mr(*b, 0, 1 << 20, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    core::Mw* mw = alloc_mw(*b, IBV_MW_TYPE_2);
    post_send(*b, bind_wqe(*b, mw, wmr, 4096, 65536, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE, 0, 0));
    mw_rkey = mw->rkey;
  }
  std::memset(mem.ptr(b->pid, kGuard), 0xa5, kGuardLen);

  std::mt19937 rng(12345 + GetParam());
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> pkt = random_packet(rng);
    b->dev.on_packet(kIpA, 4791, pkt, now);
    if (i % 32 == 31) {
      if (b->qp->state == IBV_QPS_ERR || b->qp->state == IBV_QPS_SQE) {
        // An error ended B's QP: bring it back so later packets reach the deep paths again.
        ASSERT_EQ(b->modify_state(IBV_QPS_RESET), 0);
        connect_one(*b, *a, LinkOptions{});
      }
      auto& rq = b->qp->shm->rq;
      while (rq.producer.value.load() - rq.consumer.value.load() < 8) post_recv(*b, 100, 65536, 8192);
    }
    if (i % 64 == 0) {
      // B's answers go to A, whose completer must shrug off ACKs for PSNs it never sent.
      fabric.deliver_all(now);
      now += 50 * kMs;  // and let timers fire
      a->dev.on_timer(now);
      b->dev.on_timer(now);
      run_pending();
      poll(*a);  // keep the CQs from overrunning
      poll(*b);
    }
  }
  fabric.deliver_all(now);

  for (size_t i = 0; i < kGuardLen; ++i)
    ASSERT_EQ(mem.ptr(b->pid, kGuard)[i], 0xa5) << "byte " << i << " of unregistered memory was written";
  const core::DeviceCounters& c = b->dev.counters();
  EXPECT_EQ(c.rx_packets, 20000u);
  EXPECT_GT(c.rx_drop_malformed + c.rx_drop_no_qp + c.rx_drop_unexpected + c.rx_drop_qp_state + c.rx_drop_qkey +
                c.rx_drop_uc_message + c.duplicates + c.naks_sent,
            0u);
  EXPECT_FALSE(b->dev.status_text().empty());
  // The random stream also held valid requests: some executed and completed.
  EXPECT_GT(mem.writes, 0);
  EXPECT_GT(c.completions, 0u);

  // The NIC keeps serving: reset both QPs, connect again, and move a message.
  ASSERT_EQ(a->modify_state(IBV_QPS_RESET), 0);
  ASSERT_EQ(b->modify_state(IBV_QPS_RESET), 0);
  poll(*a);
  poll(*b);
  connect_both();
  fill(*a, 0, 3000, 77);
  post_recv(*b, 1, 262144, 4096);
  abi::SendWqe s = wqe(*a, IBV_WR_SEND, 2, 0, GetParam() == IBV_QPT_UD ? 1000 : 3000);
  if (GetParam() == IBV_QPT_UD) {
    ibv_ah_attr attr{};
    attr.is_global = 1;
    attr.port_num = 1;
    attr.grh.dgid = b->dev.addressing().gid0();
    ASSERT_EQ(a->dev.memory_verbs().create_ah(a->ctx, a->pd, attr, &s.ah), 0);
    s.remote_qpn = b->qp->qpn;
    s.remote_qkey = kQkey;
  }
  post_send(*a, s);
  fabric.deliver_all(now);
  run_pending();
  auto wcs = poll(*b);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  const size_t grh = GetParam() == IBV_QPT_UD ? 40 : 0;
  EXPECT_EQ(wcs[0].byte_len, grh + (GetParam() == IBV_QPT_UD ? 1000 : 3000));
  EXPECT_TRUE(same(*a, 0, *b, 262144 + grh, GetParam() == IBV_QPT_UD ? 1000 : 3000));
  auto swc = poll(*a);
  ASSERT_EQ(swc.size(), 1u);
  EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
}

INSTANTIATE_TEST_SUITE_P(Transports, HostileInput, ::testing::Values(IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD),
                         [](const auto& info) {
                           return std::string(info.param == IBV_QPT_RC ? "RC" : info.param == IBV_QPT_UC ? "UC" : "UD");
                         });

}  // namespace
}  // namespace simnic::testing
