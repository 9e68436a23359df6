// Two simulated NICs with one QP each (RC by default, or UC/UD) on the in-memory fabric,
// driven by hand: the shared fixture of the RC semantics, memory-window, UC/UD and protocol
// tests. Posting writes WQEs the way the shim does (minus its validation); packets move one at a
// time where the order matters. Protocol tests hand the Device packets built by hand (inject,
// packet_bytes) and read what it put on the wire (sent_by, parse, queued_opcodes).
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fabric.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/packet.h"

namespace simnic::testing {

constexpr uint32_t kIpA = 0x7f000001, kIpB = 0x7f000002;
constexpr pid_t kPidA = 2001, kPidB = 2002;
constexpr uint64_t kUs = 1'000;  // simulated time is in ns
constexpr uint64_t kMs = 1'000'000;

// `h` and `payload` as the bytes of a packet with a valid ICRC for the addresses and ports it
// travels with, as a peer (or a forger) would send it; empty when the opcode has no layout.
inline std::vector<uint8_t> packet_bytes(const proto::PacketHeaders& h, std::span<const uint8_t> payload,
                                         const proto::IpUdpInfo& ip) {
  std::vector<uint8_t> out(proto::packet_size(h.bth.opcode, payload.size()) + 64);
  out.resize(proto::build_packet(h, payload, ip, out));
  return out;
}

// A trace sink that keeps every line, for tests that count events.
struct TraceLines : core::TraceSink {
  void write_line(const std::string& line) override { lines.push_back(line); }
  // The lines that contain `needle`.
  int count(const std::string& needle) const {
    int n = 0;
    for (auto& l : lines) n += l.find(needle) != std::string::npos;
    return n;
  }
  std::vector<std::string> lines;
};

struct HostOptions {
  bool sq_sig_all = false;
  uint32_t max_send_wr = 64;
  ibv_qp_type type = IBV_QPT_RC;
  bool infiniband = false;  // IB link layer: host A has LID 1, host B LID 2
  core::GidTableKind gid_table = core::GidTableKind::kSimple;
};

constexpr uint32_t kQkey = 0x11111111;  // the UD QPs' Q_Key

// How the two QPs are connected (RC and UC).
struct LinkOptions {
  uint32_t psn = 0;  // both directions start here
  uint8_t retry = 7;
  uint8_t rnr_retry = 7;
  ibv_mtu mtu = IBV_MTU_1024;
  uint8_t traffic_class = 0;  // the path's GRH traffic class (the packets' IPv4 TOS)
  bool rtr_only = false;      // connect_one stops at RTR (a QP that only receives)
};

struct Host {
  Host(uint32_t ip, pid_t pid, FakeMemory& mem, Fabric& fabric, HostOptions o)
      : pid(pid), port(fabric, ip), dev(config(ip, o), mem, port, shm, notifier, logger) {
    fabric.attach(ip, &dev);
    ctx = dev.context_verbs().open_context(pid, 0, -1, /*async_fd=*/40 + pid);
    EXPECT_EQ(dev.memory_verbs().alloc_pd(ctx, &pd), 0);
    EXPECT_EQ(dev.memory_verbs().reg_mr(ctx, pd, mem.addr(pid, 0), 1 << 20, mem.addr(pid, 0),
                                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                            IBV_ACCESS_REMOTE_ATOMIC,
                                        &mr),
              0);
    EXPECT_EQ(dev.queue_verbs().create_channel(ctx, channel_fd(), &channel), 0);
    EXPECT_EQ(dev.queue_verbs().create_cq(ctx, 256, channel, &cq), 0);
    ibv_qp_init_attr init{};
    init.qp_type = o.type;
    init.sq_sig_all = o.sq_sig_all;
    init.cap.max_send_wr = o.max_send_wr;
    init.cap.max_recv_wr = 64;
    init.cap.max_send_sge = 4;
    init.cap.max_recv_sge = 4;
    EXPECT_EQ(dev.queue_verbs().create_qp(ctx, init, pd, cq->handle, cq->handle, 0, &qp), 0);
  }
  static core::DeviceConfig config(uint32_t ip, const HostOptions& o = {}) {
    core::DeviceConfig c;
    c.ipv4 = ip;
    c.name = ip == kIpA ? "simnicA" : "simnicB";
    c.key_seed = ip;  // reproducible keys and QPNs, so a failing run can be replayed
    c.infiniband = o.infiniband;
    c.lid = o.infiniband ? (ip == kIpA ? 1 : 2) : 0;
    c.sm_lid = o.infiniband ? 1 : 0;
    c.gid_table = o.gid_table;
    return c;
  }
  int channel_fd() const { return 30 + pid; }  // any number: RecordingNotifier only records it
  // ibv_req_notify_cq(cq, solicited_only), as the shim does it.
  void arm(bool solicited_only) { cq->shm->arm.store(solicited_only ? abi::kCqArmSolicited : abi::kCqArmNext); }
  ibv_qp_attr query() {
    ibv_qp_attr at{};
    core::Qp* q = nullptr;
    EXPECT_EQ(dev.queue_verbs().query_qp(ctx, qp->handle, &at, &q), 0);
    return at;
  }
  int modify_state(ibv_qp_state s, int extra_mask = 0, uint8_t sqd_notify = 0, uint64_t now = 0) {
    ibv_qp_attr at{};
    at.qp_state = s;
    at.en_sqd_async_notify = sqd_notify;
    return dev.queue_verbs().modify_qp(ctx, qp->handle, at, IBV_QP_STATE | extra_mask, now);
  }

