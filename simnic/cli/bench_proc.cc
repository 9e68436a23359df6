// simnic bench's child processes: each bounded in time, killed by pid (never by name), and
// tied to us with PR_SET_PDEATHSIG so none outlives a bench that is itself killed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "simnic/cli/bench.h"
#include "simnic/cli/cli.h"

namespace simnic::cli::bench {
namespace {

using namespace std::chrono_literals;

volatile std::sig_atomic_t g_interrupted = 0;
std::vector<pid_t> g_tracked;

void on_signal(int) { g_interrupted = 1; }

// In a forked child, before exec: die when the bench dies; output to `log`.
void prepare_child(const std::string& log) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  int in = ::open("/dev/null", O_RDONLY);
  int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (in >= 0) ::dup2(in, 0);
  if (out >= 0) {
    ::dup2(out, 1);
    ::dup2(out, 2);
  }
}

}  // namespace

bool interrupted() { return g_interrupted != 0; }

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
}

void track_pid(pid_t pid) {
  if (pid > 0) g_tracked.push_back(pid);
}

void untrack_pid(pid_t pid) { g_tracked.erase(std::remove(g_tracked.begin(), g_tracked.end(), pid), g_tracked.end()); }

void kill_tracked() {
  for (pid_t pid : g_tracked) ::kill(pid, SIGKILL);
  for (pid_t pid : g_tracked) ::waitpid(pid, nullptr, WNOHANG);  // ours are reaped; NICs are not our children
  g_tracked.clear();
}

pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    prepare_child(log);
    exec_or_exit(argv, "simnic bench");
  }
  track_pid(pid);
  return pid;
}

void kill_and_reap(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  untrack_pid(pid);
}

Outcome wait_for(pid_t pid, std::chrono::milliseconds timeout) {
  Outcome o;
  if (pid <= 0) return o;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) {
      untrack_pid(pid);
      o.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return o;
    }
    if (interrupted() || std::chrono::steady_clock::now() > deadline) {
      kill_and_reap(pid);
      o.timed_out = !interrupted();
      return o;
    }
    std::this_thread::sleep_for(10ms);
  }
}

Outcome run_logged(const std::vector<std::string>& argv, const std::string& log, std::chrono::milliseconds timeout) {
  return wait_for(spawn(argv, log), timeout);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int free_tcp_port() {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
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

// Read from /proc/net/tcp, so the server is not disturbed by a probing connection.
bool wait_for_listener(int port, std::chrono::milliseconds timeout) {
  char needle[16];
  std::snprintf(needle, sizeof needle, ":%04X ", port);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline && !interrupted()) {
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

std::vector<pid_t> start_spinners(int count) {
  std::vector<pid_t> pids;
  for (int i = 0; i < count; ++i) {
    pid_t pid = ::fork();
    if (pid < 0) break;
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, SIG_DFL);  // Ctrl-C ends it too
      ::setpriority(PRIO_PROCESS, 0, 19);
      ::prctl(PR_SET_NAME, "simnic-spin");  // what ps and top call it
      for (;;) asm volatile("");            // a side effect, so the loop stays
    }
    track_pid(pid);
    pids.push_back(pid);
  }
  return pids;
}

}  // namespace simnic::cli::bench
