// simnic: the command line in front of simnicd and the shim.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "simnic/cli/cli.h"

namespace {

const char kUsage[] =
    "usage: simnic COMMAND [ARGS]\n"
    "Simulated RDMA NICs (RoCEv2 over UDP on loopback) for unmodified verbs programs.\n"
    "\n"
    "  up [N] [options]        start N NICs (default 2): simnic0 on 127.0.0.1, simnic1 on 127.0.0.2, ...\n"
    "  status [NAME]           list running NICs with counters (all counters of NAME)\n"
    "  run -- PROGRAM ARGS     run a verbs program on simnic (e.g. simnic run -- ibv_devinfo)\n"
    "  down [NAME...]          stop NICs (default: all)\n"
    "  restart [NAME...]       restart NICs in place, keeping their addresses (default: all)\n"
    "  fault [NAME...] SETTINGS  loss=P dup=P reorder=P delay=US seed=N, or off\n"
    "  step [NAME...] CMD      step mode: on | off | next [N] | status\n"
    "  viz [NAME...]           watch the NICs live in simnic-viz (replay: simnic viz --replay FILE...)\n"
    "  logs [NAME...] [-f]     what the NICs logged: refused verbs, failed work requests, drops\n"
    "  env                     print LD_LIBRARY_PATH/SIMNIC_DIR/LD_PRELOAD for running programs by hand\n"
    "  lab list|start|check|grade  the coursework labs: start one, check your code, grade a class\n"
    "  bench [--quick]         measure simnic against the kernel's TCP: a table, CSV, JSON and a plot\n"
    "\n"
    "NICs live in $SIMNIC_DIR, else $XDG_RUNTIME_DIR/simnic, else /tmp/simnic-$UID.\n"
    "`simnic COMMAND --help` tells more.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  using Fn = int (*)(const std::vector<std::string>&);
  // `usage`: for the commands that do not print their own on --help.
  struct Command {
    const char* name;
    Fn fn;
    const char* usage;
  };
  static const Command kCommands[] = {
      {"up", simnic::cli::cmd_up, nullptr},
      {"down", simnic::cli::cmd_down,
       "usage: simnic down [NAME...]\nStops the named NICs (default: all): SIGTERM, SIGKILL after 5 s; clears stale "
       "sockets.\n"},
      {"restart", simnic::cli::cmd_restart,
       "usage: simnic restart [NAME...]\nRestarts the named NICs (default: all) in place: same pid, options and "
       "address,\nwhose UDP port stays bound throughout, so no other user can take it meanwhile.\nPrograms using "
       "them lose their contexts, as with down and up.\n"},
      {"status", simnic::cli::cmd_status, nullptr},
      {"run", simnic::cli::cmd_run, nullptr},
      {"env", simnic::cli::cmd_env,
       "usage: simnic env [--no-devnodes]\nPrints the export lines (LD_LIBRARY_PATH, SIMNIC_DIR, LD_PRELOAD) that put "
       "programs on simnic without `simnic run`:\n  eval \"$(simnic env)\"\n"
       "  --no-devnodes   leave libsimnic_devnode.so off LD_PRELOAD (see simnic run --help)\n"},
      {"fault", simnic::cli::cmd_fault, nullptr},
      {"step", simnic::cli::cmd_step, nullptr},
      {"viz", simnic::cli::cmd_viz, nullptr},
      {"lab", simnic::cli::cmd_lab, nullptr},
      {"logs", simnic::cli::cmd_logs, nullptr},
      {"bench", simnic::cli::cmd_bench, nullptr},
  };
  for (const auto& c : kCommands) {
    if (cmd != c.name) continue;
    const bool help =
        std::any_of(args.begin(), args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; });
    if (help && c.usage) return std::fputs(c.usage, stdout), 0;
    return c.fn(args);
  }
  std::fprintf(stderr, "simnic: unknown command '%s'\n%s", cmd.c_str(), kUsage);
  return 2;
}
