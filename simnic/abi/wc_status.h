// The names rdma-core's ibv_wc_status_str gives completion statuses, once: the shim returns
// them from ibv_wc_status_str, simnicd writes them in its log and trace (it does not link
// libibverbs).
#pragma once
#include <infiniband/verbs.h>

namespace simnic::abi {

inline constexpr const char* kWcStatusNames[] = {"success",
                                                 "local length error",
                                                 "local QP operation error",
                                                 "local EE context operation error",
                                                 "local protection error",
                                                 "Work Request Flushed Error",
                                                 "memory management operation error",
                                                 "bad response error",
                                                 "local access error",
                                                 "remote invalid request error",
                                                 "remote access error",
                                                 "remote operation error",
                                                 "transport retry counter exceeded",
                                                 "RNR retry counter exceeded",
                                                 "local RDD violation error",
                                                 "remote invalid RD request",
                                                 "aborted error",
                                                 "invalid EE context number",
                                                 "invalid EE context state",
                                                 "fatal error",
                                                 "response timeout error",
                                                 "general error",
                                                 "TM error",
                                                 "TM rendezvous error"};

// Takes the raw number: a status from a program (or a test) may be outside the enum, and
// loading such a value as an ibv_wc_status is undefined behaviour (UBSan: -fsanitize=enum).
constexpr const char* wc_status_str(unsigned status) {
  const unsigned i = status;
  return i < sizeof(kWcStatusNames) / sizeof(kWcStatusNames[0]) ? kWcStatusNames[i] : "unknown";
}

}  // namespace simnic::abi
