// The one receive path: cheap checks first, then route, requests to the responder, responses
// to the completer (cf. rxe_recv.c). on_packet is an event entry point: what the engines
// scheduled while handling the packet runs before it returns (engine_events.cc).
#include <algorithm>

#include "simnic/core/device.h"
#include "simnic/core/objects/qp_state_table.h"
#include "simnic/core/text.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/psn.h"

namespace simnic::core {

using namespace simnic::proto;

void Ingress::on_packet(uint32_t src_ip, uint16_t src_port, std::span<const uint8_t> bytes, uint64_t now,
                        uint32_t dst_ip, uint8_t tos) {
  dev_.set_time(now);
  rx_tos_ = tos;  // for the GRH a UD receive writes (datagram.cc)
  receive_packet(src_ip, src_port, bytes, now, dst_ip);
  rx_tos_ = 0;
  requester_.run_scheduled(now);
}

// The checks a packet for one of our QPs passes before it is routed: its transport is the
// QP's, and a connected QP hears only its peer.
bool Ingress::qp_accepts(Qp& qp, const ParsedPacket& pkt, uint32_t src_ip) {
  const bool transport_ok = (qp.type == IBV_QPT_RC && (pkt.mask & kIsRc)) ||
                            (qp.type == IBV_QPT_UC && (pkt.mask & kIsUc)) ||
                            (qp.type == IBV_QPT_UD && (pkt.mask & kIsUd)) || (qp.is_xrc() && (pkt.mask & kIsXrc));
  if (!transport_ok) {
    dev_.journal().drop(Drop::kWrongTransport, qp.qpn, [&] {
      return "QP " + hex(qp.qpn) + " (" + qp_type_name(qp.type) + ") dropped " + opcode_info(pkt.h.bth.opcode).name +
             " from " + ip_string(src_ip) +
             ": an opcode of another transport (both QPs of a connection must have the same type)";
    });
    return false;
  }
  // A connected QP only hears its peer (IBA 9.6.1.5.1: source address check). Before RTR it
  // has no peer yet: the state check further on says why the packet is dropped.
  const bool connected = qp.state != IBV_QPS_RESET && qp.state != IBV_QPS_INIT;
  if (qp.type != IBV_QPT_UD && connected && src_ip != qp.remote_ip) {
    dev_.journal().drop(Drop::kWrongPeer, qp.qpn, [&] {
      return "QP " + hex(qp.qpn) + " dropped a packet from " + ip_string(src_ip) + ": it is connected to " +
             ip_string(qp.remote_ip) +
             (qp.attr.ah_attr.is_global ? " (the GID given at RTR)" : " (the DLID given at RTR)") +
             ", and hears only that peer";
    });
    return false;
  }
  return true;
}

// On a loopback NIC every sender is a process of this host, and a simnic NIC sends only from
// the address and UDP port it is bound to, which is the port family's (transmit.cc sends from
// and to config_.udp_port: 4791, or --port). Its peer's address:port is held by the peer
// NIC's socket (bound without SO_REUSEADDR, so no other user can bind it too), so a packet
// from another port is another program's, forging. RoCEv2 (IBA Annex A17) fixes only the
// destination port, 4791; real RNICs pick a source port per flow for ECMP (rxe: 0xC000 plus a
// hash of the QPN, rxe_qp.c), so on a LAN address nothing can be required of it
// (docs/security.md).
bool Ingress::from_nic_port(const ParsedPacket& pkt, uint32_t src_ip, uint16_t src_port) {
  if ((dev_.config_.ipv4 >> 24) != 127 || src_port == dev_.config_.udp_port) return true;
  dev_.journal().drop(Drop::kWrongPort, pkt.h.bth.dest_qp, [&] {
    return "dropped " + std::string(opcode_info(pkt.h.bth.opcode).name) + " for QP " + hex(pkt.h.bth.dest_qp) +
           " from " + ip_string(src_ip) + ":" + std::to_string(src_port) +
           ": on loopback a simnic NIC sends only from " + "its own address and UDP port " +
           std::to_string(dev_.config_.udp_port) + ", so another program on this host sent it (a forged packet?)";
  });
  return false;
}

// A UD datagram that missed (no such QP, or the wrong Q_Key) counts towards UdProbeGuard;
// the miss that closes the guard says so once in the log.
void Ingress::ud_missed(uint32_t qpn, uint64_t now) {
  if (!ud_guard_.miss(now)) return;
  dev_.journal().log_limited(LogLevel::kWarn, "ud_probe", 0, [&] {
    return "UD datagrams from senders that have not delivered one are dropped for the next " +
           std::to_string(UdProbeGuard::kClosedNs / 1'000'000) +
           " ms: " + std::to_string(UdProbeGuard::kMaxMissesPerWindow) +
           " in a second named no QP here or the wrong Q_Key "
           "(the last for QP " +
           hex(qpn) +
           "), as a sweep for a UD QP's QPN and Q_Key does; peers that already "
           "delivered a datagram are not affected (counted in rx_drop_ud_throttled)";
  });
}

// While UdProbeGuard is closed, a UD datagram from a sender it does not know is dropped before
// its QPN and Q_Key are looked at, so a guess made during a sweep is wasted.
bool Ingress::ud_guard_admits(const ParsedPacket& pkt, uint32_t src_ip, uint64_t now) {
  if (!(pkt.mask & kIsUd) || !ud_guard_.refuses(src_ip, now)) return true;
  dev_.journal().drop(Drop::kUdThrottled, pkt.h.bth.dest_qp, [&] { return "a UD datagram from " + ip_string(src_ip); });
  return false;
}

void Ingress::receive_packet(uint32_t src_ip, uint16_t src_port, std::span<const uint8_t> bytes, uint64_t now,
                             uint32_t dst_ip) {
  ++dev_.counters_.rx_packets;
  dev_.counters_.rx_bytes += bytes.size();
  if (dst_ip == 0) dst_ip = dev_.config_.ipv4;
  // The ICRC covers the IP destination: a datagram to a group is checked with the group's address.
  IpUdpInfo ip{src_ip, dst_ip, src_port, dev_.config_.udp_port};
  ParsedPacket pkt;
  ParseError err = parse_packet(bytes, ip, pkt);
  if (err != ParseError::kOk) {
    dev_.journal().drop(err == ParseError::kBadIcrc ? Drop::kBadIcrc : Drop::kMalformed, 0,
                        [&] { return std::string("dropped a packet: ") + parse_error_name(err); });
    return;
  }
  if (!from_nic_port(pkt, src_ip, src_port)) return;
  if (pkt.h.bth.dest_qp == kMulticastQpn || is_multicast_ipv4(dst_ip)) {
    if (dev_.tracer_.on())
      transmit_.trace_packet(TraceKind::kPktRx, nullptr, src_ip, dst_ip, pkt.h, pkt.mask, pkt.payload.size(), nullptr);
    datagram_.receive_multicast(pkt, src_ip, dst_ip, bytes.size());
    return;
  }
  Qp* qp = dev_.tables().find_qp_by_qpn(pkt.h.bth.dest_qp);
  if (dev_.tracer_.on())
    transmit_.trace_packet(TraceKind::kPktRx, qp, src_ip, dev_.config_.ipv4, pkt.h, pkt.mask, pkt.payload.size(),
                           nullptr);
  if (pkt.h.bth.dest_qp == proto::cm::kGsiQpn) return dev_.cm_->on_mad(src_ip, src_port, pkt, now);  // QP1: the CM's
  if (!ud_guard_admits(pkt, src_ip, now)) return;
  if (!qp) {
    if (pkt.mask & kIsUd) ud_missed(pkt.h.bth.dest_qp, now);  // before the drop's own line, as the guard closes
    dev_.journal().drop(Drop::kNoQp, pkt.h.bth.dest_qp, [&] {
      return "dropped " + std::string(opcode_info(pkt.h.bth.opcode).name) + " from " + ip_string(src_ip) + " for QP " +
             hex(pkt.h.bth.dest_qp) +
             ": no such QP on this NIC (the sender's dest_qp_num, set at RTR, "
             "must be the QPN this NIC gave the receiving QP; was it destroyed?)";
    });
    return;
  }
  if (!qp_accepts(*qp, pkt, src_ip)) return;
  ++qp->counters.rx_packets;
  // Receives are posted without a doorbell; the trace reports them when the NIC first looks.
  if (dev_.tracer_.on() && (pkt.mask & kIsRequest)) dev_.trace_points().trace_new_wqes(*qp);
  if (qp->type == IBV_QPT_UD) datagram_.respond_ud(*qp, pkt, src_ip, bytes.size(), dev_.config_.ipv4);
  else if (qp->is_xrc()) responder_.xrc_receive(*qp, pkt, now);
  else if (pkt.mask & kIsRequest) responder_.receive(*qp, pkt, now);
  else completer_.receive(*qp, pkt, now);
}

}  // namespace simnic::core
