// `simnic logs [NAME...] [-f] [--previous]`: what the NICs logged (every refusal and error
// with the rule that was broken), without knowing where their directory is.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "simnic/cli/cli.h"

namespace simnic::cli {
namespace {

constexpr const char* kLogsUsage =
    "usage: simnic logs [NAME...] [-f] [--previous]\n"
    "Prints the logs of the named NICs (default: every NIC that has one): why a verb was refused,\n"
    "why a work request failed, dropped packets, retries. Each `simnic up` starts a new log and\n"
    "keeps the previous run's as NAME.log.1.\n"
    "  -f, --follow   keep printing what is logged (until Ctrl-C)\n"
    "  --previous     the previous run's logs\n";

std::vector<std::string> nics_with_logs(const std::string& dir) {
  std::vector<std::string> names = list_nics(dir);
  if (!names.empty()) return names;
  for (int i = 0; i < 250; ++i) {  // stopped NICs keep their logs
    std::string name = "simnic" + std::to_string(i);
    if (::access((dir + "/" + name + ".log").c_str(), R_OK) == 0) names.push_back(name);
  }
  return names;
}

}  // namespace

int cmd_logs(const std::vector<std::string>& args) {
  std::vector<std::string> names;
  bool follow = false, previous = false;
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") return std::fputs(kLogsUsage, stdout), 0;
    if (a == "-f" || a == "--follow") follow = true;
    else if (a == "--previous") previous = true;
    else if (a.rfind("-", 0) == 0)
      return std::fprintf(stderr, "simnic logs: unknown option %s\n%s", a.c_str(), kLogsUsage), 2;
    else names.push_back(a);
  }
  const std::string dir = state_dir(false);
  if (dir.empty()) return 1;
  if (names.empty()) names = nics_with_logs(dir);
  if (names.empty()) {
    std::fprintf(stderr, "simnic: no NIC logs in %s; start NICs with `simnic up`\n", dir.c_str());
    return 1;
  }
  std::vector<std::string> files;
  for (const auto& n : names) files.push_back(dir + "/" + n + ".log" + (previous ? ".1" : ""));
  if (follow) {  // tail -F prints a "==> file <==" header per file, as here
    std::vector<char*> argv = {const_cast<char*>("tail"), const_cast<char*>("-n"), const_cast<char*>("+1"),
                               const_cast<char*>("-F")};
    for (auto& f : files) argv.push_back(f.data());
    argv.push_back(nullptr);
    ::execvp("tail", argv.data());
    std::fprintf(stderr, "simnic: cannot run tail: %s\n", std::strerror(errno));
    return 1;
  }
  int rc = 0;
  for (const auto& f : files) {
    std::ifstream in(f);
    if (!in) {
      std::fprintf(stderr, "simnic: %s: %s\n", f.c_str(), std::strerror(errno));
      rc = 1;
      continue;
    }
    std::printf("==> %s <==\n", f.c_str());
    std::fflush(stdout);
    std::cout << in.rdbuf();
    std::cout.flush();
  }
  return rc;
}

}  // namespace simnic::cli
