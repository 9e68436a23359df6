// /dev/infiniband/uverbs-<nic> under `simnic run` (libsimnic_devnode.so, shim/devnode.c): a
// character device the program can read and write for every NIC that runs, through each
// stat/access/open entry point; nothing for other names; left out with --no-devnodes or
// SIMNIC_DEVNODES=0; other LD_PRELOAD entries kept; `simnic env` prints it.
#include <gtest/gtest.h>

#include <sstream>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

const std::string kNode0 = "/dev/infiniband/uverbs-simnic0";
const std::string kNode1 = "/dev/infiniband/uverbs-simnic1";

// A host with RDMA hardware has the nodes itself, and they win over ours.
bool host_has_uverbs() { return run({"test", "-e", "/dev/infiniband"}).exit_code == 0; }

std::string probe() { return bin_dir() + "/simnic-devnode-probe"; }

// The lines of the probe's output that do not say "chr".
std::string not_chr(const std::string& output) {
  std::istringstream in(output);
  std::string line, bad;
  while (std::getline(in, line))
    if (line.find(" chr") == std::string::npos) bad += line + "\n";
  return bad;
}

class Devnodes : public ::testing::Test {
 protected:
  void SetUp() override {
    if (host_has_uverbs()) GTEST_SKIP() << "this host has /dev/infiniband: its own nodes are used";
    ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  }
  // `simnic run [opts] -- argv` with `extra` in the environment.
  Result simnic_run(const std::vector<std::string>& opts, const std::vector<std::string>& argv,
                    std::map<std::string, std::string> extra = {}) {
    std::vector<std::string> full = {bin_dir() + "/simnic", "run"};
    full.insert(full.end(), opts.begin(), opts.end());
    full.push_back("--");
    full.insert(full.end(), argv.begin(), argv.end());
    extra["SIMNIC_DIR"] = nics.dir();
    if (!extra.count("SIMNIC_DEVNODES")) extra["SIMNIC_DEVNODES"] = "1";
    if (!extra.count("LD_PRELOAD")) extra["LD_PRELOAD"] = "";
    return run(full, extra, 20s);
  }
  Nics nics{2};
};

