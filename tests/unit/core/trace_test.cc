// The trace is the contract with the visualizer: a known exchange must produce exactly the
// expected events, in order, from the points where the engines act.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include "fabric.h"
#include "qp_pair.h"  // kIpA, kIpB

namespace simnic::testing {
namespace {

struct RecordingSink : core::TraceSink {
  void write_line(const std::string& line) override { lines.push_back(line); }
  // "nic:kind" for each event, e.g. "A:pkt_tx".
  std::vector<std::string> kinds() const {
    std::vector<std::string> out;
    for (auto& l : lines) {
      auto field = [&](const char* key) {
        std::string k = std::string("\"") + key + "\":\"";
        auto p = l.find(k);
        if (p == std::string::npos) return std::string();
        p += k.size();
        return l.substr(p, l.find('"', p) - p);
      };
      out.push_back(field("nic").substr(6) + ":" + field("kind"));
    }
    return out;
  }
  std::vector<std::string> lines;
};

struct Side {
  Side(uint32_t ip, pid_t pid, FakeMemory& mem, Fabric& fabric, const char* name)
      : pid(pid), port(fabric, ip), dev(config(ip, name), mem, port, shm, notifier, logger) {
    fabric.attach(ip, &dev);
  }
  static core::DeviceConfig config(uint32_t ip, const char* name) {
    core::DeviceConfig c;
    c.ipv4 = ip;
    c.name = name;
    return c;
  }
  pid_t pid;
  HeapShm shm;
  RecordingNotifier notifier;
  CapturingLogger logger;
  Fabric::Port port;
  core::Device dev;
  core::Context* ctx = nullptr;
  core::Mr* mr = nullptr;
  core::Cq* cq = nullptr;
  core::Qp* qp = nullptr;
};

class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a = std::make_unique<Side>(kIpA, 11, mem, fabric, "simnicA");
    b = std::make_unique<Side>(kIpB, 12, mem, fabric, "simnicB");
    a->dev.tracer().set_nic("simnicA");
    b->dev.tracer().set_nic("simnicB");
    a->dev.tracer().set_sink(&sink);
    b->dev.tracer().set_sink(&sink);
    for (Side* s : {a.get(), b.get()}) {
      s->ctx = s->dev.context_verbs().open_context(s->pid, 0, -1, -1);
      uint32_t pd;
      ASSERT_EQ(s->dev.memory_verbs().alloc_pd(s->ctx, &pd), 0);
      ASSERT_EQ(s->dev.memory_verbs().reg_mr(s->ctx, pd, mem.addr(s->pid, 0), 1 << 20, mem.addr(s->pid, 0),
                                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
                                             &s->mr),
                0);
      ASSERT_EQ(s->dev.queue_verbs().create_cq(s->ctx, 16, 0, &s->cq), 0);
      ibv_qp_init_attr init{};
      init.qp_type = IBV_QPT_RC;
      init.cap.max_send_wr = 8;
      init.cap.max_recv_wr = 8;
      ASSERT_EQ(s->dev.queue_verbs().create_qp(s->ctx, init, pd, s->cq->handle, s->cq->handle, 0, &s->qp), 0);
    }
    connect(*a, *b);
    connect(*b, *a);
  }
  void connect(Side& s, Side& peer) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    ASSERT_EQ(s.dev.queue_verbs().modify_qp(s.ctx, s.qp->handle, at,
                                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0),
              0);
    at = {};
    at.qp_state = IBV_QPS_RTR;
    at.path_mtu = IBV_MTU_1024;
    at.dest_qp_num = peer.qp->qpn;
    at.max_dest_rd_atomic = 1;
    at.ah_attr.is_global = 1;
    at.ah_attr.grh.dgid = peer.dev.addressing().gid0();
    ASSERT_EQ(s.dev.queue_verbs().modify_qp(s.ctx, s.qp->handle, at,
                                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                                IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                                            0),
              0);
    at = {};
    at.qp_state = IBV_QPS_RTS;
    at.timeout = 14;
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 1;
    ASSERT_EQ(s.dev.queue_verbs().modify_qp(s.ctx, s.qp->handle, at,
                                            IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                                IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
                                            0),
              0);
  }
  void post_send(Side& s, ibv_wr_opcode op, size_t off, uint32_t len, uint64_t raddr, uint32_t rkey) {
    auto& ring = s.qp->shm->sq;
    uint32_t p = ring.producer.value.load();
    abi::SendWqe& w = s.qp->sq[p & (s.qp->sq_entries - 1)];
    w = {};
    w.wr_id = p;
    w.opcode = op;
    w.send_flags = IBV_SEND_SIGNALED;
    w.num_sge = 1;
    w.sge[0] = {mem.addr(s.pid, off), len, s.mr->lkey};
    w.remote_addr = raddr;
    w.rkey = rkey;
    ring.producer.value.store(p + 1);
    s.dev.on_doorbell(s.ctx, now);
  }
  void post_recv(Side& s, size_t off, uint32_t len) {
    auto& ring = s.qp->shm->rq;
    uint32_t p = ring.producer.value.load();
    abi::RecvWqe& w = s.qp->rq[p & (s.qp->rq_entries - 1)];
    w = {};
    w.wr_id = 100 + p;
    w.num_sge = 1;
    w.sge[0] = {mem.addr(s.pid, off), len, s.mr->lkey};
    ring.producer.value.store(p + 1);
    s.dev.on_doorbell(s.ctx, now);
  }

  FakeMemory mem;
  Fabric fabric;
  RecordingSink sink;
  uint64_t now = 5000;
  std::unique_ptr<Side> a, b;
};

