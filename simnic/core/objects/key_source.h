// Where memory keys and QP numbers come from. RoCE has no authentication: a packet that names
// the right QPN, PSN and rkey is executed (IBA 10.6.3.2 checks the key, not the sender). Keys
// and QPNs that count up, or come from a generator seeded with the NIC's address, let any local
// user who can send UDP forge WRITEs into another user's memory; drawn from the kernel's
// cryptographic generator, they must be guessed (2^24 QPNs x 2^24 PSNs x 2^31 keys).
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>

namespace simnic::core {

class KeySource {
 public:
  // seed 0: getrandom(2) (simnicd). Any other seed: a reproducible sequence, for tests and
  // fuzzers that must replay a run.
  explicit KeySource(uint64_t seed = 0);
  uint32_t next();

 private:
  void refill();
  bool reproducible_;
  std::mt19937_64 replay_;
  uint32_t pool_[64];
  size_t left_ = 0;
};

}  // namespace simnic::core
