// The parts of a Device that serve the verbs, by concern (docs/architecture.md, "The verbs").
// Each reaches the object tables and the shared parts through its Device.
#pragma once
#include "simnic/core/memory/memory_verbs.h"
#include "simnic/core/objects/budgets.h"
#include "simnic/core/objects/contexts.h"
#include "simnic/core/objects/queue_verbs.h"
#include "simnic/core/objects/xrc_verbs.h"
#include "simnic/core/port/addressing.h"

namespace simnic::core {

class Device;

struct VerbParts {
  explicit VerbParts(Device& dev) : addressing(dev), budgets(dev), contexts(dev), memory(dev), queues(dev), xrc(dev) {}
  Addressing addressing;  // ibv_query_device/port, the GID table, address vectors, LIDs
  Budgets budgets;        // queue memory and object shares
  ContextVerbs contexts;  // open/close, handle checks, explain_qp, the context page, import
  MemoryVerbs memory;     // PDs, MRs, rereg, DM, ODP advice, MW alloc/dealloc, AHs
  QueueVerbs queues;      // channels, CQs, SRQs, QPs, multicast attach/detach
  XrcVerbs xrc;           // XRC domains, SRQs, INI/TGT QPs, ibv_open_qp
};

}  // namespace simnic::core
