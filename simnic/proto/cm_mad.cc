// CM MAD codec. Offsets are relative to the MAD data (after the 24-byte common header), as in
// IBA Tables 106-120; sub-byte fields are given as (byte, bit offset from the byte's most
// significant bit, width), the way the spec's tables number them.
#include "simnic/proto/cm_mad.h"

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
    {kReq, "REQ", 140, 92},   {kMra, "MRA", 10, 222},   {kRej, "REJ", 84, 148},
    {kRep, "REP", 36, 196},   {kRtu, "RTU", 8, 224},    {kDreq, "DREQ", 12, 220},
    {kDrep, "DREP", 8, 224},  {kSidrReq, "SIDR_REQ", 16, 216}, {kSidrRep, "SIDR_REP", 96, 136},
};

const Layout* layout(uint16_t attr) {
  for (const Layout& l : kLayouts)
    if (l.attr == attr) return &l;
  return nullptr;
}

// IBA Table 106 (REQ).
void encode_req(const Message& m, uint8_t* d) {
  store_be32(d + 0, m.local_comm_id);
  store_be64(d + 8, m.service_id);
  store_be64(d + 16, m.local_ca_guid);
  store_be32(d + 28, m.qkey);
  store_be24(d + 32, m.qpn);
  d[35] = m.responder_resources;
  d[39] = m.initiator_depth;
  put(d, {43, 0, 5}, m.remote_cm_response_timeout);
  put(d, {43, 5, 2}, m.transport_type);
  put(d, {43, 7, 1}, m.flow_control);
  store_be24(d + 44, m.starting_psn);
  put(d, {47, 0, 5}, m.local_cm_response_timeout);
  put(d, {47, 5, 3}, m.retry_count);
  store_be16(d + 48, m.pkey);
  put(d, {50, 0, 4}, m.path_mtu);
  put(d, {50, 5, 3}, m.rnr_retry_count);
  put(d, {51, 0, 4}, m.max_cm_retries);
  put(d, {51, 4, 1}, m.srq);
  store_be16(d + 52, 0xffff);  // RoCE: the LIDs are the permissive LID (IBA A16.4.1)
  store_be16(d + 54, 0xffff);
  std::memcpy(d + 56, m.local_gid, 16);
  std::memcpy(d + 72, m.remote_gid, 16);
  store_be32(d + 88, m.flow_label << 12);
  put(d, {91, 2, 6}, m.packet_rate);
  d[92] = m.traffic_class;
  d[93] = m.hop_limit;
  put(d, {94, 0, 4}, m.sl);
  put(d, {94, 4, 1}, m.subnet_local);
  put(d, {95, 0, 5}, m.local_ack_timeout);
}

void decode_req(const uint8_t* d, Message* m) {
  m->local_comm_id = load_be32(d + 0);
  m->service_id = load_be64(d + 8);
  m->local_ca_guid = load_be64(d + 16);
  m->qkey = load_be32(d + 28);
  m->qpn = load_be24(d + 32);
  m->responder_resources = d[35];
  m->initiator_depth = d[39];
  m->remote_cm_response_timeout = uint8_t(get(d, {43, 0, 5}));
  m->transport_type = uint8_t(get(d, {43, 5, 2}));
  m->flow_control = get(d, {43, 7, 1});
  m->starting_psn = load_be24(d + 44);
  m->local_cm_response_timeout = uint8_t(get(d, {47, 0, 5}));
  m->retry_count = uint8_t(get(d, {47, 5, 3}));
  m->pkey = load_be16(d + 48);
  m->path_mtu = uint8_t(get(d, {50, 0, 4}));
  m->rnr_retry_count = uint8_t(get(d, {50, 5, 3}));
  m->max_cm_retries = uint8_t(get(d, {51, 0, 4}));
  m->srq = get(d, {51, 4, 1});
  std::memcpy(m->local_gid, d + 56, 16);
  std::memcpy(m->remote_gid, d + 72, 16);
  m->flow_label = load_be32(d + 88) >> 12;
  m->packet_rate = uint8_t(get(d, {91, 2, 6}));
  m->traffic_class = d[92];
  m->hop_limit = d[93];
  m->sl = uint8_t(get(d, {94, 0, 4}));
  m->subnet_local = get(d, {94, 4, 1});
  m->local_ack_timeout = uint8_t(get(d, {95, 0, 5}));
}

// IBA Table 110 (REP).
void encode_rep(const Message& m, uint8_t* d) {
  store_be32(d + 0, m.local_comm_id);
  store_be32(d + 4, m.remote_comm_id);
  store_be32(d + 8, m.qkey);
  store_be24(d + 12, m.qpn);
  store_be24(d + 20, m.starting_psn);
  d[24] = m.responder_resources;
  d[25] = m.initiator_depth;
  put(d, {26, 0, 5}, m.target_ack_delay);
  put(d, {26, 7, 1}, m.flow_control);
  put(d, {27, 0, 3}, m.rnr_retry_count);
  put(d, {27, 3, 1}, m.srq);
  store_be64(d + 28, m.local_ca_guid);
}

