#include "simnic/proto/headers.h"

#include "simnic/proto/wire.h"

namespace simnic::proto {

// BTH (IBA 9.2): opcode | SE M Pad(2) TVer(4) | P_Key(16) | F B Resv6 | DestQP(24) | A Resv7 | PSN(24)
void encode_bth(const Bth& h, uint8_t* p) {
  p[0] = h.opcode;
  p[1] = uint8_t((h.solicited ? 0x80 : 0) | (h.migreq ? 0x40 : 0) | (h.pad_count & 3) << 4 | (h.tver & 0xf));
  store_be16(p + 2, h.pkey);
  p[4] = uint8_t((h.fecn ? 0x80 : 0) | (h.becn ? 0x40 : 0));
  store_be24(p + 5, h.dest_qp);
  p[8] = h.ack_req ? 0x80 : 0;
  store_be24(p + 9, h.psn);
}

Bth decode_bth(const uint8_t* p) {
  Bth h;
  h.opcode = p[0];
  h.solicited = p[1] & 0x80;
  h.migreq = p[1] & 0x40;
  h.pad_count = (p[1] >> 4) & 3;
  h.tver = p[1] & 0xf;
  h.pkey = load_be16(p + 2);
  h.fecn = p[4] & 0x80;
  h.becn = p[4] & 0x40;
  h.dest_qp = load_be24(p + 5);
  h.ack_req = p[8] & 0x80;
  h.psn = load_be24(p + 9);
  return h;
}

void encode_reth(const Reth& h, uint8_t* p) {
  store_be64(p, h.va);
  store_be32(p + 8, h.rkey);
  store_be32(p + 12, h.dma_len);
}

Reth decode_reth(const uint8_t* p) { return {load_be64(p), load_be32(p + 8), load_be32(p + 12)}; }

void encode_aeth(const Aeth& h, uint8_t* p) {
  p[0] = h.syndrome;
  store_be24(p + 1, h.msn);
}

Aeth decode_aeth(const uint8_t* p) { return {p[0], load_be24(p + 1)}; }

void encode_atomic_eth(const AtomicEth& h, uint8_t* p) {
  store_be64(p, h.va);
  store_be32(p + 8, h.rkey);
  store_be64(p + 12, h.swap_add);
  store_be64(p + 20, h.compare);
}

AtomicEth decode_atomic_eth(const uint8_t* p) {
  return {load_be64(p), load_be32(p + 8), load_be64(p + 12), load_be64(p + 20)};
}

void encode_atomic_ack_eth(const AtomicAckEth& h, uint8_t* p) { store_be64(p, h.orig); }

AtomicAckEth decode_atomic_ack_eth(const uint8_t* p) { return {load_be64(p)}; }

void encode_deth(const Deth& h, uint8_t* p) {
  store_be32(p, h.qkey);
  p[4] = 0;
  store_be24(p + 5, h.src_qp);
}

Deth decode_deth(const uint8_t* p) { return {load_be32(p), load_be24(p + 5)}; }

}  // namespace simnic::proto
