// Issue 29 point 8: `simnic status` of a NIC whose status is longer than one control message
// (64 KiB) shows all of it, in pieces (abi::kRespMore); and a NIC that answers something
// `simnic` cannot read is reported as such, never as "not running (stale socket)", whose
// advice (`simnic down`) would stop a live NIC.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <sstream>
#include <thread>

#include "harness.h"
#include "simnic/abi/paths.h"

namespace simnic::it {
namespace {

using namespace std::chrono_literals;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

size_t count_lines_starting(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.rfind(prefix, 0) == 0;
  return n;
}

// 2,000 QPs: about 90 KB of status, two pieces. Every QP is listed, by --raw and by the view.
TEST(StatusScale, StatusOfTwoThousandQpsShowsThemAll) {
  Nics nics(1);
  ASSERT_TRUE(nics.ok()) << nics.up_result().output;
  auto holder = nics.start({bin_dir() + "/simnic-many-qps", "2000", "1", "60"});
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline && !contains(holder->output(), "made "))
    std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(contains(holder->output(), "made 2000 QPs")) << holder->output();

  Result raw = run({bin_dir() + "/simnic", "status", "simnic0", "--raw"}, nics.env(), 30s);
  ASSERT_EQ(raw.exit_code, 0) << raw.output.substr(0, 2000);
  EXPECT_GT(raw.output.size(), size_t(64 * 1024)) << "the status must not fit one message";
  EXPECT_EQ(count_lines_starting(raw.output, "qp."), 2000u);
  EXPECT_TRUE(contains(raw.output, "\nqps 2000\n"));
  EXPECT_FALSE(contains(raw.output, "stale"));

  Result view = run({bin_dir() + "/simnic", "status", "simnic0"}, nics.env(), 30s);
  ASSERT_EQ(view.exit_code, 0) << view.output.substr(0, 2000);
  EXPECT_GE(count_lines_starting(view.output, "  0x") + count_lines_starting(view.output, "0x"), 2000u)
      << view.output.substr(view.output.size() > 3000 ? view.output.size() - 3000 : 0);

  Result table = run({bin_dir() + "/simnic", "status"}, nics.env(), 30s);
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_TRUE(contains(table.output, "simnic0")) << table.output;
  EXPECT_FALSE(contains(table.output, "stale")) << table.output;
  EXPECT_FALSE(contains(table.output, "not running")) << table.output;
}

// A "NIC" that answers every message with three bytes of garbage.
class GarbageNic {
 public:
  explicit GarbageNic(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    ok_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd_, 8) == 0;
    thread_ = std::thread([this] { serve(); });
  }
  ~GarbageNic() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  bool ok() const { return ok_; }

 private:
  void serve() {
    while (!stop_) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      char buf[65536];
      while (::recv(c, buf, sizeof buf, 0) > 0) ::send(c, "\x01\x02\x03", 3, MSG_NOSIGNAL);
      ::close(c);
    }
  }
  int fd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(StatusScale, ANicThatAnswersGarbageIsNotCalledStale) {
  std::string dir = "/tmp/simnic-it-garbage-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  {
    GarbageNic nic(abi::control_socket_path(dir, "simnic7"));
    ASSERT_TRUE(nic.ok());
    std::map<std::string, std::string> env{{"SIMNIC_DIR", dir}};
    for (auto args : {std::vector<std::string>{"status"}, std::vector<std::string>{"status", "simnic7"}}) {
      args.insert(args.begin(), bin_dir() + "/simnic");
      Result r = run(args, env, 20s);
      EXPECT_EQ(r.exit_code, 1) << r.output;
      EXPECT_FALSE(contains(r.output, "stale")) << r.output;
      EXPECT_FALSE(contains(r.output, "not running")) << r.output;
      EXPECT_TRUE(contains(r.output, "simnic7") &&
                  contains(r.output, "is running but answered with a reply simnic cannot read (EPROTO)"))
          << r.output;
    }
  }
  // Once nobody serves the socket, the advice is right again.
  Result gone = run({bin_dir() + "/simnic", "status"}, {{"SIMNIC_DIR", dir}}, 20s);
  EXPECT_TRUE(contains(gone.output, "simnic7    not running (stale socket; `simnic down simnic7` clears it)"))
      << gone.output;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace simnic::it
