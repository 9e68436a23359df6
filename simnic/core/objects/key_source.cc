#include "simnic/core/objects/key_source.h"

#include <sys/random.h>

#include <cerrno>

namespace simnic::core {

KeySource::KeySource(uint64_t seed) : reproducible_(seed != 0), replay_(seed) {}

uint32_t KeySource::next() {
  if (left_ == 0) refill();
  return pool_[--left_];
}

// One system call per 64 values: keys are drawn at registration, never on the data path.
void KeySource::refill() {
  if (!reproducible_) {
    auto* p = reinterpret_cast<uint8_t*>(pool_);
    size_t got = 0;
    while (got < sizeof pool_) {
      ssize_t n = ::getrandom(p + got, sizeof pool_ - got, 0);
      if (n > 0) got += size_t(n);
      else if (errno != EINTR) break;
    }
    if (got == sizeof pool_) {
      left_ = 64;
      return;
    }
    // No getrandom (a very old kernel or a seccomp filter): std::random_device reads the
    // kernel's generator another way.
    std::random_device rd;
    for (auto& v : pool_) v = rd();
    left_ = 64;
    return;
  }
  for (auto& v : pool_) v = uint32_t(replay_());
  left_ = 64;
}

}  // namespace simnic::core
