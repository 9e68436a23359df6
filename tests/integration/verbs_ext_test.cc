// Issue 17's verbs through the shim between two processes (tests/programs/verbs_ext_check.cc):
// ibv_rereg_mr, device memory, thread and parent domains with the program's own allocators,
// and the extended CQ's wall-clock timestamps; bytes compared on both sides.
#include <gtest/gtest.h>

#include "check_run.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

TEST(VerbsExt, RereggedMrDeviceMemoryAndParentDomainCarryRdmaBetweenTwoProcesses) {
  Nics nics(2);
  Result r;
  ASSERT_NO_FATAL_FAILURE(run_check(nics, "simnic-verbs-ext-check", {"-a", "simnic0", "-b", "simnic1"}, &r));
  EXPECT_NE(r.output.find("rereg refusals: as rdma-core and the kernel"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rereg translation: 16384 bytes landed in the new buffer"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("device memory: 8192 bytes read and 2048 written by RDMA"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rereg access: a WRITE without the right completed with remote access error"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("parent domain: rings of 1 QP, 1 SRQ and 1 CQ in our allocations, all freed"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << r.output;
  // The NIC explained each refusal on the program's stderr (SIMNIC_EXPLAIN, set by simnic run).
  EXPECT_NE(r.output.find("an MR over device memory cannot be re-registered"), std::string::npos) << r.output;
}

// ibv_import_device: a child process given the parent's cmd_fd imports its PD and MR, and its
// own QPs (on the imported PD) read from and write into the parent's memory through that MR.
TEST(VerbsExt, AnotherProcessImportsTheContextAndUsesItsPdAndMr) {
  Nics nics(1);
  Result r;
  ASSERT_NO_FATAL_FAILURE(run_check(nics, "simnic-verbs-ext-check", {"-i", "-a", "simnic0"}, &r));
  EXPECT_NE(r.output.find("import: another process shared our PD and MR: 4096 bytes read from it and 4096 written"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace simnic::it
