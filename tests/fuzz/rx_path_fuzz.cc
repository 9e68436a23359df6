// libFuzzer target: the whole receive path of one simulated NIC against live QPs and MRs.
//
// Each input builds a fresh NIC (in-memory fakes, as the unit tests use) with a connected RC
// and UC QP and a UD QP, receive WQEs posted, send WQEs of every opcode in flight, and MRs
// with different rights; then it plays the input as a script of events: mostly well-framed
// datagrams whose opcode, PSN, keys, addresses and lengths the input chooses (with a valid
// ICRC), some raw garbage, timer ticks, new posts, and the things a hostile application can do
// (rewrite a posted WQE in its ring, deregister an MR in use, move a QP to ERR).
//
// The invariant, checked by CheckedMemory on every DMA write: the NIC writes only into the one
// MR the posted WQEs point to and remote peers may write to. Every other byte (an MR without
// write rights, an MR of another process, an MR deregistered during the input, the gaps between
// MRs) is never written. Sanitizers catch the rest.
#include <fuzzer/FuzzedDataProvider.h>

#include <vector>

#include "checked_memory.h"
#include "simnic/core/device.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/packet.h"
#include "tests/unit/core/fabric.h"

namespace simnic::fuzz {
namespace {

using core::Mr;
using core::Qp;
using proto::OpcodeInfo;

constexpr uint32_t kIpPeer = 0x7f000001, kIpNic = 0x7f000002, kIpStranger = 0x7f000003;
constexpr pid_t kPid = 3001, kOtherPid = 3002;  // the QPs' process, and another one
constexpr uint32_t kQkey = 0x11111111;
constexpr uint32_t kPeerQpn[3] = {0x100, 0x101, 0x102};  // RC, UC, UD peers
constexpr uint64_t kMs = 1'000'000;

// Where the MRs sit in each process's space (offsets from CheckedMemory::kBase).
constexpr size_t kDataOff = 0, kDataLen = 16384;             // full rights; every WQE points here
constexpr size_t kReadOnlyOff = 20480, kReadOnlyLen = 4096;  // REMOTE_READ only
constexpr size_t kLocalOff = 28672, kLocalLen = 4096;        // LOCAL_WRITE only: no WQE is posted with it
constexpr size_t kDoomedOff = 40960, kDoomedLen = 8192;      // full rights, deregistered by an action

ibv_gid gid_of(uint32_t ip) {
  ibv_gid g{};
  g.raw[10] = g.raw[11] = 0xff;
  g.raw[12] = uint8_t(ip >> 24), g.raw[13] = uint8_t(ip >> 16), g.raw[14] = uint8_t(ip >> 8), g.raw[15] = uint8_t(ip);
  return g;
}

// The opcodes a transport's QPs can receive, computed once from the opcode table.
const std::vector<uint8_t>& opcodes_of(uint32_t transport_mask) {
  static std::map<uint32_t, std::vector<uint8_t>> cache;
  auto& v = cache[transport_mask];
  if (v.empty())
    for (int op = 0; op < 256; ++op)
      if ((proto::opcode_info(uint8_t(op)).mask & (proto::kIsValid | transport_mask)) ==
          (proto::kIsValid | transport_mask))
        v.push_back(uint8_t(op));
  return v;
}

class World {
 public:
  World() : dev_(config(), mem_, wire_, shm_, notifier_, logger_) {
    ctx_ = dev_.context_verbs().open_context(kPid, 0, -1, -1);
    other_ = dev_.context_verbs().open_context(kOtherPid, 0, -1, -1);
    dev_.memory_verbs().alloc_pd(ctx_, &pd_);
    dev_.memory_verbs().alloc_pd(other_, &other_pd_);
    const uint32_t all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                         IBV_ACCESS_REMOTE_ATOMIC;
    data_ = reg(ctx_, pd_, kPid, kDataOff, kDataLen, all);
    reg(ctx_, pd_, kPid, kReadOnlyOff, kReadOnlyLen, IBV_ACCESS_REMOTE_READ);
    Mr* local = reg(ctx_, pd_, kPid, kLocalOff, kLocalLen, IBV_ACCESS_LOCAL_WRITE);
    doomed_ = reg(ctx_, pd_, kPid, kDoomedOff, kDoomedLen, all);
    reg(other_, other_pd_, kOtherPid, kDataOff, kDataLen, all);  // another process's full-rights MR
    mem_.allow_writes(kPid, data_->addr, data_->length);
    mem_.allow_writes(kPid, doomed_->addr, doomed_->length);
    // A receive WQE the program rewrites before the NIC fetched it is a new receive, and one
    // naming this MR's lkey may be scattered into (local write is all a receive needs): so
    // with ring rewrites on, only the peers' writes must stay out of it, which the responder's
    // rkey checks (and the unit tests) cover. Found by this fuzzer: a UD receive's GRH landed here.
    if (ring_rewrites()) mem_.allow_writes(kPid, local->addr, local->length);
    core::Cq* cq = nullptr;
    dev_.queue_verbs().create_cq(ctx_, 1024, 0, &cq);
    cq_ = cq ? cq->handle : 0;
    const ibv_qp_type types[3] = {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD};
    for (int i = 0; i < 3; ++i) qps_[i] = make_qp(types[i], kPeerQpn[i]);
    prime();
  }

