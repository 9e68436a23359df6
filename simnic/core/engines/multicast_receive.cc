// UD multicast delivery (IBA 10.5): a datagram sent to a group reaches every QP of this NIC
// attached to it. RoCEv2 carries the multicast GID as an IP multicast destination; the verbs
// that attach and detach QPs are in objects/multicast.cc.
#include <algorithm>

#include "simnic/core/device.h"
#include "simnic/core/text.h"
#include "simnic/proto/opcode_table.h"

namespace simnic::core {

using namespace simnic::proto;

bool DatagramReceiver::group_ip_joined(uint32_t ip) const {
  for (const auto& [key, group] : dev_.mcast_groups_)
    if (group.ip == ip) return true;
  return false;
}

std::vector<Qp*> DatagramReceiver::mcast_members(uint32_t group_ip) {
  std::vector<Qp*> out;
  for (const auto& [key, group] : dev_.mcast_groups_) {
    if (group.ip != group_ip) continue;
    for (Qp* qp : group.qps)
      if (std::find(out.begin(), out.end(), qp) == out.end()) out.push_back(qp);
  }
  return out;
}

// A datagram that arrived for IP group `group_ip` (or with the multicast DestQP). Every QP
// attached here gets it, the sending QP too if it is attached (as ConnectX loops multicast
// back unless the QP was created with IBV_QP_CREATE_BLOCK_SELF_MCAST_LB); each one checks its
// Q_Key and takes a receive WQE as for any UD datagram.
void DatagramReceiver::receive_multicast(const ParsedPacket& pkt, uint32_t src_ip, uint32_t group_ip, size_t udp_len) {
  std::string why;
  if (!is_multicast_ipv4(group_ip))
    why = "DestQP 0xFFFFFF (multicast) in a datagram sent to this NIC's own address, not to a group (IBA 10.5)";
  else if (pkt.h.bth.dest_qp != kMulticastQpn)
    why = "sent to group " + ip_string(group_ip) + " with DestQP " + hex(pkt.h.bth.dest_qp) +
          ": a multicast packet carries DestQP 0xFFFFFF (IBA 9.2 BTH, 10.5)";
  else if (!(pkt.mask & kIsUd))
    why = std::string(opcode_info(pkt.h.bth.opcode).name) +
          " sent to a group: only UD SENDs can be multicast (IBA 10.5)";
  std::vector<Qp*> members = why.empty() ? mcast_members(group_ip) : std::vector<Qp*>{};
  if (why.empty() && members.empty()) why = "no QP on this NIC is attached to a group of IP " + ip_string(group_ip);
  if (!why.empty()) {
    dev_.journal()
        .drop(Drop::kMulticast, 0, [&] { return "dropped a datagram from " + ip_string(src_ip) + ": " + why; })
        .ip("group", group_ip);
    return;
  }
  for (Qp* qp : members) {
    ++qp->counters.rx_packets;
    ++dev_.counters_.mcast_deliveries;
    if (dev_.tracer_.on()) dev_.trace_points().trace_new_wqes(*qp);
    dev_.tracer_.event(TraceKind::kMcastDeliver).u("qp", qp->qpn).ip("group", group_ip).u("src_qp", pkt.h.deth.src_qp);
    respond_ud(*qp, pkt, src_ip, udp_len, group_ip);
  }
}

}  // namespace simnic::core
