// The connection manager's table of rdma_cm ids (cm/id_table.cc). Owns the ids, their handles
// (one numbering with the event channels) and the ports they hold; finds an id by handle, by
// communication ID or by listening port; traces each id's creation, states and end. Calls
// KeySource (ephemeral ports, starting PSNs), Tracer, and CmAdmission when a request its
// listener counted is answered or goes away (release_held, forget_held).
#pragma once
#include <cstdint>
#include <map>
#include <memory>

#include "simnic/core/cm/cm_id.h"
#include "simnic/core/objects/key_source.h"
#include "simnic/core/observe/trace.h"

namespace simnic::core {

class CmAdmission;

class CmIdTable {
 public:
  using Ids = std::map<uint32_t, std::unique_ptr<CmId>>;
  CmIdTable(const CmNicInfo& nic, KeySource& keys, Tracer& tracer, CmAdmission& admission)
      : nic_(nic), keys_(keys), tracer_(tracer), admission_(admission) {}

  // --- Lookups ---
  const Ids& all() const { return ids_; }
  CmId* find(uint32_t handle);
  CmId* owned(uint32_t client, uint32_t handle);  // the id, if `client` owns it
  CmId* find_by_local_comm_id(uint32_t comm_id);
  CmId* find_by_remote(uint32_t remote_comm_id, uint32_t remote_ip);  // a passive id, by its peer's
  CmId* find_listener(uint16_t ps, uint16_t port);

  // --- Ports ---
  bool port_taken(uint16_t ps, uint16_t port) const;
  uint16_t ephemeral_port(uint16_t ps);

  // --- Ids coming, changing and going ---
  uint32_t new_handle() { return next_handle_++; }
  CmId& add(uint32_t client, uint32_t channel, uint64_t cookie, uint16_t ps, ibv_qp_type type);
  void erase(uint32_t handle);
  void set_state(CmId& id, CmState s, const char* cause);

 private:
  const CmNicInfo& nic_;
  KeySource& keys_;
  Tracer& tracer_;
  CmAdmission& admission_;
  uint32_t next_handle_ = 1;
  Ids ids_;
};

}  // namespace simnic::core
