#include "simnic/proto/opcode_table.h"

#include <array>
#include <cstdio>

#include "simnic/proto/header_layout.h"

namespace simnic::proto {

namespace {

constexpr uint8_t header_len_of(uint32_t mask) {
  uint32_t n = kBthBytes;
  for (const ExtHeader& h : kHeaderLayout)
    if (mask & h.bit) n += h.bytes;
  return uint8_t(n);
}

constexpr uint32_t kSend = kIsSend | kIsRequest | kHasPayload;
constexpr uint32_t kWrite = kIsWrite | kIsRequest | kHasPayload;
constexpr uint32_t kOnly = kIsFirst | kIsLast;

struct Row {
  uint8_t opcode;
  const char* name;
  uint32_t mask;
};

// The transport-independent shape of SEND and WRITE opcodes, shared by RC (0x00) and UC (0x20).
constexpr Row kSendWrite[] = {
    {0x00, "SEND_FIRST", kSend | kIsFirst},
    {0x01, "SEND_MIDDLE", kSend | kIsMiddle},
    {0x02, "SEND_LAST", kSend | kIsLast},
    {0x03, "SEND_LAST_WITH_IMMEDIATE", kSend | kIsLast | kHasImm},
    {0x04, "SEND_ONLY", kSend | kOnly},
    {0x05, "SEND_ONLY_WITH_IMMEDIATE", kSend | kOnly | kHasImm},
    {0x06, "RDMA_WRITE_FIRST", kWrite | kIsFirst | kHasReth},
    {0x07, "RDMA_WRITE_MIDDLE", kWrite | kIsMiddle},
    {0x08, "RDMA_WRITE_LAST", kWrite | kIsLast},
    {0x09, "RDMA_WRITE_LAST_WITH_IMMEDIATE", kWrite | kIsLast | kHasImm},
    {0x0a, "RDMA_WRITE_ONLY", kWrite | kOnly | kHasReth},
    {0x0b, "RDMA_WRITE_ONLY_WITH_IMMEDIATE", kWrite | kOnly | kHasReth | kHasImm},
};

constexpr Row kRcOnly[] = {
    {0x0c, "RDMA_READ_REQUEST", kIsReadReq | kIsRequest | kOnly | kHasReth},
    {0x0d, "RDMA_READ_RESPONSE_FIRST", kIsReadResp | kIsResponse | kHasPayload | kIsFirst | kHasAeth},
    {0x0e, "RDMA_READ_RESPONSE_MIDDLE", kIsReadResp | kIsResponse | kHasPayload | kIsMiddle},
    {0x0f, "RDMA_READ_RESPONSE_LAST", kIsReadResp | kIsResponse | kHasPayload | kIsLast | kHasAeth},
    {0x10, "RDMA_READ_RESPONSE_ONLY", kIsReadResp | kIsResponse | kHasPayload | kOnly | kHasAeth},
    {0x11, "ACKNOWLEDGE", kIsAck | kIsResponse | kOnly | kHasAeth},
    {0x12, "ATOMIC_ACKNOWLEDGE", kIsAck | kIsResponse | kOnly | kHasAeth | kHasAtomicAckEth},
    {0x13, "COMPARE_SWAP", kIsAtomic | kIsRequest | kOnly | kHasAtomicEth},
    {0x14, "FETCH_ADD", kIsAtomic | kIsRequest | kOnly | kHasAtomicEth},
    {0x16, "SEND_LAST_WITH_INVALIDATE", kSend | kIsLast | kHasIeth},
    {0x17, "SEND_ONLY_WITH_INVALIDATE", kSend | kOnly | kHasIeth},
    {0x1d, "RDMA_ATOMIC_WRITE", kIsAtomicWrite | kIsRequest | kOnly | kHasReth | kHasPayload},
};

constexpr Row kUd[] = {
    {0x64, "SEND_ONLY", kSend | kOnly | kHasDeth},
    {0x65, "SEND_ONLY_WITH_IMMEDIATE", kSend | kOnly | kHasDeth | kHasImm},
};

struct Table {
  std::array<OpcodeInfo, 256> info;
  std::array<std::array<char, 48>, 256> names;
};

Table build() {
  Table t{};
  for (auto& i : t.info) i = {"INVALID", 0, 0};
  auto add = [&](uint8_t op, const char* prefix, const char* name, uint32_t mask) {
    auto& buf = t.names[op];
    std::snprintf(buf.data(), buf.size(), "%s_%s", prefix, name);
    mask |= kIsValid;
    t.info[op] = {buf.data(), mask, header_len_of(mask)};
  };
  for (const Row& r : kSendWrite) add(r.opcode, "RC", r.name, r.mask | kIsRc);
  for (const Row& r : kRcOnly) add(r.opcode, "RC", r.name, r.mask | kIsRc);
  for (const Row& r : kSendWrite) add(uint8_t(0x20 | r.opcode), "UC", r.name, r.mask | kIsUc);
  for (const Row& r : kUd) add(r.opcode, "UD", r.name, r.mask | kIsUd);
  // XRC mirrors RC at 0xa0; every request carries an XRCETH, responses do not (Annex A14).
  auto xrc_mask = [](uint32_t m) { return m | kIsXrc | ((m & kIsRequest) ? uint32_t(kHasXrceth) : 0u); };
  for (const Row& r : kSendWrite) add(xrc_of_rc(r.opcode), "XRC", r.name, xrc_mask(r.mask));
  for (const Row& r : kRcOnly) add(xrc_of_rc(r.opcode), "XRC", r.name, xrc_mask(r.mask));
  return t;
}

const Table& table() {
  static const Table t = build();
  return t;
}

}  // namespace

const OpcodeInfo& opcode_info(uint8_t opcode) { return table().info[opcode]; }

uint32_t header_offset(uint8_t opcode, OpMask header) {
  uint32_t mask = opcode_info(opcode).mask, off = kBthBytes;
  for (const ExtHeader& h : kHeaderLayout) {
    if (h.bit == header) return off;
    if (mask & h.bit) off += h.bytes;
  }
  return off;
}

}  // namespace simnic::proto
