// Issue 28's memory registration through the shim (tests/programs/mem_check.cc): zero-length
// MRs and zero-byte traffic, traffic after ibv_rereg_mr, RC QPs on PDs with ODP MRs, device
// memory copies and RDMA, and device memory from processes sharing one context.
#include <gtest/gtest.h>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

Result mem_check(const Nics& nics, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {bin_dir() + "/simnic-mem-check", "-a", "simnic0", "-b", "simnic1"};
  argv.insert(argv.end(), args.begin(), args.end());
  return nics.run(argv, 60s);
}

bool says(const Result& r, const std::string& line) { return r.output.find(line) != std::string::npos; }

TEST(Mem, ZeroLengthMrsAndZeroByteTrafficAsRxe) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = mem_check(nics, {"-z"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(says(r, "zero-length MR: EINVAL at a page boundary, registered inside a page (pinned and ODP)")) << r.output;
  EXPECT_TRUE(says(r, "zero-length DM MR: registered within the DM, EINVAL beyond it")) << r.output;
  EXPECT_TRUE(says(r, "zero-byte SEND, WRITE and READ through zero-length MRs, inside and outside them: success"))
      << r.output;
  EXPECT_TRUE(says(r, "one byte from a zero-length MR: local protection error")) << r.output;
  EXPECT_TRUE(says(r, "PASS")) << r.output;
}

TEST(Mem, TrafficThroughReregisteredMrsSucceeds) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = mem_check(nics, {"-r"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(says(r, "rereg translation: WRITE, READ and SEND through the moved MRs, bytes compared")) << r.output;
  EXPECT_TRUE(says(r, "rereg PD: WRITE and SEND through QPs of the new PDs, bytes compared")) << r.output;
  EXPECT_TRUE(says(r, "then after a reset 3 SENDs land")) << r.output;
}

TEST(Mem, RcQpsOnPdsWithOdpMrsReachRtsAndCarryWrites) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = mem_check(nics, {"-o"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(says(r, "ODP: RC QPs on PDs with ODP MRs went RESET->INIT->RTR->RTS and carried WRITEs")) << r.output;
}

TEST(Mem, DeviceMemoryRefusesCopiesAndRdmaBeyondIt) {
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = mem_check(nics, {"-d"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(says(r, "device memory: RDMA WRITE and READ through a DM MR at offset 512; past its end REM_ACCESS_ERR"))
      << r.output;
  EXPECT_TRUE(says(r, "device memory: copies and MRs beyond the DM refused, the DM unchanged")) << r.output;
  EXPECT_TRUE(says(r, "must be multiples of 4 (device memory is accessed in 4-byte words, as on mlx5)")) << r.output;
}

TEST(Mem, ProcessesSharingAContextAllocateDeviceMemoryAtOnce) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = mem_check(nics, {"-p", "8"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(says(r, "device memory: 8 processes (half on one shared context) allocated and freed 200 DMs each at once"))
      << r.output;
  EXPECT_FALSE(says(r, "Protocol error")) << r.output;
}

}  // namespace
}  // namespace simnic::it
