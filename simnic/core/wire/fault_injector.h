// The NIC's own impairment model for packets it sends: loss, duplication, reordering and
// delay, from a seeded generator so a run can be repeated. Kernels here have no netem, so
// this is the injector users can count on. Pure: the I/O layer applies the decisions.
#pragma once
#include <cstdint>
#include <random>
#include <string>

namespace simnic::core {

struct FaultConfig {
  double loss = 0;        // probability a packet is dropped
  double dup = 0;         // probability a packet is sent twice
  double reorder = 0;     // probability a packet is held back behind later ones
  uint32_t delay_us = 0;  // added to every packet
  uint64_t seed = 1;
};

struct FaultDecision {
  bool drop = false;
  uint32_t copies = 1;    // 2 when duplicated
  uint64_t delay_ns = 0;  // 0 = send now
};

class FaultInjector {
 public:
  static constexpr uint64_t kReorderHoldNs = 300'000;  // long enough for later packets to pass

  const FaultConfig& config() const { return config_; }
  void configure(const FaultConfig& c);
  bool active() const { return config_.loss > 0 || config_.dup > 0 || config_.reorder > 0 || config_.delay_us > 0; }
  FaultDecision decide();

  // "loss=0.05 dup=0.01 reorder=0.05 delay_us=100 seed=7"; unknown keys or bad values fail.
  bool apply_spec(const std::string& spec, std::string* error);
  std::string describe() const;

 private:
  FaultConfig config_;
  std::mt19937_64 rng_{1};
  std::uniform_real_distribution<double> uniform_{0.0, 1.0};
};

}  // namespace simnic::core
