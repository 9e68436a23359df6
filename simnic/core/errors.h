// Every error the engines detect, mapped once to what the NIC does about it: the NAK the
// responder sends (its AETH code), the completion status, the IBA error class and the rule.
// The requester, responder, completer and the UC/UD receive paths report errors by these
// names; the log line and the trace event cite error_info(e).rule, so a user sees which rule
// was broken. The AETH NAK codes have their own table (nak_info), which the responder uses to
// name what it sends and the completer to map what it hears to a completion status.
#pragma once
#include <cstdint>

#include <infiniband/verbs.h>

namespace simnic::core {

enum class Error : uint8_t {
  // Found by the responder on a request. RC/XRC answer with the NAK, then the QP goes to ERR
  // (IBA 9.9.3.1); UC sends nothing and drops the message (IBA 9.8.3.2) unless a receive WQE
  // completes in error.
  kSendOutOfSequence,     // a SEND FIRST/ONLY inside a SEND: that SEND's receive WQE fails
  kSendMissingFirst,      // a SEND MIDDLE/LAST outside a SEND
  kWriteOutOfSequence,    // the same for WRITEs
  kWriteLength,           // a WRITE's payload does not add up to its RETH's DMA length
  kTooManyRdAtomic,       // more READs/atomics outstanding than max_dest_rd_atomic
  kMisalignedAtomic,      // an atomic's (or ATOMIC WRITE's) target is not 8-byte aligned
  kAtomicWriteLength,     // an ATOMIC WRITE whose RETH length or payload is not 8 bytes
  kXrcSrqInvalid,         // an XRCETH naming no XRC SRQ of the TGT QP's domain
  kRkeyViolation,         // the rkey, range or rights of a remote access
  kRemoteDmaFailed,       // the NIC's own DMA into or out of an MR failed
  kOdpPageFault,          // a remote access to a page of an on-demand-paging MR with no mapping
  kRecvWqeInvalid,        // the receive WQE's scatter list is bad
  kRecvTooShort,          // the message is longer than the receive WQE's buffers
  kRecvDmaFailed,         // writing into the receive WQE's buffers failed
  kInvalidateFailed,      // SEND with invalidate named a key that cannot be invalidated
  kRkeyViolationWithImm,  // an R_Key violation of a WRITE with immediate: its receive WQE fails
  // Found by the requester or completer on a send WQE: it completes with the status, and the
  // QP goes to ERR (RC, XRC) or SQE (UC, UD: IBA 10.3.1.8).
  kWrNotForQp,            // an opcode this QP type cannot carry
  kUdAddressInvalid,      // a UD WR's AH is not the QP's
  kWqeMalformed,          // inline data, num_sge or the SQ producer index out of bounds; a failed LOCAL_INV
  kLocalProtection,       // an lkey, its range or rights, or the DMA through it
  kMessageTooLong,        // longer than the port allows, or an atomic (ATOMIC WRITE) not 8 bytes
  kMwBindFailed,          // a BIND_MW that could not be carried out
  kRetryExceeded,         // no ACK (or sequence NAKs) beyond retry_cnt
  kRnrRetryExceeded,      // RNR NAKs beyond rnr_retry
  kRemoteInvalidRequest,  // the responder's NAKs, as the requester completes them
  kRemoteAccess,
  kRemoteOperational,
  kRemoteInvalidRdRequest,
  kCount,
};

inline constexpr int8_t kNoNak = -1;

struct ErrorInfo {
  const char* name;       // as in the trace: "RKEY_VIOLATION"
  int8_t nak;             // the AETH NAK code the responder sends (proto::NakCode), kNoNak
  ibv_wc_status status;   // the completion status of the WQE it fails
  bool completes_recv;    // responder: the receive WQE in progress completes with `status`
  const char* iba_class;  // the error class of IBA 9.9.2 (requester) / 9.9.3.1 (responder)
  const char* rule;       // the clause that says so
};

const ErrorInfo& error_info(Error e);

// The AETH NAK codes (IBA Table 43 values), and the requester-side error each one ends in.
struct NakInfo {
  const char* name;     // as in the trace: "REMOTE_ACCESS_ERR"
  const char* text;     // for logs: "remote access error"
  Error at_requester;   // what the completer makes of it (PSN_SEQ_ERR: retry instead)
  const char* meaning;  // what the requester's user is told it means
};

// Reserved codes read as a remote operational error, as rdma-core's providers do.
const NakInfo& nak_info(uint32_t code);

// "ACK", "RNR_NAK", "RESERVED", "NAK": the AETH syndrome classes (IBA Table 42).
const char* aeth_class_name(uint32_t cls);

}  // namespace simnic::core
