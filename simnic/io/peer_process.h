// Whether the NIC behind a peer socket on this host is running or waiting for a CPU (issue 26):
// a peer that read a packet and has not answered it for an ACK timeout either dropped it or has
// not been given a CPU since, and only the first is a loss (completer_timers.cc, "A queue is
// not a loss"). The kernel does not list a socket's process in /proc/net/udp, so the process is
// found once per socket among the simnicd processes whose descriptors this user may read (its
// own NICs; another user's NIC stays unknown, and is judged as before).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace simnic::io {

// The NICs on this process' own loop (simnicd --next), by the inode of their UDP socket: for
// each, whether it has read packets it has not finished with (work left for a later turn of
// the loop, such as coalesced ACKs still to send). One thread serves them all, so that is the
// one way such a peer can be "behind".
class LoopNics {
 public:
  static void add(uint64_t socket, std::function<bool()> behind);
  static void remove(uint64_t socket);
  static bool behind(uint64_t socket);  // false for a socket no NIC of this process holds
};

class PeerProcesses {
 public:
  // `comm`: the command name of the processes to look in (simnicd; tests pass their own).
  explicit PeerProcesses(std::string comm = "simnicd") : comm_(std::move(comm)) {}
  // True when the process holding the socket with inode `socket` is running or runnable (state
  // R), or is this process and the NIC holding it is behind (LoopNics); false when it sleeps,
  // or is not one this user can see. Read once per socket until forget(): a thousand QPs
  // timing out together towards one peer read it once.
  bool busy(uint64_t socket);
  void forget() { states_.clear(); }
  // The process found for `socket` (0: none), looking it up the first time.
  pid_t owner(uint64_t socket);

 private:
  pid_t find_owner(uint64_t socket) const;
  bool holds(pid_t pid, const std::string& link) const;
  std::string comm_;
  std::map<uint64_t, pid_t> owners_;  // by socket inode; 0: looked for, not found
  std::map<uint64_t, bool> states_;   // busy(), by socket inode, since forget()
};

}  // namespace simnic::io
