// The transmit unit: every packet an engine sends is built, counted, traced and handed to the
// wire here. Owns the transmit buffer; calls nothing but the Device's shared helpers (the
// wire, the counters, the tracer, the AH table for a UD WQE's traffic class).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "simnic/core/env.h"
#include "simnic/core/objects/objects.h"
#include "simnic/core/observe/trace.h"
#include "simnic/proto/packet.h"

namespace simnic::core {

class Device;

class Transmit {
 public:
  explicit Transmit(Device& dev) : dev_(dev) {}

  // --- Sending ---
  void emit(Qp& qp, const proto::PacketHeaders& h, std::span<const uint8_t> payload) {
    emit_to(qp, qp.remote_ip, h, payload);
  }
  SendOutcome emit_to(Qp& qp, uint32_t dst_ip, const proto::PacketHeaders& h, std::span<const uint8_t> payload) {
    return emit_to(qp, dst_ip, h, payload, path_tos(qp));
  }
  // `tos`: the IPv4 TOS byte the datagram carries (a UD WQE's AH's traffic class).
  SendOutcome emit_to(Qp& qp, uint32_t dst_ip, const proto::PacketHeaders& h, std::span<const uint8_t> payload,
                      uint8_t tos);

  // A request the program sent itself from the NIC's socket (a lent PSN, direct_send.h):
  // counted and traced as this NIC's own, which it is from now on.
  SendOutcome count_sent_by_program(Qp& qp, uint32_t dst_ip, const proto::PacketHeaders& h, size_t payload_len);

  // --- Traffic class ---
  // The traffic class of a connected QP's path (ibv_modify_qp's ah_attr.grh), 0 without a GRH.
  static uint8_t path_tos(const Qp& qp) { return qp.attr.ah_attr.is_global ? qp.attr.ah_attr.grh.traffic_class : 0; }
  uint8_t wqe_tos(const Qp& qp, const abi::SendWqe& w);

  // --- Tracing (observe/trace_points.cc): a packet sent or received ---
  // `sent_by`: who put it on the wire, when not this NIC ("program": a lent PSN).
  void trace_packet(TraceKind kind, const Qp* qp, uint32_t src, uint32_t dst, const proto::PacketHeaders& h,
                    uint32_t mask, size_t payload, const char* fault, const char* sent_by = nullptr);

 private:
  Device& dev_;
  std::vector<uint8_t> tx_buffer_ = std::vector<uint8_t>(8192);
};

}  // namespace simnic::core
