// rsockets: SOCK_STREAM sockets over an RC QP (rsocket(7)), on simnic's rdma_cm and verbs.
//
// The number rsocket() returns is the file descriptor of the socket's own rdma_cm event
// channel, as in rdma-core (its rsocket returns an index equal to cm_id->channel->fd): a real
// descriptor the process owns, so librspreload.so can hand it back to rpoll mixed with
// ordinary descriptors without the two ever colliding.
//
// Wire protocol (simnic's own; see docs/rdma-cm.md "rsockets"): the connect and accept private
// data carry a ConnHdr (how many data receives the sender posted and their size, and how many
// IO mappings it accepts). Every message is a SEND with immediate data; the immediate's top 4
// bits say what it is (ImmOp: data, credit update, end of stream, iomap, iounmap) and its low 28
// bits return receive credits to the peer (an iounmap's are the withdrawn mapping's index). A
// data or iomap message consumes one of the peer's data credits; credit updates, the
// end-of-stream marker and iounmaps land in kCtrlRecvs extra receives the peer reposts at once,
// so they never need credits (more than kCtrlRecvs unprocessed ones meet an RNR NAK and are
// retried: rnr_retry 7).
//
// IO mappings (riomap, riowrite, riounmap): the ConnHdr also says how many of the peer's
// mappings the sender accepts (RDMA_IOMAPSIZE, 0 by default as in rdma-core, so a peer that
// predates mappings, whose header has 0 there, is never sent one). A riomap(PROT_WRITE) takes a
// free index below that number and sends an iomap message: a SEND with immediate (op kOpIomap)
// whose payload is an IomapMsg (index, offset, address, length, rkey); it takes a data credit
// like a data message (so it never meets an empty receive queue) and waits, queued, while none
// is left. riounmap deregisters the buffer at once and sends kOpIounmap, a control message
// without payload whose immediate's low 28 bits are the index (not credits): no credit needed,
// so the peer learns of it even while its receive buffer is full. Both are ordered with the
// byte stream (sent before any later data). riowrite is a plain RDMA WRITE (no immediate:
// the peer's CPU is not involved) from a send slot to the address the peer's mapping gives for
// the offset; IBA's ordering rules on one RC QP (a SEND completes at the responder only after
// the data of every earlier RDMA WRITE was placed) make riowrite data visible before any
// stream data sent after it is received, as rsocket(7) says.
#pragma once
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

namespace simnic::rdmacm::rs {

constexpr uint32_t kMagic = 0x534e5253;  // "SNRS"
constexpr uint8_t kVersion = 1;
constexpr uint32_t kDefaultSeg = 16384;  // bytes per message
constexpr uint32_t kDefaultBuf = 256 * 1024;
constexpr uint32_t kCtrlRecvs = 8;       // receives beyond the data credits, for control messages
constexpr uint32_t kCtrlSends = 8;       // send queue room kept for control messages
constexpr int kConnectTimeoutMs = 2000;  // address resolution timeout
constexpr int kCloseDrainMs = 2000;      // rclose waits at most this long for its sends

enum ImmOp : uint32_t { kOpData = 0, kOpCredit = 1, kOpFin = 2, kOpIomap = 3, kOpIounmap = 4 };
constexpr int kMaxIomaps = 1024;  // RDMA_IOMAPSIZE is clamped to this
inline uint32_t make_imm(ImmOp op, uint32_t credits) { return (uint32_t(op) << 28) | (credits & 0x0fffffff); }

struct ConnHdr {
  uint32_t magic;
  uint8_t version;
  uint8_t pad;
  uint16_t iomaps;   // how many of the peer's riomap(PROT_WRITE) mappings the sender accepts
  uint32_t credits;  // data receives posted
  uint32_t seg;      // bytes each of them holds
};

static_assert(sizeof(ConnHdr) == 16, "the connect header's layout is the wire format");

struct IomapMsg {  // the payload of kOpIomap, network byte order
  uint32_t index;  // the entry in the receiver's table, below the iomaps it accepts
  uint32_t rkey;
  uint64_t offset;  // riowrite(offset) lands at addr + (offset - this offset)
  uint64_t addr;
  uint64_t len;
};

struct LocalMap {  // a riomap of ours
  void* buf;
  size_t len;
  uint64_t offset;
  ibv_mr* mr;
  int index;  // in the peer's table; -1 for PROT_NONE (local only, the peer is not told)
};

struct RemoteMap {  // a mapping the peer offered us
  bool used = false;
  uint64_t offset = 0, addr = 0, len = 0;
  uint32_t rkey = 0;
};

struct IomapOut {  // a mapping message not sent yet (no credit)
  ImmOp op;
  IomapMsg msg;  // host byte order
};

enum class State { kInit, kBound, kListening, kResolving, kConnecting, kConnected, kClosed };

struct Slot {
  uint32_t idx, len, off;
};

struct Pending {  // a connection request raccept has not taken yet
  rdma_cm_id* id;
  ConnHdr hdr;
};

struct Rs {
  int fd = -1;  // == ch->fd
  int domain = AF_INET;
  State state = State::kInit;
  rdma_event_channel* ch = nullptr;
  rdma_cm_id* id = nullptr;
  std::mutex mu;

