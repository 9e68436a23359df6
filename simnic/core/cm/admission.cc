// Which connection requests (REQ, SIDR_REQ) a listener takes, and when its program hears of
// them. Anyone who can send a datagram to the NIC can send a REQ (RoCE has no authentication),
// so three rules keep one sender from shutting a listener's program off from everybody else:
//
//  - malformed REQs are dropped before they make an id: the program never sees a request it
//    cannot accept (a REQ with QPN 0 used to reach it, and its rdma_accept then failed EINVAL);
//  - the requests of a listener are bounded per source (address and UDP port) and in total;
//    when the total is full, the oldest request of the source holding the most is evicted;
//  - the program is told of at most `backlog` requests at a time (rdma_listen's argument); the
//    others wait in the NIC, and the next one told is the oldest of the source holding the
//    fewest. The kernel's ucma_connect_event_handler takes one from the backlog for each
//    CONNECT_REQUEST it queues and gives it back when the program reads the event; past it,
//    the request is rejected (-ENOMEM). simnicd cannot see the program read its channel, so
//    a request counts until the program answers it (accept, reject or destroy), and the ones
//    past the backlog wait instead of being rejected: a flood delays a real client, it does
//    not turn it away.
#include <limits>

#include "simnic/core/cm/admission.h"

#include "simnic/core/cm/events.h"
#include "simnic/core/cm/id_table.h"
#include "simnic/core/cm/messages.h"
#include "simnic/core/observe/drop_reasons.h"
#include "simnic/core/text.h"

