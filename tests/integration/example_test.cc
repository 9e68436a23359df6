// The README's "compile and run your own program": examples/hello_rdma.c built exactly as the
// README says (cc + pkg-config, against the system libibverbs) and run through `simnic run`.
#include <gtest/gtest.h>

#include <cstdlib>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

TEST(Example, HelloRdmaBuildsWithPkgConfigAndRunsOnSimnic) {
  if (!have_program("cc") || !have_program("pkg-config")) GTEST_SKIP() << "no cc or pkg-config on PATH";
  char dir[] = "/tmp/simnic-example-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string exe = std::string(dir) + "/hello_rdma";
  Result cc = run({"sh", "-c",
                   "cc -o " + exe + " " SIMNIC_TEST_SOURCE_DIR "/examples/hello_rdma.c " +
                       "$(pkg-config --cflags --libs libibverbs)"});
  ASSERT_EQ(cc.exit_code, 0) << cc.output;

  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({exe}, 30s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("bytes from QP 0x"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(": \"hello, RDMA\""), std::string::npos) << r.output;

  // Without simnic (no SIMNIC_DIR devices, the system libibverbs): a clean message, exit 1.
  Result alone = run({exe}, {{"SIMNIC_DIR", std::string(dir) + "/none"}}, 30s);
  EXPECT_EQ(alone.exit_code, 1) << alone.output;
  EXPECT_NE(alone.output.find("no RDMA device found"), std::string::npos) << alone.output;
  std::system(("rm -rf " + std::string(dir)).c_str());
}

}  // namespace
}  // namespace simnic::it