void decode_rep(const uint8_t* d, Message* m) {
  m->local_comm_id = load_be32(d + 0);
  m->remote_comm_id = load_be32(d + 4);
  m->qkey = load_be32(d + 8);
  m->qpn = load_be24(d + 12);
  m->starting_psn = load_be24(d + 20);
  m->responder_resources = d[24];
  m->initiator_depth = d[25];
  m->target_ack_delay = uint8_t(get(d, {26, 0, 5}));
  m->flow_control = get(d, {26, 7, 1});
  m->rnr_retry_count = uint8_t(get(d, {27, 0, 3}));
  m->srq = get(d, {27, 3, 1});
  m->local_ca_guid = load_be64(d + 28);
}

// Tables 107 (MRA), 108 (REJ), 111 (RTU), 112 (DREQ), 113 (DREP): the two comm IDs first.
void encode_pair(const Message& m, uint8_t* d) {
  store_be32(d + 0, m.local_comm_id);
  store_be32(d + 4, m.remote_comm_id);
  if (m.attr_id == kRej) {
    put(d, {8, 0, 2}, m.msg_ref);
    put(d, {9, 0, 7}, m.ari_len > 72 ? 72 : m.ari_len);
    store_be16(d + 10, m.reason);
    std::memcpy(d + 12, m.ari, sizeof m.ari);
  } else if (m.attr_id == kMra) {
    put(d, {8, 0, 2}, m.msg_ref);
    put(d, {9, 0, 5}, m.service_timeout);
  } else if (m.attr_id == kDreq) {
    store_be24(d + 8, m.qpn);
  }
}

void decode_pair(const uint8_t* d, Message* m) {
  m->local_comm_id = load_be32(d + 0);
  m->remote_comm_id = load_be32(d + 4);
  if (m->attr_id == kRej) {
    m->msg_ref = uint8_t(get(d, {8, 0, 2}));
    m->ari_len = uint8_t(get(d, {9, 0, 7}));
    if (m->ari_len > 72) m->ari_len = 72;
    m->reason = load_be16(d + 10);
    std::memcpy(m->ari, d + 12, sizeof m->ari);
  } else if (m->attr_id == kMra) {
    m->msg_ref = uint8_t(get(d, {8, 0, 2}));
    m->service_timeout = uint8_t(get(d, {9, 0, 5}));
  } else if (m->attr_id == kDreq) {
    m->qpn = load_be24(d + 8);
  }
}

// Tables 119 (SIDR_REQ) and 120 (SIDR_REP).
void encode_sidr(const Message& m, uint8_t* d) {
  store_be32(d + 0, m.local_comm_id);
  if (m.attr_id == kSidrReq) {
    store_be16(d + 4, m.pkey);
    store_be64(d + 8, m.service_id);
    return;
  }
  d[4] = m.sidr_status;
  store_be24(d + 8, m.qpn);
  store_be64(d + 12, m.service_id);
  store_be32(d + 20, m.qkey);
}

void decode_sidr(const uint8_t* d, Message* m) {
  m->local_comm_id = load_be32(d + 0);
  if (m->attr_id == kSidrReq) {
    m->pkey = load_be16(d + 4);
    m->service_id = load_be64(d + 8);
    return;
  }
  m->sidr_status = d[4];
  m->qpn = load_be24(d + 8);
  m->service_id = load_be64(d + 12);
  m->qkey = load_be32(d + 20);
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
  switch (m.attr_id) {
    case kReq: encode_req(m, d); break;
    case kRep: encode_rep(m, d); break;
    case kSidrReq: case kSidrRep: encode_sidr(m, d); break;
    default: encode_pair(m, d); break;
  }
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
  switch (m->attr_id) {
    case kReq: decode_req(d, m); break;
    case kRep: decode_rep(d, m); break;
    case kSidrReq: case kSidrRep: decode_sidr(d, m); break;
    default: decode_pair(d, m); break;
  }
  std::memcpy(m->private_data, d + l->private_offset, l->private_size);
  return DecodeError::kOk;
}

void encode_cma_hdr(const CmaHdr& h, uint8_t* p) {
  std::memset(p, 0, kCmaHdrBytes);
  p[0] = 0;                      // cma_version
  p[1] = uint8_t(h.ip_version << 4);
  store_be16(p + 2, h.src_port);
  store_be32(p + 4 + 12, h.src_ip);   // IPv4 in the last 4 bytes of the 16-byte address
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
