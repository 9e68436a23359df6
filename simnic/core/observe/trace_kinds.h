// The trace's event kinds, one table: the enum the engines emit and the names a trace line
// carries. docs/trace-format.md's Kinds table documents every row (tests/unit/viz/
// trace_kinds_test.cc fails on a kind missing there, or on one no engine emits).
#pragma once
#include <cstddef>
#include <cstdint>

namespace simnic::core {

// X(enumerator, name in the trace)
#define SIMNIC_TRACE_KINDS(X)          \
  X(kNicUp, "nic_up")                  \
  X(kCtxOpen, "ctx_open")              \
  X(kCtxClose, "ctx_close")            \
  X(kPdCreate, "pd_create")            \
  X(kPdDestroy, "pd_destroy")          \
  X(kMrCreate, "mr_create")            \
  X(kMrDestroy, "mr_destroy")          \
  X(kDmCreate, "dm_create")            \
  X(kDmDestroy, "dm_destroy")          \
  X(kMwCreate, "mw_create")            \
  X(kMwDestroy, "mw_destroy")          \
  X(kMwBind, "mw_bind")                \
  X(kMwInvalidate, "mw_invalidate")    \
  X(kCqCreate, "cq_create")            \
  X(kCqDestroy, "cq_destroy")          \
  X(kCqResize, "cq_resize")            \
  X(kQpCreate, "qp_create")            \
  X(kQpDestroy, "qp_destroy")          \
  X(kXrcdOpen, "xrcd_open")            \
  X(kXrcdClose, "xrcd_close")          \
  X(kXrcSrqCreate, "xrc_srq_create")   \
  X(kXrcSrqDestroy, "xrc_srq_destroy") \
  X(kQpOpen, "qp_open")                \
  X(kQpHandover, "qp_handover")        \
  X(kQpState, "qp_state")              \
  X(kDoorbell, "doorbell")             \
  X(kWqePosted, "wqe_posted")          \
  X(kWqeDone, "wqe_done")              \
  X(kPktTx, "pkt_tx")                  \
  X(kPktRx, "pkt_rx")                  \
  X(kPktDrop, "pkt_drop")              \
  X(kNak, "nak")                       \
  X(kRetransmit, "retransmit")         \
  X(kCcCut, "cc_cut")                  \
  X(kTimer, "timer")                   \
  X(kDma, "dma")                       \
  X(kOdpFault, "odp_fault")            \
  X(kCqe, "cqe")                       \
  X(kCqEvent, "cq_event")              \
  X(kError, "error")                   \
  X(kStep, "step")                     \
  X(kEngineSteps, "engine_steps")      \
  X(kMcastAttach, "mcast_attach")      \
  X(kMcastDetach, "mcast_detach")      \
  X(kMcastDeliver, "mcast_deliver")    \
  X(kCmRx, "cm_rx")                    \
  X(kCmId, "cm_id")                    \
  X(kCmState, "cm_state")              \
  X(kCmEvent, "cm_event")

enum class TraceKind : uint8_t {
#define SIMNIC_TRACE_KIND_ENUM(id, name) id,
  SIMNIC_TRACE_KINDS(SIMNIC_TRACE_KIND_ENUM)
#undef SIMNIC_TRACE_KIND_ENUM
};

inline constexpr const char* kTraceKindNames[] = {
#define SIMNIC_TRACE_KIND_NAME(id, name) name,
    SIMNIC_TRACE_KINDS(SIMNIC_TRACE_KIND_NAME)
#undef SIMNIC_TRACE_KIND_NAME
};
inline constexpr size_t kTraceKindCount = sizeof kTraceKindNames / sizeof kTraceKindNames[0];

constexpr const char* trace_kind_name(TraceKind k) { return kTraceKindNames[size_t(k)]; }

}  // namespace simnic::core
