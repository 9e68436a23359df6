#include "simnic/io/peer_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <utility>

#include "simnic/io/proc_stat.h"

namespace simnic::io {

namespace {

pid_t pid_of_entry(const dirent* e) {
  char* end = nullptr;
  const long pid = std::strtol(e->d_name, &end, 10);
  return *end || pid <= 0 ? 0 : pid_t(pid);
}

std::map<uint64_t, std::function<bool()>>& loop_nics() {
  static std::map<uint64_t, std::function<bool()>> nics;  // the loop's thread only
  return nics;
}

}  // namespace

void LoopNics::add(uint64_t socket, std::function<bool()> behind) { loop_nics()[socket] = std::move(behind); }
void LoopNics::remove(uint64_t socket) { loop_nics().erase(socket); }
bool LoopNics::behind(uint64_t socket) {
  auto it = loop_nics().find(socket);
  return it != loop_nics().end() && it->second();
}

bool PeerProcesses::busy(uint64_t socket) {
  if (auto it = states_.find(socket); it != states_.end()) return it->second;
  const pid_t pid = owner(socket);
  // A peer NIC on this process' own loop (simnic up --one-process) is running: this is it. It
  // is behind only if it left work for a later turn of the loop.
  if (pid == ::getpid()) return states_[socket] = LoopNics::behind(socket);
  const char state = pid ? read_proc_stat(pid).state : 0;
  if (pid && state == 0) owners_.erase(socket);  // gone: look for it again next time
  return states_[socket] = state == 'R';
}

pid_t PeerProcesses::owner(uint64_t socket) {
  auto it = owners_.find(socket);
  if (it == owners_.end()) it = owners_.emplace(socket, find_owner(socket)).first;
  return it->second;
}

// Every process named comm_ whose descriptors can be read, until one holds the socket: a walk
// of /proc that costs a few milliseconds on a busy server, once per peer socket.
pid_t PeerProcesses::find_owner(uint64_t socket) const {
  const std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir("/proc"), ::closedir);
  if (!dir) return 0;
  const std::string link = "socket:[" + std::to_string(socket) + "]";
  while (const dirent* e = ::readdir(dir.get())) {
    const pid_t pid = pid_of_entry(e);
    if (pid && read_proc_stat(pid).comm == comm_ && holds(pid, link)) return pid;
  }
  return 0;
}

bool PeerProcesses::holds(pid_t pid, const std::string& link) const {
  const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
  const std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(fds.c_str()), ::closedir);
  if (!dir) return false;  // another user's process
  char target[64];
  while (const dirent* e = ::readdir(dir.get())) {
    const ssize_t n = ::readlinkat(::dirfd(dir.get()), e->d_name, target, sizeof target);
    if (n > 0 && std::string(target, size_t(n)) == link) return true;
  }
  return false;
}

}  // namespace simnic::io