  // Plays the rest of the input as events.
  void play(FuzzedDataProvider& in) {
    for (int steps = 0; in.remaining_bytes() > 0 && steps < 32; ++steps) {
      switch (in.ConsumeIntegralInRange(0, 9)) {
        case 0:
        case 1:
        case 2:
        case 3:
        case 4:
        case 5: deliver(in, framed_packet(in)); break;
        case 6: deliver(in, in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange(0, 600))); break;
        case 7:
          now_ += in.ConsumeIntegralInRange<uint64_t>(0, 4000) * kMs;
          dev_.on_timer(now_);
          break;
        case 8: post(in); break;
        case 9: hostile_action(in); break;
      }
      settle();
    }
  }

 private:
  static core::DeviceConfig config() {
    core::DeviceConfig c;
    c.ipv4 = kIpNic;
    c.name = "fuzz";
    return c;
  }
  Mr* reg(core::Context* ctx, uint32_t pd, pid_t pid, size_t off, size_t len, uint32_t access) {
    Mr* mr = nullptr;
    uint64_t a = mem_.addr(pid, off);
    if (dev_.memory_verbs().reg_mr(ctx, pd, a, len, a, access, &mr) != 0) std::abort();  // the set-up must work
    keys_.push_back(mr->rkey);
    keys_.push_back(mr->lkey);
    ranges_.push_back({mr->iova, mr->length});  // copied: an MR may be deregistered mid-input
    return mr;
  }
  Qp* make_qp(ibv_qp_type type, uint32_t peer_qpn) {
    ibv_qp_init_attr init{};
    init.qp_type = type;
    init.cap.max_send_wr = 32;
    init.cap.max_recv_wr = 32;
    init.cap.max_send_sge = 4;
    init.cap.max_recv_sge = 4;
    Qp* qp = nullptr;
    if (dev_.queue_verbs().create_qp(ctx_, init, pd_, cq_, cq_, 0, &qp) != 0) std::abort();
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qkey = kQkey;
    at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    if (type == IBV_QPT_UC) at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
               (type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
    must(dev_.queue_verbs().modify_qp(ctx_, qp->handle, at, mask, now_));
    at = {};
    at.qp_state = IBV_QPS_RTR;
    mask = IBV_QP_STATE;
    if (type != IBV_QPT_UD) {
      at.path_mtu = IBV_MTU_1024;
      at.dest_qp_num = peer_qpn;
      at.max_dest_rd_atomic = 4;
      at.min_rnr_timer = 1;
      at.ah_attr.is_global = 1;
      at.ah_attr.grh.dgid = gid_of(kIpPeer);
      at.ah_attr.port_num = 1;
      mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
      if (type == IBV_QPT_RC) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    }
    must(dev_.queue_verbs().modify_qp(ctx_, qp->handle, at, mask, now_));
    at = {};
    at.qp_state = IBV_QPS_RTS;
    at.timeout = 14;
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 4;
    mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (type == IBV_QPT_RC) mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    must(dev_.queue_verbs().modify_qp(ctx_, qp->handle, at, mask, now_));
    return qp;
  }
  static void must(int rc) {
    if (rc != 0) std::abort();
  }

  // Receives on every QP, and one WQE of each opcode its transport allows in flight.
  void prime() {
    for (int i = 0; i < 3; ++i)
      for (uint32_t k = 0; k < 6; ++k) post_recv(*qps_[i], k, kDataOff + 2048 * k, 2048, data_->lkey);
    post_recv(*qps_[0], 99, kDoomedOff, 4096, doomed_->lkey);
    Qp& rc = *qps_[0];
    post_send(rc, send_wqe(IBV_WR_SEND, 1, 0, 100));
    post_send(rc, rdma_wqe(IBV_WR_RDMA_WRITE, 2, 0, 3000, 8192));
    post_send(rc, rdma_wqe(IBV_WR_RDMA_READ, 3, 12288, 2500, 0));
    abi::SendWqe doomed_read = rdma_wqe(IBV_WR_RDMA_READ, 4, 0, 3000, 0);
    doomed_read.sge[0] = {doomed_->addr, 3000, doomed_->lkey};
    post_send(rc, doomed_read);
    post_send(rc, rdma_wqe(IBV_WR_ATOMIC_CMP_AND_SWP, 5, 15360, 8, 64));
    post_send(rc, rdma_wqe(IBV_WR_ATOMIC_FETCH_AND_ADD, 6, 15368, 8, 72));
    post_send(rc, send_wqe(IBV_WR_SEND_WITH_IMM, 7, 0, 1500));
    post_send(*qps_[1], send_wqe(IBV_WR_SEND, 8, 0, 1200));
    post_send(*qps_[1], rdma_wqe(IBV_WR_RDMA_WRITE_WITH_IMM, 9, 0, 500, 4096));
    abi::SendWqe ud = send_wqe(IBV_WR_SEND, 10, 0, 256);
    ud.remote_qpn = kPeerQpn[2];
    ud.remote_qkey = kQkey;
    ud.ah = ah();
    post_send(*qps_[2], ud);
    settle();
  }
  uint32_t ah() {
    ibv_ah_attr a{};
    a.is_global = 1;
    a.grh.dgid = gid_of(kIpPeer);
    a.port_num = 1;
    uint32_t h = 0;
    dev_.memory_verbs().create_ah(ctx_, pd_, a, &h);
    return h;
  }
  abi::SendWqe send_wqe(ibv_wr_opcode op, uint64_t id, size_t off, uint32_t len) {
    abi::SendWqe w{};
    w.wr_id = id;
    w.opcode = op;
    w.send_flags = IBV_SEND_SIGNALED;
    w.num_sge = 1;
    w.imm_data = 0x12345678;
    w.sge[0] = {mem_.addr(kPid, off), len, data_->lkey};
    return w;
  }
  // An RDMA or atomic WQE aimed at `remote_off` in the peer's memory (same layout as ours).
  abi::SendWqe rdma_wqe(ibv_wr_opcode op, uint64_t id, size_t off, uint32_t len, size_t remote_off) {
    abi::SendWqe w = send_wqe(op, id, off, len);
    w.remote_addr = CheckedMemory::kBase + remote_off;
    w.rkey = 0x4242;
    w.compare_add = 1;
    w.swap = 2;
    return w;
  }
  void post_send(Qp& qp, const abi::SendWqe& w) {
    auto& ring = qp.shm->sq;
    uint32_t p = ring.producer.value.load();
    qp.sq[p & (qp.sq_entries - 1)] = w;
    ring.producer.value.store(p + 1);
    dev_.on_doorbell(ctx_, now_);
  }
  void post_recv(Qp& qp, uint64_t id, size_t off, uint32_t len, uint32_t lkey) {
    auto& ring = qp.shm->rq;
    uint32_t p = ring.producer.value.load();
    abi::RecvWqe& w = qp.rq[p & (qp.rq_entries - 1)];
    w = {};
    w.wr_id = id;
    w.num_sge = 1;
    w.sge[0] = {mem_.addr(kPid, off), len, lkey};
    ring.producer.value.store(p + 1);
    dev_.on_doorbell(ctx_, now_);
  }

  // An rkey the input picks: one of the real keys (ours, read-only, another process's...) or raw.
  uint32_t pick_key(FuzzedDataProvider& in) {
    size_t i = in.ConsumeIntegralInRange<size_t>(0, keys_.size());
    return i < keys_.size() ? keys_[i] : in.ConsumeIntegral<uint32_t>();
  }
  // An address near one of the MRs, or raw.
  uint64_t pick_va(FuzzedDataProvider& in) {
    size_t i = in.ConsumeIntegralInRange<size_t>(0, ranges_.size());
    if (i == ranges_.size()) return in.ConsumeIntegral<uint64_t>();
    return ranges_[i].first + in.ConsumeIntegralInRange<int64_t>(-64, int64_t(ranges_[i].second) + 64);
  }

  // A datagram with valid headers and ICRC for one of the QPs, fields chosen by the input.
  std::vector<uint8_t> framed_packet(FuzzedDataProvider& in) {
    const int which = in.ConsumeIntegralInRange(0, 2);
    Qp& qp = *qps_[which];
    const uint32_t transport = which == 0 ? proto::kIsRc : which == 1 ? proto::kIsUc : proto::kIsUd;
    const auto& ops = opcodes_of(transport);
    proto::PacketHeaders h;
    h.bth.opcode = ops[in.ConsumeIntegralInRange<size_t>(0, ops.size() - 1)];
    const uint32_t mask = proto::opcode_info(h.bth.opcode).mask;
    const uint8_t flags = in.ConsumeIntegral<uint8_t>();
    h.bth.solicited = flags & 1;
    h.bth.ack_req = flags & 2;
    h.bth.migreq = flags & 4;
    h.bth.becn = flags & 8;
    h.bth.dest_qp = (flags & 16) ? in.ConsumeIntegral<uint32_t>() & 0xffffff : qp.qpn;
    h.bth.pkey = (flags & 32) ? in.ConsumeIntegral<uint16_t>() : 0xffff;
    const uint32_t base = (mask & proto::kIsResponse) ? qp.comp.una_psn : qp.resp.epsn;
    h.bth.psn = (base + uint32_t(in.ConsumeIntegralInRange<int32_t>(-40, 40))) & 0xffffff;
    h.reth = {pick_va(in), pick_key(in), in.ConsumeIntegralInRange<uint32_t>(0, 20000)};
    h.atomic = {pick_va(in), pick_key(in), in.ConsumeIntegral<uint64_t>(), in.ConsumeIntegral<uint64_t>()};
    h.aeth = {in.ConsumeIntegral<uint8_t>(),
              (qp.req.msn_started + uint32_t(in.ConsumeIntegralInRange<int32_t>(-4, 8))) & 0xffffff};
    h.atomic_ack.orig = in.ConsumeIntegral<uint64_t>();
    h.deth = {(flags & 64) ? in.ConsumeIntegral<uint32_t>() : kQkey, in.ConsumeIntegral<uint32_t>() & 0xffffff};
    h.imm_be = in.ConsumeIntegral<uint32_t>();
    h.ieth_rkey = pick_key(in);
    std::vector<uint8_t> payload;
    if (mask & proto::kHasPayload) {
      payload = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 1100));
      if (flags & 128) payload.resize(in.ConsumeIntegralInRange<size_t>(0, 4200), 0x5a);
    }
    const uint32_t src = (flags & 128) && (flags & 16) ? kIpStranger : kIpPeer;
    std::vector<uint8_t> out(proto::packet_size(h.bth.opcode, payload.size()));
    size_t n = proto::build_packet(h, payload, {src, kIpNic, 4791, 4791}, out);
    out.resize(n);
    out.insert(out.begin(), uint8_t(src == kIpStranger));  // deliver() strips this source tag
    return out;
  }
  void deliver(FuzzedDataProvider&, std::vector<uint8_t> tagged) {
    if (tagged.empty()) return;
    const uint32_t src = tagged[0] ? kIpStranger : kIpPeer;
    dev_.on_packet(src, 4791, std::span<const uint8_t>(tagged).subspan(1), now_);
  }

