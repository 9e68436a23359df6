// The parts every engine and verb shares (docs/architecture.md, "Inside the core"). None of
// them holds a Device: each is given the references it needs (logger, counters, tracer,
// notifier, clock, tables), and the hooks into the engines' state (the busy set, congestion
// credit, the completer's oldest WQE, queued DMA writes) are wired in shared_parts.cc.
#pragma once
#include "simnic/core/engines/completions.h"
#include "simnic/core/objects/qp_states.h"
#include "simnic/core/observe/journal.h"
#include "simnic/core/observe/trace_points.h"

namespace simnic::core {

class Device;

struct SharedParts {
  explicit SharedParts(Device& dev);  // shared_parts.cc: where Device is complete
  Journal journal;                    // log, drops, notices, refusals (observe/journal.h)
  TracePoints trace_points;           // objects in trace events (observe/trace_points.h)
  Completions completions;            // CQEs, flushes, async events (engines/completions.h)
  QpStates qp_states;                 // QP state changes (objects/qp_states.h)
};

}  // namespace simnic::core
