// Trace helpers shared by the engines: how packets, WQEs and objects are described in events.
#include <arpa/inet.h>

#include <array>

#include "simnic/abi/wr_opcodes.h"
#include "simnic/core/device.h"
#include "simnic/core/errors.h"
#include "simnic/core/objects/qp_state_table.h"
#include "simnic/core/observe/trace_points.h"
#include "simnic/core/text.h"
#include "simnic/proto/opcode_table.h"

namespace simnic::core {

using namespace simnic::proto;

namespace {

std::string hex_json(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "\"0x%llx\"", static_cast<unsigned long long>(v));
  return b;
}

using BitName = std::pair<uint32_t, const char*>;

// The names of the bits set in `v`, "A|B|C", in the table's order.
template <size_t N>
std::string bit_names(uint32_t v, const BitName (&names)[N]) {
  std::string s;
  for (auto [bit, name] : names)
    if (v & bit) (s += s.empty() ? "" : "|") += name;
  return s;
}

std::string send_flags_string(uint32_t f) {
  static constexpr BitName kNames[] = {{IBV_SEND_SIGNALED, "SIGNALED"},
                                       {IBV_SEND_INLINE, "INLINE"},
                                       {IBV_SEND_FENCE, "FENCE"},
                                       {IBV_SEND_SOLICITED, "SOLICITED"}};
  return bit_names(f, kNames);
}

std::string kinds_of(uint32_t mask) {
  static constexpr BitName kKindBits[] = {{kIsRequest, "REQUEST"},
                                          {kIsResponse, "RESPONSE"},
                                          {kIsFirst, "FIRST"},
                                          {kIsMiddle, "MIDDLE"},
                                          {kIsLast, "LAST"},
                                          {kIsSend, "SEND"},
                                          {kIsWrite, "WRITE"},
                                          {kIsReadReq, "READ_REQ"},
                                          {kIsReadResp, "READ_RESP"},
                                          {kIsAtomic, "ATOMIC"},
                                          {kIsAtomicWrite, "ATOMIC_WRITE"},
                                          {kIsAck, "ACK"},
                                          {kIsRc, "RC"},
                                          {kIsUc, "UC"},
                                          {kIsUd, "UD"},
                                          {kIsXrc, "XRC"}};
  return bit_names(mask, kKindBits);
}

}  // namespace

// What the opcode is, from its row of the opcode table (IBA Table 38): a viewer classifies
// packets by these, never by the opcode's name. The header bits are not listed: the headers
// themselves are in the event. Spelled once per opcode, not once per traced packet.
const std::string& op_flags_of(uint8_t opcode) {
  static const auto kSpelled = [] {
    std::array<std::string, 256> t;
    for (size_t op = 0; op < t.size(); ++op) t[op] = kinds_of(opcode_info(uint8_t(op)).mask);
    return t;
  }();
  return kSpelled[opcode];
}

std::string access_string(uint32_t access) {
  static constexpr BitName kNames[] = {{IBV_ACCESS_LOCAL_WRITE, "LOCAL_WRITE"},
                                       {IBV_ACCESS_REMOTE_WRITE, "REMOTE_WRITE"},
                                       {IBV_ACCESS_REMOTE_READ, "REMOTE_READ"},
                                       {IBV_ACCESS_REMOTE_ATOMIC, "REMOTE_ATOMIC"},
                                       {IBV_ACCESS_MW_BIND, "MW_BIND"},
                                       {IBV_ACCESS_ZERO_BASED, "ZERO_BASED"},
                                       {IBV_ACCESS_ON_DEMAND, "ON_DEMAND"}};
  return bit_names(access, kNames);
}

const char* wc_opcode_name(ibv_wc_opcode op) {
  switch (op) {
    case IBV_WC_SEND: return "SEND";
    case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
    case IBV_WC_RDMA_READ: return "RDMA_READ";
    case IBV_WC_COMP_SWAP: return "COMP_SWAP";
    case IBV_WC_FETCH_ADD: return "FETCH_ADD";
    case IBV_WC_ATOMIC_WRITE: return "ATOMIC_WRITE";
    case IBV_WC_LOCAL_INV: return "LOCAL_INV";
    case IBV_WC_BIND_MW: return "BIND_MW";
    case IBV_WC_RECV: return "RECV";
    case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
    default: return "OTHER";
  }
}

const char* wr_opcode_name(uint32_t op) { return abi::wr_opcode_name(op); }