  pid_t pid;
  HeapShm shm;
  RecordingNotifier notifier;
  CapturingLogger logger;
  Fabric::Port port;
  core::Device dev;
  core::Context* ctx = nullptr;
  uint32_t pd = 0, channel = 0;
  core::Mr* mr = nullptr;
  core::Cq* cq = nullptr;
  core::Qp* qp = nullptr;
};

class QpPair : public ::testing::Test {
 protected:
  void start(HostOptions o = {}, LinkOptions l = {}) {
    make_hosts(o);
    connect_both(l);
  }
  void make_hosts(HostOptions o = {}) {
    a = std::make_unique<Host>(kIpA, kPidA, mem, fabric, o);
    b = std::make_unique<Host>(kIpB, kPidB, mem, fabric, o);
  }
  void connect_both(LinkOptions l = {}) {
    connect_one(*a, *b, l);
    connect_one(*b, *a, l);
  }
  void connect_one(Host& h, Host& peer, const LinkOptions& l) {
    if (h.qp->type == IBV_QPT_UD) return connect_ud(h);
    const bool rc = h.qp->type == IBV_QPT_RC;
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qp_access_flags = rc ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC
                            : IBV_ACCESS_REMOTE_WRITE;
    ASSERT_EQ(h.dev.queue_verbs().modify_qp(h.ctx, h.qp->handle, at,
                                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, now),
              0);
    at = {};
    at.qp_state = IBV_QPS_RTR;
    at.path_mtu = l.mtu;
    at.dest_qp_num = peer.qp->qpn;
    at.rq_psn = l.psn;
    at.max_dest_rd_atomic = 4;
    at.min_rnr_timer = 1;
    at.ah_attr.is_global = 1;
    at.ah_attr.grh.dgid = peer.dev.addressing().gid0();
    at.ah_attr.grh.traffic_class = l.traffic_class;
    at.ah_attr.port_num = 1;
    int rc_only = rc ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0;
    ASSERT_EQ(h.dev.queue_verbs().modify_qp(h.ctx, h.qp->handle, at,
                                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                                IBV_QP_RQ_PSN | rc_only,
                                            now),
              0);
    if (l.rtr_only) return;
    at = {};
    at.qp_state = IBV_QPS_RTS;
    at.sq_psn = l.psn;
    at.timeout = 14;
    at.retry_cnt = l.retry;
    at.rnr_retry = l.rnr_retry;
    at.max_rd_atomic = 4;
    rc_only = rc ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC : 0;
    ASSERT_EQ(h.dev.queue_verbs().modify_qp(h.ctx, h.qp->handle, at, IBV_QP_STATE | IBV_QP_SQ_PSN | rc_only, now), 0);
  }
  void connect_ud(Host& h) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qkey = kQkey;
    ASSERT_EQ(h.dev.queue_verbs().modify_qp(h.ctx, h.qp->handle, at,
                                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, now),
              0);
    at = {};
    at.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(h.dev.queue_verbs().modify_qp(h.ctx, h.qp->handle, at, IBV_QP_STATE, now), 0);
    at.qp_state = IBV_QPS_RTS;
    ASSERT_EQ(h.dev.queue_verbs().modify_qp(h.ctx, h.qp->handle, at, IBV_QP_STATE | IBV_QP_SQ_PSN, now), 0);
  }

