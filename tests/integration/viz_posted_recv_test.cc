// A live viewer sees receives when they are posted, not only when the first SEND finds them:
// ibv_rc_pingpong's server posts its receives and then waits for its client on TCP, so no
// packet and no doorbell ever makes the NIC look at its receive queue.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "harness.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

int connect_viewer(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads what the NIC streams until `needle` shows up or `timeout` passes.
bool stream_shows(int fd, const std::string& needle, std::chrono::milliseconds timeout, std::string* seen) {
  auto end = std::chrono::steady_clock::now() + timeout;
  char buf[65536];
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) != 1) continue;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return false;
    seen->append(buf, size_t(n));
    if (seen->find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(VizLive, PostedReceivesShowWithoutAnyPacket) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  int viewer = connect_viewer(nics.dir() + "/simnic0.trace");
  ASSERT_GE(viewer, 0);
  const std::string port = std::to_string(free_tcp_port());
  auto server = nics.start({"ibv_rc_pingpong", "-d", "simnic0", "-g", "0", "-p", port});
  ASSERT_TRUE(wait_for_listener(std::stoi(port), 10s)) << server->output();
  std::string seen;
  EXPECT_TRUE(stream_shows(viewer, "\"kind\":\"wqe_posted\"", 5s, &seen))
      << seen.substr(seen.size() > 4000 ? seen.size() - 4000 : 0);
  EXPECT_NE(seen.find("\"queue\":\"rq\""), std::string::npos);
  EXPECT_EQ(seen.find("\"kind\":\"pkt_rx\""), std::string::npos) << "no packet was needed";
  ::close(viewer);
}

}  // namespace
}  // namespace simnic::it
