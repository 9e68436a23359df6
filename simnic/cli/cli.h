// `simnic`, the command users type: start and stop NICs, look at them, run programs on them.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace simnic::cli {

// Where things are, relative to the `simnic` executable (build tree or install prefix).
std::string self_dir();                 // directory of this executable
std::string find_simnicd();             // sibling simnicd, or "" when missing
std::string find_shim_dir();            // directory holding our libibverbs.so.1, or ""

// The simnic directory, checked (simnic/abi/state_dir.h) and, with `create`, made (0700). An
// unsafe directory is refused with a message on stderr: then returns "". Without `create`, a
// directory that does not exist yet is fine (nothing runs there).
std::string state_dir(bool create);

// The NICs whose control sockets are in `dir`, sorted by name.
std::vector<std::string> list_nics(const std::string& dir);

// One request to a running NIC over a query-only control connection. Returns 0 or an errno;
// `text` receives the reply body.
int query_nic(const std::string& dir, const std::string& name, unsigned op, const std::string& body,
              std::string* text);

// "key value" lines, as simnicd's Status reply has them.
std::map<std::string, std::string> parse_kv(const std::string& text);

int cmd_up(const std::vector<std::string>& args);
int cmd_down(const std::vector<std::string>& args);
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
