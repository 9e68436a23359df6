// Finding the NIC process behind a peer socket and whether it runs (issue 26: a peer that read
// a packet and waits for a CPU has not lost it; completer_timers.cc).
#include "simnic/io/peer_process.h"
#include "simnic/io/host_memory_process.h"
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

// A child whose main thread sleeps while another thread of it spins (a program that polls on a
// thread of its own and joins it from main): the main thread's state says asleep, the process is
// runnable. With both asleep it is not, and a process that is gone is not.
pid_t fork_child_with_threads(bool second_spins) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  std::thread second([second_spins] {
    if (second_spins)
      for (;;) asm volatile("");
    ::pause();
  });
  ::pause();  // the main thread sleeps until killed
  _exit(0);
}

bool wait_for_main_thread_asleep(pid_t pid) {
  for (int i = 0; i < 400; ++i) {
    if (read_proc_stat(pid).state == 'S') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

TEST(ProcStat, AProcessIsRunnableWhenAnyOfItsThreadsIs) {
  const pid_t spinning = fork_child_with_threads(true);
  ASSERT_GT(spinning, 0);
  ASSERT_TRUE(wait_for_main_thread_asleep(spinning));
  EXPECT_TRUE(any_thread_runnable(spinning));       // the second thread runs or waits for a CPU
  EXPECT_FALSE(any_thread_runnable(spinning, 1));   // the main thread alone (listed first) sleeps
  EXPECT_TRUE(ProcessMemory().runnable(spinning));  // what a receive wait asks (receive_wait.cc)
  ::kill(spinning, SIGKILL);
  ::waitpid(spinning, nullptr, 0);
  EXPECT_FALSE(any_thread_runnable(spinning));  // gone

  const pid_t sleeping = fork_child_with_threads(false);
  ASSERT_GT(sleeping, 0);
  ASSERT_TRUE(wait_for_main_thread_asleep(sleeping));
  bool seen_asleep = false;  // the second thread may not have reached pause() yet
  for (int i = 0; i < 400 && !(seen_asleep = !any_thread_runnable(sleeping)); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(seen_asleep);
  ::kill(sleeping, SIGKILL);
  ::waitpid(sleeping, nullptr, 0);
}

// This process holds a UDP socket and is running while it asks: found, and busy only while the
// NIC on this loop that holds the socket says it is behind (work left for a later turn).
TEST(PeerProcess, ASocketOfThisProcessIsBusyOnlyWhileItsNicIsBehind) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  const uint64_t inode = inode_of(fd);
  {
    PeerProcesses peers(own_comm());
    EXPECT_EQ(peers.owner(inode), ::getpid());
    EXPECT_FALSE(peers.busy(inode)) << "no NIC of this loop holds it";
  }
  bool behind = true;
  LoopNics::add(inode, [&behind] { return behind; });
  {
    PeerProcesses peers(own_comm());
    EXPECT_TRUE(peers.busy(inode));
    EXPECT_TRUE(peers.busy(inode));
    behind = false;
    EXPECT_TRUE(peers.busy(inode)) << "read once until forget()";
    peers.forget();
    EXPECT_FALSE(peers.busy(inode));
  }
  behind = true;
  LoopNics::remove(inode);
  PeerProcesses peers(own_comm());
  EXPECT_FALSE(peers.busy(inode));
  ::close(fd);
}

// A child process holding a UDP socket, spinning or asleep, until killed.
struct ChildWithSocket {
  pid_t pid = -1;
  uint64_t inode = 0;
};

ChildWithSocket fork_child_with_socket(bool spin) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return {};
  const pid_t child = ::fork();
  if (child == 0) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    const uint64_t inode = inode_of(fd);
    if (::write(pipe_fds[1], &inode, sizeof inode) != sizeof inode) ::_exit(1);
    for (volatile bool forever = true; forever;)
      if (!spin) ::pause();
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  ChildWithSocket c{child, 0};
  if (child < 0 || ::read(pipe_fds[0], &c.inode, sizeof c.inode) != ssize_t(sizeof c.inode)) c.inode = 0;
  ::close(pipe_fds[0]);
  return c;
}

// A child holds the socket and spins: found, and busy.
TEST(PeerProcess, ARunningOwnerIsBusy) {
  const ChildWithSocket child = fork_child_with_socket(true);
  ASSERT_GT(child.pid, 0);
  ASSERT_NE(child.inode, 0u);
  PeerProcesses peers(own_comm());
  EXPECT_EQ(peers.owner(child.inode), child.pid);
  EXPECT_TRUE(peers.busy(child.inode));
  ::kill(child.pid, SIGKILL);
  ::waitpid(child.pid, nullptr, 0);
}

// A child holds the socket and sleeps: found, not busy; a socket nobody holds has no owner.
TEST(PeerProcess, ASleepingOwnerIsNotBusyAndAnUnknownSocketHasNoOwner) {
  const ChildWithSocket c = fork_child_with_socket(false);
  ASSERT_GT(c.pid, 0);
  ASSERT_NE(c.inode, 0u);
  const pid_t child = c.pid;
  const uint64_t inode = c.inode;
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
