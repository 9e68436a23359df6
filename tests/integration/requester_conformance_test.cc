// The requester as rxe and rdma-core (issue 28), through the shim (tests/programs/requester_check.cc):
// a UD AH's traffic class reaches the receiver's GRH and ibv_init_ah_from_wc; RDMA WRITE, READ
// and atomics on a UD QP, and READ and atomics on a UC QP, are posted and complete with
// IBV_WC_LOC_QP_OP_ERR; BIND_MW on a UD QP is refused at post time with EINVAL.
#include <gtest/gtest.h>

#include "check_run.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

TEST(RequesterConformance, TrafficClassReachesTheGrhAndOpcodesOfAnotherTransportCompleteWithLocQpOpErr) {
  Nics nics(1);
  Result r;
  ASSERT_NO_FATAL_FAILURE(run_check(nics, "simnic-requester-check", {"-d", "simnic0"}, &r));
  EXPECT_NE(r.output.find("tclass: TOS 252 in the receiver's GRH, traffic_class 252 from ibv_init_ah_from_wc"),
            std::string::npos)
      << r.output;
  for (const char* what : {"UD RDMA_WRITE", "UD RDMA_READ", "UD ATOMIC_CMP_AND_SWP", "UD ATOMIC_FETCH_AND_ADD",
                           "UC RDMA_READ", "UC ATOMIC_CMP_AND_SWP", "UC ATOMIC_FETCH_AND_ADD"})
    EXPECT_NE(r.output.find(std::string(what) + ": posted, completed with local QP operation error"), std::string::npos)
        << what << "\n"
        << r.output;
  EXPECT_NE(r.output.find("UD BIND_MW: refused at post time with EINVAL"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace simnic::it
