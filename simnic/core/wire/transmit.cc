// The one transmit path: every packet an engine sends is built, counted, traced and handed to
// the wire here.
#include "simnic/core/device.h"
#include "simnic/proto/opcode_table.h"

namespace simnic::core {

using namespace simnic::proto;

// `tos` travels as the datagram's IPv4 TOS byte: RoCEv2 maps the GRH's traffic class onto the
// IP header's DSCP and ECN (IBA Annex A17; rxe's prepare_ipv4_hdr takes av->grh.traffic_class).
SendOutcome Transmit::emit_to(Qp& qp, uint32_t dst_ip, const PacketHeaders& rc_h, std::span<const uint8_t> payload,
                              uint8_t tos) {
  // An XRC TGT QP answers with the XRC twins of the RC responses the responder builds.
  PacketHeaders xrc_h;
  const bool xrc_response = qp.type == IBV_QPT_XRC_RECV && (opcode_info(rc_h.bth.opcode).mask & kIsRc);
  if (xrc_response) {
    xrc_h = rc_h;
    xrc_h.bth.opcode = xrc_of_rc(rc_h.bth.opcode);
  }
  const PacketHeaders& h = xrc_response ? xrc_h : rc_h;
  IpUdpInfo ip{dev_.config_.ipv4, dst_ip, dev_.config_.udp_port, dev_.config_.udp_port, 0, tos};
  size_t need = packet_size(h.bth.opcode, payload.size());
  if (tx_buffer_.size() < need) tx_buffer_.resize(need);
  size_t n = build_packet(h, payload, ip, tx_buffer_);
  if (n == 0) {
    dev_.journal().log(LogLevel::kError,
                       "internal: could not build a packet for opcode " + std::to_string(h.bth.opcode));
    return SendOutcome::kDropped;
  }
  ++dev_.counters_.tx_packets;
  dev_.counters_.tx_bytes += n;
  if (is_multicast_ipv4(dst_ip)) ++dev_.counters_.mcast_tx_packets;
  ++qp.counters.tx_packets;
  const std::span<const uint8_t> bytes(tx_buffer_.data(), n);
  SendOutcome out = tos ? dev_.env_.wire.send_with_tos(dst_ip, dev_.config_.udp_port, bytes, tos)
                        : dev_.env_.wire.send(dst_ip, dev_.config_.udp_port, bytes);
  if (dev_.tracer_.on()) {
    const char* fault = out == SendOutcome::kDropped      ? "drop"
                        : out == SendOutcome::kDuplicated ? "dup"
                        : out == SendOutcome::kDelayed    ? "delay"
                                                          : nullptr;
    trace_packet(TraceKind::kPktTx, &qp, dev_.config_.ipv4, dst_ip, h, opcode_info(h.bth.opcode).mask, payload.size(),
                 fault);
  }
  return out;
}

SendOutcome Transmit::count_sent_by_program(Qp& qp, uint32_t dst_ip, const PacketHeaders& h, size_t payload_len) {
  ++dev_.counters_.tx_packets;
  ++dev_.counters_.direct_sends;
  dev_.counters_.tx_bytes += packet_size(h.bth.opcode, payload_len);
  ++qp.counters.tx_packets;
  if (dev_.tracer_.on())
    trace_packet(TraceKind::kPktTx, &qp, dev_.config_.ipv4, dst_ip, h, opcode_info(h.bth.opcode).mask, payload_len,
                 nullptr, "program");
  return SendOutcome::kSent;
}

// The traffic class a WQE's packets carry as their IPv4 TOS: a UD WQE's AH's (checked by
// ud_destination), a connected QP's path's (IBA Annex A17; rxe's rxe_get_av).
uint8_t Transmit::wqe_tos(const Qp& qp, const abi::SendWqe& w) {
  if (qp.type != IBV_QPT_UD) return path_tos(qp);
  const Ah* ah = dev_.tables().owned(dev_.ahs_, qp.ctx, w.ah);
  return ah && ah->attr.is_global ? ah->attr.grh.traffic_class : 0;
}

}  // namespace simnic::core