  // options
  int fd_flags = 0;  // O_NONBLOCK
  int reuseaddr = 0, keepalive = 0, nodelay = 0, keepidle = 7200, keepintvl = 75, keepcnt = 9;
  int rcvbuf = kDefaultBuf, sndbuf = kDefaultBuf;
  int sq_size = 0, rq_size = 0, inline_size = 64;
  int iomap_size = 0;  // RDMA_IOMAPSIZE: peer mappings we accept (read at connect)
  linger lng{0, 0};
  int so_error = 0;  // reported once by SO_ERROR

  // listener
  std::deque<Pending> pending;

  // connection
  ibv_comp_channel* cc = nullptr;
  ibv_cq* cq = nullptr;
  bool armed = false;
  ibv_mr* rmr = nullptr;
  ibv_mr* smr = nullptr;
  std::vector<uint8_t> rbuf, sbuf;
  uint32_t seg = kDefaultSeg;       // our receive slot size
  uint32_t peer_seg = kDefaultSeg;  // largest message the peer takes
  uint32_t nrecv = 0;               // data receives (credits we grant)
  uint32_t nsend = 0;               // send slots
  std::deque<Slot> ready;           // received data not read yet
  std::vector<uint32_t> free_sends;
  uint32_t credits = 0;     // data messages the peer can take now
  uint32_t unreturned = 0;  // our receives reposted but not told to the peer
  uint32_t sq_used = 0;     // send WRs posted, not completed
  uint32_t sq_depth = 0;
  bool fin_sent = false, fin_rcvd = false, rd_shut = false;
  bool disconnected = false;  // the CM connection is gone
  bool reset = false;         // gone without an end of stream, or a transfer failed
  int conn_error = 0;         // why the connection failed or broke

  // IO mappings (rsocket_iomap.cc)
  uint32_t peer_iomaps = 0;          // how many of ours the peer accepts
  std::vector<LocalMap> maps;        // ours
  std::vector<RemoteMap> peer_maps;  // the peer's, by index (iomap_size entries)
  std::deque<IomapOut> iomap_out;    // mapping messages waiting for a credit, in order
};

// rsockets.cc: the registry
Rs* lookup(int fd);
void register_rs(Rs* rs);

// rsocket_conn.cc: connection setup and CM events
rdma_event_channel* make_channel();  // non-blocking
int start_connect(Rs* rs, const sockaddr* addr);
void process_cm_events(Rs* rs);
int accept_one(Rs* listener, Rs** out);
void disconnect(Rs* rs);

// rsocket_stream.cc: buffers, QP, data path
int setup_connection(Rs* rs);
int setup_sends(Rs* rs);
void free_connection(Rs* rs);
int post_all_recvs(Rs* rs);
void process_cq(Rs* rs);
ssize_t recv_iov(Rs* rs, std::unique_lock<std::mutex>& lk, const iovec* iov, int iovcnt, int flags);
ssize_t send_iov(Rs* rs, std::unique_lock<std::mutex>& lk, const iovec* iov, int iovcnt, int flags);
int send_fin(Rs* rs);
void drain_sends(Rs* rs, int timeout_ms);
bool can_send(const Rs* rs);
bool readable(const Rs* rs);
void fill_hdr(const Rs* rs, ConnHdr* h);
void take_peer_hdr(Rs* rs, const void* data, size_t len);
bool valid_hdr(const void* data, size_t len);

bool can_write(const Rs* rs);
bool control_room(const Rs* rs);
int send_control(Rs* rs, uint32_t imm);
int send_message(Rs* rs, ImmOp op, const void* payload, uint32_t len);
int write_remote(Rs* rs, const void* src, uint32_t len, uint64_t raddr, uint32_t rkey);

// rsocket_iomap.cc: riomap, riounmap, riowrite
int flush_iomaps(Rs* rs);
void take_iomap(Rs* rs, const uint8_t* data, uint32_t len);
void drop_iomap(Rs* rs, uint32_t index);
void free_iomaps(Rs* rs);

// rsocket_poll.cc
short poll_events(Rs* rs, short events);
int wait_for(Rs* rs, std::unique_lock<std::mutex>& lk, short events);
int wait_until(Rs* rs, std::unique_lock<std::mutex>& lk, const std::function<bool(Rs*)>& ready);
void consume_cq_event(Rs* rs);
int arm(Rs* rs, pollfd* out);

inline int fail(int err) {
  errno = err;
  return -1;
}

}  // namespace simnic::rdmacm::rs
