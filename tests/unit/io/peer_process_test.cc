// Finding the NIC process behind a peer socket and whether it runs (issue 26: a peer that read
// a packet and waits for a CPU has not lost it; completer_timers.cc).
#include "simnic/io/peer_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace simnic::io {
namespace {

std::string own_comm() {
  std::ifstream in("/proc/self/comm");
  std::string c;
  std::getline(in, c);
  return c;
}

uint64_t inode_of(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? uint64_t(st.st_ino) : 0;
}

char state_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  return state_in_proc_stat(line);
}

TEST(PeerProcess, TheStateIsTheLetterAfterTheCommandName) {
  EXPECT_EQ(state_in_proc_stat("4242 (simnicd) R 1 4242 4242 0 -1"), 'R');
  EXPECT_EQ(state_in_proc_stat("17 (a) b (c)) S 1 17"), 'S');  // a name with ") " in it
  EXPECT_EQ(state_in_proc_stat("garbage"), 0);
  EXPECT_EQ(state_in_proc_stat("17 (x)"), 0);
}

// This process holds a UDP socket and is running while it asks: found, and busy.
TEST(PeerProcess, TheRunningOwnerOfASocketIsFoundAndBusy) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  PeerProcesses peers(own_comm());
  EXPECT_EQ(peers.owner(inode_of(fd)), ::getpid());
  EXPECT_TRUE(peers.busy(inode_of(fd)));
  ::close(fd);
}

// A child holds the socket and sleeps: found, not busy; a socket nobody holds has no owner.
TEST(PeerProcess, ASleepingOwnerIsNotBusyAndAnUnknownSocketHasNoOwner) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    const uint64_t inode = inode_of(fd);
    if (::write(pipe_fds[1], &inode, sizeof inode) != sizeof inode) ::_exit(1);
    ::pause();
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  uint64_t inode = 0;
  ASSERT_EQ(::read(pipe_fds[0], &inode, sizeof inode), ssize_t(sizeof inode));
  ::close(pipe_fds[0]);
  for (int i = 0; i < 200 && state_of(child) != 'S'; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  PeerProcesses peers(own_comm());
  EXPECT_EQ(peers.owner(inode), child);
  EXPECT_FALSE(peers.busy(inode));
  EXPECT_EQ(peers.owner(1), 0);
  EXPECT_FALSE(peers.busy(1));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

}  // namespace
}  // namespace simnic::io
