// The CM MAD exchange (cm/messages.cc; IBA 12.6: REQ/REP/RTU, REJ, MRA, DREQ/DREP, 12.11
// SIDR_REQ/SIDR_REP): the handlers of received MADs, the disconnect messages, what the peer is
// told when an id goes away, and the ids' timers (CM response timeout, TIMEWAIT). Owns the count
// of MADs received; an id's timer lives in the id. Calls CmIdTable, CmMadWire (out), CmEvents
// (the program's events), CmAdmission (requests to listeners), CmFloodLog, KeySource, Tracer
// and Logger.
#pragma once
#include <cstddef>
#include <cstdint>

#include "simnic/core/cm/cm_id.h"
#include "simnic/core/env.h"
#include "simnic/core/objects/key_source.h"
#include "simnic/core/observe/trace.h"
#include "simnic/proto/cm_mad.h"
#include "simnic/proto/packet.h"

namespace simnic::core {

class CmIdTable;
class CmMadWire;
class CmEvents;
class CmAdmission;
class CmFloodLog;

class CmExchange {
 public:
  CmExchange(const CmNicInfo& nic, KeySource& keys, CmIdTable& ids, CmMadWire& wire, CmEvents& events,
             CmAdmission& admission, CmFloodLog& log, Tracer& tracer, Logger& logger)
      : nic_(nic),
        keys_(keys),
        ids_(ids),
        wire_(wire),
        events_(events),
        admission_(admission),
        log_(log),
        tracer_(tracer),
        logger_(logger) {}

  // --- From the wire and the clock ---
  void on_mad(uint32_t src_ip, uint16_t src_port, const proto::ParsedPacket& pkt, uint64_t now);
  void on_timer(uint64_t now);
  uint64_t next_deadline() const;
  uint64_t received() const { return mads_received_; }

  // --- Sent for the program's calls ---
  void send_dreq(CmId& id, uint64_t now, const uint8_t* priv = nullptr, size_t priv_len = 0);
  void send_drep(CmId& id, uint64_t now, bool remember);
  void enter_timewait(CmId& id, uint64_t now);
  void abandon(CmId& id, uint64_t now);  // destroy: tell the peer as the kernel's ib_destroy_cm_id

 private:
  void on_req(uint32_t src_ip, uint16_t udp_port, const proto::cm::Message& m, uint64_t now);
  void on_rep(uint32_t src_ip, const proto::cm::Message& m, uint64_t now);
  void on_rtu(uint32_t src_ip, const proto::cm::Message& m, uint64_t now);
  void on_rej(uint32_t src_ip, const proto::cm::Message& m, uint64_t now);
  void on_mra(uint32_t src_ip, const proto::cm::Message& m, uint64_t now);
  void on_dreq(uint32_t src_ip, const proto::cm::Message& m, uint64_t now);
  void on_drep(uint32_t src_ip, const proto::cm::Message& m, uint64_t now);
  void on_sidr_req(uint32_t src_ip, uint16_t udp_port, const proto::cm::Message& m, uint64_t now);
  void on_sidr_rep(uint32_t src_ip, const proto::cm::Message& m, uint64_t now);
  void on_timeout(CmId& id, uint64_t now);

  const CmNicInfo& nic_;
  KeySource& keys_;
  CmIdTable& ids_;
  CmMadWire& wire_;
  CmEvents& events_;
  CmAdmission& admission_;
  CmFloodLog& log_;
  Tracer& tracer_;
  Logger& logger_;
  uint64_t mads_received_ = 0;
};

}  // namespace simnic::core
