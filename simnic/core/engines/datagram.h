// The datagram receiver: UD receive (datagram.cc; one packet is one message: no ACK, no RNR,
// no PSN order) and multicast delivery to every attached QP (multicast_receive.cc). Owns no
// state; calls ReceiveQueue (WQEs, scatter), Responder (can_receive), Ingress (the packet's
// TOS, the UD probe guard) and the Device's shared helpers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "simnic/core/objects/objects.h"
#include "simnic/proto/packet.h"

namespace simnic::core {

class Device;
class ReceiveQueue;
class Responder;
class Ingress;

class DatagramReceiver {
 public:
  DatagramReceiver(Device& dev, ReceiveQueue& recv, Responder& responder, Ingress& ingress)
      : dev_(dev), recv_(recv), responder_(responder), ingress_(ingress) {}

  void respond_ud(Qp& qp, const proto::ParsedPacket& pkt, uint32_t src_ip, size_t udp_len, uint32_t dst_ip);
  void receive_multicast(const proto::ParsedPacket& pkt, uint32_t src_ip, uint32_t group_ip, size_t udp_len);
  bool group_ip_joined(uint32_t ip) const;

 private:
  std::vector<Qp*> mcast_members(uint32_t group_ip);  // attached to any group of that IP, once each
  int scatter_ud_grh(const Qp& qp, const RecvInProgress& r, uint32_t src_ip, uint32_t dst_ip, size_t udp_len,
                     std::string* why);
  void ud_drop_too_long(Qp& qp, const abi::RecvWqe& wqe, uint32_t len);

  Device& dev_;
  ReceiveQueue& recv_;
  Responder& responder_;
  Ingress& ingress_;
};

}  // namespace simnic::core
