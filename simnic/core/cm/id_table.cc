// The connection manager's ids: their handles, lookups, ports and states.
#include "simnic/core/cm/id_table.h"

#include "simnic/core/cm/admission.h"

namespace simnic::core {

const char* cm_state_name(CmState s) {
  static const char* kNames[] = {"IDLE",     "BOUND",         "LISTEN",        "REQ_SENT",  "REP_RCVD",
                                 "REQ_RCVD", "REP_SENT",      "ESTABLISHED",   "DREQ_SENT", "DREQ_RCVD",
                                 "TIMEWAIT", "SIDR_REQ_SENT", "SIDR_REQ_RCVD", "CLOSED"};
  return kNames[int(s)];
}

CmId* CmIdTable::find(uint32_t handle) {
  auto it = ids_.find(handle);
  return it == ids_.end() ? nullptr : it->second.get();
}

CmId* CmIdTable::owned(uint32_t client, uint32_t handle) {
  CmId* id = find(handle);
  return id && id->client == client ? id : nullptr;
}

CmId* CmIdTable::find_by_local_comm_id(uint32_t comm_id) {
  for (auto& [h, id] : ids_)
    if (id->local_comm_id == comm_id && id->state != CmState::kListen) return id.get();
  return nullptr;
}

CmId* CmIdTable::find_by_remote(uint32_t remote_comm_id, uint32_t remote_ip) {
  for (auto& [h, id] : ids_)
    if (id->remote_comm_id == remote_comm_id && id->remote_ip == remote_ip && id->listener) return id.get();
  return nullptr;
}

CmId* CmIdTable::find_listener(uint16_t ps, uint16_t port) {
  for (auto& [h, id] : ids_)
    if (id->state == CmState::kListen && id->ps == ps && id->local_port == port) return id.get();
  return nullptr;
}

// A port is taken by any id bound to it in the same port space, except the passive ids a
// listener created (they share its port, as accepted TCP sockets do).
bool CmIdTable::port_taken(uint16_t ps, uint16_t port) const {
  for (const auto& [h, id] : ids_)
    if (id->ps == ps && id->local_port == port && !id->listener) return true;
  return false;
}

// Like the kernel's cma_alloc_any_port: a random start in the local port range, then onwards.
uint16_t CmIdTable::ephemeral_port(uint16_t ps) {
  constexpr uint32_t kLow = 32768, kCount = 61000 - 32768;
  uint32_t start = keys_.next() % kCount;
  for (uint32_t i = 0; i < kCount; ++i) {
    uint16_t p = uint16_t(kLow + (start + i) % kCount);
    if (!port_taken(ps, p)) return p;
  }
  return 0;
}

CmId& CmIdTable::add(uint32_t client, uint32_t channel, uint64_t cookie, uint16_t ps, ibv_qp_type type) {
  auto id = std::make_unique<CmId>();
  id->handle = new_handle();
  id->client = client;
  id->channel = channel;
  id->cookie = cookie;
  id->ps = ps;
  id->qp_type = type;
  id->psn = keys_.next() & 0xffffff;  // a random starting PSN, as the kernel's cma
  id->mtu = nic_.mtu;
  CmId& ref = *id;
  ids_[ref.handle] = std::move(id);
  tracer_.event(TraceKind::kCmId)
      .u("id", ref.handle)
      .s("action", "create")
      .u("ps", ps)
      .s("qp_type", type == IBV_QPT_UD ? "UD" : "RC");
  return ref;
}

// An answered (or vanished) request makes room in the listener's backlog for a held one.
void CmIdTable::erase(uint32_t handle) {
  tracer_.event(TraceKind::kCmId).u("id", handle).s("action", "destroy");
  CmId* id = find(handle);
  const uint32_t listener = id && awaits_answer(id->state) ? id->listener : 0;
  admission_.forget_held(handle);
  ids_.erase(handle);
  if (listener) admission_.release_held(listener);
}

void CmIdTable::set_state(CmId& id, CmState s, const char* cause) {
  if (id.state == s) return;
  tracer_.event(TraceKind::kCmState)
      .u("id", id.handle)
      .s("from", cm_state_name(id.state))
      .s("to", cm_state_name(s))
      .s("cause", cause)
      .u("local_comm_id", id.local_comm_id)
      .u("remote_comm_id", id.remote_comm_id);
  const bool answered = id.listener && awaits_answer(id.state) && !awaits_answer(s);
  id.state = s;
  if (answered) admission_.release_held(id.listener);
}

}  // namespace simnic::core
