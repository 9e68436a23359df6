// The named steps the engines walk, as rxe's comp_state and resp_states: each step is a
// function returning the next, and the names are what a trace or a debugger shows.
#pragma once
#include <cstdint>

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
  kCheckState,   // RTR, RTS, SQD or SQE
  kCheckPsn,     // RC: in order, a gap (NAK once), or a duplicate; UC: resynchronise
  kDuplicate,    // re-ACK, re-read, or replay the atomic
  kExecute,      // SEND, WRITE, READ or atomic by the opcode table's flags
  kDone,
};
const char* resp_step_name(RespStep step);

}  // namespace simnic::core
