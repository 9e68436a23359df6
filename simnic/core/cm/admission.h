// Which connection requests (REQ, SIDR_REQ) a listener takes, and when its program hears of
// them (cm/admission.cc, which says the rules). Owns the CONNECT_REQUEST events held back for
// a full backlog and the counts of requests dropped as malformed, refused and evicted. Calls
// CmIdTable (the listener's requests), CmEvents (deliver), CmExchange (abandon an evicted
// request: its REJ) and CmFloodLog.
#pragma once
#include <cstdint>
#include <map>

#include "simnic/abi/cm_bodies.h"
#include "simnic/core/cm/cm_id.h"
#include "simnic/core/cm/flood_log.h"
#include "simnic/core/observe/trace.h"
#include "simnic/proto/cm_mad.h"

namespace simnic::core {

class CmIdTable;
class CmEvents;
class CmExchange;

// The requests a listener's program may have unanswered for rdma_listen(id, asked), as the
// kernel's ucma: asked, or the maximum (1024) for <= 0 or more.
uint32_t listen_backlog(int32_t asked);

class CmAdmission {
 public:
  CmAdmission(const CmNicInfo& nic, CmIdTable& ids, CmEvents& events, CmExchange& exchange, CmFloodLog& log,
              Tracer& tracer)
      : nic_(nic), ids_(ids), events_(events), exchange_(exchange), log_(log), tracer_(tracer) {}

  // --- A request arrives ---
  const char* malformed_req(uint32_t src_ip, const proto::cm::Message& m, const proto::cm::CmaHdr& hdr,
                            const CmId& listener) const;
  void drop_malformed(uint32_t src_ip, const proto::cm::Message& m, const char* why, uint64_t now);
  bool admit_request(const CmId& listener, uint32_t src_ip, uint16_t src_port, uint64_t now);
  void offer_request(CmId& id, const abi::CmEventMsg& ev);

  // --- A request is answered or goes away ---
  void release_held(uint32_t listener_handle);
  void forget_held(uint32_t handle);  // its program is never to hear of it

  uint64_t malformed() const { return reqs_malformed_; }
  uint64_t refused() const { return reqs_refused_; }
  uint64_t evicted() const { return reqs_evicted_; }

 private:
  bool evict_from_largest_source(const CmId& listener, size_t newcomer_holds, uint64_t now);
  size_t requests_from(const CmId& listener, uint32_t ip, uint16_t port) const;
  size_t told_requests(const CmId& listener) const;
  size_t pending_requests(const CmId& listener) const;

  const CmNicInfo& nic_;
  CmIdTable& ids_;
  CmEvents& events_;
  CmExchange& exchange_;
  CmFloodLog& log_;
  Tracer& tracer_;
  uint64_t reqs_malformed_ = 0, reqs_refused_ = 0, reqs_evicted_ = 0;
  std::map<uint32_t, abi::CmEventMsg> held_events_;  // CONNECT_REQUESTs not told yet, by new id
};

}  // namespace simnic::core