TEST_F(TraceTest, SendWriteReadProduceTheExpectedEvents) {
  sink.lines.clear();
  post_recv(*b, 8192, 4096);
  post_send(*a, IBV_WR_SEND, 0, 100, 0, 0);
  fabric.deliver_all(now);
  post_send(*a, IBV_WR_RDMA_WRITE, 0, 100, mem.addr(12, 65536), b->mr->rkey);
  fabric.deliver_all(now);
  post_send(*a, IBV_WR_RDMA_READ, 4096, 100, mem.addr(12, 65536), b->mr->rkey);
  fabric.deliver_all(now);

  std::vector<std::string> expected = {
      // B posts a receive.
      "B:doorbell",
      "B:wqe_posted",
      // SEND: A posts, reads the payload, sends one packet and arms its ACK timer.
      "A:doorbell",
      "A:wqe_posted",
      "A:dma",
      "A:pkt_tx",
      "A:timer",
      // B receives it into its receive WQE, completes, and ACKs.
      "B:pkt_rx",
      "B:wqe_done",
      "B:dma",
      "B:cqe",
      "B:pkt_tx",
      // A receives the ACK: the CQE is written, the SQ slot freed, the timer stopped.
      "A:pkt_rx",
      "A:cqe",
      "A:wqe_done",
      "A:timer",
      // RDMA WRITE: same shape, but B writes through the rkey and makes no CQE.
      "A:doorbell",
      "A:wqe_posted",
      "A:dma",
      "A:pkt_tx",
      "A:timer",
      "B:pkt_rx",
      "B:dma",
      "B:pkt_tx",
      "A:pkt_rx",
      "A:cqe",
      "A:wqe_done",
      "A:timer",
      // RDMA READ: a request with no payload; B reads and answers; A scatters the response.
      "A:doorbell",
      "A:wqe_posted",
      "A:pkt_tx",
      "A:timer",
      "B:pkt_rx",
      "B:dma",
      "B:pkt_tx",
      "A:pkt_rx",
      "A:dma",
      "A:cqe",
      "A:wqe_done",
      "A:timer",
  };
  EXPECT_EQ(sink.kinds(), expected);

  // Events are numbered per NIC without gaps and carry the fields the visualizer needs.
  int last_a = 0;
  for (auto& l : sink.lines) {
    if (l.find("\"nic\":\"simnicA\"") == std::string::npos) continue;
    int seq = std::stoi(l.substr(7));
    EXPECT_GT(seq, last_a);
    last_a = seq;
  }
  bool saw_read_request = false;
  for (auto& l : sink.lines)
    if (l.find("\"opcode\":\"RC_RDMA_READ_REQUEST\"") != std::string::npos) {
      saw_read_request = true;
      EXPECT_NE(l.find("\"reth\":{\"va\":"), std::string::npos) << l;
      EXPECT_NE(l.find("\"psn\":2"), std::string::npos) << l;
    }
  EXPECT_TRUE(saw_read_request);
}

