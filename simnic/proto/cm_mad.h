// InfiniBand Communication Management MADs (IBA chapter 12, and 13.4 for the MAD header):
// the messages rdma_cm exchanges on QP1 to connect two QPs. Pure codec: a Message holds the
// fields of any CM message in host order; encode/decode place them at the offsets of IBA
// Tables 106-120 (the same layouts as the kernel's include/rdma/ibta_vol1_c12.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace simnic::proto::cm {

constexpr size_t kMadBytes = 256;          // IBA 13.4.2: every MAD is 256 bytes
constexpr size_t kMadHeaderBytes = 24;     // IBA 13.4.3 common MAD header
constexpr uint32_t kGsiQkey = 0x80010000;  // IBA 9.6.1.1.3: the well-known Q_Key of QP1
constexpr uint32_t kGsiQpn = 1;
constexpr uint8_t kBaseVersion = 1, kMgmtClassCm = 0x07, kCmClassVersion = 2;
constexpr uint8_t kMethodSend = 0x03;  // IBA Table 87: CM messages use Send

// IBA Table 104: CM attribute IDs.
enum AttrId : uint16_t {
  kReq = 0x0010,
  kMra = 0x0011,
  kRej = 0x0012,
  kRep = 0x0013,
  kRtu = 0x0014,
  kDreq = 0x0015,
  kDrep = 0x0016,
  kSidrReq = 0x0017,
  kSidrRep = 0x0018,
};

// IBA Table 112 (REJ reasons) that simnic sends or rdma_cm programs see.
enum RejReason : uint16_t {
  kRejTimeout = 1,
  kRejInvalidServiceId = 8,  // nobody listens on that service ID (port)
  kRejStaleConn = 10,
  kRejInvalidQpType = 30,    // (not an IBA name: rdma_cm maps it to EINVAL)
  kRejConsumerDefined = 28,  // rdma_reject()
};

// IBA Table 121: SIDR_REP status.
enum SidrStatus : uint8_t { kSidrSuccess = 0, kSidrUnsupported = 1, kSidrReject = 2, kSidrNoQp = 3 };

// Which message an MRA or REJ refers to (IBA Table 107/108, "Message MRAed/REJected").
enum MsgRef : uint8_t { kRefReq = 0, kRefRep = 1, kRefOther = 2 };

// Every field of the CM messages simnic uses, host order. A message uses the fields its
// table lists; encode writes only those, decode fills only those.
struct Message {
  uint16_t attr_id = 0;
  uint64_t tid = 0;            // transaction ID, echoed by the answer (IBA 13.4.6.4)
  uint32_t local_comm_id = 0;  // REQ..DREP; the SIDR RequestID
  uint32_t remote_comm_id = 0;
  uint64_t service_id = 0;                 // REQ, SIDR_REQ, SIDR_REP
  uint64_t local_ca_guid = 0;              // REQ, REP
  uint32_t qkey = 0;                       // REQ/REP (UD/RD only), SIDR_REP
  uint32_t qpn = 0;                        // REQ/REP local QPN, DREQ remote QPN, SIDR_REP QPN (24 bits)
  uint8_t responder_resources = 0;         // REQ, REP
  uint8_t initiator_depth = 0;             // REQ, REP
  uint8_t remote_cm_response_timeout = 0;  // REQ (5 bits, 4.096us * 2^n)
  uint8_t transport_type = 0;              // REQ: 0 RC, 1 UC
  bool flow_control = false;               // REQ, REP
  uint32_t starting_psn = 0;               // REQ, REP (24 bits)
  uint8_t local_cm_response_timeout = 0;   // REQ
  uint8_t retry_count = 0;                 // REQ (3 bits)
  uint16_t pkey = 0xffff;                  // REQ, SIDR_REQ
  uint8_t path_mtu = 0;                    // REQ (IBA MTU code, 1 = 256 .. 5 = 4096)
  uint8_t rnr_retry_count = 0;             // REQ, REP (3 bits)
  uint8_t max_cm_retries = 0;              // REQ (4 bits)
  bool srq = false;                        // REQ, REP
  uint8_t local_gid[16] = {};              // REQ primary path
  uint8_t remote_gid[16] = {};
  uint32_t flow_label = 0;  // REQ (20 bits)
  uint8_t packet_rate = 0;  // REQ (6 bits)
  uint8_t traffic_class = 0, hop_limit = 0, sl = 0;
  bool subnet_local = false;
  uint8_t local_ack_timeout = 0;  // REQ (5 bits)
  uint8_t target_ack_delay = 0;   // REP (5 bits)
  uint8_t msg_ref = 0;            // REJ "message REJected", MRA "message MRAed" (MsgRef)
  uint8_t service_timeout = 0;    // MRA (5 bits)
  uint16_t reason = 0;            // REJ (RejReason)
  uint8_t ari_len = 0;            // REJ additional rejection information
  uint8_t ari[72] = {};
  uint8_t sidr_status = 0;         // SIDR_REP (SidrStatus)
  uint8_t private_data[224] = {};  // the message's whole private data field
};

// Bytes of private data message `attr_id` carries (IBA Tables 106-120), 0 if unknown.
size_t private_data_size(uint16_t attr_id);
const char* attr_name(uint16_t attr_id);  // "REQ", "REP", ... or "CM?"

// Writes the 256-byte MAD. Returns false for an attribute simnic does not send.
bool encode(const Message& m, std::span<uint8_t, kMadBytes> out);

enum class DecodeError { kOk, kTooShort, kNotCm, kUnknownAttr };
const char* decode_error_name(DecodeError e);
// Reads a MAD received on QP1: the header must be a CM Send of class version 2.
DecodeError decode(std::span<const uint8_t> mad, Message* out);

// The rdma_cm service ID for a port space and port (kernel cma.c cma_get_service_id):
// RDMA_IB_IP_PS_MASK | ps << 16 | port, e.g. RDMA_PS_TCP (0x0106) port 7174 -> 0x0000000001061c06.
constexpr uint64_t service_id(uint16_t port_space, uint16_t port) { return uint64_t(port_space) << 16 | port; }
constexpr uint16_t service_port(uint64_t sid) { return uint16_t(sid); }
constexpr uint16_t service_port_space(uint64_t sid) { return uint16_t(sid >> 16); }

// rdma_cm's IP private-data header ("cma_hdr", kernel cma.c; IBA Annex A11 "IP addressing
// CM private data"), first 36 bytes of a REQ's or SIDR_REQ's private data.
constexpr size_t kCmaHdrBytes = 36;
struct CmaHdr {
  uint8_t ip_version = 4;
  uint16_t src_port = 0;  // host order
  uint32_t src_ip = 0;    // host order (IPv4)
  uint32_t dst_ip = 0;
};
void encode_cma_hdr(const CmaHdr& h, uint8_t* p);
bool decode_cma_hdr(const uint8_t* p, CmaHdr* out);  // false: not version 0 / IPv4

}  // namespace simnic::proto::cm
