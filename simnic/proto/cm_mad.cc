// CM MAD codec. Offsets are relative to the MAD data (after the 24-byte common header), as in
// IBA Tables 106-120; sub-byte fields are given as (byte, bit offset from the byte's most
// significant bit, width), the way the spec's tables number them.
#include "simnic/proto/cm_mad.h"

#include <algorithm>
#include <cstring>

#include "simnic/proto/wire.h"

namespace simnic::proto::cm {

namespace {

struct Bits {
  size_t byte;
  unsigned msb_offset;  // 0 = the byte's most significant bit
  unsigned width;
};

uint8_t mask_of(Bits b) { return uint8_t(((1u << b.width) - 1) << (8 - b.msb_offset - b.width)); }

void put(uint8_t* d, Bits b, unsigned v) {
  const unsigned shift = 8 - b.msb_offset - b.width;
  d[b.byte] = uint8_t((d[b.byte] & ~mask_of(b)) | ((v << shift) & mask_of(b)));
}

unsigned get(const uint8_t* d, Bits b) { return (d[b.byte] & mask_of(b)) >> (8 - b.msb_offset - b.width); }

// Where each message keeps its private data (IBA Tables 106-120).
struct Layout {
  uint16_t attr;
  const char* name;
  size_t private_offset;
  size_t private_size;
};

constexpr Layout kLayouts[] = {
    {kReq, "REQ", 140, 92},  {kMra, "MRA", 10, 222},          {kRej, "REJ", 84, 148},
    {kRep, "REP", 36, 196},  {kRtu, "RTU", 8, 224},           {kDreq, "DREQ", 12, 220},
    {kDrep, "DREP", 8, 224}, {kSidrReq, "SIDR_REQ", 16, 216}, {kSidrRep, "SIDR_REP", 96, 136},
};

const Layout* layout(uint16_t attr) {
  for (const Layout& l : kLayouts)
    if (l.attr == attr) return &l;
  return nullptr;
}

// Each message's fields are listed once, in a walk that an Encoder (Message -> bytes) or a
// Decoder (bytes -> Message) follows, so the two directions cannot disagree.
struct Encoder {
  const Message& m;
  uint8_t* d;
  template <class T>
  void u8(size_t at, T Message::*f) {
    d[at] = uint8_t(m.*f);
  }
  template <class T>
  void be16(size_t at, T Message::*f) {
    store_be16(d + at, uint16_t(m.*f));
  }
  template <class T>
  void be24(size_t at, T Message::*f) {
    store_be24(d + at, uint32_t(m.*f));
  }
  template <class T>
  void be32(size_t at, T Message::*f) {
    store_be32(d + at, uint32_t(m.*f));
  }
  template <class T>
  void be64(size_t at, T Message::*f) {
    store_be64(d + at, uint64_t(m.*f));
  }
  template <class T>
  void bits(Bits b, T Message::*f, unsigned max = ~0u) {
    put(d, b, std::min(unsigned(m.*f), max));
  }
  template <size_t N>
  void bytes(size_t at, uint8_t (Message::*f)[N]) {
    std::memcpy(d + at, m.*f, N);
  }
  // The top 20 bits of a 32-bit word (a flow label).
  void high20(size_t at, uint32_t Message::*f) { store_be32(d + at, m.*f << 12); }
  // RoCE: the LIDs are the permissive LID (IBA A16.4.1); nothing to read back.
  void permissive_lid(size_t at) { store_be16(d + at, 0xffff); }
};

struct Decoder {
  Message& m;
  const uint8_t* d;
  template <class T>
  void u8(size_t at, T Message::*f) {
    m.*f = T(d[at]);
  }
  template <class T>
  void be16(size_t at, T Message::*f) {
    m.*f = T(load_be16(d + at));
  }
  template <class T>
  void be24(size_t at, T Message::*f) {
    m.*f = T(load_be24(d + at));
  }
  template <class T>
  void be32(size_t at, T Message::*f) {
    m.*f = T(load_be32(d + at));
  }
  template <class T>
  void be64(size_t at, T Message::*f) {
    m.*f = T(load_be64(d + at));
  }
  template <class T>
  void bits(Bits b, T Message::*f, unsigned max = ~0u) {
    m.*f = T(std::min(get(d, b), max));
  }
  template <size_t N>
  void bytes(size_t at, uint8_t (Message::*f)[N]) {
    std::memcpy(m.*f, d + at, N);
  }
  void high20(size_t at, uint32_t Message::*f) { m.*f = load_be32(d + at) >> 12; }
  void permissive_lid(size_t) {}
};

// IBA Table 106 (REQ).
template <class IO>
void req_fields(IO& io) {
  io.be32(0, &Message::local_comm_id);
  io.be64(8, &Message::service_id);
  io.be64(16, &Message::local_ca_guid);
  io.be32(28, &Message::qkey);
  io.be24(32, &Message::qpn);
  io.u8(35, &Message::responder_resources);
  io.u8(39, &Message::initiator_depth);
  io.bits({43, 0, 5}, &Message::remote_cm_response_timeout);
  io.bits({43, 5, 2}, &Message::transport_type);
  io.bits({43, 7, 1}, &Message::flow_control);
  io.be24(44, &Message::starting_psn);
  io.bits({47, 0, 5}, &Message::local_cm_response_timeout);
  io.bits({47, 5, 3}, &Message::retry_count);
  io.be16(48, &Message::pkey);
  io.bits({50, 0, 4}, &Message::path_mtu);
  io.bits({50, 5, 3}, &Message::rnr_retry_count);
  io.bits({51, 0, 4}, &Message::max_cm_retries);
  io.bits({51, 4, 1}, &Message::srq);
  io.permissive_lid(52);
  io.permissive_lid(54);
  io.bytes(56, &Message::local_gid);
  io.bytes(72, &Message::remote_gid);
  io.high20(88, &Message::flow_label);
  io.bits({91, 2, 6}, &Message::packet_rate);
  io.u8(92, &Message::traffic_class);
  io.u8(93, &Message::hop_limit);
  io.bits({94, 0, 4}, &Message::sl);
  io.bits({94, 4, 1}, &Message::subnet_local);
  io.bits({95, 0, 5}, &Message::local_ack_timeout);
}

// IBA Table 110 (REP).
template <class IO>
void rep_fields(IO& io) {
  io.be32(0, &Message::local_comm_id);
  io.be32(4, &Message::remote_comm_id);
  io.be32(8, &Message::qkey);
  io.be24(12, &Message::qpn);
  io.be24(20, &Message::starting_psn);
  io.u8(24, &Message::responder_resources);
  io.u8(25, &Message::initiator_depth);
  io.bits({26, 0, 5}, &Message::target_ack_delay);
  io.bits({26, 7, 1}, &Message::flow_control);
  io.bits({27, 0, 3}, &Message::rnr_retry_count);
  io.bits({27, 3, 1}, &Message::srq);
  io.be64(28, &Message::local_ca_guid);
}

// Tables 107 (MRA), 108 (REJ), 111 (RTU), 112 (DREQ), 113 (DREP): the two comm IDs first.
template <class IO>
void pair_fields(IO& io, uint16_t attr) {
  io.be32(0, &Message::local_comm_id);
  io.be32(4, &Message::remote_comm_id);
  if (attr == kRej) {
    io.bits({8, 0, 2}, &Message::msg_ref);
    io.bits({9, 0, 7}, &Message::ari_len, 72);
    io.be16(10, &Message::reason);
    io.bytes(12, &Message::ari);
  } else if (attr == kMra) {
    io.bits({8, 0, 2}, &Message::msg_ref);
    io.bits({9, 0, 5}, &Message::service_timeout);
  } else if (attr == kDreq) {
    io.be24(8, &Message::qpn);
  }
}

// Tables 119 (SIDR_REQ) and 120 (SIDR_REP).
template <class IO>
void sidr_fields(IO& io, uint16_t attr) {
  io.be32(0, &Message::local_comm_id);
  if (attr == kSidrReq) {
    io.be16(4, &Message::pkey);
    io.be64(8, &Message::service_id);
    return;
  }
  io.u8(4, &Message::sidr_status);
  io.be24(8, &Message::qpn);
  io.be64(12, &Message::service_id);
  io.be32(20, &Message::qkey);
}

template <class IO>
void message_fields(IO& io, uint16_t attr) {
  switch (attr) {
    case kReq: return req_fields(io);
    case kRep: return rep_fields(io);
    case kSidrReq:
    case kSidrRep: return sidr_fields(io, attr);
    default: return pair_fields(io, attr);
  }
}

}  // namespace

size_t private_data_size(uint16_t attr_id) {
  const Layout* l = layout(attr_id);
  return l ? l->private_size : 0;
}

const char* attr_name(uint16_t attr_id) {
  const Layout* l = layout(attr_id);
  return l ? l->name : "CM?";
}

bool encode(const Message& m, std::span<uint8_t, kMadBytes> out) {
  const Layout* l = layout(m.attr_id);
  if (!l) return false;
  std::memset(out.data(), 0, kMadBytes);
  uint8_t* h = out.data();
  h[0] = kBaseVersion;
  h[1] = kMgmtClassCm;
  h[2] = kCmClassVersion;
  h[3] = kMethodSend;
  store_be64(h + 8, m.tid);
  store_be16(h + 16, m.attr_id);
  uint8_t* d = h + kMadHeaderBytes;
  Encoder io{m, d};
  message_fields(io, m.attr_id);
  std::memcpy(d + l->private_offset, m.private_data, l->private_size);
  return true;
}

const char* decode_error_name(DecodeError e) {
  switch (e) {
    case DecodeError::kOk: return "ok";
    case DecodeError::kTooShort: return "shorter than a 256-byte MAD";
    case DecodeError::kNotCm: return "not a CM MAD (base version 1, class 0x07, version 2, method Send)";
    case DecodeError::kUnknownAttr: return "a CM attribute simnic does not handle";
  }
  return "?";
}

DecodeError decode(std::span<const uint8_t> mad, Message* m) {
  if (mad.size() < kMadBytes) return DecodeError::kTooShort;
  const uint8_t* h = mad.data();
  if (h[0] != kBaseVersion || h[1] != kMgmtClassCm || h[2] != kCmClassVersion || h[3] != kMethodSend)
    return DecodeError::kNotCm;
  *m = Message{};
  m->attr_id = load_be16(h + 16);
  m->tid = load_be64(h + 8);
  const Layout* l = layout(m->attr_id);
  if (!l) return DecodeError::kUnknownAttr;
  const uint8_t* d = h + kMadHeaderBytes;
  Decoder io{*m, d};
  message_fields(io, m->attr_id);
  std::memcpy(m->private_data, d + l->private_offset, l->private_size);
  return DecodeError::kOk;
}

void encode_cma_hdr(const CmaHdr& h, uint8_t* p) {
  std::memset(p, 0, kCmaHdrBytes);
  p[0] = 0;  // cma_version
  p[1] = uint8_t(h.ip_version << 4);
  store_be16(p + 2, h.src_port);
  store_be32(p + 4 + 12, h.src_ip);  // IPv4 in the last 4 bytes of the 16-byte address
  store_be32(p + 20 + 12, h.dst_ip);
}

bool decode_cma_hdr(const uint8_t* p, CmaHdr* out) {
  if (p[0] != 0 || (p[1] >> 4) != 4) return false;
  out->ip_version = 4;
  out->src_port = load_be16(p + 2);
  out->src_ip = load_be32(p + 16);
  out->dst_ip = load_be32(p + 32);
  return true;
}

}  // namespace simnic::proto::cm
