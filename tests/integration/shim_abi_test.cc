// The shim is a drop-in libibverbs.so.1: the same SONAME and the same versioned symbols as
// Debian's libibverbs 44, and other unmodified consumers (pyverbs) find our devices.
#include <gtest/gtest.h>

#include <unistd.h>

#include <set>
#include <sstream>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

// "name@VERSION" (default) and "name@(VERSION)" (old) for every IBVERBS_* dynamic symbol.
std::set<std::string> versioned_symbols(const std::string& lib) {
  Result r = run({"objdump", "-T", lib}, {}, 30s);
  std::set<std::string> out;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::vector<std::string> f;
    for (std::string w; ls >> w;) f.push_back(w);
    if (f.size() < 3) continue;
    const std::string& ver = f[f.size() - 2];
    if (ver.find("IBVERBS_") == std::string::npos || f.back() == ver) continue;
    out.insert(f.back() + "@" + ver);
  }
  return out;
}

std::string system_libibverbs() {
  for (const char* p :
       {"/usr/lib/x86_64-linux-gnu/libibverbs.so.1", "/usr/lib64/libibverbs.so.1", "/usr/lib/libibverbs.so.1"})
    if (::access(p, R_OK) == 0) return p;
  return "";
}

TEST(ShimAbi, ExportsExactlyTheVersionedSymbolsOfTheSystemLibrary) {
  const std::string sys = system_libibverbs();
  if (sys.empty() || !have_program("objdump")) GTEST_SKIP() << "no system libibverbs.so.1 or objdump";
  auto theirs = versioned_symbols(sys);
  auto ours = versioned_symbols(shim_dir() + "/libibverbs.so.1");
  ASSERT_GT(theirs.size(), 150u);
  for (const auto& s : theirs) EXPECT_TRUE(ours.count(s)) << "missing " << s;
  for (const auto& s : ours) EXPECT_TRUE(theirs.count(s)) << "extra " << s;
  EXPECT_TRUE(ours.count("ibv_create_qp@IBVERBS_1.1"));
  EXPECT_TRUE(ours.count("ibv_create_qp@(IBVERBS_1.0)"));
  EXPECT_TRUE(ours.count("verbs_register_driver_34@IBVERBS_PRIVATE_34"));
}

TEST(ShimAbi, HasTheSonameTheLoaderLooksFor) {
  if (!have_program("readelf")) GTEST_SKIP() << "no readelf";
  Result r = run({"readelf", "-d", shim_dir() + "/libibverbs.so.1"}, {}, 30s);
  EXPECT_NE(r.output.find("Library soname: [libibverbs.so.1]"), std::string::npos) << r.output;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    if (line.find("(NEEDED)") == std::string::npos) continue;
    EXPECT_EQ(line.find("libibverbs"), std::string::npos) << "the shim must not load the real libibverbs: " << line;
  }
}

TEST(ShimAbi, PyverbsListsAndQueriesOurDevices) {
  if (::access("/usr/bin/python3", X_OK) != 0 ||
      run({"/usr/bin/python3", "-c", "import pyverbs.device"}, {}, 30s).exit_code != 0)
    GTEST_SKIP() << "Debian's python3-pyverbs is not installed";
  Nics nics(2);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  Result r = nics.run({"/usr/bin/python3", "-c",
                       "import pyverbs.device as d\n"
                       "print(sorted(x.name.decode() for x in d.get_device_list()))\n"
                       "c = d.Context(name='simnic1')\n"
                       "print('state', c.query_port(1).state, 'gid', c.query_gid(1, 0))\n"},
                      60s);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("['simnic0', 'simnic1']"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("state 4 gid 0000:0000:0000:0000:0000:ffff:"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace simnic::it
