// simnic: the command line in front of simnicd and the shim.
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
    "  fault [NAME...] SETTINGS  loss=P dup=P reorder=P delay=US seed=N, or off\n"
    "  step [NAME...] CMD      step mode: on | off | next [N] | status\n"
    "  viz [NAME...]           watch the NICs live in simnic-viz (replay: simnic viz --replay FILE...)\n"
    "  env                     print LD_LIBRARY_PATH/SIMNIC_DIR for running programs by hand\n"
    "  lab list|start|check|grade  the coursework labs: start one, check your code, grade a class\n"
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
  struct Command { const char* name; Fn fn; };
  static const Command kCommands[] = {
      {"up", simnic::cli::cmd_up},         {"down", simnic::cli::cmd_down}, {"status", simnic::cli::cmd_status},
      {"run", simnic::cli::cmd_run},       {"env", simnic::cli::cmd_env},   {"fault", simnic::cli::cmd_fault},
      {"step", simnic::cli::cmd_step},     {"viz", simnic::cli::cmd_viz},   {"lab", simnic::cli::cmd_lab},
  };
  for (const auto& c : kCommands)
    if (cmd == c.name) return c.fn(args);
  std::fprintf(stderr, "simnic: unknown command '%s'\n%s", cmd.c_str(), kUsage);
  return 2;
}
