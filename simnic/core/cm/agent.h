// The connection manager of one NIC: what the kernel's ib_cm and rdma_cm do for RoCE. It keeps
// the rdma_cm ids of the programs using this NIC (librdmacm asks through abi/cm.h), exchanges
// CM MADs (IBA chapter 12) with other NICs' agents on QP1, retransmits them on the CM response
// timeout, and reports rdma_cm events on the programs' event channels.
//
// CmAgent is the façade: it serves librdmacm's calls (cm/agent.cc) and holds the parts, each
// with its own state (their headers say what they own and whom they call): the id table
// (cm/id_table.h), the event channels (cm/events.h), admission of requests to listeners
// (cm/admission.h), the MAD exchange and timers (cm/messages.h), MADs out (cm/mad_wire.h) and
// the flood-limited log (cm/flood_log.h). The parts are built in the order they are declared;
// one given a part declared after it only keeps the reference while the agent is built.
//
// Pure like the Device: packets leave through PacketSink, events through Notifier, time comes
// in as an argument.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "simnic/abi/cm_bodies.h"
#include "simnic/core/cm/admission.h"
#include "simnic/core/cm/cm_id.h"
#include "simnic/core/cm/events.h"
#include "simnic/core/cm/flood_log.h"
#include "simnic/core/cm/id_table.h"
#include "simnic/core/cm/mad_wire.h"
#include "simnic/core/cm/messages.h"
#include "simnic/core/env.h"
#include "simnic/core/objects/key_source.h"
#include "simnic/core/observe/trace.h"
#include "simnic/proto/cm_mad.h"
#include "simnic/proto/packet.h"

namespace simnic::core {

class CmAgent {
 public:
  CmAgent(CmNicInfo nic, PacketSink& wire, Notifier& notifier, Tracer& tracer, Logger& logger);

  // --- From the control socket (abi/cm_bodies.h); each returns 0 or a positive errno ---
  uint32_t new_client() { return next_client_++; }
  void close_client(uint32_t client, uint64_t now);  // the process is gone: destroy its ids
  int attach_channel(uint32_t client, int fd, uint32_t* handle) { return events_.attach(client, fd, handle); }
  int create_id(uint32_t client, const abi::CmCreateIdReq& req, uint32_t* handle);
  int destroy_id(uint32_t client, uint32_t handle, uint64_t now);
  int migrate_id(uint32_t client, const abi::CmMigrateReq& req);
  int bind(uint32_t client, const abi::CmBindReq& req, uint16_t* port);
  int listen(uint32_t client, const abi::CmListenReq& req);
  int connect(uint32_t client, const abi::CmConnectReq& req, uint64_t now);
  int accept(uint32_t client, const abi::CmAcceptReq& req, uint64_t now);
  int reject(uint32_t client, const abi::CmRejectReq& req, uint64_t now);
  int disconnect(uint32_t client, const abi::CmDisconnectReq& req, uint64_t now);
  int init_qp_attr(uint32_t client, const abi::CmInitQpAttrReq& req, abi::CmInitQpAttrReply* out);
  // Why the last call was refused, for the program ("" if it gave no reason).
  std::string take_refusal() { return std::exchange(refusal_, {}); }

  // --- From the wire and the clock ---
  void on_mad(uint32_t src_ip, uint16_t src_port, const proto::ParsedPacket& pkt, uint64_t now) {
    exchange_.on_mad(src_ip, src_port, pkt, now);
  }
  void on_timer(uint64_t now) { exchange_.on_timer(now); }
  uint64_t next_deadline() const { return exchange_.next_deadline(); }

  // --- What it holds and counts ---
  const CmIdTable::Ids& ids() const { return ids_.all(); }
  uint64_t mads_sent() const { return mad_wire_.sent(); }
  uint64_t mads_received() const { return exchange_.received(); }
  // Requests dropped as malformed, and refused or evicted to keep one source from filling a
  // listener (cm/admission.cc).
  uint64_t reqs_malformed() const { return admission_.malformed(); }
  uint64_t reqs_refused() const { return admission_.refused(); }
  uint64_t reqs_evicted() const { return admission_.evicted(); }

 private:
  int refuse(int err, std::string why) {
    refusal_ = std::move(why);
    return err;
  }
  void fill_req(CmId& id, const abi::CmConnectReq& req, uint8_t timeout, uint8_t retries, proto::cm::Message* m);

  CmNicInfo nic_;
  Logger& logger_;
  KeySource keys_;
  std::string refusal_;
  uint32_t next_client_ = 1;
  CmFloodLog log_;
  CmMadWire mad_wire_;
  CmIdTable ids_;
  CmEvents events_;
  CmAdmission admission_;
  CmExchange exchange_;
};

}  // namespace simnic::core
