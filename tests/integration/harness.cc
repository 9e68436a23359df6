#include "harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace simnic::it {

using namespace std::chrono_literals;

namespace {

std::string make_temp_dir(const char* prefix) {
  std::string tmpl = std::string("/tmp/") + prefix + "XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) return "";
  return buf.data();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string bin_dir() { return SIMNIC_TEST_BIN_DIR; }
std::string shim_dir() { return SIMNIC_TEST_SHIM_DIR; }

bool have_program(const std::string& name) { return run({"sh", "-c", "command -v " + name}, {}, 10s).exit_code == 0; }

Process::Process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
  static std::atomic<int> seq{0};
  out_path_ = "/tmp/simnic-it-out-" + std::to_string(::getpid()) + "-" + std::to_string(seq++);
  pid_ = ::fork();
  if (pid_ == 0) {
    ::setpgid(0, 0);  // its own group, so a kill reaches what it started in the foreground
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    int fd = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
}

Process::~Process() {
  if (pid_ > 0 && !reaped_) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status_, 0);
  }
  ::unlink(out_path_.c_str());
}

std::string Process::output() const { return read_file(out_path_); }

Result Process::wait(std::chrono::milliseconds timeout) {
  Result r;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!reaped_) {
    pid_t w = ::waitpid(pid_, &status_, WNOHANG);
    if (w == pid_) {
      reaped_ = true;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status_, 0);
      reaped_ = true;
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  if (r.timed_out) r.exit_code = -1;
  else if (WIFEXITED(status_)) r.exit_code = WEXITSTATUS(status_);
  else if (WIFSIGNALED(status_)) r.exit_code = 128 + WTERMSIG(status_);
  r.output = output();
  return r;
}

Result run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
           std::chrono::milliseconds timeout) {
  Process p(argv, env);
  return p.wait(timeout);
}

Nics::Nics(int count, const std::vector<std::string>& extra_up_args) : count_(count) {
  // 127.A.B.1..N with A in [16, 216) and B random: tests running in parallel (ctest -j) rarely
  // pick the same address; when one does, `simnic up` cannot bind its UDP port 4791 and the
  // NICs start again on other addresses.
  static std::random_device rd;
  for (int attempt = 0;; ++attempt) {
    const uint32_t a = 16 + rd() % 200, b = 1 + rd() % 250;
    base_ = (127u << 24) | (a << 16) | (b << 8) | 1u;
    dir_ = make_temp_dir("simnic-it-");
    std::vector<std::string> argv = {bin_dir() + "/simnic", "up", std::to_string(count), "--addr", addr(0)};
    argv.insert(argv.end(), extra_up_args.begin(), extra_up_args.end());
    up_ = it::run(argv, env(), 30s);
    if (up_.exit_code == 0 || attempt == 7 || up_.output.find("Address already in use") == std::string::npos) break;
    stop_and_remove();
  }
}

void Nics::stop_and_remove() {
  std::vector<pid_t> pids = daemon_pids();
  it::run({bin_dir() + "/simnic", "down"}, env(), 30s);
  for (pid_t pid : pids) ::kill(pid, SIGKILL);  // in case `down` could not stop one
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

Nics::~Nics() { stop_and_remove(); }

std::string Nics::addr(int i) const {
  in_addr a{htonl(base_ + uint32_t(i))};
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

std::vector<pid_t> Nics::daemon_pids() const {
  std::vector<pid_t> pids;
  for (int i = 0; i < count_; ++i) {
    std::ifstream in(dir_ + "/simnic" + std::to_string(i) + ".pid");
    long pid = 0;
    if (in >> pid && pid > 0) pids.push_back(pid_t(pid));
  }
  return pids;
}

Result Nics::run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) const {
  std::vector<std::string> full = {bin_dir() + "/simnic", "run", "--"};
  full.insert(full.end(), argv.begin(), argv.end());
  return it::run(full, env(), timeout);
}

std::unique_ptr<Process> Nics::start(const std::vector<std::string>& argv) const {
  std::vector<std::string> full = {bin_dir() + "/simnic", "run", "--"};
  full.insert(full.end(), argv.begin(), argv.end());
  return std::make_unique<Process>(full, env());
}

std::map<std::string, std::string> Nics::status(const std::string& nic) const {
  Result r = it::run({bin_dir() + "/simnic", "status", nic, "--raw"}, env(), 10s);
  std::map<std::string, std::string> kv;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    auto sp = line.find(' ');
    if (sp != std::string::npos) kv[line.substr(0, sp)] = line.substr(sp + 1);
  }
  return kv;
}

ScratchDir::ScratchDir(const std::string& what) {
  std::string tmpl = "/tmp/simnic-it-" + what + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

int free_tcp_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(s);
  return port;
}

bool wait_for_listener(int port, std::chrono::milliseconds timeout) {
  char needle[16];
  std::snprintf(needle, sizeof needle, ":%04X ", port);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const char* f : {"/proc/net/tcp", "/proc/net/tcp6"}) {
      std::ifstream in(f);
      for (std::string line; std::getline(in, line);) {
        std::istringstream ls(line);
        std::string sl, local, remote, st;
        ls >> sl >> local >> remote >> st;
        if (st == "0A" && (local + " ").find(needle) != std::string::npos) return true;
      }
    }
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

}  // namespace simnic::it
