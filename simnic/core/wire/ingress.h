// The ingress unit: the one receive path. Cheap checks first (parse, source port, the UD probe
// guard, the QP's transport and peer), then requests go to the responder (or the datagram
// receiver, or XRC's routing), responses to the completer. Owns the UD probe guard and the TOS
// of the datagram being received; calls Transmit (trace), Requester (what the packet
// scheduled), Responder, Completer and DatagramReceiver.
#pragma once
#include <cstdint>
#include <span>

#include "simnic/core/objects/objects.h"
#include "simnic/core/wire/ud_probe_guard.h"
#include "simnic/proto/packet.h"

namespace simnic::core {

class Device;
class Transmit;
class Requester;
class Completer;
class Responder;
class DatagramReceiver;

class Ingress {
 public:
  Ingress(Device& dev, Transmit& transmit, Requester& requester, Completer& completer, Responder& responder,
          DatagramReceiver& datagram)
      : dev_(dev),
        transmit_(transmit),
        requester_(requester),
        completer_(completer),
        responder_(responder),
        datagram_(datagram) {}

  // --- The event entry point (Device::on_packet) ---
  void on_packet(uint32_t src_ip, uint16_t src_port, std::span<const uint8_t> bytes, uint64_t now, uint32_t dst_ip,
                 uint8_t tos);

  // --- What the datagram receiver asks of the packet being received ---
  uint8_t rx_tos() const { return rx_tos_; }  // its IPv4 TOS: a UD GRH shows it
  void ud_sender_delivered(uint32_t src_ip) { ud_guard_.delivered(src_ip); }
  void ud_missed(uint32_t qpn, uint64_t now);

 private:
  // --- Admission ---
  void receive_packet(uint32_t src_ip, uint16_t src_port, std::span<const uint8_t> bytes, uint64_t now,
                      uint32_t dst_ip);
  bool qp_accepts(Qp& qp, const proto::ParsedPacket& pkt, uint32_t src_ip);  // false: dropped, counted
  // false when the packet is dropped (counted, logged within budget).
  bool from_nic_port(const proto::ParsedPacket& pkt, uint32_t src_ip, uint16_t src_port);
  bool ud_guard_admits(const proto::ParsedPacket& pkt, uint32_t src_ip, uint64_t now);

  // --- The units it calls ---
  Device& dev_;
  Transmit& transmit_;
  Requester& requester_;
  Completer& completer_;
  Responder& responder_;
  DatagramReceiver& datagram_;

  // --- State ---
  UdProbeGuard ud_guard_;  // slows QPN/Q_Key sweeps of UD QPs
  uint8_t rx_tos_ = 0;     // the IPv4 TOS of the packet being received (on_packet)
};

}  // namespace simnic::core
