// A process as /proc/PID/stat shows it: its command name and scheduler state letter. Like
// netif.h it sits with io but has no Asio: `simnic down` (is it a live simnicd, where does it
// wait) and simnicd's ACK timer (is a peer NIC running: peer_process.h) both read it.
#pragma once
#include <sys/types.h>

#include <string>

namespace simnic::io {

// R running or runnable, S sleeping, D in the kernel on a disk or lock, T stopped, Z a zombie;
// state 0 when the process is gone or the line is malformed.
struct ProcStat {
  std::string comm;
  char state = 0;
};

// One line of /proc/PID/stat ("4242 (simnicd) R 1 ..."). The command name may hold spaces and
// parentheses: it runs from the first '(' to the last ')', and the state follows that.
ProcStat parse_proc_stat(const std::string& line);
ProcStat read_proc_stat(pid_t pid);

// Whether any thread of the process is running or waiting for a CPU (state R in
// /proc/PID/task/TID/stat): a program may poll and post on a thread other than its main one,
// which then sleeps in pthread_join. Reads at most `max_threads` threads; false when the
// process is gone.
bool any_thread_runnable(pid_t pid, size_t max_threads = 1024);

}  // namespace simnic::io
