// The request packet of a lent PSN (direct_packet.h).
#include "shim/direct_packet.h"

#include "simnic/abi/wr_opcodes.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/packet.h"

namespace simnic::shim {

DirectKind direct_kind(const abi::SendWqe& w, uint64_t length, const abi::DirectLend& lend) {
  const abi::WrOpcodeInfo* wr = abi::wr_opcode_info(w.opcode);
  if (!wr || (wr->props & (abi::kWrLocal | abi::kWrInv | abi::kWrAtomicWrite))) return DirectKind::kNone;
  const bool inline_data = w.send_flags & IBV_SEND_INLINE;
  if (wr->props & (abi::kWrSend | abi::kWrWrite)) return length <= lend.mtu ? DirectKind::kData : DirectKind::kNone;
  if (inline_data) return DirectKind::kNone;  // an answer cannot land in inline data
  if (wr->props & abi::kWrRead) return length <= lend.mtu ? DirectKind::kAnswered : DirectKind::kNone;
  if (wr->props & abi::kWrAtomic) return length == 8 ? DirectKind::kAnswered : DirectKind::kNone;
  return DirectKind::kNone;
}

size_t build_direct_packet(const abi::SendWqe& w, const abi::DirectLend& lend, uint32_t src_ip, uint16_t udp_port,
                           uint64_t length, std::span<const uint8_t> payload, std::vector<uint8_t>& out) {
  const DirectKind kind = direct_kind(w, length, lend);
  if (kind == DirectKind::kNone || (kind == DirectKind::kData && payload.size() != length)) return 0;
  const abi::WrOpcodeInfo* wr = abi::wr_opcode_info(w.opcode);
  proto::PacketHeaders h{};
  h.bth.opcode = wr->only;  // RC: the transport bits are 0 (IBA Table 38)
  h.bth.pkey = 0xffff;
  h.bth.dest_qp = lend.dest_qp;
  h.bth.psn = lend.psn;
  h.bth.ack_req = true;  // the last packet of a request asks for its answer, as the requester's do
  if (wr->props & abi::kWrAtomic) {
    const bool swap = h.bth.opcode == proto::kRcCompareSwap;
    h.atomic = {w.remote_addr, w.rkey, swap ? w.swap : w.compare_add, w.compare_add};
  } else if (wr->props & (abi::kWrWrite | abi::kWrRead)) {
    h.reth = {w.remote_addr, w.rkey, uint32_t(length)};
  }
  if (wr->props & abi::kWrImm) h.imm_be = w.imm_data;
  // SE means something where the responder completes a receive WQE: a SEND, a WRITE with
  // immediate (as the requester, and rxe).
  const bool completes_recv = (wr->props & abi::kWrSend) || (wr->props & abi::kWrImm);
  h.bth.solicited = completes_recv && (w.send_flags & IBV_SEND_SOLICITED);
  out.resize(proto::packet_size(h.bth.opcode, payload.size()));
  const proto::IpUdpInfo ip{src_ip, lend.dst_ip, udp_port, udp_port, 0, 0};
  return proto::build_packet(h, payload, ip, out);
}

}  // namespace simnic::shim
