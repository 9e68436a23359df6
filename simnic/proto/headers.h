// RoCEv2 transport headers (IBA 9.2-9.5): parsed values in host order, and codecs on bytes.
#pragma once
#include <cstdint>

namespace simnic::proto {

constexpr uint32_t kBthBytes = 12, kRethBytes = 16, kAethBytes = 4, kAtomicEthBytes = 28, kAtomicAckEthBytes = 8,
                   kDethBytes = 8, kImmBytes = 4, kIethBytes = 4, kIcrcBytes = 4,
                   kXrcethBytes = 4;  // 8 reserved bits, the 24-bit XRC SRQ number (Annex A14)

struct Bth {  // Base Transport Header
  uint8_t opcode = 0;
  bool solicited = false;  // SE: wake a solicited-only CQ arm
  bool migreq = false;
  uint8_t pad_count = 0;  // bytes of pad after the payload, to a 4-byte boundary
  uint8_t tver = 0;       // transport version, 0
  uint16_t pkey = 0xffff;
  bool fecn = false, becn = false;
  uint32_t dest_qp = 0;  // 24 bits
  bool ack_req = false;  // A: the requester asks for an ACK
  uint32_t psn = 0;      // 24 bits
};

struct Reth {  // RDMA Extended Transport Header: where a WRITE/READ goes
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_len = 0;
};

struct Aeth {            // ACK Extended Transport Header
  uint8_t syndrome = 0;  // as on the wire: class in bits 7..5, value in 4..0
  uint32_t msn = 0;      // 24 bits
};

struct AtomicEth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint64_t swap_add = 0;
  uint64_t compare = 0;
};

struct AtomicAckEth {
  uint64_t orig = 0;  // the value before the atomic
};

struct Deth {  // Datagram Extended Transport Header (UD)
  uint32_t qkey = 0;
  uint32_t src_qp = 0;
};

// AETH syndrome classes (IBA Table 42) and NAK codes (Table 43).
enum AethClass : uint32_t { kAethAck = 0, kAethRnrNak = 1, kAethReserved = 2, kAethNak = 3 };
enum NakCode : uint32_t {
  kNakPsnSeqError = 0,
  kNakInvalidRequest = 1,
  kNakRemoteAccessError = 2,
  kNakRemoteOperationalError = 3,
  kNakInvalidRdRequest = 4,
};

constexpr uint8_t aeth_ack(uint32_t credits) { return uint8_t(kAethAck << 5 | (credits & 0x1f)); }
constexpr uint8_t aeth_rnr_nak(uint32_t timer) { return uint8_t(kAethRnrNak << 5 | (timer & 0x1f)); }
constexpr uint8_t aeth_nak(uint32_t code) { return uint8_t(kAethNak << 5 | (code & 0x1f)); }
constexpr uint32_t aeth_class(uint8_t syndrome) { return (syndrome >> 5) & 3; }
constexpr uint32_t aeth_value(uint8_t syndrome) { return syndrome & 0x1f; }

// Raw accessors: encode into / decode from exactly the header's bytes.
void encode_bth(const Bth& h, uint8_t* p);
Bth decode_bth(const uint8_t* p);
void encode_reth(const Reth& h, uint8_t* p);
Reth decode_reth(const uint8_t* p);
void encode_aeth(const Aeth& h, uint8_t* p);
Aeth decode_aeth(const uint8_t* p);
void encode_atomic_eth(const AtomicEth& h, uint8_t* p);
AtomicEth decode_atomic_eth(const uint8_t* p);
void encode_atomic_ack_eth(const AtomicAckEth& h, uint8_t* p);
AtomicAckEth decode_atomic_ack_eth(const uint8_t* p);
void encode_deth(const Deth& h, uint8_t* p);
Deth decode_deth(const uint8_t* p);

}  // namespace simnic::proto
