// Issue 28's memory registration through the shim (tests/programs/mem_check.cc): zero-length
// MRs and zero-byte traffic, traffic after ibv_rereg_mr, RC QPs on PDs with ODP MRs, device
// memory copies and RDMA, and device memory from processes sharing one context.
#include <gtest/gtest.h>

#include "check_run.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

// simnic-mem-check with `args` on `nic_count` fresh NICs: it exits 0 and says each of `lines`.
// `out`, when given, gets the run for the test's own expectations.
void mem_step(int nic_count, const std::vector<std::string>& args, const std::vector<std::string>& lines,
              Result* out = nullptr) {
  Nics nics(nic_count);
  std::vector<std::string> argv = {"-a", "simnic0", "-b", "simnic1"};
  argv.insert(argv.end(), args.begin(), args.end());
  Result r;
  ASSERT_NO_FATAL_FAILURE(run_check(nics, "simnic-mem-check", argv, &r));
  expect_says(r, lines);
  if (out) *out = r;
}

TEST(Mem, ZeroLengthMrsAndZeroByteTrafficAsRxe) {
  mem_step(2, {"-z"},
           {"zero-length MR: EINVAL at a page boundary, registered inside a page (pinned and ODP)",
            "zero-length DM MR: registered within the DM, EINVAL beyond it",
            "zero-byte SEND, WRITE and READ through zero-length MRs, inside and outside them: success",
            "one byte from a zero-length MR: local protection error", "PASS"});
}

TEST(Mem, TrafficThroughReregisteredMrsSucceeds) {
  mem_step(2, {"-r"},
           {"rereg translation: WRITE, READ and SEND through the moved MRs, bytes compared",
            "rereg PD: WRITE and SEND through QPs of the new PDs, bytes compared", "then after a reset 3 SENDs land"});
}

TEST(Mem, RcQpsOnPdsWithOdpMrsReachRtsAndCarryWrites) {
  mem_step(2, {"-o"}, {"ODP: RC QPs on PDs with ODP MRs went RESET->INIT->RTR->RTS and carried WRITEs"});
}

TEST(Mem, DeviceMemoryRefusesCopiesAndRdmaBeyondIt) {
  mem_step(2, {"-d"},
           {"device memory: RDMA WRITE and READ through a DM MR at offset 512; past its end REM_ACCESS_ERR",
            "device memory: copies and MRs beyond the DM refused, the DM unchanged",
            "must be multiples of 4 (device memory is accessed in 4-byte words, as on mlx5)"});
}

TEST(Mem, ProcessesSharingAContextAllocateDeviceMemoryAtOnce) {
  Result r;
  ASSERT_NO_FATAL_FAILURE(
      mem_step(1, {"-p", "8"},
               {"device memory: 8 processes (half on one shared context) allocated and freed 200 DMs each at once"},
               &r));
  EXPECT_FALSE(says(r, "Protocol error")) << r.output;
}

}  // namespace
}  // namespace simnic::it
