// What integration tests stand on: child processes bounded in time and killed by pid, and a
// set of running NICs in a private SIMNIC_DIR on loopback addresses no other test uses.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace simnic::it {

struct Result {
  int exit_code = -1;  // -1: killed after the timeout; 128+N: killed by signal N
  std::string output;  // stdout and stderr together
  bool timed_out = false;
};

// A child process with its output in a file. The destructor kills it (SIGKILL, by pid) if it
// is still running, so no test leaves a process behind.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {});
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  pid_t pid() const { return pid_; }
  // Waits up to `timeout`; on expiry kills the process and reports timed_out.
  Result wait(std::chrono::milliseconds timeout);
  std::string output() const;  // what it printed so far

 private:
  pid_t pid_ = -1;
  std::string out_path_;
  bool reaped_ = false;
  int status_ = 0;
};

// Runs a command to completion (bounded).
Result run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
           std::chrono::milliseconds timeout = std::chrono::seconds(60));

std::string bin_dir();                       // build/bin
std::string shim_dir();                      // build/lib
bool have_program(const std::string& name);  // on PATH

// N NICs started with `simnic up` in a fresh directory. Stops them (and kills their pids)
// and removes the directory on destruction.
class Nics {
 public:
  explicit Nics(int count, const std::vector<std::string>& extra_up_args = {});
  ~Nics();
  Nics(const Nics&) = delete;
  Nics& operator=(const Nics&) = delete;

  const std::string& dir() const { return dir_; }
  std::string addr(int i) const;  // "127.a.b.(1+i)"
  std::map<std::string, std::string> env() const { return {{"SIMNIC_DIR", dir_}}; }
  bool ok() const { return up_.exit_code == 0; }
  const Result& up_result() const { return up_; }
  std::vector<pid_t> daemon_pids() const;

  // `simnic run -- argv`, bounded.
  Result run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  // Starts `simnic run -- argv` in the background.
  std::unique_ptr<Process> start(const std::vector<std::string>& argv) const;
  std::map<std::string, std::string> status(const std::string& nic) const;  // `simnic status NAME`

 private:
  void stop_and_remove();  // `simnic down`, SIGKILL by pid, and the directory

  std::string dir_;
  uint32_t base_ = 0;  // host order
  int count_ = 0;
  Result up_;
};

// A fresh directory under /tmp, removed with everything in it on destruction, for a test's
// traces and captures (the NICs that wrote into it must be down first: declare it before them).
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& what);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A TCP port nobody listens on, for ibv_rc_pingpong's out-of-band exchange.
int free_tcp_port();
// Waits until some process listens on TCP `port` (read from /proc/net/tcp, without connecting).
bool wait_for_listener(int port, std::chrono::milliseconds timeout);

}  // namespace simnic::it
