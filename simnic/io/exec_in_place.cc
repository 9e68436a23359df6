#include "simnic/io/exec_in_place.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace simnic::io {
namespace {

// This process' command line, without the --udp-fd options it was given.
std::vector<std::string> own_command_line_without_udp_fd() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string a; std::getline(in, a, '\0');) {
    if (a == "--udp-fd") {
      std::getline(in, a, '\0');
      continue;
    }
    if (a.rfind("--udp-fd=", 0) != 0) args.push_back(a);
  }
  return args;
}

// The command line with NIC i's socket named at the end of its part.
std::vector<std::string> with_udp_fds(const std::vector<std::string>& args, const std::vector<int>& fds) {
  std::vector<std::string> out;
  size_t nic = 0;
  auto name_socket = [&] {
    if (nic < fds.size()) out.insert(out.end(), {"--udp-fd", std::to_string(fds[nic])});
    ++nic;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0 && args[i] == "--next") name_socket();
    out.push_back(args[i]);
  }
  name_socket();
  return out;
}

std::string own_executable_path() {
  std::error_code ec;
  std::string path = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  const std::string deleted = " (deleted)";  // the binary was replaced since: run the new one
  if (path.size() > deleted.size() && path.compare(path.size() - deleted.size(), deleted.size(), deleted) == 0)
    path.resize(path.size() - deleted.size());
  return ec ? "/proc/self/exe" : path;
}

}  // namespace

int exec_in_place(const std::vector<int>& fds) {
  std::vector<std::string> args = own_command_line_without_udp_fd();
  if (args.empty()) return ENOENT;
  args = with_udp_fds(args, fds);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  for (int fd : fds) ::fcntl(fd, F_SETFD, 0);  // the descriptors the new image keeps
  // By its path, not /proc/self/exe: the new image's name (comm) must stay "simnicd", which
  // `simnic down` looks for; a rebuilt binary at that path is what a restart should run.
  const std::string exe = own_executable_path();
  ::execv(exe.c_str(), argv.data());
  const int e = errno;
  for (int fd : fds) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return e;
}

}  // namespace simnic::io
