// Step mode's controller on its own: what it holds while paused, in which order it performs
// it, what it reports. The Device is a real one on the in-memory fabric of the core tests;
// packets here are garbage, so each one performed shows as a malformed drop.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

#include "../core/fabric.h"
#include "simnic/io/step_controller.h"
#include "simnic/io/udp_port.h"

namespace simnic::testing {
namespace {

struct StepControllerTest : ::testing::Test {
  StepControllerTest()
      : port(fabric, kIp),
        device(config(), mem, port, shm, notifier, logger),
        clock(io::monotonic_ns()),
        step(device, clock, "nicA",
             {[this](uint32_t ctx, uint64_t) { rung.push_back(ctx); }, [this] { ++after_events; },
              [this] { ++timer_cancels; }, [] {}}) {}
  static core::DeviceConfig config() {
    core::DeviceConfig c;
    c.ipv4 = kIp;
    c.name = "nicA";
    return c;
  }
  std::string run(const std::string& cmd, int* status = nullptr) {
    int st = 0;
    std::string out = step.command(cmd, &st);
    if (status) *status = st;
    return out;
  }
  uint64_t dropped() const { return device.counters().rx_drop_malformed; }
  void hold_garbage_packet() { step.hold_packet(0x7f000002, 4791, garbage, 0); }

  static constexpr uint32_t kIp = 0x7f000001;
  const std::vector<uint8_t> garbage = std::vector<uint8_t>(12, 0xee);
  FakeMemory mem;
  Fabric fabric;
  Fabric::Port port;
  HeapShm shm;
  RecordingNotifier notifier;
  CapturingLogger logger;
  core::Device device;
  io::SimClock clock;
  io::StepController step;
  std::vector<uint32_t> rung;
  int after_events = 0, timer_cancels = 0;
};

TEST_F(StepControllerTest, NextIsRefusedUnlessPaused) {
  int st = 0;
  EXPECT_EQ(run("next", &st), "not paused: turn step mode on first (simnic step nicA on)");
  EXPECT_EQ(st, EINVAL);
  run("bogus", &st);
  EXPECT_EQ(st, EINVAL);
  EXPECT_FALSE(step.paused());
}

TEST_F(StepControllerTest, PausedInputsWaitAndStepOneAtATimeInArrivalOrder) {
  EXPECT_NE(run("on").find("paused 1\nheld 0\n"), std::string::npos);
  EXPECT_TRUE(step.paused());
  EXPECT_EQ(timer_cancels, 1);
  step.hold_doorbell(7);
  step.hold_doorbell(7);  // rung again before the first was performed: one is enough
  hold_garbage_packet();
  step.hold_doorbell(7);  // after a packet: a new doorbell
  EXPECT_NE(run("status").find("held 3\nnext doorbell\n"), std::string::npos);

  run("next");
  EXPECT_EQ(rung, std::vector<uint32_t>{7});
  EXPECT_EQ(dropped(), 0u);
  EXPECT_NE(run("status").find("held 2\nnext packet\n"), std::string::npos);
  run("next 2");
  EXPECT_EQ(dropped(), 1u);
  EXPECT_EQ(rung, (std::vector<uint32_t>{7, 7}));
  EXPECT_NE(run("status").find("paused 1\nheld 0\n"), std::string::npos);
  EXPECT_EQ(after_events, 3) << "each step continues the NIC's work once";
}

TEST_F(StepControllerTest, OffPerformsEverythingHeldAndAClosedContextsDoorbellsGo) {
  run("on");
  step.hold_doorbell(1);
  hold_garbage_packet();
  step.hold_doorbell(2);
  hold_garbage_packet();
  step.forget_context(2);
  EXPECT_NE(run("status").find("held 3\n"), std::string::npos);
  EXPECT_NE(run("off").find("paused 0\nheld 0\n"), std::string::npos);
  EXPECT_FALSE(step.paused());
  EXPECT_EQ(rung, std::vector<uint32_t>{1});
  EXPECT_EQ(dropped(), 2u);
}

}  // namespace
}  // namespace simnic::testing
