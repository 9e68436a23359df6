// The one receive path (cheap checks first, then route: requests to the responder, responses
// to the completer; cf. rxe_recv.c), the one transmit path, and the event entry points.
#include <algorithm>

#include "simnic/core/device.h"
#include "simnic/core/qp_state_table.h"
#include "simnic/core/text.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/psn.h"

namespace simnic::core {

using namespace simnic::proto;

void Device::emit_to(Qp& qp, uint32_t dst_ip, const PacketHeaders& rc_h, std::span<const uint8_t> payload) {
  // An XRC TGT QP answers with the XRC twins of the RC responses the responder builds.
  PacketHeaders xrc_h;
  const bool xrc_response = qp.type == IBV_QPT_XRC_RECV && (opcode_info(rc_h.bth.opcode).mask & kIsRc);
  if (xrc_response) {
    xrc_h = rc_h;
    xrc_h.bth.opcode = xrc_of_rc(rc_h.bth.opcode);
  }
  const PacketHeaders& h = xrc_response ? xrc_h : rc_h;
  IpUdpInfo ip{config_.ipv4, dst_ip, config_.udp_port, config_.udp_port};
  size_t need = packet_size(h.bth.opcode, payload.size());
  if (tx_buffer_.size() < need) tx_buffer_.resize(need);
  size_t n = build_packet(h, payload, ip, tx_buffer_);
  if (n == 0) {
    log(LogLevel::kError, "internal: could not build a packet for opcode " + std::to_string(h.bth.opcode));
    return;
  }
  ++counters_.tx_packets;
  counters_.tx_bytes += n;
  if (is_multicast_ipv4(dst_ip)) ++counters_.mcast_tx_packets;
  ++qp.counters.tx_packets;
  SendOutcome out = wire_.send(dst_ip, config_.udp_port, std::span<const uint8_t>(tx_buffer_.data(), n));
  if (tracer_.on()) {
    const char* fault = out == SendOutcome::kDropped      ? "drop"
                        : out == SendOutcome::kDuplicated ? "dup"
                        : out == SendOutcome::kDelayed    ? "delay"
                                                          : nullptr;
    trace_packet("pkt_tx", &qp, config_.ipv4, dst_ip, h, opcode_info(h.bth.opcode).mask, payload.size(), fault);
  }
}

void Device::on_packet(uint32_t src_ip, uint16_t src_port, std::span<const uint8_t> bytes, uint64_t now,
                       uint32_t dst_ip) {
  set_time(now);
  ++counters_.rx_packets;
  counters_.rx_bytes += bytes.size();
  if (dst_ip == 0) dst_ip = config_.ipv4;
  // The ICRC covers the IP destination: a datagram to a group is checked with the group's address.
  IpUdpInfo ip{src_ip, dst_ip, src_port, config_.udp_port};
  ParsedPacket pkt;
  ParseError err = parse_packet(bytes, ip, pkt);
  if (err != ParseError::kOk) {
    if (err == ParseError::kBadIcrc) ++counters_.rx_drop_icrc;
    else ++counters_.rx_drop_malformed;
    log(LogLevel::kDebug, std::string("dropped a packet: ") + parse_error_name(err));
    tracer_.event("pkt_drop").s("reason", parse_error_name(err));
    return;
  }
  if (pkt.h.bth.dest_qp == kMulticastQpn || is_multicast_ipv4(dst_ip)) {
    if (tracer_.on()) trace_packet("pkt_rx", nullptr, src_ip, dst_ip, pkt.h, pkt.mask, pkt.payload.size(), nullptr);
    receive_multicast(pkt, src_ip, dst_ip, bytes.size());
    return;
  }
  Qp* qp = find_qp_by_qpn(pkt.h.bth.dest_qp);
  if (tracer_.on()) trace_packet("pkt_rx", qp, src_ip, config_.ipv4, pkt.h, pkt.mask, pkt.payload.size(), nullptr);
  if (pkt.h.bth.dest_qp == proto::cm::kGsiQpn) return cm_->on_mad(src_ip, pkt, now);  // QP1: the CM's
  if (!qp) {
    ++counters_.rx_drop_no_qp;
    tracer_.event("pkt_drop").s("reason", "no such QP").u("qp", pkt.h.bth.dest_qp);
    log_limited(LogLevel::kWarn, "no_qp", pkt.h.bth.dest_qp, [&] {
      return "dropped " + std::string(opcode_info(pkt.h.bth.opcode).name) + " from " + ip_string(src_ip) +
             " for QP " + hex(pkt.h.bth.dest_qp) + ": no such QP on this NIC (the sender's dest_qp_num, set at RTR, "
             "must be the QPN this NIC gave the receiving QP; was it destroyed?)";
    });
    return;
  }
  const bool transport_ok = (qp->type == IBV_QPT_RC && (pkt.mask & kIsRc)) ||
                            (qp->type == IBV_QPT_UC && (pkt.mask & kIsUc)) ||
                            (qp->type == IBV_QPT_UD && (pkt.mask & kIsUd)) ||
                            (qp->is_xrc() && (pkt.mask & kIsXrc));
  if (!transport_ok) {
    ++counters_.rx_drop_unexpected;
    tracer_.event("pkt_drop").s("reason", "opcode of another transport").u("qp", qp->qpn);
    log_limited(LogLevel::kWarn, "transport", qp->qpn, [&] {
      return "QP " + hex(qp->qpn) + " (" + qp_type_name(qp->type) + ") dropped " +
             opcode_info(pkt.h.bth.opcode).name + " from " + ip_string(src_ip) +
             ": an opcode of another transport (both QPs of a connection must have the same type)";
    });
    return;
  }
  // A connected QP only hears its peer (IBA 9.6.1.5.1: source address check). Before RTR it
  // has no peer yet: the state check further on says why the packet is dropped.
  const bool connected = qp->state != IBV_QPS_RESET && qp->state != IBV_QPS_INIT;
  if (qp->type != IBV_QPT_UD && connected && src_ip != qp->remote_ip) {
    ++counters_.rx_drop_wrong_source;
    tracer_.event("pkt_drop").s("reason", "not from the QP's peer").u("qp", qp->qpn);
    log_limited(LogLevel::kWarn, "source", qp->qpn, [&] {
      return "QP " + hex(qp->qpn) + " dropped a packet from " + ip_string(src_ip) + ": it is connected to " +
             ip_string(qp->remote_ip) + (qp->attr.ah_attr.is_global ? " (the GID given at RTR)" : " (the DLID given at RTR)") +
             ", and hears only that peer";
    });
    return;
  }
  ++qp->counters.rx_packets;
  // Receives are posted without a doorbell; the trace reports them when the NIC first looks.
  if (tracer_.on() && (pkt.mask & kIsRequest)) trace_new_wqes(*qp);
  if (qp->type == IBV_QPT_UD) respond_ud(*qp, pkt, src_ip, bytes.size(), config_.ipv4);
  else if (qp->is_xrc()) xrc_receive(*qp, pkt, now);
  else if (pkt.mask & kIsRequest) responder_receive(*qp, pkt, now);
  else completer_receive(*qp, pkt, now);
}

void Device::on_doorbell(Context* ctx, uint64_t now, uint64_t rings) {
  set_time(now);
  tracer_.event("doorbell").u("ctx", ctx->id).u("rings", rings);
  for (uint32_t h : std::vector<uint32_t>(ctx->qps)) {
    auto it = qps_.find(h);
    if (it == qps_.end()) continue;
    Qp& qp = *it->second;
    if (tracer_.on()) trace_new_wqes(qp);
    if (qp.state == IBV_QPS_ERR) flush_qp(qp);
    else if (qp.state == IBV_QPS_SQE) flush_sq(qp);
    else if (qp.state == IBV_QPS_RTS) requester_run(qp, now);
  }
}

uint64_t Device::next_deadline() const {
  uint64_t best = cm_->next_deadline();
  for (const auto& [h, qp] : qps_)
    if (qp->timer_deadline_ns && (!best || qp->timer_deadline_ns < best)) best = qp->timer_deadline_ns;
  return best;
}

void Device::on_timer(uint64_t now) {
  set_time(now);
  cm_->on_timer(now);
  std::vector<Qp*> due;
  for (auto& [h, qp] : qps_)
    if (qp->timer_deadline_ns && qp->timer_deadline_ns <= now) due.push_back(qp.get());
  for (Qp* qp : due) {
    qp->timer_deadline_ns = 0;
    if (!qp->sq_running()) continue;  // SQD still retransmits what it is draining
    if (qp->rnr_wait) {  // the RNR wait is over: try again from the NAKed PSN
      qp->rnr_wait = false;
      tracer_.event("timer").u("qp", qp->qpn).s("what", "rnr_wait").s("action", "fired");
      go_back_n(*qp, qp->una_psn, now, "rnr");
      continue;
    }
    if (qp->sq_consumer == qp->sq_started) continue;  // everything was acknowledged meanwhile
    log_limited(LogLevel::kWarn, "ack_timeout", qp->qpn, [&] {
      return "QP " + hex(qp->qpn) + ": no ACK from " + ip_string(qp->remote_ip) + " for PSN " + hex(qp->una_psn) +
             " within the ACK timeout; " +
             (qp->retry_left ? "retransmitting (" + std::to_string(qp->retry_left) + " of retry_cnt=" +
                                   std::to_string(qp->attr.retry_cnt) + " retries left)"
                             : std::string("no retries left")) +
             ". Is the peer's QP in RTR/RTS, with this QP's QPN as its dest_qp_num?";
    });
    ++counters_.timeouts;
    ++qp->counters.timeouts;
    tracer_.event("timer").u("qp", qp->qpn).s("what", "ack_timeout").s("action", "fired");
    if (qp->retry_left == 0) {
      requester_error(*qp, Error::kRetryExceeded,
                      "no ACK within the local ACK timeout (4.096us * 2^" + std::to_string(qp->attr.timeout) +
                          ") after retry_cnt=" + std::to_string(qp->attr.retry_cnt) + " retries");
      continue;
    }
    --qp->retry_left;
    go_back_n(*qp, qp->una_psn, now, "timeout");
  }
}

void Device::run_pending(uint64_t now) {
  set_time(now);
  std::vector<Qp*> busy;
  for (auto& [qpn, qp] : busy_qps_) busy.push_back(qp);
  for (Qp* qp : busy) {
    if (!find_qp_by_qpn(qp->qpn)) continue;
    bool reads_done = send_read_responses(*qp, burst_);
    if (qp->sq_running()) requester_run(*qp, now);
    if (reads_done && qp->read_responses.empty() && !busy_qps_.count(qp->qpn)) continue;
    if (!reads_done) busy_qps_[qp->qpn] = qp;
  }
}

}  // namespace simnic::core