TEST_F(TraceTest, StateChangesAndErrorsSayWhy) {
  sink.lines.clear();
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(a->dev.queue_verbs().modify_qp(a->ctx, a->qp->handle, at, IBV_QP_STATE, now), 0);
  ASSERT_FALSE(sink.lines.empty());
  const std::string& l = sink.lines.front();
  EXPECT_NE(l.find("\"kind\":\"qp_state\""), std::string::npos) << l;
  EXPECT_NE(l.find("\"from\":\"RTS\",\"to\":\"ERR\""), std::string::npos) << l;
  // A bad rkey at the responder: the error event names the rule.
  sink.lines.clear();
  post_send(*b, IBV_WR_RDMA_WRITE, 0, 10, mem.addr(11, 0), 0xdead00);
  fabric.deliver_all(now);
  bool named = false;
  for (auto& x : sink.lines)
    if (x.find("\"kind\":\"nak\"") != std::string::npos || x.find("\"kind\":\"pkt_drop\"") != std::string::npos)
      named = true;
  EXPECT_TRUE(named);
}

// The QP's attributes as set by ibv_modify_qp travel with each state change, so a viewer shows
// a connected QP as connected before any packet has moved.
TEST_F(TraceTest, StateChangesCarryTheAttributesModifyQpSet) {
  sink.lines.clear();
  ibv_qp_attr at{};
  at.min_rnr_timer = 5;  // one of the attributes RTS->RTS may change (IBA 11.2.4.2)
  ASSERT_EQ(a->dev.queue_verbs().modify_qp(a->ctx, a->qp->handle, at, IBV_QP_MIN_RNR_TIMER, now), 0);
  ASSERT_EQ(sink.lines.size(), 1u);
  const std::string& l = sink.lines.front();
  EXPECT_NE(l.find("\"from\":\"RTS\",\"to\":\"RTS\""), std::string::npos) << l;
  EXPECT_NE(l.find("\"dest_qp\":" + std::to_string(b->qp->qpn) + ","), std::string::npos) << l;
  EXPECT_NE(l.find("\"mtu\":1024,\"dgid\":\"127.0.0.2\""), std::string::npos) << l;
  EXPECT_NE(l.find("\"timeout\":14,\"retry_cnt\":7,\"rnr_retry\":7,\"min_rnr_timer\":5"), std::string::npos) << l;
  EXPECT_NE(l.find("\"access\":\"REMOTE_WRITE|REMOTE_READ\""), std::string::npos) << l;
}

// Without a sink no event is even started: every TraceEvent takes a sequence number when it
// is built, so the NICs' next sequence numbers must not move while the same exchange that
// traces dozens of events with a sink (checked first) runs again without one.
TEST_F(TraceTest, NothingIsBuiltWithoutASink) {
  auto produced = [](Side& s) { return s.cq->shm->ring.producer.value.load(); };
  auto exchange = [&] {
    post_recv(*b, 8192, 4096);
    post_send(*a, IBV_WR_SEND, 0, 100, 0, 0);
    fabric.deliver_all(now);
  };
  sink.lines.clear();
  exchange();
  ASSERT_GE(sink.lines.size(), 10u) << "the exchange must reach the emitters for the second run to mean anything";
  ASSERT_EQ(produced(*a), 1u);
  ASSERT_EQ(produced(*b), 1u);

  a->dev.tracer().set_sink(nullptr);
  b->dev.tracer().set_sink(nullptr);
  sink.lines.clear();
  const uint64_t seq_a = a->dev.tracer().next_seq(), seq_b = b->dev.tracer().next_seq();
  exchange();
  EXPECT_EQ(produced(*a), 2u) << "the second exchange completed too";
  EXPECT_EQ(produced(*b), 2u);
  EXPECT_EQ(a->dev.tracer().next_seq(), seq_a) << "an event was built on A without a sink";
  EXPECT_EQ(b->dev.tracer().next_seq(), seq_b) << "an event was built on B without a sink";
  EXPECT_TRUE(sink.lines.empty());
}

