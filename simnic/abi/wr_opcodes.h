// The work-request opcodes (ibv_wr_opcode), defined once: which QP types may post each, what
// it does, and the completion opcode rdma-core reports for it. The shim checks posts against
// it, simnicd's requester and completer test its flags, never lists of opcodes. Header-only
// and constexpr, so the shim (which includes nothing but simnic/abi) and the core share it.
#pragma once
#include <cstdint>

#include <infiniband/verbs.h>

namespace simnic::abi {

// The QP types that may post an opcode (IBA 9.4 and Table 39; XRC INI QPs as RC, Annex A14).
enum WrQpTypes : uint32_t {
  kOnRc = 1u << 0,
  kOnUc = 1u << 1,
  kOnUd = 1u << 2,
  kOnXrcIni = 1u << 3,
};

enum WrProps : uint32_t {
  kWrSend = 1u << 0,         // consumes a receive WQE at the responder
  kWrWrite = 1u << 1,        // carries a RETH and data to remote memory
  kWrRead = 1u << 2,         // RDMA READ: a RETH out, data back
  kWrAtomic = 1u << 3,       // an AtomicETH out, the original value back (8 bytes)
  kWrLocal = 1u << 4,        // executed by the local NIC alone, no packet (IBA 10.6.7: MW ops)
  kWrImm = 1u << 5,          // carries ImmDt (the WR's imm_data)
  kWrInv = 1u << 6,          // carries a key to invalidate (the WR's invalidate_rkey)
  kWrRemoteAddr = 1u << 7,   // uses remote_addr and rkey
  kWrAtomicWrite = 1u << 8,  // RDMA ATOMIC WRITE: a RETH and 8 bytes out, answered like a READ (IBA Annex A19)
};

struct WrOpcodeInfo {
  ibv_wr_opcode opcode;
  const char* name;         // "RDMA_WRITE": ibv_wr_opcode_str's spelling without IBV_WR_
  uint32_t qp_types;        // WrQpTypes
  uint32_t props;           // WrProps
  ibv_wc_opcode wc_opcode;  // what ibv_poll_cq reports for it
  // The RC packet opcodes (IBA Table 38) of a message of one / first / middle / last packet.
  // UC carries the same at 0x20 |, UD at 0x60 |, XRC at 0xa0 | (the transport bits).
  uint8_t only, first, middle, last;
};

inline constexpr uint32_t kOnConnected = kOnRc | kOnXrcIni;
inline constexpr uint32_t kOnAllButUd = kOnRc | kOnUc | kOnXrcIni;
inline constexpr uint32_t kOnAll = kOnRc | kOnUc | kOnUd | kOnXrcIni;

inline constexpr WrOpcodeInfo kWrOpcodes[] = {
    {IBV_WR_RDMA_WRITE, "RDMA_WRITE", kOnAllButUd, kWrWrite | kWrRemoteAddr, IBV_WC_RDMA_WRITE, 0x0a, 0x06, 0x07, 0x08},
    {IBV_WR_RDMA_WRITE_WITH_IMM, "RDMA_WRITE_WITH_IMM", kOnAllButUd, kWrWrite | kWrImm | kWrRemoteAddr,
     IBV_WC_RDMA_WRITE, 0x0b, 0x06, 0x07, 0x09},
    {IBV_WR_SEND, "SEND", kOnAll, kWrSend, IBV_WC_SEND, 0x04, 0x00, 0x01, 0x02},
    {IBV_WR_SEND_WITH_IMM, "SEND_WITH_IMM", kOnAll, kWrSend | kWrImm, IBV_WC_SEND, 0x05, 0x00, 0x01, 0x03},
    {IBV_WR_RDMA_READ, "RDMA_READ", kOnConnected, kWrRead | kWrRemoteAddr, IBV_WC_RDMA_READ, 0x0c, 0x0c, 0x0c, 0x0c},
    {IBV_WR_ATOMIC_CMP_AND_SWP, "ATOMIC_CMP_AND_SWP", kOnConnected, kWrAtomic | kWrRemoteAddr, IBV_WC_COMP_SWAP, 0x13,
     0x13, 0x13, 0x13},
    {IBV_WR_ATOMIC_FETCH_AND_ADD, "ATOMIC_FETCH_AND_ADD", kOnConnected, kWrAtomic | kWrRemoteAddr, IBV_WC_FETCH_ADD,
     0x14, 0x14, 0x14, 0x14},
    {IBV_WR_LOCAL_INV, "LOCAL_INV", kOnAllButUd, kWrLocal | kWrInv, IBV_WC_LOCAL_INV, 0xff, 0xff, 0xff, 0xff},
    {IBV_WR_BIND_MW, "BIND_MW", kOnAllButUd, kWrLocal, IBV_WC_BIND_MW, 0xff, 0xff, 0xff, 0xff},
    // IBTA 1.5 RDMA ATOMIC WRITE (Annex A19): one packet, 0x1D, as Soft-RoCE sends it.
    {IBV_WR_ATOMIC_WRITE, "ATOMIC_WRITE", kOnConnected, kWrAtomicWrite | kWrRemoteAddr, IBV_WC_ATOMIC_WRITE, 0x1d, 0x1d,
     0x1d, 0x1d},
    // SEND with invalidate is RC's (IBA Table 39 has no UC opcode for it).
    {IBV_WR_SEND_WITH_INV, "SEND_WITH_INV", kOnConnected, kWrSend | kWrInv, IBV_WC_SEND, 0x17, 0x00, 0x01, 0x16},
};

// ibv_device_attr_ex.device_cap_flags_ex bit for RDMA ATOMIC WRITE (the kernel's
// IB_UVERBS_DEVICE_ATOMIC_WRITE; rdma-core 44's headers do not name it yet).
inline constexpr uint64_t kDeviceCapAtomicWrite = 1ull << 40;

// The row of `opcode`, nullptr for one simnic does not implement.
constexpr const WrOpcodeInfo* wr_opcode_info(uint32_t opcode) {
  for (const WrOpcodeInfo& w : kWrOpcodes)
    if (uint32_t(w.opcode) == opcode) return &w;
  return nullptr;
}

constexpr uint32_t wr_qp_type_bit(ibv_qp_type type) {
  switch (type) {
    case IBV_QPT_RC: return kOnRc;
    case IBV_QPT_UC: return kOnUc;
    case IBV_QPT_UD: return kOnUd;
    case IBV_QPT_XRC_SEND: return kOnXrcIni;
    default: return 0;  // an XRC TGT QP posts nothing
  }
}

// Whether a QP of `type` may post `opcode`.
constexpr bool wr_opcode_allowed(ibv_qp_type type, uint32_t opcode) {
  const WrOpcodeInfo* w = wr_opcode_info(opcode);
  return w && (w->qp_types & wr_qp_type_bit(type));
}

constexpr bool wr_has(uint32_t opcode, uint32_t props) {
  const WrOpcodeInfo* w = wr_opcode_info(opcode);
  return w && (w->props & props);
}

constexpr const char* wr_opcode_name(uint32_t opcode) {
  const WrOpcodeInfo* w = wr_opcode_info(opcode);
  return w ? w->name : "UNKNOWN";
}

}  // namespace simnic::abi
