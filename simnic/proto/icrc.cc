#include "simnic/proto/icrc.h"

#include <zlib.h>
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#ifdef SIMNIC_HAVE_ISAL
#include <isa-l/crc.h>
#endif

#include "simnic/proto/headers.h"

namespace simnic::proto {

namespace {

// ISA-L's AVX-512 CRC (crc32_gzip_refl_by16_10, Debian's libisal 2.30) returns without
// VZEROUPPER, so the upper halves of the vector registers stay in use: every SSE instruction
// simnicd runs afterwards (the compiler's, glibc's) then merges with them, and every context
// switch saves them (Intel's optimization manual, "Mixing AVX code with SSE code"). Clearing
// them after each CRC took the sending NIC from 20-24 to 15 us per 64 KiB WRITE and the
// receiving one from 16-18 to 11 (docs/performance.md, "The vector state ISA-L left behind").
#if defined(SIMNIC_HAVE_ISAL) && defined(__x86_64__)
bool cpu_has_avx() {
  __builtin_cpu_init();  // this runs as a static initializer, possibly before libgcc's own
  return __builtin_cpu_supports("avx");
}
const bool kCpuHasAvx = cpu_has_avx();
inline void clear_upper_vector_state() {
  if (kCpuHasAvx) asm volatile("vzeroupper");
}
#else
inline void clear_upper_vector_state() {}
#endif

// CRC-32 (the reflected IEEE polynomial zlib and the ICRC use) of len bytes, continuing `crc`.
// ISA-L's folding implementation (PCLMULQDQ) is about 12 times faster than zlib's table on a
// 4 KiB payload here (0.07 vs 0.81 us), and the ICRC is computed on every packet sent and
// received; the value is the same, so zlib stays as the fallback where ISA-L is missing.
uint32_t crc32_update(uint32_t crc, const uint8_t* p, size_t len) {
#ifdef SIMNIC_HAVE_ISAL
  const uint32_t out = crc32_gzip_refl(crc, p, len);
  clear_upper_vector_state();
  return out;
#else
  return uint32_t(crc32(crc, p, uInt(len)));
#endif
}

constexpr size_t kHeadBytes = 8 + kIpv4UdpBytes + kBthBytes;

// The first bytes the ICRC covers, with the variant fields masked (IBA A17.3.3); returns how
// many of head[] are used (the BTH may be cut short in a malformed packet).
size_t masked_head(const uint8_t ipv4_udp[kIpv4UdpBytes], std::span<const uint8_t> roce, uint8_t head[kHeadBytes]) {
  // 8 bytes of ones stand for the masked LRH a real IB packet would have (the RoCEv2 rule).
  std::memset(head, 0xff, 8);
  uint8_t* ip = head + 8;
  std::memcpy(ip, ipv4_udp, kIpv4UdpBytes);
  ip[1] = 0xff;            // TOS: DSCP and ECN may change in flight
  ip[8] = 0xff;            // TTL
  ip[10] = ip[11] = 0xff;  // header checksum
  ip[26] = ip[27] = 0xff;  // UDP checksum
  uint8_t* bth = ip + kIpv4UdpBytes;
  size_t bth_len = std::min<size_t>(kBthBytes, roce.size());
  std::memcpy(bth, roce.data(), bth_len);
  if (bth_len > 4) bth[4] = 0xff;  // FECN, BECN and the reserved bits
  return 8 + kIpv4UdpBytes + bth_len;
}

// Where the IPv4 Identification and the DF bit sit in the masked head.
constexpr size_t kIdOffset = 8 + 4;
constexpr size_t kFlagsOffset = 8 + 6;
constexpr size_t kPrefix = 16;  // the bytes that vary with them: the rest is CRCed once

// A GF(2) basis in echelon form: pivot[b] has b as its highest set bit, and combo[b] says which
// of the original vectors it sums. Built once per set of vectors, it solves each target in at
// most 32 steps (issue 26: rebuilding it for every received segment was a fifth of a receiving
// NIC's time with small packets).
struct Gf2Basis {
  uint32_t pivot[32] = {}, combo[32] = {};
};

Gf2Basis reduce_gf2(const uint32_t* vectors, int n) {
  Gf2Basis r;
  for (int i = 0; i < n; ++i) {
    uint32_t v = vectors[i], m = 1u << i;
    for (int b = 31; b >= 0 && v; --b) {
      if (!(v >> b & 1)) continue;
      if (!r.pivot[b]) {
        r.pivot[b] = v, r.combo[b] = m;
        break;
      }
      v ^= r.pivot[b], m ^= r.combo[b];
    }
  }
  return r;
}

// Solves sum(x_i * vector_i) = target over GF(2); false if no x exists.
bool solve_gf2(const Gf2Basis& basis, uint32_t target, uint32_t* x) {
  uint32_t sol = 0;
  for (int b = 31; b >= 0 && target; --b) {
    if (!(target >> b & 1)) continue;
    if (!basis.pivot[b]) return false;
    target ^= basis.pivot[b], sol ^= basis.combo[b];
  }
  *x = sol;
  return true;
}

// The bytes the ICRC covers after the prefix: the rest of the masked head (LRH ones, IPv4 and
// UDP headers) and the RoCE bytes (BTH to payload).
constexpr size_t covered_after_prefix(size_t roce_len) { return 8 + kIpv4UdpBytes + roce_len - kPrefix; }

// How flipping each Identification bit (16), then DF, changes the ICRC of a packet whose
// covered bytes after the first kPrefix number `after_prefix`. The CRC is affine: the change is
// the CRC of the flipped bit alone, carried over the bytes that follow it (zlib's
// crc32_combine_op), so it depends on that length and nothing else. A GSO sender's segments
// share one length, so a small cache turns solving for their Identification into a
// back-substitution in a basis reduced once per length instead of 18 CRC combinations per packet.
struct IdentDeltas {
  size_t len = SIZE_MAX;
  std::array<uint32_t, 17> deltas{};
  Gf2Basis basis;  // of `deltas`, for solving
};

const IdentDeltas& ident_deltas(size_t after_prefix) {
  thread_local std::array<IdentDeltas, 4> cache;
  thread_local size_t next = 0;
  for (const IdentDeltas& e : cache)
    if (e.len == after_prefix) return e;
  IdentDeltas& e = cache[next++ % cache.size()];
  e.len = after_prefix;
  const uLong op = crc32_combine_gen64(z_off64_t(after_prefix));
  const uint8_t zero[kPrefix] = {};
  const uLong crc_zero = crc32(0L, zero, kPrefix);
  for (int i = 0; i < 17; ++i) {
    uint8_t p[kPrefix] = {};
    if (i < 16) p[kIdOffset + (i < 8 ? 1 : 0)] = uint8_t(1u << (i % 8));
    else p[kFlagsOffset] = 0x40;
    // crc(p) ^ crc(zero) is the CRC's linear part of the flip; combined with 0, it is carried
    // over the following bytes.
    e.deltas[i] = uint32_t(crc32_combine_op(crc32(0L, p, kPrefix) ^ crc_zero, 0, op));
  }
  e.basis = reduce_gf2(e.deltas.data(), 17);
  return e;
}

}  // namespace

uint32_t compute_icrc(const uint8_t ipv4_udp[kIpv4UdpBytes], std::span<const uint8_t> roce) {
  uint8_t head[kHeadBytes];
  const size_t head_len = masked_head(ipv4_udp, roce, head);
  const size_t bth_len = head_len - 8 - kIpv4UdpBytes;
  uint32_t crc = crc32_update(0, head, head_len);
  if (roce.size() > bth_len) crc = crc32_update(crc, roce.data() + bth_len, roce.size() - bth_len);
  return crc;
}

bool icrc_verifies_for_some_ident(const IpUdpInfo& ip, std::span<const uint8_t> roce, uint32_t got,
                                  IpIdent* sent_with) {
  return icrc_change_explained(roce.size(), compute_icrc(ip, roce) ^ got, sent_with);
}

bool icrc_change_explained(size_t roce_len, uint32_t change, IpIdent* sent_with) {
  if (change == 0) {
    *sent_with = IpIdent{};
    return true;
  }
  uint32_t x = 0;
  if (!solve_gf2(ident_deltas(covered_after_prefix(roce_len)).basis, change, &x)) return false;
  sent_with->id = uint16_t(x & 0xffff);
  sent_with->df = !(x >> 16 & 1);
  return true;
}

uint32_t icrc_ident_change(size_t roce_len, uint16_t id) {
  const auto& deltas = ident_deltas(covered_after_prefix(roce_len)).deltas;
  uint32_t change = 0;
  for (int i = 0; i < 16; ++i)
    if (id >> i & 1) change ^= deltas[i];
  return change;
}

uint32_t compute_icrc(const IpUdpInfo& ip, std::span<const uint8_t> roce) {
  uint8_t h[kIpv4UdpBytes];
  build_ipv4_udp(ip, roce.size() + kIcrcBytes, h);
  return compute_icrc(h, roce);
}

}  // namespace simnic::proto
