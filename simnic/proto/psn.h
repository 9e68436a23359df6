// 24-bit packet sequence numbers (IBA 9.7.1): they wrap, so order is a signed distance.
#pragma once
#include <cstdint>

namespace simnic::proto {

constexpr uint32_t kPsnMask = 0xFFFFFF;

constexpr uint32_t psn_add(uint32_t psn, uint32_t n) { return (psn + n) & kPsnMask; }

// a - b in 24-bit space, in [-2^23, 2^23).
constexpr int32_t psn_diff(uint32_t a, uint32_t b) { return static_cast<int32_t>(((a - b) & kPsnMask) << 8) >> 8; }

constexpr bool psn_before(uint32_t a, uint32_t b) { return psn_diff(a, b) < 0; }

}  // namespace simnic::proto
