// The CM MAD exchange (IBA 12.6: REQ/REP/RTU to connect, REJ, MRA, DREQ/DREP to disconnect,
// 12.11 SIDR_REQ/SIDR_REP for UD) over the general services interface: UD SEND_ONLY packets to
// QP1 with Q_Key 0x80010000 (IBA 9.6.1.1.3, 13.5.1), retransmitted on the CM response timeout
// (IBA 12.7.22) until answered or out of retries.
#include <cerrno>
#include <cstring>

#include "simnic/core/cm/agent.h"
#include "simnic/core/observe/drop_reasons.h"
#include "simnic/core/text.h"
#include "simnic/proto/opcode_table.h"

namespace simnic::core {

using namespace simnic::proto;

namespace {
// Time in TIMEWAIT: the kernel's cm_enter_timewait waits the path's packet lifetime + 1
// (CMA_IBOE_PACKET_LIFETIME 16 for RoCE): 4.096us * 2^17, about half a second.
constexpr uint64_t kTimewaitNs = 4096ull << 17;

const uint8_t* user_data(const cm::Message& m) { return m.private_data + cm::kCmaHdrBytes; }

// An id just created for a request (REQ, SIDR_REQ) that reached `listener`: where the request
// came from (the datagram's address and UDP port, the rdma_cm port of the IP CM header) and
// which of the peer's ids and transactions it answers.
void take_request(CmId& id, const CmId& listener, uint32_t src_ip, uint16_t udp_port, uint16_t src_port,
                  const cm::Message& m) {
  id.listener = listener.handle;
  id.local_port = listener.local_port;
  id.remote_ip = src_ip;
  id.src_udp_port = udp_port;
  id.remote_port = src_port;
  id.remote_comm_id = m.local_comm_id;
  id.tid = m.tid;
}

}  // namespace

void CmAgent::trace_mad(TraceKind kind, uint32_t src, uint32_t dst, uint32_t psn, const cm::Message& m,
                        const char* fault) {
  auto e = tracer_.event(kind);
  e.s("src", ip_string(src))
      .s("dst", ip_string(dst))
      .s("opcode", opcode_info(kUdSendOnly).name)
      .u("opcode_num", kUdSendOnly)
      .s("op_flags", op_flags_of(kUdSendOnly))
      .u("psn", psn)
      .u("dest_qp", cm::kGsiQpn)
      .u("payload", cm::kMadBytes)
      .raw("deth", "{\"qkey\":" + std::to_string(cm::kGsiQkey) + ",\"src_qp\":1}")
      .s("cm", cm::attr_name(m.attr_id))
      .u("local_comm_id", m.local_comm_id)
      .u("remote_comm_id", m.remote_comm_id);
  if (m.attr_id == cm::kReq || m.attr_id == cm::kSidrReq) e.hex("service_id", m.service_id);
  if (m.attr_id == cm::kReq || m.attr_id == cm::kRep || m.attr_id == cm::kSidrRep) e.u("cm_qpn", m.qpn);
  if (m.attr_id == cm::kRej) e.u("reason", m.reason);
  if (fault) e.s("fault", fault);
}

// One MAD to QP1 of the NIC at dst_ip. With an id and expect_answer, it is kept to be sent
// again when the id's timer fires.
void CmAgent::send_mad(CmId* id, uint32_t dst_ip, cm::Message& m, uint64_t now, bool expect_answer) {
  std::array<uint8_t, cm::kMadBytes> mad;
  if (!cm::encode(m, mad)) return;
  PacketHeaders h;
  h.bth.opcode = kUdSendOnly;
  h.bth.dest_qp = cm::kGsiQpn;
  h.bth.psn = gsi_psn_ = (gsi_psn_ + 1) & 0xffffff;
  h.deth.qkey = cm::kGsiQkey;
  h.deth.src_qp = cm::kGsiQpn;
  IpUdpInfo ip{nic_.ipv4, dst_ip, nic_.udp_port, nic_.udp_port};
  size_t n = build_packet(h, mad, ip, tx_);
  if (!n) return;
  ++mads_sent_;
  SendOutcome out = wire_.send(dst_ip, nic_.udp_port, std::span<const uint8_t>(tx_.data(), n));
  if (tracer_.on())
    trace_mad(TraceKind::kPktTx, nic_.ipv4, dst_ip, h.bth.psn, m,
              out == SendOutcome::kDropped      ? "drop"
              : out == SendOutcome::kDuplicated ? "dup"
              : out == SendOutcome::kDelayed    ? "delay"
                                                : nullptr);
  if (!id) return;
  id->last_mad = mad;
  id->last_attr = m.attr_id;
  id->deadline_ns = expect_answer ? now + id->interval_ns : 0;
}

void CmAgent::send_rej(uint32_t dst_ip, uint64_t tid, uint32_t local_comm_id, uint32_t remote_comm_id, uint16_t reason,
                       uint8_t msg_ref, const uint8_t* priv, size_t priv_len, uint64_t now) {
  cm::Message m;
  m.attr_id = cm::kRej;
  m.tid = tid;
  m.local_comm_id = local_comm_id;
  m.remote_comm_id = remote_comm_id;
  m.reason = reason;
  m.msg_ref = msg_ref;
  if (priv) std::memcpy(m.private_data, priv, std::min<size_t>(priv_len, 148));
  send_mad(nullptr, dst_ip, m, now, false);
}

void CmAgent::send_dreq(CmId& id, uint64_t now, const uint8_t* priv, size_t priv_len) {
  cm::Message m;
  m.attr_id = cm::kDreq;
  m.tid = id.tid = uint64_t(id.local_comm_id) << 32 | (keys_.next() & 0xffff);
  m.local_comm_id = id.local_comm_id;
  m.remote_comm_id = id.remote_comm_id;
  m.qpn = id.remote_qpn;
  if (priv) std::memcpy(m.private_data, priv, std::min<size_t>(priv_len, 220));
  id.retries_left = 3;
  set_state(id, CmState::kDreqSent, "DREQ sent");
  send_mad(&id, id.remote_ip, m, now, true);
}

void CmAgent::send_drep(CmId& id, uint64_t now, bool remember) {
  cm::Message m;
  m.attr_id = cm::kDrep;
  m.tid = id.tid;
  m.local_comm_id = id.local_comm_id;
  m.remote_comm_id = id.remote_comm_id;
  send_mad(remember ? &id : nullptr, id.remote_ip, m, now, false);
}

void CmAgent::enter_timewait(CmId& id, uint64_t now) {
  set_state(id, CmState::kTimewait, "timewait");
  id.deadline_ns = now + kTimewaitNs;
}

// ------------------------------------------------------------------------- receive

void CmAgent::on_mad(uint32_t src_ip, uint16_t src_port, const ParsedPacket& pkt, uint64_t now) {
  ++mads_received_;
  cm::Message m;
  cm::DecodeError err = pkt.h.bth.opcode != kUdSendOnly   ? cm::DecodeError::kNotCm
                        : pkt.h.deth.qkey != cm::kGsiQkey ? cm::DecodeError::kNotCm
                                                          : cm::decode(pkt.payload, &m);
  if (err != cm::DecodeError::kOk) {
    if (tracer_.on()) trace_drop(tracer_, Drop::kCmNotDecodable, 1, cm::decode_error_name(err));
    return;
  }
  if (tracer_.on())
    tracer_.event(TraceKind::kCmRx)
        .s("cm", cm::attr_name(m.attr_id))
        .s("src", ip_string(src_ip))
        .u("local_comm_id", m.local_comm_id)
        .u("remote_comm_id", m.remote_comm_id);
  switch (m.attr_id) {
    case cm::kReq: return on_req(src_ip, src_port, m, now);
    case cm::kRep: return on_rep(src_ip, m, now);
    case cm::kRtu: return on_rtu(src_ip, m, now);
    case cm::kRej: return on_rej(src_ip, m, now);
    case cm::kMra: return on_mra(src_ip, m, now);
    case cm::kDreq: return on_dreq(src_ip, m, now);
    case cm::kDrep: return on_drep(src_ip, m, now);
    case cm::kSidrReq: return on_sidr_req(src_ip, src_port, m, now);
    case cm::kSidrRep: return on_sidr_rep(src_ip, m, now);
    default: return;
  }
}

// IBA 12.6.2: a REQ for a service nobody listens on is rejected with "invalid service ID"
// (reason 8), which rdma_cm reports as RDMA_CM_EVENT_REJECTED, status 8. A malformed REQ is
// dropped, and one the listener has no room for is rejected (cm/admission.cc).
void CmAgent::on_req(uint32_t src_ip, uint16_t udp_port, const cm::Message& m, uint64_t now) {
  if (CmId* dup = find_by_remote(m.local_comm_id, src_ip)) {  // IBA 12.9.7: a duplicate REQ
    if (dup->state == CmState::kRepSent) {
      cm::Message rep;
      cm::decode(dup->last_mad, &rep);
      send_mad(nullptr, src_ip, rep, now, false);
    }
    return;
  }
  cm::CmaHdr hdr;
  CmId* listener = find_listener(cm::service_port_space(m.service_id), cm::service_port(m.service_id));
  if (!listener || !cm::decode_cma_hdr(m.private_data, &hdr)) {
    log_limited(LogLevel::kInfo, "cm_no_listener", now, [&] {
      return "rejected a REQ from " + ip_string(src_ip) + " for service ID " + hex(m.service_id) +
             ": nobody listens on port " + std::to_string(cm::service_port(m.service_id));
    });
    send_rej(src_ip, m.tid, keys_.next() | 1, m.local_comm_id, cm::kRejInvalidServiceId, cm::kRefReq, nullptr, 0, now);
    return;
  }
  if (const char* why = malformed_req(src_ip, m, hdr, *listener)) return drop_malformed(src_ip, m, why, now);
  if (!admit_request(*listener, src_ip, udp_port, now)) {  // a REQ flood must not fill the NIC
    send_rej(src_ip, m.tid, keys_.next() | 1, m.local_comm_id, cm::kRejConsumerDefined, cm::kRefReq, nullptr, 0, now);
    return;
  }
  CmId& id = add_id(listener->client, listener->channel, listener->cookie, listener->ps, IBV_QPT_RC);
  take_request(id, *listener, src_ip, udp_port, hdr.src_port, m);
  id.local_comm_id = keys_.next() | 1;
  id.remote_qpn = m.qpn;
  id.remote_psn = m.starting_psn;
  id.responder_resources = m.initiator_depth;  // seen from this side (kernel cma_set_req_event_data)
  id.initiator_depth = m.responder_resources;
  id.retry_count = m.retry_count;
  id.rnr_retry_count = m.rnr_retry_count;
  id.mtu = m.path_mtu < uint8_t(nic_.mtu) ? ibv_mtu(m.path_mtu) : nic_.mtu;
  id.interval_ns = (4096ull << m.remote_cm_response_timeout) + 2 * (4096ull << 16);
  id.retries_left = m.max_cm_retries;
  set_state(id, CmState::kReqRcvd, "REQ received");
  abi::CmEventMsg ev = event_for(id, abi::kCmConnectRequest);
  ev.new_id = id.handle;
  ev.cookie = listener->cookie;
  ev.flow_control = m.flow_control;
  ev.srq = m.srq;
  ev.private_len = uint8_t(cm::private_data_size(cm::kReq) - cm::kCmaHdrBytes);
  std::memcpy(ev.private_data, user_data(m), ev.private_len);
  offer_request(id, ev);
}

void CmAgent::on_rep(uint32_t src_ip, const cm::Message& m, uint64_t now) {
  CmId* id = find_by_local_comm_id(m.remote_comm_id);
  if (!id || id->remote_ip != src_ip) return;
  if (id->state == CmState::kEstablished && id->last_attr == cm::kRtu) {  // our RTU was lost
    cm::Message rtu;
    cm::decode(id->last_mad, &rtu);
    send_mad(nullptr, src_ip, rtu, now, false);
    return;
  }
  if (id->state != CmState::kReqSent) return;
  stop_timer(*id);
  id->remote_comm_id = m.local_comm_id;
  id->remote_qpn = m.qpn;
  id->remote_psn = m.starting_psn;
  id->responder_resources = m.initiator_depth;
  id->initiator_depth = m.responder_resources;
  id->rnr_retry_count = m.rnr_retry_count;
  set_state(*id, CmState::kRepRcvd, "REP received");
  abi::CmEventMsg ev = event_for(*id, abi::kCmConnectResponse);
  ev.flow_control = m.flow_control;
  ev.srq = m.srq;
  ev.private_len = uint8_t(cm::private_data_size(cm::kRep));
  std::memcpy(ev.private_data, m.private_data, ev.private_len);
  deliver(*id, ev);
}

void CmAgent::on_rtu(uint32_t src_ip, const cm::Message& m, uint64_t) {
  CmId* id = find_by_local_comm_id(m.remote_comm_id);
  if (!id || id->remote_ip != src_ip || id->state != CmState::kRepSent) return;
  stop_timer(*id);
  set_state(*id, CmState::kEstablished, "RTU received");
  abi::CmEventMsg ev = event_for(*id, abi::kCmEstablished);
  ev.private_len = uint8_t(cm::private_data_size(cm::kRtu));
  std::memcpy(ev.private_data, m.private_data, ev.private_len);
  deliver(*id, ev);
}

// The kernel's cma reports every REJ as RDMA_CM_EVENT_REJECTED with the reason as status.
void CmAgent::on_rej(uint32_t src_ip, const cm::Message& m, uint64_t) {
  CmId* id = find_by_local_comm_id(m.remote_comm_id);
  if (!id || id->remote_ip != src_ip) return;
  if (id->state != CmState::kReqSent && id->state != CmState::kRepSent && id->state != CmState::kRepRcvd &&
      id->state != CmState::kReqRcvd)
    return;
  stop_timer(*id);
  if (id->held) return erase_id(id->handle);  // the program never heard of it: nothing to say
  const bool passive_waiting = id->state == CmState::kReqRcvd;
  set_state(*id, CmState::kClosed, "REJ received");
  if (passive_waiting) return;  // the program has not accepted: the kernel says nothing either
  abi::CmEventMsg ev = event_for(*id, abi::kCmRejected, m.reason);
  ev.private_len = uint8_t(cm::private_data_size(cm::kRej));
  std::memcpy(ev.private_data, m.private_data, ev.private_len);
  deliver(*id, ev);
}

// IBA 12.6.6: the peer needs longer; wait its service timeout before sending again.
void CmAgent::on_mra(uint32_t src_ip, const cm::Message& m, uint64_t now) {
  CmId* id = find_by_local_comm_id(m.remote_comm_id);
  if (!id || id->remote_ip != src_ip || !id->deadline_ns) return;
  id->deadline_ns = now + (4096ull << (m.service_timeout & 31)) + id->interval_ns;
}

void CmAgent::on_dreq(uint32_t src_ip, const cm::Message& m, uint64_t now) {
  CmId* id = find_by_local_comm_id(m.remote_comm_id);
  if (!id || id->remote_ip != src_ip || id->remote_comm_id != m.local_comm_id) {
    // IBA 12.9.6: a DREQ for a connection we no longer have still gets its DREP.
    cm::Message drep;
    drep.attr_id = cm::kDrep;
    drep.tid = m.tid;
    drep.local_comm_id = m.remote_comm_id;
    drep.remote_comm_id = m.local_comm_id;
    send_mad(nullptr, src_ip, drep, now, false);
    return;
  }
  id->tid = m.tid;
  switch (id->state) {
    case CmState::kTimewait: send_drep(*id, now, false); return;
    case CmState::kDreqSent:  // both sides disconnected at once: answer and wait
      stop_timer(*id);
      send_drep(*id, now, false);
      enter_timewait(*id, now);
      deliver(*id, event_for(*id, abi::kCmDisconnected));
      return;
    case CmState::kEstablished:
    case CmState::kRepSent:
      stop_timer(*id);
      set_state(*id, CmState::kDreqRcvd, "DREQ received");
      deliver(*id, event_for(*id, abi::kCmDisconnected));
      return;
    default: return;
  }
}

void CmAgent::on_drep(uint32_t src_ip, const cm::Message& m, uint64_t now) {
  CmId* id = find_by_local_comm_id(m.remote_comm_id);
  if (!id || id->remote_ip != src_ip || id->state != CmState::kDreqSent) return;
  stop_timer(*id);
  enter_timewait(*id, now);
  deliver(*id, event_for(*id, abi::kCmDisconnected));
}

// IBA 12.11.1: SIDR_REQ asks which UD QP serves a service ID; no listener: "unsupported".
void CmAgent::on_sidr_req(uint32_t src_ip, uint16_t udp_port, const cm::Message& m, uint64_t now) {
  cm::CmaHdr hdr;
  CmId* listener = find_listener(cm::service_port_space(m.service_id), cm::service_port(m.service_id));
  if (!listener || listener->qp_type != IBV_QPT_UD || !cm::decode_cma_hdr(m.private_data, &hdr)) {
    cm::Message rep;
    rep.attr_id = cm::kSidrRep;
    rep.tid = m.tid;
    rep.local_comm_id = m.local_comm_id;
    rep.service_id = m.service_id;
    rep.sidr_status = cm::kSidrUnsupported;
    send_mad(nullptr, src_ip, rep, now, false);
    return;
  }
  for (auto& [h, other] : ids_)  // a retransmitted SIDR_REQ is already being handled
    if (other->listener == listener->handle && other->remote_ip == src_ip && other->remote_comm_id == m.local_comm_id)
      return;
  if (!admit_request(*listener, src_ip, udp_port, now)) return;
  CmId& id = add_id(listener->client, listener->channel, listener->cookie, listener->ps, IBV_QPT_UD);
  take_request(id, *listener, src_ip, udp_port, hdr.src_port, m);
  set_state(id, CmState::kSidrReqRcvd, "SIDR_REQ received");
  abi::CmEventMsg ev = event_for(id, abi::kCmConnectRequest);
  ev.new_id = id.handle;
  ev.private_len = uint8_t(cm::private_data_size(cm::kSidrReq) - cm::kCmaHdrBytes);
  std::memcpy(ev.private_data, user_data(m), ev.private_len);
  offer_request(id, ev);
}

void CmAgent::on_sidr_rep(uint32_t src_ip, const cm::Message& m, uint64_t) {
  CmId* id = find_by_local_comm_id(m.local_comm_id);
  if (!id || id->remote_ip != src_ip || id->state != CmState::kSidrReqSent) return;
  stop_timer(*id);
  if (m.sidr_status != cm::kSidrSuccess) {
    set_state(*id, CmState::kClosed, "SIDR_REP refused");
    abi::CmEventMsg ev = event_for(*id, abi::kCmUnreachable, m.sidr_status);
    ev.private_len = uint8_t(cm::private_data_size(cm::kSidrRep));
    std::memcpy(ev.private_data, m.private_data, ev.private_len);
    deliver(*id, ev);
    return;
  }
  id->remote_qpn = m.qpn;
  id->remote_qkey = m.qkey;
  set_state(*id, CmState::kEstablished, "SIDR_REP received");
  abi::CmEventMsg ev = event_for(*id, abi::kCmEstablished);
  ev.private_len = uint8_t(cm::private_data_size(cm::kSidrRep));
  std::memcpy(ev.private_data, m.private_data, ev.private_len);
  deliver(*id, ev);
}

// ------------------------------------------------------------------------- timers

uint64_t CmAgent::next_deadline() const {
  uint64_t best = 0;
  for (const auto& [h, id] : ids_)
    if (id->deadline_ns && (!best || id->deadline_ns < best)) best = id->deadline_ns;
  return best;
}

void CmAgent::on_timer(uint64_t now) {
  std::vector<uint32_t> due;
  for (auto& [h, id] : ids_)
    if (id->deadline_ns && id->deadline_ns <= now) due.push_back(h);
  for (uint32_t h : due) {
    auto it = ids_.find(h);
    if (it != ids_.end()) on_timeout(*it->second, now);
  }
}

// IBA 12.7.22/12.7.33: send again while retries are left; then give up as the kernel's cma
// reports it: UNREACHABLE (-ETIMEDOUT) for REQ, REP and SIDR_REQ, DISCONNECTED for DREQ.
void CmAgent::on_timeout(CmId& id, uint64_t now) {
  id.deadline_ns = 0;
  if (id.state == CmState::kTimewait) {
    set_state(id, CmState::kClosed, "timewait over");
    deliver(id, event_for(id, abi::kCmTimewaitExit));
    return;
  }
  if (id.retries_left > 0) {
    --id.retries_left;
    cm::Message m;
    cm::decode(id.last_mad, &m);
    tracer_.event(TraceKind::kTimer)
        .s("what", "cm_response_timeout")
        .u("id", id.handle)
        .s("action", "resend")
        .s("cm", cm::attr_name(m.attr_id))
        .u("retries_left", id.retries_left);
    send_mad(&id, id.remote_ip, m, now, true);
    return;
  }
  logger_.log(LogLevel::kInfo, std::string("rdma_cm: no answer from ") + ip_string(id.remote_ip) + " to " +
                                   cm::attr_name(id.last_attr) + " after the last retry (" + cm_state_name(id.state) +
                                   ")");
  const CmState was = id.state;
  if (was == CmState::kDreqSent) {
    enter_timewait(id, now);
    deliver(id, event_for(id, abi::kCmDisconnected));
    return;
  }
  set_state(id, CmState::kClosed, "CM response timeout");
  if (was == CmState::kReqSent || was == CmState::kRepSent || was == CmState::kSidrReqSent)
    deliver(id, event_for(id, abi::kCmUnreachable, -ETIMEDOUT));
}

}  // namespace simnic::core
