// On-demand paging through the shim between two processes (tests/programs/odp_check.cc): 1 GiB
// of mostly unmapped memory registered with IBV_ACCESS_ON_DEMAND, pages 333 MiB and 1 GiB apart
// written and read by the peer (bytes compared on both sides), an unmapped page NAKed with
// remote access error; implicit ODP likewise; a local page fault; ibv_advise_mr.
#include <gtest/gtest.h>

#include "check_run.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

TEST(Odp, OneGibOfMostlyUnmappedMemoryServesRdmaAndNaksItsHoles) {
  Nics nics(2);
  Result r;
  ASSERT_NO_FATAL_FAILURE(run_check(nics, "simnic-odp-check", {"-a", "simnic0", "-b", "simnic1"}, &r));
  expect_says(r, {"caps: ODP_SUPPORT and ODP_SUPPORT_IMPLICIT, rc_odp_caps 0x3f",
                  "advise: prefetch of a mapped page 0, of an unmapped one with FLUSH EFAULT",
                  "explicit ODP: 2 pages written and 1 read, 333 MiB and 1 GiB apart, bytes compared",
                  "explicit ODP: a WRITE to an unmapped page completed with remote access error",
                  "implicit ODP: 4096 bytes read and 4096 written, a READ of an unmapped page completed with remote "
                  "access error",
                  "local ODP fault: a WRITE from an unmapped page completed with local protection error",
                  "server: the peer's WRITEs landed 333 MiB and 1 GiB apart; the hole stayed unmapped", "PASS"});
}

}  // namespace
}  // namespace simnic::it
