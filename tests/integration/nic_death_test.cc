// Issue 29 point 10: a program whose NIC was killed learns it on the very next post, not on
// the 128th (docs/shim.md "When the NIC goes away": EIO).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <cstring>

#include <thread>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

bool wait_for_line(const Process& p, const std::string& line, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (contains(p.output(), line)) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// simnicd is SIGKILLed; the program waits for its exit without any verb, then posts 100
// receives and 100 sends: each returns EIO with *bad_wr at the WR, the first included
// (before: the first posts returned 0, the shim looked at the socket every 128th call only).
TEST(NicDeath, EveryPostAfterTheNicIsKilledFailsWithEio) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  auto pids = nics.daemon_pids();
  ASSERT_EQ(pids.size(), 1u);
  auto watch = nics.start({bin_dir() + "/simnic-nic-loss-watch", "simnic0", std::to_string(pids[0])});
  ASSERT_TRUE(wait_for_line(*watch, "ready", 20s)) << watch->output();
  ::kill(pids[0], SIGKILL);
  Result r = watch->wait(30s);
  EXPECT_FALSE(r.timed_out) << r.output;
  EXPECT_TRUE(contains(r.output, "posts_after_death: recv_eio=100 send_eio=100 of 100")) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// A program that outlives its NIC does not keep the NIC's address: the UDP socket it held for
// posts that send themselves (a --no-history NIC lends them) is let go when the shim learns the
// NIC is gone, so the address can be bound again (by `simnic up`; here by this test) while the
// program still runs with its context open.
TEST(NicDeath, AProgramThatOutlivesItsNicDoesNotKeepItsAddress) {
  Nics nics(1, {"--no-history"});
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  auto pids = nics.daemon_pids();
  ASSERT_EQ(pids.size(), 1u);
  auto watch = nics.start({bin_dir() + "/simnic-nic-loss-watch", "simnic0", std::to_string(pids[0]), "linger"});
  ASSERT_TRUE(wait_for_line(*watch, "ready", 20s)) << watch->output();
  ::kill(pids[0], SIGKILL);
  ASSERT_TRUE(wait_for_line(*watch, "lingering", 30s)) << watch->output();
  EXPECT_TRUE(contains(watch->output(), "posts_after_death: recv_eio=100 send_eio=100 of 100")) << watch->output();

  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(4791);
  ASSERT_EQ(::inet_pton(AF_INET, nics.addr(0).c_str(), &a.sin_addr), 1);
  const int bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a);
  const int err = errno;
  ::close(fd);
  EXPECT_EQ(bound, 0) << nics.addr(0) << ":4791 is still held: " << std::strerror(err);
}

}  // namespace
}  // namespace simnic::it