namespace simnic::core {

using namespace simnic::proto;

namespace {

// Requests a listener holds before its program accepts or rejects them: the kernel's
// net.rdma_ucm.max_backlog (1024), which also caps rdma_listen's backlog.
constexpr size_t kMaxPendingRequests = 1024;
// One source's share of them, well below the total, so that a flood from one address and
// port leaves room for everyone else.
constexpr size_t kMaxRequestsPerSource = 32;

}  // namespace

// What the kernel's ucma does with rdma_listen's backlog: a value <= 0 or above the maximum
// means the maximum.
uint32_t listen_backlog(int32_t asked) {
  return asked > 0 && size_t(asked) < kMaxPendingRequests ? uint32_t(asked) : uint32_t(kMaxPendingRequests);
}

// A REQ simnic could never turn into a working connection, so the program must not see it.
// Returns why, or nullptr for a well-formed one. The kernel's cm_req_handler takes most of
// these as they come and leaves them to fail later (in the program's rdma_accept or on the
// wire); a NIC that is sent forged REQs does better to drop them first.
const char* CmAdmission::malformed_req(uint32_t src_ip, const cm::Message& m, const cm::CmaHdr& hdr,
                                       const CmId& listener) const {
  // The kernel's cma_check_req_qp_type: a UD service answers SIDR_REQ (IBA 12.11), not REQ.
  if (listener.qp_type != IBV_QPT_RC) return "it asks for an RC connection to a UD service";
  // IBA Table 106, Transport Service Type: 0 RC, 1 UC; rdma_cm's RC ids take RC only.
  if (m.transport_type != 0) return "its transport type is not RC";
  // IBA Table 106, Local QPN: the sender's RC QP. QP0 and QP1 are the special QPs (SMI, GSI),
  // never an RC QP; with QPN 0 the program's rdma_accept failed (no peer QP for RTR).
  if (m.qpn < 2) return "its local QPN is 0 or 1 (the special QPs, never an RC QP)";
  // IBA Table 106, Path Packet Payload MTU: 1 (256) .. 5 (4096); other codes are reserved.
  if (m.path_mtu < IBV_MTU_256 || m.path_mtu > IBV_MTU_4096) return "its path MTU code is not 1..5";
  // rdma_cm's IP header in the private data (IBA Annex A11): a NIC says its own address, which
  // is the datagram's source, and asks for ours.
  if (hdr.src_ip != src_ip) return "its IP CM header names another source address than the datagram's";
  if (hdr.dst_ip != nic_.ipv4) return "its IP CM header names another destination than this NIC";
  return nullptr;
}

void CmAdmission::drop_malformed(uint32_t src_ip, const cm::Message& m, const char* why, uint64_t now) {
  ++reqs_malformed_;
  if (tracer_.on()) trace_drop(tracer_, Drop::kCmMalformedReq, 1, why);
  log_.log(LogLevel::kWarn, "cm_malformed", now, [&] {
    return "dropped a REQ from " + ip_string(src_ip) + " for port " + std::to_string(cm::service_port(m.service_id)) +
           ": " + why + " (a malformed or forged connection request; the program never sees it)";
  });
}

size_t CmAdmission::requests_from(const CmId& listener, uint32_t ip, uint16_t port) const {
  size_t n = 0;
  for (const auto& [h, id] : ids_.all())
    n += id->listener == listener.handle && awaits_answer(id->state) && id->remote_ip == ip && id->src_udp_port == port;
  return n;
}

size_t CmAdmission::told_requests(const CmId& listener) const {
  size_t n = 0;
  for (const auto& [h, id] : ids_.all()) n += id->listener == listener.handle && awaits_answer(id->state) && !id->held;
  return n;
}

// When the listener is full: the oldest request the program has not been told of, from the
// source that holds the most, makes room, if that source holds more than the newcomer would.
// Requests the program was told of are never taken back (its rdma_accept must work).
bool CmAdmission::evict_from_largest_source(const CmId& listener, size_t newcomer_holds, uint64_t now) {
  std::map<std::pair<uint32_t, uint16_t>, size_t> holds;
  for (const auto& [h, id] : ids_.all())
    if (id->listener == listener.handle && awaits_answer(id->state)) ++holds[{id->remote_ip, id->src_udp_port}];
  CmId* victim = nullptr;
  size_t victim_holds = newcomer_holds + 1;
  for (auto& [h, id] : ids_.all()) {  // in handle order: the first of a source is its oldest
    if (id->listener != listener.handle || !id->held) continue;
    size_t n = holds[{id->remote_ip, id->src_udp_port}];
    if (n > victim_holds) victim = id.get(), victim_holds = n;
  }
  if (!victim) return false;
  ++reqs_evicted_;
  log_.log(LogLevel::kWarn, "cm_evict", now, [&] {
    return "rdma_cm id " + std::to_string(listener.handle) + " (port " + std::to_string(listener.local_port) +
           "): rejected the oldest waiting request of " + ip_string(victim->remote_ip) + " (" +
           std::to_string(victim_holds) + " waiting) to make room: the listener holds " +
           std::to_string(kMaxPendingRequests) + " requests its program has not answered";
  });
  exchange_.abandon(*victim, now);  // REJ (consumer defined), as the kernel's destroy of a REQ_RCVD id
  return true;
}

// Whether a new request from (ip, port) may wait for the listener's program.
bool CmAdmission::admit_request(const CmId& listener, uint32_t src_ip, uint16_t src_port, uint64_t now) {
  const size_t mine = requests_from(listener, src_ip, src_port);
  bool room = mine < kMaxRequestsPerSource &&
              (pending_requests(listener) < kMaxPendingRequests || evict_from_largest_source(listener, mine, now));
  if (room) return true;
  ++reqs_refused_;
  log_.log(LogLevel::kWarn, "cm_refuse", now, [&] {
    return "rdma_cm id " + std::to_string(listener.handle) + " (port " + std::to_string(listener.local_port) +
           ") rejected a request from " + ip_string(src_ip) + ":" + std::to_string(src_port) + ": " +
           (mine >= kMaxRequestsPerSource
                ? "that source already has " + std::to_string(mine) + " requests waiting (the most one source may have)"
                : "the listener is full (" + std::to_string(kMaxPendingRequests) +
                      " requests its program has not answered)");
  });
  return false;
}

// The program hears of a new request now if fewer than `backlog` of the listener's requests
// it was told of wait for its answer; else the NIC holds it until one is answered.
void CmAdmission::offer_request(CmId& id, const abi::CmEventMsg& ev) {
  const CmId* l = ids_.find(id.listener);
  if (!l || told_requests(*l) < l->backlog + 1) {  // +1: `id` counts
    events_.deliver(id, ev);
    return;
  }
  id.held = true;
  held_events_[id.handle] = ev;
  tracer_.event(TraceKind::kCmId).u("id", id.handle).s("action", "held").u("listener", id.listener);
}

// A request of `listener_handle` was answered (or went away): tell its program of the next
// ones, the oldest of the source holding the fewest first, so a flooding source waits its turn.
void CmAdmission::release_held(uint32_t listener_handle) {
  const CmId* l = ids_.find(listener_handle);
  if (!l || l->state != CmState::kListen) return;
  const CmId& listener = *l;
  for (size_t told = told_requests(listener); told < listener.backlog; ++told) {
    std::map<std::pair<uint32_t, uint16_t>, size_t> holds;
    for (const auto& [h, id] : ids_.all())
      if (id->listener == listener_handle && awaits_answer(id->state)) ++holds[{id->remote_ip, id->src_udp_port}];
    CmId* next = nullptr;
    size_t next_holds = std::numeric_limits<size_t>::max();
    for (auto& [h, id] : ids_.all()) {  // in handle order: the first of a source is its oldest
      if (id->listener != listener_handle || !id->held) continue;
      size_t n = holds[{id->remote_ip, id->src_udp_port}];
      if (n < next_holds) next = id.get(), next_holds = n;
    }
    if (!next) return;
    next->held = false;
    auto ev = held_events_.find(next->handle);
    if (ev == held_events_.end()) continue;
    const abi::CmEventMsg msg = ev->second;
    held_events_.erase(ev);
    events_.deliver(*next, msg);
  }
}

void CmAdmission::forget_held(uint32_t handle) {
  if (CmId* id = ids_.find(handle)) id->held = false;
  held_events_.erase(handle);
}

size_t CmAdmission::pending_requests(const CmId& listener) const {
  size_t n = 0;
  for (const auto& [h, id] : ids_.all()) n += id->listener == listener.handle && awaits_answer(id->state);
  return n;
}

}  // namespace simnic::core
