// The named steps the engines walk, as rxe's comp_state and resp_states: each step is a
// function returning the next, and the names are what a trace or a debugger shows.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "simnic/core/observe/trace.h"

namespace simnic::core {

// The completer, for one response (completer.cc).
enum class CompStep : uint8_t {
  kCheckState,      // only a sending QP hears responses
  kCheckPsn,        // for a PSN sent and not yet retired
  kFindWqe,         // READ response / atomic ACK: the WQE it answers
  kAtomicAck,       // the original value into the local buffer
  kReadData,        // READ data, in order, into the local buffers
  kReadAtomicDone,  // retire it when complete, else re-arm the timer
  kCheckMsn,        // ACK/NAK: an MSN our responder could send
  kAck,             // retire every WQE the ACK covers
  kRnrNak,          // wait, then go back
  kNak,             // go back (sequence error) or fail the WQE
  kRunRequester,    // schedule the requester: the window may have opened
  kDone,
};
const char* comp_step_name(CompStep step);

// The responder, for one request (responder.cc).
enum class RespStep : uint8_t {
  kCheckState,  // RTR, RTS, SQD or SQE
  kCheckPsn,    // RC: in order, a gap (NAK once), or a duplicate; UC: resynchronise
  kDuplicate,   // re-ACK, re-read, or replay the atomic
  kExecute,     // SEND, WRITE, READ or atomic by the opcode table's flags
  kDone,
};
const char* resp_step_name(RespStep step);

// The steps one packet walked, kept on the stack only while engine steps are traced: one
// engine_steps event per packet at the end of its walk; when they are not, nothing is kept,
// allocated or written.
class StepPath {
 public:
  template <class Step>
  void add(Step s) {
    if (n_ < sizeof steps_) steps_[n_++] = uint8_t(s);
  }
  // "CHECK_STATE>CHECK_PSN>CHECK_MSN>ACK>RUN_REQUESTER"
  template <class Step>
  std::string names(const char* (*name)(Step)) const {
    std::string s;
    for (size_t i = 0; i < n_; ++i) (s += i ? ">" : "") += name(Step(steps_[i]));
    return s;
  }

 private:
  uint8_t steps_[16];  // the longest walk today is 7 steps
  size_t n_ = 0;
};

template <class Step>
void trace_engine_steps(Tracer& t, const char* engine, uint32_t qpn, uint32_t psn, const StepPath& path,
                        const char* (*name)(Step)) {
  t.event(TraceKind::kEngineSteps).s("engine", engine).u("qp", qpn).u("psn", psn).s("steps", path.names(name));
}

}  // namespace simnic::core
