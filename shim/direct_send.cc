// Posts that send themselves (simnic/abi/direct_send.h has the protocol): while simnicd lends an RC
// QP's next PSN, ibv_post_send of one SEND or WRITE that fits a packet (or a READ of one response
// packet, an atomic) sends that request packet from the NIC's socket itself, instead of ringing the
// doorbell and waiting for the NIC process to be scheduled, which on a machine whose CPUs run the
// programs is most of a small message's latency (docs/performance.md). It reads the payload where
// the program's memory is, as a post's inline copy does: from this process's registrations (the MRs
// it registered itself, checked as simnicd checks an SGE), never an imported, device-memory or
// on-demand MR.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <shared_mutex>
#include <string_view>
#include <utility>

#include "shim/direct_packet.h"
#include "shim/shim.h"

using namespace simnic::abi;

namespace simnic::shim {

namespace {

// An MR this process registered with ibv_reg_mr: where its bytes are, for the SGEs that name it.
struct LocalMr {
  const ibv_pd* pd;
  uint64_t addr, iova, length;
};

std::shared_mutex local_mrs_mu;
std::map<std::pair<const ibv_context*, uint32_t>, LocalMr> local_mrs;  // by context and lkey

// As simnicd's MemoryAccess::local_mr: a registered MR of the QP's PD holds the whole range
// (LOCAL_READ is every MR's). nullptr otherwise: the post goes to the NIC, which says why.
const uint8_t* local_bytes(const ibv_qp* qp, const ibv_sge& s) {
  std::shared_lock lock(local_mrs_mu);
  auto it = local_mrs.find({qp->context, s.lkey});
  if (it == local_mrs.end() || it->second.pd != qp->pd) return nullptr;
  const LocalMr& mr = it->second;
  if (s.addr < mr.iova || s.length > mr.length || s.addr - mr.iova > mr.length - s.length) return nullptr;
  return reinterpret_cast<const uint8_t*>(mr.addr + (s.addr - mr.iova));
}

// The message's length: its inline bytes, or its SGEs'; UINT64_MAX for a malformed WQE (the
// NIC's to fail).
uint64_t length_of(const SendWqe& w) {
  if (w.send_flags & IBV_SEND_INLINE) return w.inline_len <= kMaxInlineData ? w.inline_len : UINT64_MAX;
  return w.num_sge <= kMaxSge ? sge_bytes(w) : UINT64_MAX;
}

// The `total` bytes of the WQE's payload: its inline bytes, its one SGE where it lies, or its
// SGEs gathered into `gather`. False when an SGE is not this process's to read.
bool payload_of(const ibv_qp* qp, const SendWqe& w, uint64_t total, std::vector<uint8_t>& gather,
                std::span<const uint8_t>* out) {
  if (w.send_flags & IBV_SEND_INLINE) {
    *out = {w.inline_data, size_t(total)};
    return true;
  }
  gather.clear();
  for (uint32_t i = 0; i < w.num_sge; ++i) {
    if (w.sge[i].length == 0) continue;
    const uint8_t* p = local_bytes(qp, w.sge[i]);
    if (!p) return false;
    if (total == w.sge[i].length) {  // the only SGE with bytes: sent from where it lies
      *out = {p, w.sge[i].length};
      return true;
    }
    gather.insert(gather.end(), p, p + w.sge[i].length);
  }
  *out = gather;
  return true;
}

thread_local std::vector<uint8_t> packet;  // the packet a post of this thread is sending

bool direct_send_wanted() {
  const char* v = std::getenv("SIMNIC_DIRECT_SEND");
  return !v || std::string_view(v) != "0";
}

}  // namespace

void note_local_mr(const ibv_mr* mr, uint64_t iova, unsigned access) {
  if (!mr->addr || (access & IBV_ACCESS_ON_DEMAND)) return;
  std::unique_lock lock(local_mrs_mu);
  local_mrs[{mr->context, mr->lkey}] = {mr->pd, reinterpret_cast<uint64_t>(mr->addr), iova, mr->length};
}

void forget_local_mr(const ibv_mr* mr) {
  std::unique_lock lock(local_mrs_mu);
  local_mrs.erase({mr->context, mr->lkey});
}

void open_direct_send(ShimContext* c) {
  if (!direct_send_wanted()) return;
  OpenDirectSendReply rep{};
  std::vector<int> fds;
  // An older simnicd, or one started with SIMNIC_DIRECT_SEND=0, refuses: every post rings.
  if (rpc(c, Op::OpenDirectSend, HandleReq{}, &rep, &fds) != 0 || fds.size() != 1) {
    for (int fd : fds) ::close(fd);
    return;
  }
  c->direct_fd = fds[0];
  c->direct_src_ip = rep.ipv4;
  c->direct_port = uint16_t(rep.udp_port);
}

// The NIC is gone. Closing the descriptor could race a post on another thread, whose sendto
// would then reach whatever file took the number; dup3 puts an unbound socket in its place in
// one step instead, so the NIC's socket loses this last reference (its address is free again)
// and a late sendto leaves from an ephemeral port that no peer accepts. Posts stop anyway:
// every post on a lost NIC returns EIO before it looks at a lend.
void release_direct_send(ShimContext* c) {
  if (c->direct_fd < 0) return;
  const int blank = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (blank < 0) return;
  ::dup3(blank, c->direct_fd, O_CLOEXEC);
  ::close(blank);
}

bool prepare_direct_send(ShimContext* c, ShimQp* qp, const SendWqe& w, uint32_t index, DirectPacket* out) {
  const ibv_qp* q = &qp->qpx.qp_base;
  if (c->direct_fd < 0 || q->qp_type != IBV_QPT_RC) return false;
  if (!read_direct_lend(qp->shm->direct, &out->lend) || out->lend.sq_index != index) return false;
  const uint64_t length = length_of(w);
  const DirectKind kind = direct_kind(w, length, out->lend);
  thread_local std::vector<uint8_t> gather;
  std::span<const uint8_t> payload;  // a READ or atomic reads nothing here: its answer lands later
  if (kind == DirectKind::kNone || (kind == DirectKind::kData && !payload_of(q, w, length, gather, &payload)))
    return false;
  out->bytes = build_direct_packet(w, out->lend, c->direct_src_ip, c->direct_port, length, payload, packet);
  return out->bytes != 0;
}

bool send_direct_packet(ShimContext* c, ShimQp* qp, const DirectPacket& p) {
  if (!take_direct_lend(qp->shm->direct, p.lend)) return false;  // simnicd took the PSN back first
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(c->direct_port);
  to.sin_addr.s_addr = htonl(p.lend.dst_ip);
  // A full socket buffer is a lossy link: the NIC accounts the packet at the doorbell this
  // failure rings, and its ACK timer resends it.
  const ssize_t n = ::sendto(c->direct_fd, packet.data(), p.bytes, MSG_DONTWAIT | MSG_NOSIGNAL,
                             reinterpret_cast<const sockaddr*>(&to), sizeof to);
  mark_direct_packet_sent(qp->shm->direct, p.lend);  // simnicd's ACK timer waits for this
  return n == ssize_t(p.bytes);
}

}  // namespace simnic::shim