  // A new WQE the application posts: a receive, or a send of any opcode.
  void post(FuzzedDataProvider& in) {
    const int which = in.ConsumeIntegralInRange(0, 2);
    Qp& qp = *qps_[which];
    const size_t off = in.ConsumeIntegralInRange<size_t>(0, kDataLen - 1);
    const uint32_t len = in.ConsumeIntegralInRange<uint32_t>(0, uint32_t(kDataLen - off));
    if (in.ConsumeBool()) return post_recv(qp, 100, off, len, data_->lkey);
    static constexpr ibv_wr_opcode kOps[] = {
        IBV_WR_SEND,      IBV_WR_SEND_WITH_IMM,      IBV_WR_RDMA_WRITE,          IBV_WR_RDMA_WRITE_WITH_IMM,
        IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD};
    ibv_wr_opcode op = kOps[in.ConsumeIntegralInRange<size_t>(0, std::size(kOps) - 1)];
    const bool atomic = op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
    abi::SendWqe w = rdma_wqe(op, 101, atomic ? off & ~size_t(7) : off, atomic ? 8 : len,
                              in.ConsumeIntegralInRange<size_t>(0, kDataLen));
    w.remote_qpn = kPeerQpn[2];
    w.remote_qkey = kQkey;
    if (which == 2) w.ah = ah();
    post_send(qp, w);
  }