// A drop is counted, traced and logged by its row of the drop table (drop_reasons.h).
TEST_F(TraceTest, ADropIsCountedTracedAndLoggedByItsRow) {
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(b->dev.queue_verbs().modify_qp(b->ctx, b->qp->handle, at, IBV_QP_STATE, now), 0);
  sink.lines.clear();
  post_send(*a, IBV_WR_SEND, 0, 100, 0, 0);
  fabric.deliver_all(now);
  std::string drop;
  for (auto& l : sink.lines)
    if (l.find("\"nic\":\"simnicB\"") != std::string::npos && l.find("\"kind\":\"pkt_drop\"") != std::string::npos)
      drop = l;
  ASSERT_FALSE(drop.empty()) << "B, in ERR, drops A's SEND";
  EXPECT_NE(drop.find("\"drop\":\"request_state\""), std::string::npos) << drop;
  EXPECT_NE(drop.find("\"reason\":\"QP cannot receive in this state\""), std::string::npos) << drop;
  EXPECT_NE(drop.find("\"counter\":\"rx_drop_qp_state\""), std::string::npos) << drop;
  EXPECT_NE(drop.find("\"rule\":\"IBA 10.3.1"), std::string::npos) << drop;
  EXPECT_NE(drop.find("\"qp\":" + std::to_string(b->qp->qpn)), std::string::npos) << drop;
  EXPECT_NE(drop.find("\"detail\":\"QP 0x"), std::string::npos) << drop;
  EXPECT_NE(drop.find("it is in ERR"), std::string::npos) << drop;
  EXPECT_EQ(b->dev.counters().rx_drop_qp_state, 1u);
  EXPECT_TRUE(b->logger.contains("dropped a request: it is in ERR"));
}

// Packet events carry what the opcode is, from the opcode table: a viewer classifies by it.
TEST_F(TraceTest, PacketEventsCarryTheOpcodeTablesFlags) {
  sink.lines.clear();
  post_recv(*b, 8192, 4096);
  post_send(*a, IBV_WR_SEND, 0, 100, 0, 0);
  fabric.deliver_all(now);
  int sends = 0, acks = 0;
  for (auto& l : sink.lines) {
    if (l.find("\"opcode\":\"RC_SEND_ONLY\"") != std::string::npos) {
      ++sends;
      EXPECT_NE(l.find("\"op_flags\":\"REQUEST|FIRST|LAST|SEND|RC\""), std::string::npos) << l;
    }
    if (l.find("\"opcode\":\"RC_ACKNOWLEDGE\"") != std::string::npos) {
      ++acks;
      EXPECT_NE(l.find("\"op_flags\":\"RESPONSE|FIRST|LAST|ACK|RC\""), std::string::npos) << l;
    }
  }
  EXPECT_EQ(sends, 2) << "A's pkt_tx and B's pkt_rx";
  EXPECT_EQ(acks, 2);
}

// With engine steps asked for, each packet's walk through the responder or completer is one
// event naming its steps; without, none (TraceTest.SendWriteReadProduceTheExpectedEvents).
TEST_F(TraceTest, EngineStepsAreTracedWhenAsked) {
  a->dev.tracer().set_engine_steps(true);
  b->dev.tracer().set_engine_steps(true);
  sink.lines.clear();
  post_recv(*b, 8192, 4096);
  post_send(*a, IBV_WR_SEND, 0, 100, 0, 0);
  fabric.deliver_all(now);
  std::vector<std::string> steps;
  for (auto& l : sink.lines)
    if (l.find("\"kind\":\"engine_steps\"") != std::string::npos) steps.push_back(l);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_NE(steps[0].find("\"nic\":\"simnicB\",\"kind\":\"engine_steps\",\"engine\":\"responder\",\"qp\":" +
                          std::to_string(b->qp->qpn) + ",\"psn\":0,\"steps\":\"CHECK_STATE>CHECK_PSN>EXECUTE\""),
            std::string::npos)
      << steps[0];
  EXPECT_NE(steps[1].find("\"engine\":\"completer\""), std::string::npos) << steps[1];
  EXPECT_NE(steps[1].find("\"steps\":\"CHECK_STATE>CHECK_PSN>CHECK_MSN>ACK>RUN_REQUESTER\""), std::string::npos)
      << steps[1];
  EXPECT_EQ(a->cq->shm->ring.producer.value.load(), 1u) << "the SEND completed";
  // Off again: the same exchange traces no step.
  a->dev.tracer().set_engine_steps(false);
  b->dev.tracer().set_engine_steps(false);
  sink.lines.clear();
  post_recv(*b, 8192, 4096);
  post_send(*a, IBV_WR_SEND, 0, 100, 0, 0);
  fabric.deliver_all(now);
  for (auto& l : sink.lines) EXPECT_EQ(l.find("engine_steps"), std::string::npos) << l;
}

}  // namespace
}  // namespace simnic::testing
