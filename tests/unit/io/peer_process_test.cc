// Finding the NIC process behind a peer socket and whether it runs (issue 26: a peer that read
// a packet and waits for a CPU has not lost it; completer_timers.cc).
#include "simnic/io/peer_process.h"
#include "simnic/io/proc_stat.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace simnic::io {
namespace {

std::string own_comm() { return read_proc_stat(::getpid()).comm; }

uint64_t inode_of(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? uint64_t(st.st_ino) : 0;
}

TEST(ProcStat, TheCommandNameRunsToTheLastParenthesisAndTheStateFollows) {
  EXPECT_EQ(parse_proc_stat("4242 (simnicd) R 1 4242 4242 0 -1").comm, "simnicd");
  EXPECT_EQ(parse_proc_stat("4242 (simnicd) R 1 4242 4242 0 -1").state, 'R');
  EXPECT_EQ(parse_proc_stat("17 (a) b (c)) S 1 17").comm, "a) b (c)");  // a name with ") " in it
  EXPECT_EQ(parse_proc_stat("17 (a) b (c)) S 1 17").state, 'S');
  EXPECT_EQ(parse_proc_stat("garbage").state, 0);
  EXPECT_EQ(parse_proc_stat("17 (x)").state, 0);
  EXPECT_EQ(read_proc_stat(::getpid()).state, 'R');  // this process, running as it asks
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
  for (int i = 0; i < 200 && read_proc_stat(child).state != 'S'; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
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