TEST_F(Devnodes, EachRunningNicHasAReadWriteCharacterDeviceThroughEveryEntryPoint) {
  for (const std::string& node : {kNode0, kNode1}) {
    Result r = simnic_run({}, {probe(), node});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(not_chr(r.output), "") << node;
    EXPECT_NE(r.output.find("__xstat chr"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("statx chr"), std::string::npos) << r.output;
  }
  // What a shell script sees: test -c/-r/-w, coreutils stat (statx), a write through open().
  Result sh = simnic_run({}, {"sh", "-c",
                              "test -c " + kNode0 + " -a -r " + kNode0 + " -a -w " + kNode0 + " && echo rw-chr; " +
                                  "stat -c %F " + kNode1 + "; echo x > " + kNode0 + " && echo wrote"});
  EXPECT_EQ(sh.exit_code, 0) << sh.output;
  EXPECT_NE(sh.output.find("rw-chr\ncharacter special file\nwrote\n"), std::string::npos) << sh.output;
}

TEST_F(Devnodes, OtherNamesAndOtherPathsAreUntouched) {
  // A NIC that is not running, a near miss of the name, and the directory: as without simnic.
  for (const std::string& path : {std::string("/dev/infiniband/uverbs-simnic7"), std::string("/dev/infiniband/simnic0"),
                                  std::string("/dev/infiniband/uverbs-simnic0/x"), std::string("/dev/infiniband")}) {
    Result r = simnic_run({}, {probe(), path});
    EXPECT_EQ(r.exit_code, 1) << path << "\n" << r.output;
    EXPECT_EQ(r.output.find(" chr"), std::string::npos) << path << "\n" << r.output;
    EXPECT_NE(r.output.find("stat ENOENT"), std::string::npos) << path << "\n" << r.output;
  }
  // A real character device is the real one.
  Result null = simnic_run({}, {"stat", "-c", "%t:%T %F", "/dev/null"});
  EXPECT_EQ(null.output, "1:3 character special file\n");
  // A directory keeps reading as a directory.
  Result tmp = simnic_run({}, {"stat", "-c", "%F", "/tmp"});
  EXPECT_EQ(tmp.output, "directory\n");
}

TEST_F(Devnodes, NoDevnodesOrSimnicDevnodes0LeaveThemOut) {
  Result off = simnic_run({"--no-devnodes"}, {probe(), kNode0});
  EXPECT_EQ(off.exit_code, 1) << off.output;
  EXPECT_EQ(off.output.find(" chr"), std::string::npos) << off.output;
  Result env_off = simnic_run({}, {probe(), kNode0}, {{"SIMNIC_DEVNODES", "0"}});
  EXPECT_EQ(env_off.exit_code, 1) << env_off.output;
  EXPECT_EQ(env_off.output.find(" chr"), std::string::npos) << env_off.output;
  // --no-devnodes after `--` belongs to the program.
  Result arg = simnic_run({}, {"sh", "-c", "echo \"$LD_PRELOAD\"", "--no-devnodes"});
  EXPECT_EQ(arg.output, shim_dir() + "/libsimnic_devnode.so\n");
}

TEST_F(Devnodes, OtherPreloadsAreKeptAfterItAndACopyFromSimnicEnvIsNotDoubled) {
  const std::string ours = shim_dir() + "/libsimnic_devnode.so";
  const std::string libm = "/lib/x86_64-linux-gnu/libm.so.6";
  Result kept = simnic_run({}, {"sh", "-c", "echo \"$LD_PRELOAD\""}, {{"LD_PRELOAD", libm}});
  EXPECT_EQ(kept.output, ours + ":" + libm + "\n");
  Result once = simnic_run({}, {"sh", "-c", "echo \"$LD_PRELOAD\""}, {{"LD_PRELOAD", ours + " " + libm}});
  EXPECT_EQ(once.output, ours + ":" + libm + "\n");
  Result removed =
      simnic_run({"--no-devnodes"}, {"sh", "-c", "echo \"$LD_PRELOAD\""}, {{"LD_PRELOAD", ours + ":" + libm}});
  EXPECT_EQ(removed.output, libm + "\n");
}

TEST_F(Devnodes, SimnicEnvExportsThePreloadAndItWorksWithoutSimnicRun) {
  Result env = run({bin_dir() + "/simnic", "env"},
                   {{"SIMNIC_DIR", nics.dir()}, {"SIMNIC_DEVNODES", "1"}, {"LD_PRELOAD", ""}}, 10s);
  EXPECT_EQ(env.exit_code, 0) << env.output;
  EXPECT_NE(env.output.find("export LD_PRELOAD='" + shim_dir() + "/libsimnic_devnode.so'\n"), std::string::npos)
      << env.output;
  Result sh = run({"sh", "-c", "eval \"$(" + bin_dir() + "/simnic env)\" && " + probe() + " " + kNode0},
                  {{"SIMNIC_DIR", nics.dir()}, {"SIMNIC_DEVNODES", "1"}, {"LD_PRELOAD", ""}}, 20s);
  EXPECT_EQ(sh.exit_code, 0) << sh.output;
  EXPECT_EQ(not_chr(sh.output), "");
  Result off =
      run({bin_dir() + "/simnic", "env", "--no-devnodes"}, {{"SIMNIC_DIR", nics.dir()}, {"LD_PRELOAD", ""}}, 10s);
  EXPECT_EQ(off.output.find("LD_PRELOAD"), std::string::npos) << off.output;
}

TEST(DevnodesHelp, RunHelpNamesTheOption) {
  Result r = run({bin_dir() + "/simnic", "run", "--help"}, {}, 10s);
  EXPECT_NE(r.output.find("--no-devnodes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("SIMNIC_DEVNODES=0"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace simnic::it