  // The shim's post_send and post_recv, minus validation.
  void post_send(Host& h, abi::SendWqe w) { post_sends(h, {w}); }
  // One ibv_post_send with a chain of WRs: one doorbell for all of them.
  void post_sends(Host& h, const std::vector<abi::SendWqe>& ws) {
    auto& ring = h.qp->shm->sq;
    uint32_t p = ring.producer.value.load();
    for (const abi::SendWqe& w : ws) h.qp->sq[p++ & (h.qp->sq_entries - 1)] = w;
    ring.producer.value.store(p);
    h.dev.on_doorbell(h.ctx, now);
  }
  void post_recv(Host& h, uint64_t wr_id, size_t off, uint32_t len) {
    post_recv_sge(h, wr_id, {mem.addr(h.pid, off), len, h.mr->lkey});
  }
  // A receive WQE with one SGE of the caller's choosing (any address, length and lkey).
  void post_recv_sge(Host& h, uint64_t wr_id, ibv_sge sge) {
    auto& ring = h.qp->shm->rq;
    uint32_t p = ring.producer.value.load();
    abi::RecvWqe& w = h.qp->rq[p & (h.qp->rq_entries - 1)];
    w = {};
    w.wr_id = wr_id;
    w.num_sge = 1;
    w.sge[0] = sge;
    ring.producer.value.store(p + 1);
    h.dev.on_doorbell(h.ctx, now);
  }
  abi::SendWqe wqe(Host& h, ibv_wr_opcode op, uint64_t wr_id, size_t off, uint32_t len,
                   uint32_t flags = IBV_SEND_SIGNALED) {
    abi::SendWqe w{};
    w.wr_id = wr_id;
    w.opcode = op;
    w.send_flags = flags;
    w.num_sge = 1;
    w.sge[0] = {mem.addr(h.pid, off), len, h.mr->lkey};
    return w;
  }
  // A UD SEND of [off, off+len) of `h`'s memory through address handle `ah` to `peer`'s QP.
  abi::SendWqe ud_wqe(Host& h, uint32_t ah, const Host& peer, uint64_t wr_id, size_t off, uint32_t len,
                      uint32_t qkey = kQkey) {
    abi::SendWqe w = wqe(h, IBV_WR_SEND, wr_id, off, len);
    w.ah = ah;
    w.remote_qpn = peer.qp->qpn;
    w.remote_qkey = qkey;
    return w;
  }
  // Memory windows: an extra MR over [off, off+len) of `h`'s memory, a window of its PD, and
  // the BIND_MW / LOCAL_INV work requests (the key byte advanced as ibv_inc_rkey would).
  core::Mr* reg_mr(Host& h, size_t off, uint32_t len, uint32_t access) {
    core::Mr* mr = nullptr;
    EXPECT_EQ(h.dev.memory_verbs().reg_mr(h.ctx, h.pd, mem.addr(h.pid, off), len, mem.addr(h.pid, off), access, &mr),
              0);
    return mr;
  }
  core::Mw* alloc_mw(Host& h, ibv_mw_type type) {
    core::Mw* mw = nullptr;
    EXPECT_EQ(h.dev.memory_verbs().alloc_mw(h.ctx, h.pd, type, &mw), 0);
    return mw;
  }
  abi::SendWqe bind_wqe(Host& h, const core::Mw* mw, const core::Mr* mr, size_t off, uint64_t len, uint32_t access,
                        uint64_t wr_id, uint32_t flags = IBV_SEND_SIGNALED) {
    abi::SendWqe w{};
    w.wr_id = wr_id;
    w.opcode = IBV_WR_BIND_MW;
    w.send_flags = flags;
    w.bind_mw = mw->handle;
    w.imm_data = mw->rkey;  // the window's current rkey, as the shim passes ibv_mw.rkey
    w.rkey = ibv_inc_rkey(mw->rkey);
    w.bind_lkey = mr ? mr->lkey : 0;
    w.remote_addr = mem.addr(h.pid, off);
    w.bind_length = len;
    w.bind_access = access;
    return w;
  }
  static abi::SendWqe local_inv_wqe(uint32_t rkey, uint64_t wr_id) {
    abi::SendWqe w{};
    w.wr_id = wr_id;
    w.opcode = IBV_WR_LOCAL_INV;
    w.send_flags = IBV_SEND_SIGNALED;
    w.imm_data = rkey;  // invalidate_rkey
    return w;
  }
  // An RDMA WRITE/READ/atomic aimed at `off` in the peer's MR.
  abi::SendWqe rdma(Host& h, Host& peer, ibv_wr_opcode op, uint64_t wr_id, size_t off, uint32_t len, size_t remote_off,
                    uint32_t flags = IBV_SEND_SIGNALED) {
    abi::SendWqe w = wqe(h, op, wr_id, off, len, flags);
    w.remote_addr = mem.addr(peer.pid, remote_off);
    w.rkey = peer.mr->rkey;
    return w;
  }
  std::vector<ibv_wc> poll(Host& h) {
    std::vector<ibv_wc> out;
    auto& ring = h.cq->shm->ring;
    uint32_t c = ring.consumer.value.load(), p = ring.producer.value.load();
    for (; c != p; ++c) out.push_back(h.cq->slots[c & (h.cq->entries - 1)]);
    ring.consumer.value.store(c);
    return out;
  }
  void fill(Host& h, size_t off, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; ++i) mem.ptr(h.pid, off)[i] = uint8_t(seed + i * 7 + (i >> 8));
  }
  bool same(Host& x, size_t xoff, Host& y, size_t yoff, size_t n) {
    return std::memcmp(mem.ptr(x.pid, xoff), mem.ptr(y.pid, yoff), n) == 0;
  }
  // Signaled 64-byte WRITEs k in [first, first + n) from A to B: A's bytes at k * 64 (filled
  // with seed k + 1) to B's at 8192 + k * 64, wr_id 100 + k.
  std::vector<abi::SendWqe> small_writes(size_t first, size_t n) {
    std::vector<abi::SendWqe> ws;
    for (size_t k = first; k < first + n; ++k) {
      fill(*a, k * 64, 64, uint8_t(k + 1));
      ws.push_back(rdma(*a, *b, IBV_WR_RDMA_WRITE, 100 + k, k * 64, 64, 8192 + k * 64));
    }
    return ws;
  }
  // `wcs` are the completions of small_writes(0, n), in order, all successful.
  void expect_in_order_success(const std::vector<ibv_wc>& wcs, size_t n) {
    ASSERT_EQ(wcs.size(), n);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(wcs[i].wr_id, 100 + i);
      EXPECT_EQ(wcs[i].status, IBV_WC_SUCCESS) << "WRITE " << i;
    }
  }
  static proto::ParsedPacket parse(const WirePacket& p) {
    proto::ParsedPacket pkt;
    EXPECT_EQ(proto::parse_packet(p.bytes, proto::IpUdpInfo{p.src_ip, p.dst_ip, 4791, 4791}, pkt),
              proto::ParseError::kOk);
    return pkt;
  }
  // The BTH opcodes waiting on the wire from `src_ip`, oldest first.
  std::vector<uint8_t> queued_opcodes(uint32_t src_ip) {
    std::vector<uint8_t> out;
    for (const WirePacket& p : fabric.queue)
      if (p.src_ip == src_ip) out.push_back(parse(p).h.bth.opcode);
    return out;
  }
  bool queued(uint32_t src_ip, uint8_t opcode) {
    for (uint8_t op : queued_opcodes(src_ip))
      if (op == opcode) return true;
    return false;
  }
  // Hand-built packets in: `h` handed to `to` as if `from` had sent it, then the engines finish
  // their turn.
  void inject(Host& from, Host& to, const proto::PacketHeaders& h, std::span<const uint8_t> payload = {}) {
    const uint32_t src = from.dev.config().ipv4, dst = to.dev.config().ipv4;
    const std::vector<uint8_t> bytes = packet_bytes(h, payload, proto::IpUdpInfo{src, dst, 4791, 4791});
    ASSERT_EQ(bytes.size(), proto::packet_size(h.bth.opcode, payload.size()));
    to.dev.on_packet(src, 4791, bytes, now);
    run_pending();
  }
  // Captured packets out: everything `h` has put on the wire since the last call, taken off it
  // and parsed (their bytes, which the parsed payloads point into, kept in sent_).
  std::vector<proto::ParsedPacket> sent_by(Host& h) {
    std::vector<proto::ParsedPacket> out;
    for (auto it = fabric.queue.begin(); it != fabric.queue.end();) {
      if (it->src_ip != h.dev.config().ipv4) {
        ++it;
        continue;
      }
      sent_.push_back(std::move(*it));
      out.push_back(parse(sent_.back()));
      it = fabric.queue.erase(it);
    }
    return out;
  }
  // Delivers the oldest packet on the wire and lets the engines finish their turn.
  void deliver_one() {
    ASSERT_FALSE(fabric.queue.empty());
    WirePacket p = std::move(fabric.queue.front());
    fabric.queue.pop_front();
    fabric.devices.at(p.dst_ip)->on_packet(p.src_ip, 4791, p.bytes, now, 0, p.tos);
    run_pending();
  }
  void run_pending() { fabric.after_events(now); }
  // The NIC counter `name` of `h` (`simnic status`'s names), 0 if there is none.
  static uint64_t counter(Host& h, const std::string& name) {
    uint64_t v = 0;
    h.dev.counters().for_each([&](const char* n, uint64_t x) {
      if (name == n) v = x;
    });
    return v;
  }
  static std::vector<uint64_t> wr_ids(const std::vector<ibv_wc>& wcs) {
    std::vector<uint64_t> out;
    for (auto& wc : wcs) out.push_back(wc.wr_id);
    return out;
  }

  FakeMemory mem;
  Fabric fabric;
  uint64_t now = 1000 * kMs;
  std::unique_ptr<Host> a, b;
  std::deque<WirePacket> sent_;  // packets sent_by took off the wire
};

}  // namespace simnic::testing
