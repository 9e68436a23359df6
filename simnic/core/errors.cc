#include "simnic/core/errors.h"

#include <array>

#include "simnic/proto/headers.h"

namespace simnic::core {

namespace {

using namespace simnic::proto;

// Responder classes as IBA 9.9.3.1 names them: A, a malformed receive WQE or an operational
// failure (NAK remote operational error); C, a request the responder must refuse (NAK invalid
// request or remote access error). Both complete the receive WQE in progress, if the error
// is its, and take the QP to ERR. (Class B, the PSN sequence error, is only NAKed: the
// responder's PSN check sends it, not this map.)
constexpr const char* kClassA = "responder class A";
constexpr const char* kClassC = "responder class C";
constexpr const char* kLocal = "requester, local";
constexpr const char* kRemote = "requester, remote (the responder's NAK)";
constexpr const char* kRetries = "requester, retries exhausted";
constexpr int8_t kInvReq = kNakInvalidRequest, kAccess = kNakRemoteAccessError, kOp = kNakRemoteOperationalError;

constexpr std::array<ErrorInfo, size_t(Error::kCount)> kErrors = {{
    {"SEND_OUT_OF_SEQUENCE", kInvReq, IBV_WC_REM_INV_REQ_ERR, true, kClassC, "IBA 9.9.3.1"},
    {"SEND_MISSING_FIRST", kInvReq, IBV_WC_SUCCESS, false, kClassC, "IBA 9.9.3.1"},
    {"WRITE_OUT_OF_SEQUENCE", kInvReq, IBV_WC_SUCCESS, false, kClassC, "IBA 9.9.3.1"},
    {"WRITE_LENGTH", kInvReq, IBV_WC_SUCCESS, false, kClassC, "IBA 9.9.3.1"},
    {"TOO_MANY_RD_ATOMIC", kInvReq, IBV_WC_SUCCESS, false, kClassC, "IBA 9.9.3.1"},
    {"MISALIGNED_ATOMIC", kInvReq, IBV_WC_SUCCESS, false, kClassC, "IBA 9.9.3.1"},
    {"ATOMIC_WRITE_LENGTH", kInvReq, IBV_WC_SUCCESS, false, kClassC, "IBA Annex A19, IBA 9.9.3.1"},
    {"XRC_SRQ_INVALID", kInvReq, IBV_WC_SUCCESS, false, kClassC, "IBA Annex A14, IBA 9.9.3.1"},
    {"RKEY_VIOLATION", kAccess, IBV_WC_SUCCESS, false, kClassC, "IBA 10.6.3, IBA 9.9.3.1"},
    {"REMOTE_DMA_FAILED", kOp, IBV_WC_SUCCESS, false, kClassA, "IBA 9.9.3.1"},
    // ODP is outside the IBA: an unresolvable fault is an access outside what the MR can give,
    // NAKed as an R_Key violation (class C), as rxe's and mlx5's ODP do.
    {"ODP_PAGE_FAULT", kAccess, IBV_WC_SUCCESS, false, kClassC, "IBA 10.6.3, IBA 9.9.3.1"},
    {"RECV_WQE_INVALID", kOp, IBV_WC_LOC_PROT_ERR, true, kClassA, "IBA 10.6.3.1, IBA 9.9.3.1"},
    {"RECV_TOO_SHORT", kInvReq, IBV_WC_LOC_LEN_ERR, true, kClassC, "IBA 9.9.3.1"},
    {"RECV_DMA_FAILED", kOp, IBV_WC_LOC_PROT_ERR, true, kClassA, "IBA 9.9.3.1"},
    {"INVALIDATE_FAILED", kInvReq, IBV_WC_REM_INV_REQ_ERR, true, kClassC, "IBA 9.9.3.1.2"},
    // The receive WQE a WRITE with immediate took completes with the error (C9-222.1.1), with
    // rxe's status for it.
    {"RKEY_VIOLATION_WITH_IMM", kAccess, IBV_WC_REM_ACCESS_ERR, true, kClassC, "IBA 10.6.3, IBA 9.9.3.1.3"},
    {"WR_NOT_FOR_QP", kNoNak, IBV_WC_LOC_QP_OP_ERR, false, kLocal, "IBA 9.9.2"},
    {"UD_ADDRESS_INVALID", kNoNak, IBV_WC_LOC_QP_OP_ERR, false, kLocal, "IBA 10.2.5, IBA 9.9.2"},
    {"WQE_MALFORMED", kNoNak, IBV_WC_LOC_QP_OP_ERR, false, kLocal, "IBA 9.9.2"},
    {"LOCAL_PROTECTION", kNoNak, IBV_WC_LOC_PROT_ERR, false, kLocal, "IBA 10.6.3.1"},
    {"MESSAGE_TOO_LONG", kNoNak, IBV_WC_LOC_LEN_ERR, false, kLocal, "IBA 9.9.2"},
    {"MW_BIND_FAILED", kNoNak, IBV_WC_MW_BIND_ERR, false, kLocal, "IBA 10.6.7"},
    {"RETRY_EXCEEDED", kNoNak, IBV_WC_RETRY_EXC_ERR, false, kRetries, "IBA 9.7.5.1.2, IBA 9.9.2"},
    {"RNR_RETRY_EXCEEDED", kNoNak, IBV_WC_RNR_RETRY_EXC_ERR, false, kRetries, "IBA 9.9.2"},
    {"REMOTE_INVALID_REQUEST", kNoNak, IBV_WC_REM_INV_REQ_ERR, false, kRemote, "IBA 9.9.2"},
    {"REMOTE_ACCESS", kNoNak, IBV_WC_REM_ACCESS_ERR, false, kRemote, "IBA 9.9.2"},
    {"REMOTE_OPERATIONAL", kNoNak, IBV_WC_REM_OP_ERR, false, kRemote, "IBA 9.9.2"},
    {"REMOTE_INVALID_RD_REQUEST", kNoNak, IBV_WC_REM_INV_RD_REQ_ERR, false, kRemote, "IBA 9.9.2"},
}};

constexpr NakInfo kNaks[] = {
    {"PSN_SEQ_ERR", "PSN sequence error", Error::kRetryExceeded, "a packet was lost"},
    {"INVALID_REQUEST", "invalid request", Error::kRemoteInvalidRequest,
     "invalid request (an operation or length the peer's QP does not accept)"},
    {"REMOTE_ACCESS_ERR", "remote access error", Error::kRemoteAccess,
     "remote access error (a wrong rkey or address, or rights the peer's MR or QP was not given)"},
    {"REMOTE_OP_ERR", "remote operational error", Error::kRemoteOperational,
     "remote operational error (the peer could not complete it, e.g. its receive buffer was bad)"},
    {"INVALID_RD_REQUEST", "invalid RD request", Error::kRemoteInvalidRdRequest, "invalid RD request"},
};

}  // namespace

const ErrorInfo& error_info(Error e) { return kErrors[size_t(e) < kErrors.size() ? size_t(e) : 0]; }

const NakInfo& nak_info(uint32_t code) {
  return code < std::size(kNaks) ? kNaks[code] : kNaks[kNakRemoteOperationalError];
}

const char* aeth_class_name(uint32_t cls) {
  static constexpr const char* kNames[] = {"ACK", "RNR_NAK", "RESERVED", "NAK"};
  return kNames[cls & 3];
}

}  // namespace simnic::core
