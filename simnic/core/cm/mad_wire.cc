// CM MADs out: UD SEND_ONLY packets to QP1 with Q_Key 0x80010000 (IBA 9.6.1.1.3, 13.5.1),
// over the general services interface.
#include "simnic/core/cm/mad_wire.h"

#include <array>
#include <cstring>
#include <string>

#include "simnic/core/text.h"
#include "simnic/proto/opcode_table.h"
#include "simnic/proto/packet.h"

namespace simnic::core {

using namespace simnic::proto;

CmMadWire::CmMadWire(const CmNicInfo& nic, KeySource& keys, PacketSink& wire, Tracer& tracer)
    : nic_(nic), wire_(wire), tracer_(tracer) {
  gsi_psn_ = keys.next() & 0xffffff;
  tx_.resize(512);
}

void CmMadWire::trace(uint32_t dst, uint32_t psn, const cm::Message& m, const char* fault) {
  auto e = tracer_.event(TraceKind::kPktTx);
  e.ip("src", nic_.ipv4)
      .ip("dst", dst)
      .s("opcode", opcode_info(kUdSendOnly).name)
      .u("opcode_num", kUdSendOnly)
      .s("op_flags", op_flags_of(kUdSendOnly))
      .u("psn", psn)
      .u("dest_qp", cm::kGsiQpn)
      .u("payload", cm::kMadBytes)
      .raw("deth", "{\"qkey\":" + std::to_string(cm::kGsiQkey) + ",\"src_qp\":1}")
      .s("cm", cm::attr_name(m.attr_id))
      .u("local_comm_id", m.local_comm_id)
      .u("remote_comm_id", m.remote_comm_id);
  if (m.attr_id == cm::kReq || m.attr_id == cm::kSidrReq) e.hex("service_id", m.service_id);
  if (m.attr_id == cm::kReq || m.attr_id == cm::kRep || m.attr_id == cm::kSidrRep) e.u("cm_qpn", m.qpn);
  if (m.attr_id == cm::kRej) e.u("reason", m.reason);
  if (fault) e.s("fault", fault);
}

void CmMadWire::send(CmId* id, uint32_t dst_ip, cm::Message& m, uint64_t now, bool expect_answer) {
  std::array<uint8_t, cm::kMadBytes> mad;
  if (!cm::encode(m, mad)) return;
  PacketHeaders h;
  h.bth.opcode = kUdSendOnly;
  h.bth.dest_qp = cm::kGsiQpn;
  h.bth.psn = gsi_psn_ = (gsi_psn_ + 1) & 0xffffff;
  h.deth.qkey = cm::kGsiQkey;
  h.deth.src_qp = cm::kGsiQpn;
  IpUdpInfo ip{nic_.ipv4, dst_ip, nic_.udp_port, nic_.udp_port};
  size_t n = build_packet(h, mad, ip, tx_);
  if (!n) return;
  ++mads_sent_;
  SendOutcome out = wire_.send(dst_ip, nic_.udp_port, std::span<const uint8_t>(tx_.data(), n));
  if (tracer_.on())
    trace(dst_ip, h.bth.psn, m,
          out == SendOutcome::kDropped      ? "drop"
          : out == SendOutcome::kDuplicated ? "dup"
          : out == SendOutcome::kDelayed    ? "delay"
                                            : nullptr);
  if (!id) return;
  id->last_mad = mad;
  id->last_attr = m.attr_id;
  id->deadline_ns = expect_answer ? now + id->interval_ns : 0;
}

void CmMadWire::send_rej(uint32_t dst_ip, uint64_t tid, uint32_t local_comm_id, uint32_t remote_comm_id,
                         uint16_t reason, uint8_t msg_ref, const uint8_t* priv, size_t priv_len, uint64_t now) {
  cm::Message m;
  m.attr_id = cm::kRej;
  m.tid = tid;
  m.local_comm_id = local_comm_id;
  m.remote_comm_id = remote_comm_id;
  m.reason = reason;
  m.msg_ref = msg_ref;
  if (priv) std::memcpy(m.private_data, priv, std::min<size_t>(priv_len, 148));
  send(nullptr, dst_ip, m, now, false);
}

}  // namespace simnic::core
