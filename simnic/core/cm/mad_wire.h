// CM MADs out to QP1 of another NIC (cm/mad_wire.cc): UD SEND_ONLY packets with Q_Key
// 0x80010000 (IBA 9.6.1.1.3, 13.5.1). Owns the GSI QP's PSN, the packet buffer and the count
// of MADs sent; keeps an id's last MAD for retransmission. Calls PacketSink, Tracer and, once
// (the first PSN), KeySource.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "simnic/core/cm/cm_id.h"
#include "simnic/core/env.h"
#include "simnic/core/objects/key_source.h"
#include "simnic/core/observe/trace.h"
#include "simnic/proto/cm_mad.h"

namespace simnic::core {

class CmMadWire {
 public:
  CmMadWire(const CmNicInfo& nic, KeySource& keys, PacketSink& wire, Tracer& tracer);

  // One MAD to QP1 of the NIC at dst_ip. With an id and expect_answer, it is kept to be sent
  // again when the id's timer fires.
  void send(CmId* id, uint32_t dst_ip, proto::cm::Message& m, uint64_t now, bool expect_answer);
  void send_rej(uint32_t dst_ip, uint64_t tid, uint32_t local_comm_id, uint32_t remote_comm_id, uint16_t reason,
                uint8_t msg_ref, const uint8_t* priv, size_t priv_len, uint64_t now);
  uint64_t sent() const { return mads_sent_; }

 private:
  void trace(uint32_t dst, uint32_t psn, const proto::cm::Message& m, const char* fault);

  const CmNicInfo& nic_;
  PacketSink& wire_;
  Tracer& tracer_;
  uint32_t gsi_psn_ = 0;
  uint64_t mads_sent_ = 0;
  std::vector<uint8_t> tx_;
};

}  // namespace simnic::core
