// UD receive (IBA 9.8.4 and 10.2.5; rxe_resp.c does the same for IB_QPT_UD): every packet is a
// whole message. There is no ACK, no RNR and no PSN order: a datagram with the wrong Q_Key,
// or that finds no receive WQE, or that does not fit the next one, is counted and lost. The
// receive buffer starts with 40 bytes for the GRH; on RoCE v2 over IPv4 that area holds 20
// zero bytes and then the IPv4 header, as on rxe and ConnectX (rdma-core's
// ibv_init_ah_from_wc reads it back).
#include <cstring>

#include "simnic/core/device.h"
#include "simnic/core/errors.h"
#include "simnic/core/text.h"
#include "simnic/proto/ipv4_udp.h"
#include "simnic/proto/opcode_table.h"

namespace simnic::core {

using namespace simnic::proto;

constexpr uint32_t kGrhBytes = 40;

// The first 40 bytes of a UD receive buffer: 20 zero bytes, then the datagram's IPv4 header,
// with the TOS byte it arrived with (the sender's traffic class: rxe copies ip_hdr(skb) whole,
// and rdma-core's ibv_init_ah_from_wc reads the traffic class back from it).
// InfiniBand mode writes none: the datagram came with no GRH, as on an IB subnet where peers
// are addressed by LID; the sender is known by its LID (wc.slid), the 40 bytes are left
// untouched and IBV_WC_GRH is clear (docs/link-layer.md).
int DatagramReceiver::scatter_ud_grh(const Qp& qp, const RecvInProgress& r, uint32_t src_ip, uint32_t dst_ip,
                                     size_t udp_len, std::string* why) {
  uint8_t grh[kGrhBytes] = {};
  uint8_t ip_udp[kIpv4UdpBytes];
  build_ipv4_udp(IpUdpInfo{src_ip, dst_ip, kRoceV2Port, dev_.config_.udp_port, 0, ingress_.rx_tos()}, udp_len, ip_udp);
  std::memcpy(grh + 20, ip_udp, 20);
  return recv_.scatter_recv(qp, r, 0, grh, kGrhBytes, why);
}

namespace {

// ibv_wc.sl of a UD receive. On RoCE there is no service level to report; ConnectX (libmlx5)
// puts the datagram's L3 header type there, 0 = GRH (RoCE v1), 1 = IPv6, 2 = IPv4, and UCX's
// ud_verbs reads it to find the destination address in the GRH area (uct_ud_iface_check_grh).
// simnic carries RoCE v2 over IPv4 only: 2. InfiniBand mode carries no SL in its packets: 0.
uint8_t wc_sl(bool infiniband) { return infiniband ? 0 : 2; }

// The bytes a receive WQE's scatter list holds (their MRs are checked as bytes land).
uint64_t ud_room(const abi::RecvWqe& wqe) { return abi::sge_bytes(wqe); }

std::string ud_too_long_why(const abi::RecvWqe& wqe, uint32_t len, size_t payload) {
  return "the datagram needs " + std::to_string(len) + " bytes (40 of GRH + " + std::to_string(payload) +
         " of payload), the receive WQE has " + std::to_string(ud_room(wqe));
}

}  // namespace

// A datagram longer than the next receive WQE of a QP's own RQ: IBA 9.9.3 (Table 63, class D
// for UD) and rxe (RESPST_ERR_LENGTH on UD without an SRQ: drop_msg, the WQE stays at the
// head of the RQ) drop it silently; the WQE is not consumed and the QP stays in RTS.
void DatagramReceiver::ud_drop_too_long(Qp& qp, const abi::RecvWqe& wqe, uint32_t len) {
  const std::string why = ud_too_long_why(wqe, len, len - kGrhBytes);
  dev_.journal().drop(Drop::kUdTooLong, qp.qpn, [&] {
    return "QP " + hex(qp.qpn) + " dropped a UD datagram: " + why +
           ". A UD datagram that does not fit the receive WQE is discarded and the WQE stays posted "
           "(IBA 9.9.3, class D; as rxe): post receive buffers of 40 bytes + the largest message";
  });
}

// `dst_ip` is where the datagram was sent: this NIC, or the multicast group; the GRH area shows it.
void DatagramReceiver::respond_ud(Qp& qp, const ParsedPacket& pkt, uint32_t src_ip, size_t udp_len, uint32_t dst_ip) {
  if (!responder_.can_receive(qp)) return;
  if (pkt.h.deth.qkey != qp.attr.qkey) {
    dev_.journal().drop(Drop::kQkey, qp.qpn, [&] {
      return "Q_Key " + hex(pkt.h.deth.qkey) + " is not the QP's " + hex(qp.attr.qkey) + " (IBA 10.2.5)";
    });
    ingress_.ud_missed(qp.qpn, dev_.now_);  // a guess of the Q_Key: UdProbeGuard counts it
    return;
  }
  ingress_.ud_sender_delivered(src_ip);  // the sender knows the QPN and Q_Key: let it through a sweep
  RecvInProgress rip;
  if (!recv_.peek_recv_wqe(qp, &rip)) {
    dev_.journal().drop(Drop::kUdNoWqe, qp.qpn,
                        [&] { return "a datagram from " + ip_string(src_ip) + ", no receive posted"; });
    return;
  }
  const uint32_t len = kGrhBytes + uint32_t(pkt.payload.size());
  if (rip.wqe.num_sge <= abi::kMaxSge && ud_room(rip.wqe) < len && !rip.from_srq)
    return ud_drop_too_long(qp, rip.wqe, len);
  recv_.consume_recv_wqe(qp);
  ibv_wc wc{};
  wc.wr_id = rip.wqe.wr_id;
  wc.opcode = IBV_WC_RECV;
  wc.qp_num = qp.qpn;
  wc.src_qp = pkt.h.deth.src_qp;
  // The receive WQE completes in error and, unless `keep_qp`, the QP goes to ERR (the error
  // map's receive rows).
  auto fail = [&](Error e, const std::string& why, bool keep_qp = false) {
    const ErrorInfo& err = error_info(e);
    const std::string rule = why + " (" + err.rule + ")";
    dev_.journal().log(LogLevel::kWarn,
                       "QP " + hex(qp.qpn) + " UD receive failed with " + wc_status_name(err.status) + ": " + rule);
    dev_.tracer_.event(TraceKind::kError)
        .u("qp", qp.qpn)
        .s("status", wc_status_name(err.status))
        .s("error", err.name)
        .s("rule", rule);
    wc.status = err.status;
    dev_.completions().push_cqe(*qp.recv_cq, wc, false);
    if (!keep_qp) dev_.qp_states().set_qp_state(qp, IBV_QPS_ERR, wc_status_name(err.status));
  };
  std::string why;
  if (rip.wqe.num_sge > abi::kMaxSge)
    return fail(Error::kRecvWqeInvalid, "receive WQE: num_sge " + std::to_string(rip.wqe.num_sge) +
                                            " exceeds the NIC's max_sge " + std::to_string(abi::kMaxSge));
  if (ud_room(rip.wqe) < len)
    // An SRQ's WQE was taken when the datagram came (class E, as rxe): it completes in error,
    // and the QP goes on receiving.
    return fail(Error::kRecvTooShort, ud_too_long_why(rip.wqe, len, pkt.payload.size()), true);
  // Only the bytes placed are checked against the SGEs' MRs (scatter_recv), as rxe and ConnectX.
  if (!dev_.config_.infiniband) {
    if (int e = scatter_ud_grh(qp, rip, src_ip, dst_ip, udp_len, &why)) return fail(recv_.recv_scatter_error(e), why);
  }
  if (!pkt.payload.empty()) {
    if (int e = recv_.scatter_recv(qp, rip, kGrhBytes, pkt.payload.data(), uint32_t(pkt.payload.size()), &why))
      return fail(recv_.recv_scatter_error(e), why);
  }
  wc.status = IBV_WC_SUCCESS;
  wc.byte_len = len;
  wc.wc_flags = dev_.config_.infiniband ? 0 : IBV_WC_GRH;
  wc.sl = wc_sl(dev_.config_.infiniband);
  wc.slid = dev_.addressing().lid_of(src_ip);
  if (pkt.mask & kHasImm) {
    wc.wc_flags |= IBV_WC_WITH_IMM;
    wc.imm_data = pkt.h.imm_be;
  }
  dev_.completions().push_cqe(*qp.recv_cq, wc, pkt.h.bth.solicited);
}

}  // namespace simnic::core
