// The request packet of a lent PSN (direct_packet.h).
#include "shim/direct_packet.h"

#include "simnic/abi/wr_opcodes.h"
#include "simnic/proto/packet.h"

namespace simnic::shim {

namespace {
constexpr uint32_t kNotDirect = abi::kWrRead | abi::kWrAtomic | abi::kWrAtomicWrite | abi::kWrLocal | abi::kWrInv;
}  // namespace

bool direct_packet_allowed(const abi::SendWqe& w, uint64_t payload_len, const abi::DirectLend& lend) {
  const abi::WrOpcodeInfo* wr = abi::wr_opcode_info(w.opcode);
  if (!wr || !(wr->props & (abi::kWrSend | abi::kWrWrite)) || (wr->props & kNotDirect)) return false;
  return payload_len <= lend.mtu;
}

size_t build_direct_packet(const abi::SendWqe& w, const abi::DirectLend& lend, uint32_t src_ip, uint16_t udp_port,
                           std::span<const uint8_t> payload, std::vector<uint8_t>& out) {
  if (!direct_packet_allowed(w, payload.size(), lend)) return 0;
  const abi::WrOpcodeInfo* wr = abi::wr_opcode_info(w.opcode);
  proto::PacketHeaders h{};
  h.bth.opcode = wr->only;  // RC: the transport bits are 0 (IBA Table 38)
  h.bth.pkey = 0xffff;
  h.bth.dest_qp = lend.dest_qp;
  h.bth.psn = lend.psn;
  h.bth.ack_req = true;  // the last packet of a message asks for its ACK, as the requester's do
  if (wr->props & abi::kWrWrite) h.reth = {w.remote_addr, w.rkey, uint32_t(payload.size())};
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
