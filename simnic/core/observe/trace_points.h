// How WQEs, QPs, MRs and windows are described in trace events, and the snapshot of the NIC's
// objects a trace that starts late begins with. Reaches only the tracer, the NIC's
// configuration and the object tables. (Packets are traced by the engines: trace_packet.)
#pragma once
#include <cstdint>
#include <string>

#include "simnic/core/objects/tables.h"
#include "simnic/core/observe/trace.h"

namespace simnic::core {

struct DeviceConfig;

class TracePoints {
 public:
  TracePoints(Tracer& tracer, const DeviceConfig& config, ObjectTables& tables)
      : tracer_(tracer), config_(config), tables_(tables) {}
  TracePoints(const TracePoints&) = delete;
  TracePoints& operator=(const TracePoints&) = delete;

  void trace_new_wqes(Qp& qp);  // the WQEs posted on qp since the NIC last looked
  void trace_qp_lifecycle(TraceKind kind, const Qp& qp);
  std::string qp_attr_json(const Qp& qp) const;
  void trace_mr_create(const Mr& mr);  // at registration, and in a snapshot
  void trace_mr_destroy(const Mr& mr);
  void trace_mw_create(const Mw& mw);
  // One DMA into or out of application memory ("read" or "write"), through `key` (an lkey or
  // rkey) at `addr` in that key's address space: the dma event.
  void trace_dma(uint32_t qpn, const char* dir, uint32_t key, uint64_t addr, uint64_t length) {
    if (!tracer_.on()) return;
    tracer_.event(TraceKind::kDma).u("qp", qpn).s("dir", dir).u("key", key).hex("addr", addr).u("length", length);
  }
  // Emits the NIC's current objects as events, for a trace that starts now.
  void trace_snapshot();
  // Reports the WQEs posted since the NIC last looked (receives ring no doorbell): for a viewer.
  void trace_posted_wqes() {
    if (!tracer_.on()) return;
    for (auto& [h, qp] : tables_.qps_) trace_new_wqes(*qp);
  }

 private:
  void trace_mr(TraceKind kind, const Mr& mr);
  Tracer& tracer_;
  const DeviceConfig& config_;
  ObjectTables& tables_;
};

}  // namespace simnic::core