// The shim writes WQEs without telling simnicd which; at a doorbell we report the new ones.
void TracePoints::trace_new_wqes(Qp& qp) {
  uint32_t prod = qp.shm->sq.producer.value.load(std::memory_order_acquire);
  for (int guard = 0; qp.req.sq_seen != prod && guard < int(qp.sq_entries); ++qp.req.sq_seen, ++guard) {
    const abi::SendWqe& w = qp.sq[qp.req.sq_seen & (qp.sq_entries - 1)];
    const uint64_t len = w.opcode == IBV_WR_BIND_MW       ? w.bind_length
                         : w.send_flags & IBV_SEND_INLINE ? w.inline_len
                                                          : abi::sge_bytes(w);
    tracer_.event(TraceKind::kWqePosted)
        .u("qp", qp.qpn)
        .s("queue", "sq")
        .u("index", qp.req.sq_seen)
        .u("wr_id", w.wr_id)
        .s("opcode", wr_opcode_name(w.opcode))
        .u("length", len)
        .s("flags", send_flags_string(w.send_flags));
  }
  qp.req.sq_seen = prod;
  if (!qp.rq_entries) return;
  prod = qp.shm->rq.producer.value.load(std::memory_order_acquire);
  for (int guard = 0; qp.resp.rq_seen != prod && guard < int(qp.rq_entries); ++qp.resp.rq_seen, ++guard) {
    const abi::RecvWqe& w = qp.rq[qp.resp.rq_seen & (qp.rq_entries - 1)];
    const uint64_t len = abi::sge_bytes(w);
    tracer_.event(TraceKind::kWqePosted)
        .u("qp", qp.qpn)
        .s("queue", "rq")
        .u("index", qp.resp.rq_seen)
        .u("wr_id", w.wr_id)
        .s("opcode", "RECV")
        .u("length", len)
        .s("flags", "");
  }
  qp.resp.rq_seen = prod;
}

void Transmit::trace_packet(TraceKind kind, const Qp* qp, uint32_t src, uint32_t dst, const PacketHeaders& h,
                            uint32_t mask, size_t payload, const char* fault, const char* sent_by) {
  auto e = dev_.tracer_.event(kind);
  if (qp) e.u("qp", qp->qpn);
  e.ip("src", src)
      .ip("dst", dst)
      .s("opcode", opcode_info(h.bth.opcode).name)
      .u("opcode_num", h.bth.opcode)
      .s("op_flags", op_flags_of(h.bth.opcode))
      .u("psn", h.bth.psn)
      .u("dest_qp", h.bth.dest_qp)
      .b("ack_req", h.bth.ack_req)
      .b("se", h.bth.solicited)
      .u("payload", payload);
  if (mask & kHasReth)
    e.raw("reth", "{\"va\":" + hex_json(h.reth.va) + ",\"rkey\":" + std::to_string(h.reth.rkey) +
                      ",\"len\":" + std::to_string(h.reth.dma_len) + "}");
  if (mask & kHasAeth) {
    uint32_t cls = aeth_class(h.aeth.syndrome);
    const char* name = aeth_class_name(cls);
    e.raw("aeth", "{\"syndrome\":" + std::to_string(h.aeth.syndrome) + ",\"class\":\"" + name + "\",\"value\":" +
                      std::to_string(aeth_value(h.aeth.syndrome)) + ",\"msn\":" + std::to_string(h.aeth.msn) + "}");
  }
  if (mask & kHasImm) e.u("imm", ntohl(h.imm_be));
  if (mask & kHasAtomicEth)
    e.raw("atomic", "{\"va\":" + hex_json(h.atomic.va) + ",\"rkey\":" + std::to_string(h.atomic.rkey) +
                        ",\"swap_add\":" + std::to_string(h.atomic.swap_add) +
                        ",\"compare\":" + std::to_string(h.atomic.compare) + "}");
  if (mask & kHasAtomicAckEth) e.raw("atomic_ack", "{\"orig\":" + std::to_string(h.atomic_ack.orig) + "}");
  if (mask & kHasDeth)
    e.raw("deth", "{\"qkey\":" + std::to_string(h.deth.qkey) + ",\"src_qp\":" + std::to_string(h.deth.src_qp) + "}");
  if (mask & kHasIeth) e.u("ieth_rkey", h.ieth_rkey);
  if (mask & kHasXrceth) e.u("xrc_srqn", h.xrc_srqn);
  if (fault) e.s("fault", fault);
  if (sent_by) e.s("sent_by", sent_by);
}

void TracePoints::trace_mr_create(const Mr& mr) { trace_mr(TraceKind::kMrCreate, mr); }

void TracePoints::trace_mr_destroy(const Mr& mr) { trace_mr(TraceKind::kMrDestroy, mr); }

