// The BTH opcodes (IBA Table 38), defined once: what each carries and what it is. Engines
// test flags from this table, never lists of opcodes.
#pragma once
#include <cstdint>

namespace simnic::proto {

enum Opcode : uint8_t {
  kRcSendFirst = 0x00,
  kRcSendMiddle = 0x01,
  kRcSendLast = 0x02,
  kRcSendLastImm = 0x03,
  kRcSendOnly = 0x04,
  kRcSendOnlyImm = 0x05,
  kRcWriteFirst = 0x06,
  kRcWriteMiddle = 0x07,
  kRcWriteLast = 0x08,
  kRcWriteLastImm = 0x09,
  kRcWriteOnly = 0x0a,
  kRcWriteOnlyImm = 0x0b,
  kRcReadRequest = 0x0c,
  kRcReadResponseFirst = 0x0d,
  kRcReadResponseMiddle = 0x0e,
  kRcReadResponseLast = 0x0f,
  kRcReadResponseOnly = 0x10,
  kRcAcknowledge = 0x11,
  kRcAtomicAcknowledge = 0x12,
  kRcCompareSwap = 0x13,
  kRcFetchAdd = 0x14,
  kRcSendLastInv = 0x16,
  kRcSendOnlyInv = 0x17,
  kRcAtomicWrite = 0x1d,
  kUcSendFirst = 0x20,
  kUcSendMiddle = 0x21,
  kUcSendLast = 0x22,
  kUcSendLastImm = 0x23,
  kUcSendOnly = 0x24,
  kUcSendOnlyImm = 0x25,
  kUcWriteFirst = 0x26,
  kUcWriteMiddle = 0x27,
  kUcWriteLast = 0x28,
  kUcWriteLastImm = 0x29,
  kUcWriteOnly = 0x2a,
  kUcWriteOnlyImm = 0x2b,
  kUdSendOnly = 0x64,
  kUdSendOnlyImm = 0x65,
  // XRC (IBA Annex A14, Table 38): the RC opcodes with the transport bits 101 (0xA0 | RC's).
  kXrcBase = 0xa0,
  kXrcSendOnly = 0xa4,
  kXrcAcknowledge = 0xb1,
};

enum OpMask : uint32_t {
  kHasReth = 1u << 0,
  kHasAeth = 1u << 1,
  kHasAtomicEth = 1u << 2,
  kHasAtomicAckEth = 1u << 3,
  kHasDeth = 1u << 4,
  kHasImm = 1u << 5,
  kHasIeth = 1u << 6,
  kHasPayload = 1u << 7,
  kIsRequest = 1u << 8,   // handled by the responder
  kIsResponse = 1u << 9,  // handled by the completer: ACK, atomic ACK, READ responses
  kIsFirst = 1u << 10,
  kIsMiddle = 1u << 11,
  kIsLast = 1u << 12,  // ONLY = First | Last
  kIsSend = 1u << 13,
  kIsWrite = 1u << 14,
  kIsReadReq = 1u << 15,
  kIsReadResp = 1u << 16,
  kIsAtomic = 1u << 17,
  kIsAck = 1u << 18,  // ACKNOWLEDGE or ATOMIC ACKNOWLEDGE
  kIsRc = 1u << 19,
  kIsUc = 1u << 20,
  kIsUd = 1u << 21,
  kIsValid = 1u << 22,
  kHasXrceth = 1u << 23,  // XRC requests: the XRC SRQ number follows the BTH (and any DETH)
  kIsXrc = 1u << 24,
  kIsAtomicWrite = 1u << 25,  // RDMA ATOMIC WRITE (IBA Annex A19): RETH + 8 bytes, a READ RESPONSE back
};

// The RC opcode an XRC opcode mirrors (0xa4 -> 0x04), and back.
constexpr uint8_t rc_of_xrc(uint8_t xrc_opcode) { return uint8_t(xrc_opcode & 0x1f); }
constexpr uint8_t xrc_of_rc(uint8_t rc_opcode) { return uint8_t(kXrcBase | (rc_opcode & 0x1f)); }

struct OpcodeInfo {
  const char* name;    // "RC_SEND_FIRST", as rxe and Wireshark name them
  uint32_t mask;       // OpMask bits
  uint8_t header_len;  // BTH + every extension header, in bytes
};

const OpcodeInfo& opcode_info(uint8_t opcode);

// Byte offset of an extension header within the packet (after the BTH and the headers that
// precede it in IBA order: DETH, XRCETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH).
uint32_t header_offset(uint8_t opcode, OpMask header);

}  // namespace simnic::proto
