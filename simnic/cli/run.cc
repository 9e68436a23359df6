// `simnic run -- PROGRAM ARGS`: runs an unmodified verbs program on simnic by putting the shim
// first on the library path; `simnic env` prints the same settings for a shell.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "simnic/abi/paths.h"
#include "simnic/cli/cli.h"
#include "simnic/cli/devnodes.h"
#include "simnic/cli/netns.h"

namespace simnic::cli {
namespace {

std::string library_path(const std::string& shim_dir) {
  const char* old = std::getenv("LD_LIBRARY_PATH");
  return old && *old ? shim_dir + ":" + old : shim_dir;
}

bool shim_missing(const std::string& shim_dir) {
  if (!shim_dir.empty()) return false;
  std::fprintf(stderr,
               "simnic: the shim (libibverbs.so.1) was not found in %s/../lib or %s/../lib/simnic;\n"
               "        build it (cmake --build build) or set SIMNIC_SHIM_DIR\n",
               self_dir().c_str(), self_dir().c_str());
  return true;
}

}  // namespace

constexpr const char* kRunUsage =
    "usage: simnic run [--quiet] [--no-devnodes] [--netns] [--] PROGRAM [ARGS...]\n"
    "Runs PROGRAM with simnic's libibverbs, so it sees the NICs `simnic up` started. When the NIC\n"
    "refuses a verb or a work request completes in error, the reason is printed on PROGRAM's\n"
    "stderr, prefixed \"simnic: \", once per distinct cause; stdout is left alone.\n"
    "  --quiet         no explanations (or set SIMNIC_QUIET=1)\n"
    "  --no-devnodes   no /dev/infiniband/uverbs-<nic> nodes for the NICs (or set SIMNIC_DEVNODES=0);\n"
    "                  by default libsimnic_devnode.so goes first on LD_PRELOAD so that programs which\n"
    "                  check the node, as UCX does, see the NICs\n"
    "  --netns         run PROGRAM in a network namespace of its own (an unprivileged user namespace,\n"
    "                  no root) where each NIC has an interface named after it holding its address, as\n"
    "                  an RDMA NIC has its netdev (libfabric's verbs MSG/RDM endpoints need one).\n"
    "                  Processes that talk over TCP must share it: start them all from one\n"
    "                  `simnic run --netns -- sh -c`\n";

int cmd_run(const std::vector<std::string>& args) {
  size_t first = 0;
  bool quiet = false, no_devnodes = false, netns = false;
  for (; first < args.size(); ++first) {
    const std::string& a = args[first];
    if (a == "--help" || a == "-h") {
      std::fputs(kRunUsage, stdout);
      return 0;
    }
    if (a == "--quiet" || a == "-q") quiet = true;
    else if (a == "--no-devnodes") no_devnodes = true;
    else if (a == "--netns") netns = true;
    else if (a == "--") {
      ++first;
      break;
    } else if (a.rfind("-", 0) == 0) {
      std::fprintf(stderr, "simnic run: unknown option %s (the program goes after --)\n%s", a.c_str(), kRunUsage);
      return 2;
    } else {
      break;
    }
  }
  if (first >= args.size()) {
    std::fputs(kRunUsage, stderr);
    return 2;
  }
  const std::string shim_dir = find_shim_dir();
  if (shim_missing(shim_dir)) return 1;
  const std::string dir = state_dir(false);
  if (dir.empty()) return 1;
  if (list_nics(dir).empty())
    std::fprintf(stderr,
                 "simnic: warning: no NIC is running in %s, so the program will find no device; "
                 "start them with `simnic up`\n",
                 dir.c_str());
  ::setenv("LD_LIBRARY_PATH", library_path(shim_dir).c_str(), 1);
  ::setenv("SIMNIC_DIR", dir.c_str(), 1);
  ::setenv("SIMNIC_EXPLAIN", quiet ? "0" : "1", 1);
  set_devnode_preload(shim_dir, devnodes_wanted(no_devnodes));
  if (netns) {
    if (std::string why = enter_netns(dir); !why.empty()) {
      std::fprintf(stderr, "%s\n", why.c_str());
      return 1;
    }
  }
  std::vector<char*> argv;
  for (size_t i = first; i < args.size(); ++i) argv.push_back(const_cast<char*>(args[i].c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "simnic: cannot run %s: %s\n", argv[0], std::strerror(errno));
  return 127;
}

int cmd_env(const std::vector<std::string>& args) {
  const std::string shim_dir = find_shim_dir();
  if (shim_missing(shim_dir)) return 1;
  std::printf("export LD_LIBRARY_PATH='%s'\nexport SIMNIC_DIR='%s'\n", library_path(shim_dir).c_str(),
              abi::simnic_dir().c_str());
  const bool no_devnodes = !args.empty() && args[0] == "--no-devnodes";
  std::fputs(devnode_env_line(shim_dir, devnodes_wanted(no_devnodes)).c_str(), stdout);
  return 0;
}

// simnic viz [NAME...] | --replay FILE...: simnic-viz, from next to this executable, pointed at
// this SIMNIC_DIR.
int cmd_viz(const std::vector<std::string>& args) {
  std::string viz = self_dir() + "/simnic-viz";
  if (::access(viz.c_str(), X_OK) != 0) {
    std::fprintf(stderr,
                 "simnic: %s is missing (it is built when libimgui-dev, libglfw3-dev and libstb-dev are "
                 "installed: scripts/setup.sh)\n",
                 viz.c_str());
    return 1;
  }
  const std::string dir = state_dir(false);
  if (dir.empty()) return 1;
  std::vector<std::string> argv = {viz, "--dir", dir};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  ::execv(viz.c_str(), cargv.data());
  std::fprintf(stderr, "simnic: cannot start %s: %s\n", viz.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace simnic::cli