// An MR's creation and destruction carry the same fields, so a viewer can match them.
void TracePoints::trace_mr(TraceKind kind, const Mr& mr) {
  tracer_.event(kind)
      .u("ctx", mr.ctx->id)
      .u("pd", mr.pd->handle)
      .u("mr", mr.handle)
      .u("lkey", mr.lkey)
      .u("rkey", mr.rkey)
      .hex("addr", mr.iova)
      .u("length", mr.length)
      .s("access", access_string(mr.access));
}

void TracePoints::trace_mw_create(const Mw& mw) {
  tracer_.event(TraceKind::kMwCreate)
      .u("ctx", mw.ctx->id)
      .u("pd", mw.pd->handle)
      .u("mw", mw.handle)
      .u("rkey", mw.rkey)
      .u("type", mw.type == IBV_MW_TYPE_2 ? 2 : 1);
}

// The attributes ibv_modify_qp has set, as ibv_query_qp would report them: what the viewer's QP
// panel and the labs' graders read (the PSNs of the latest packets are another matter).
std::string TracePoints::qp_attr_json(const Qp& qp) const {
  const ibv_qp_attr& a = qp.attr;
  const uint32_t mtu = qp.type == IBV_QPT_UD ? qp.mtu_bytes : mtu_to_bytes(a.path_mtu);
  return "{\"dest_qp\":" + std::to_string(a.dest_qp_num) + ",\"sq_psn\":" + std::to_string(a.sq_psn) +
         ",\"rq_psn\":" + std::to_string(a.rq_psn) + ",\"mtu\":" + std::to_string(mtu) + ",\"dgid\":\"" +
         ip_string(qp.remote_ip) + "\",\"qkey\":" + std::to_string(a.qkey) + ",\"access\":\"" +
         access_string(a.qp_access_flags) + "\",\"timeout\":" + std::to_string(a.timeout) +
         ",\"retry_cnt\":" + std::to_string(a.retry_cnt) + ",\"rnr_retry\":" + std::to_string(a.rnr_retry) +
         ",\"min_rnr_timer\":" + std::to_string(a.min_rnr_timer) +
         ",\"max_rd_atomic\":" + std::to_string(a.max_rd_atomic) +
         ",\"max_dest_rd_atomic\":" + std::to_string(a.max_dest_rd_atomic) + "}";
}

void TracePoints::trace_qp_lifecycle(TraceKind kind, const Qp& qp) {
  tracer_.event(kind)
      .u("ctx", qp.ctx->id)
      .u("qp", qp.qpn)
      .s("type", qp_type_name(qp.type))
      .u("sq_entries", qp.sq_entries)
      .u("rq_entries", qp.rq_entries)
      .u("send_cq", qp.send_cq ? qp.send_cq->handle : 0)   // an XRC TGT QP has no CQs,
      .u("recv_cq", qp.recv_cq ? qp.recv_cq->handle : 0);  // an XRC INI QP no receive CQ
}

void TracePoints::trace_snapshot() {
  if (!tracer_.on()) return;
  tracer_.event(TraceKind::kNicUp)
      .ip("addr", config_.ipv4)
      .u("port", config_.udp_port)
      .u("mtu", config_.mtu_bytes)
      .u("wall_ns", tracer_.wall_ns());
  for (auto& [id, ctx] : tables_.contexts_)
    tracer_.event(TraceKind::kCtxOpen).u("ctx", id).u("pid", uint64_t(ctx->pid));
  for (auto& [h, mr] : tables_.mrs_) trace_mr_create(*mr);
  for (auto& [h, mw] : tables_.mws_) trace_mw_create(*mw);
  for (auto& [h, cq] : tables_.cqs_)
    tracer_.event(TraceKind::kCqCreate)
        .u("ctx", cq->ctx->id)
        .u("cq", h)
        .u("cqe", uint64_t(cq->cqe))
        .u("entries", cq->entries);
  for (auto& [h, qp] : tables_.qps_) {
    trace_qp_lifecycle(TraceKind::kQpCreate, *qp);
    if (qp->state != IBV_QPS_RESET)
      tracer_.event(TraceKind::kQpState)
          .u("qp", qp->qpn)
          .s("from", "RESET")
          .s("to", qp_state_name(qp->state))
          .s("mask", "")
          .s("cause", "snapshot")
          .raw("attr", qp_attr_json(*qp));
  }
  for (const auto& [key, group] : tables_.mcast_groups_) {
    uint64_t members = 0;
    for (const Qp* qp : group.qps)
      tracer_.event(TraceKind::kMcastAttach)
          .u("ctx", qp->ctx->id)
          .u("qp", qp->qpn)
          .s("mgid", gid_string(group.gid))
          .ip("group", group.ip)
          .u("members", ++members);
  }
}

}  // namespace simnic::core