  // What a hostile or careless application does to its own resources while traffic flows.
  void hostile_action(FuzzedDataProvider& in) {
    Qp& qp = *qps_[in.ConsumeIntegralInRange(0, 2)];
    int action = in.ConsumeIntegralInRange(0, 3);
    if (action <= 1 && !ring_rewrites()) action = 2 + action;
    switch (action) {
      case 0: {  // rewrite a send WQE after posting it (issue 12: the NIC must not re-read it)
        abi::SendWqe& w = qp.sq[in.ConsumeIntegralInRange<uint32_t>(0, qp.sq_entries - 1)];
        w.num_sge = in.ConsumeBool() ? in.ConsumeIntegral<uint32_t>() : in.ConsumeIntegralInRange(0, 4);
        w.sge[0] = {pick_va(in), in.ConsumeIntegral<uint32_t>() % 8192, pick_key(in)};
        w.opcode = in.ConsumeBool() ? w.opcode : in.ConsumeIntegralInRange(0, 12);
        break;
      }
      case 1: {  // rewrite a receive WQE after posting it
        abi::RecvWqe& w = qp.rq[in.ConsumeIntegralInRange<uint32_t>(0, qp.rq_entries - 1)];
        w.num_sge = in.ConsumeBool() ? in.ConsumeIntegral<uint32_t>() : in.ConsumeIntegralInRange(0, 4);
        w.sge[0] = {pick_va(in), in.ConsumeIntegral<uint32_t>() % 8192, pick_key(in)};
        break;
      }
      case 2:  // deregister the MR a receive and a READ point into; nothing may land there after
        if (doomed_) {
          mem_.forbid_writes(kPid, doomed_->addr);
          dev_.memory_verbs().dereg_mr(ctx_, doomed_->handle);
          doomed_ = nullptr;
        }
        break;
      case 3: {
        ibv_qp_attr at{};
        at.qp_state = IBV_QPS_ERR;
        dev_.queue_verbs().modify_qp(ctx_, qp.handle, at, IBV_QP_STATE, now_);
        break;
      }
    }
    dev_.on_doorbell(ctx_, now_);
  }

  // SIMNIC_FUZZ_NO_RING_REWRITE=1 leaves posted WQEs alone: for fuzzing the rest of the receive
  // path on a NIC that still re-reads WQEs from the ring (issue 12, item 1).
  static bool ring_rewrites() {
    static const bool on = !std::getenv("SIMNIC_FUZZ_NO_RING_REWRITE");
    return on;
  }

  void settle() {
    for (int i = 0; i < 10000 && dev_.has_pending_work(); ++i) dev_.run_pending(now_);
  }

  CheckedMemory mem_;
  testing::HeapShm shm_;
  testing::RecordingNotifier notifier_;
  NullLogger logger_;
  CountingSink wire_;
  core::Device dev_;
  core::Context* ctx_ = nullptr;
  core::Context* other_ = nullptr;
  uint32_t pd_ = 0, other_pd_ = 0, cq_ = 0;
  Mr* data_ = nullptr;
  Mr* doomed_ = nullptr;
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;  // every MR's iova and length
  std::vector<uint32_t> keys_;
  Qp* qps_[3] = {};
  uint64_t now_ = 1000 * kMs;
};

}  // namespace
}  // namespace simnic::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  simnic::fuzz::World world;
  world.play(in);
  return 0;
}
