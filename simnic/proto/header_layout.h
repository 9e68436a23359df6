// The extension headers in the order they follow the BTH (IBA 9.2, Figure 39; the XRCETH of
// Annex A14 after any DETH), each with its size and its codec on PacketHeaders. The opcode
// table sizes packets from it, build_packet and parse_packet walk it: the order is written
// once, here.
#pragma once
#include <cstring>

#include "simnic/proto/opcode_table.h"
#include "simnic/proto/packet.h"
#include "simnic/proto/wire.h"

namespace simnic::proto {

struct ExtHeader {
  OpMask bit;
  uint32_t bytes;
  void (*encode)(const PacketHeaders& h, uint8_t* p);
  void (*decode)(const uint8_t* p, PacketHeaders& h);
};

inline constexpr ExtHeader kHeaderLayout[] = {
    {kHasDeth, kDethBytes, [](const PacketHeaders& h, uint8_t* p) { encode_deth(h.deth, p); },
     [](const uint8_t* p, PacketHeaders& h) { h.deth = decode_deth(p); }},
    {kHasXrceth, kXrcethBytes, [](const PacketHeaders& h, uint8_t* p) { store_be32(p, h.xrc_srqn & 0xffffff); },
     [](const uint8_t* p, PacketHeaders& h) { h.xrc_srqn = load_be32(p) & 0xffffff; }},
    {kHasReth, kRethBytes, [](const PacketHeaders& h, uint8_t* p) { encode_reth(h.reth, p); },
     [](const uint8_t* p, PacketHeaders& h) { h.reth = decode_reth(p); }},
    {kHasAtomicEth, kAtomicEthBytes, [](const PacketHeaders& h, uint8_t* p) { encode_atomic_eth(h.atomic, p); },
     [](const uint8_t* p, PacketHeaders& h) { h.atomic = decode_atomic_eth(p); }},
    {kHasAeth, kAethBytes, [](const PacketHeaders& h, uint8_t* p) { encode_aeth(h.aeth, p); },
     [](const uint8_t* p, PacketHeaders& h) { h.aeth = decode_aeth(p); }},
    {kHasAtomicAckEth, kAtomicAckEthBytes,
     [](const PacketHeaders& h, uint8_t* p) { encode_atomic_ack_eth(h.atomic_ack, p); },
     [](const uint8_t* p, PacketHeaders& h) { h.atomic_ack = decode_atomic_ack_eth(p); }},
    // ImmDt is kept as on the wire (network order), like ibv_send_wr.imm_data.
    {kHasImm, kImmBytes, [](const PacketHeaders& h, uint8_t* p) { std::memcpy(p, &h.imm_be, 4); },
     [](const uint8_t* p, PacketHeaders& h) { std::memcpy(&h.imm_be, p, 4); }},
    {kHasIeth, kIethBytes, [](const PacketHeaders& h, uint8_t* p) { store_be32(p, h.ieth_rkey); },
     [](const uint8_t* p, PacketHeaders& h) { h.ieth_rkey = load_be32(p); }},
};

}  // namespace simnic::proto
