// `simnic`, the command users type: start and stop NICs, look at them, run programs on them.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "simnic/client/nic_client.h"

namespace simnic::cli {

// Where things are, relative to the `simnic` executable (build tree or install prefix).
std::string self_dir();       // directory of this executable
std::string find_simnicd();   // sibling simnicd, or "" when missing
std::string find_shim_dir();  // directory holding our libibverbs.so.1, or ""

// The simnic directory, checked (simnic/abi/state_dir.h) and, with `create`, made (0700). An
// unsafe directory is refused with a message on stderr: then returns "". Without `create`, a
// directory that does not exist yet is fine (nothing runs there).
std::string state_dir(bool create);

// Finding NICs and asking them one thing: shared with simnic-viz (simnic/client).
using client::list_nics;
using client::parse_kv;
using client::query_nic;

// In a forked child: runs argv[0] (found on PATH) with `argv`; if it cannot, says so on stderr
// as `who: cannot run X: why` and exits 127, the shell's code for a command that cannot run.
[[noreturn]] void exec_or_exit(const std::vector<std::string>& argv, const char* who);

int cmd_up(const std::vector<std::string>& args);
int cmd_down(const std::vector<std::string>& args);
int cmd_restart(const std::vector<std::string>& args);
int cmd_status(const std::vector<std::string>& args);
void print_status_view(const std::string& name, const std::string& status_text);  // status_view.cc
int cmd_run(const std::vector<std::string>& args);
int cmd_env(const std::vector<std::string>& args);
int cmd_fault(const std::vector<std::string>& args);
int cmd_step(const std::vector<std::string>& args);
int cmd_viz(const std::vector<std::string>& args);
int cmd_lab(const std::vector<std::string>& args);
int cmd_logs(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args);  // bench*.cc

}  // namespace simnic::cli
