// The port's IPv4 TOS byte (RoCEv2's GRH traffic class, IBA Annex A17) through real loopback
// sockets: a datagram sent with a TOS arrives with it (IP_TOS control message out, IP_RECVTOS
// in), one sent without arrives with 0, with and without GSO, and a GSO run never carries two
// TOS values (GRO would merge segments under the first's).
#include <gtest/gtest.h>

#include <unistd.h>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "simnic/io/udp_port.h"

namespace simnic::io {
namespace {

// 127.77.x.y and .y+1 from this process's pid: ctest runs each test in a process of its own,
// several at once, and two of them on one address would take each other's datagrams.
const uint32_t kIpA = 0x7f4d0000u | ((uint32_t(getpid()) * 2) & 0xfffe), kIpB = kIpA + 1;
constexpr uint16_t kPort = 4791;

struct Arrival {
  size_t len;
  uint8_t first_byte, tos;
};

class UdpPortTos : public ::testing::TestWithParam<UdpPort::GsoMode> {
 protected:
  void SetUp() override {
    a.set_gso_mode(GetParam());
    std::string err;
    ASSERT_TRUE(a.open(&err)) << err;
    ASSERT_TRUE(b.open(&err)) << err;
    b.start(
        [this](uint32_t, uint16_t, std::span<const uint8_t> bytes, uint32_t, uint8_t tos) {
          got.push_back({bytes.size(), bytes[0], tos});
        },
        [] {});
  }
  void send(uint8_t tag, uint8_t tos) {
    std::vector<uint8_t> d(256, tag);
    if (tos) a.send_with_tos(kIpB, kPort, d, tos);
    else a.send(kIpB, kPort, d);
  }
  // Runs the loop until `n` datagrams arrived, or two seconds passed.
  void receive(size_t n) {
    a.flush();
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (got.size() < n && std::chrono::steady_clock::now() < end) io.run_for(std::chrono::milliseconds(10));
  }

  boost::asio::io_context io;
  UdpPort a{io, kIpA, kPort}, b{io, kIpB, kPort};
  std::vector<Arrival> got;
};

TEST_P(UdpPortTos, EachDatagramArrivesWithTheTosItWasSentWith) {
  send(1, 252);
  send(2, 252);
  send(3, 0);
  send(4, 0);
  send(5, 0x68);
  send(6, 252);
  receive(6);
  ASSERT_EQ(got.size(), 6u);
  const uint8_t want[6] = {252, 252, 0, 0, 0x68, 252};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(got[i].first_byte, i + 1) << "in order";
    EXPECT_EQ(got[i].len, 256u);
    EXPECT_EQ(got[i].tos, want[i]) << "datagram " << i + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(Gso, UdpPortTos, ::testing::Values(UdpPort::GsoMode::kOff, UdpPort::GsoMode::kOn),
                         [](const auto& info) { return info.param == UdpPort::GsoMode::kOn ? "On" : "Off"; });

TEST(UdpPortTosRuns, AGsoRunNeverMixesTwoTosValues) {
  boost::asio::io_context io;
  UdpPort a{io, kIpA, kPort}, b{io, kIpB, kPort};
  a.set_gso_mode(UdpPort::GsoMode::kOn);
  std::string err;
  ASSERT_TRUE(a.open(&err)) << err;
  ASSERT_TRUE(b.open(&err)) << err;
  std::vector<uint8_t> d(256, 0);
  for (int i = 0; i < 3; ++i) a.send_with_tos(kIpB, kPort, d, 252);
  for (int i = 0; i < 3; ++i) a.send(kIpB, kPort, d);
  a.flush();
  EXPECT_EQ(a.tx_gso_sends(), 2u) << "three at TOS 252, then three at TOS 0";
}

}  // namespace
}  // namespace simnic::io
