// rsockets' data path: the QP and its buffers, credits, and the byte stream over SENDs with
// immediate data (the protocol is described in rsocket.h).
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "rdmacm/rsocket.h"

namespace simnic::rdmacm::rs {
namespace {

constexpr uint64_t kSendTag = 1ull << 63;

uint32_t clamp_count(int bytes, uint32_t seg, int cap) {
  uint32_t n = uint32_t(std::max(bytes, 0)) / seg;
  n = std::clamp<uint32_t>(n, 4, 256);
  if (cap > 0) n = std::min<uint32_t>(n, uint32_t(std::max(cap, 2)));
  return n;
}

int post_recv(Rs* rs, uint32_t idx) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(rs->rbuf.data() + size_t(idx) * rs->seg), rs->seg, rs->rmr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = idx;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(rs->id->qp, &wr, &bad);
}

// One SEND with immediate; `slot` < 0 for a control message without payload.
int post_send(Rs* rs, int slot, uint32_t len, uint32_t imm) {
  ibv_sge sge{};
  ibv_send_wr wr{};
  wr.wr_id = kSendTag | uint32_t(slot < 0 ? 0xffffffffu : uint32_t(slot));
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  if (len) {
    sge = {reinterpret_cast<uintptr_t>(rs->sbuf.data() + size_t(slot) * rs->peer_seg), len, rs->smr->lkey};
    wr.sg_list = &sge;
    wr.num_sge = 1;
  }
  ibv_send_wr* bad = nullptr;
  if (int e = ibv_post_send(rs->id->qp, &wr, &bad)) return e;
  rs->sq_used++;
  return 0;
}

// One RDMA WRITE (no immediate: the peer is not told) of a send slot's first `len` bytes.
int post_write(Rs* rs, uint32_t slot, uint32_t len, uint64_t raddr, uint32_t rkey) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(rs->sbuf.data() + size_t(slot) * rs->peer_seg), len, rs->smr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kSendTag | slot;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  if (int e = ibv_post_send(rs->id->qp, &wr, &bad)) return e;
  rs->sq_used++;
  return 0;
}

// A transfer failed or the connection broke: the stream is reset (ECONNRESET, as TCP on RST).
void mark_reset(Rs* rs, int err) {
  if (!rs->reset && !rs->conn_error) rs->conn_error = err;
  rs->reset = true;
}

void on_recv(Rs* rs, const ibv_wc& wc) {
  const uint32_t imm = (wc.wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc.imm_data) : 0;
  const uint32_t op = imm >> 28;
  if (op != kOpIounmap) rs->credits += imm & 0x0fffffff;  // its low bits are an index
  const uint32_t idx = uint32_t(wc.wr_id);
  if (op == kOpData && wc.byte_len > 0) {
    rs->ready.push_back({idx, wc.byte_len, 0});
    return;
  }
  if (op == kOpIomap) {  // took a data credit: give it back with the next message
    take_iomap(rs, rs->rbuf.data() + size_t(idx) * rs->seg, wc.byte_len);
    if (post_recv(rs, idx)) return mark_reset(rs, ECONNRESET);
    rs->unreturned++;
    return;
  }
  if (op == kOpFin) rs->fin_rcvd = true;
  if (op == kOpIounmap) drop_iomap(rs, imm & 0x0fffffff);
  if (post_recv(rs, idx)) mark_reset(rs, ECONNRESET);  // control receives go back at once
}

void on_send(Rs* rs, const ibv_wc& wc) {
  if (rs->sq_used) rs->sq_used--;
  const uint32_t slot = uint32_t(wc.wr_id);
  if (slot != 0xffffffffu) rs->free_sends.push_back(slot);
}

void handle(Rs* rs, const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS) {
    // Flushes after our own disconnect are expected; anything else breaks the stream.
    if (!rs->disconnected || wc.status != IBV_WC_WR_FLUSH_ERR) mark_reset(rs, ECONNRESET);
    if (wc.wr_id & kSendTag) on_send(rs, wc);
    return;
  }
  (wc.wr_id & kSendTag) ? on_send(rs, wc) : on_recv(rs, wc);
}

// Tells the peer about reposted receives once half of them are free again (and always when
// all are: the peer may be waiting for exactly these).
void maybe_send_credits(Rs* rs) {
  if (!rs->unreturned || rs->disconnected || rs->reset || !rs->id || !rs->id->qp) return;
  if (rs->unreturned < std::max<uint32_t>(1, rs->nrecv / 2)) return;
  if (rs->sq_used >= rs->sq_depth) return;
  if (post_send(rs, -1, 0, make_imm(kOpCredit, rs->unreturned)) == 0) rs->unreturned = 0;
}

void consume_slot(Rs* rs) {
  const uint32_t idx = rs->ready.front().idx;
  rs->ready.pop_front();
  if (post_recv(rs, idx)) {
    mark_reset(rs, ECONNRESET);
    return;
  }
  rs->unreturned++;
}

size_t iov_total(const iovec* iov, int n) {
  size_t t = 0;
  for (int i = 0; i < n; i++) t += iov[i].iov_len;
  return t;
}

// Copies what has arrived into iov (from byte `done` on); MSG_PEEK leaves it in place.
size_t copy_out(Rs* rs, const iovec* iov, int iovcnt, size_t done, bool peek) {
  size_t copied = 0;
  size_t qi = 0, qoff = 0;  // peek position in ready
  int vi = 0;
  size_t voff = done;
  while (vi < iovcnt && voff >= iov[vi].iov_len) voff -= iov[vi++].iov_len;
  while (vi < iovcnt && qi < rs->ready.size()) {
    Slot& s = rs->ready[qi];
    const uint32_t off = peek ? uint32_t(s.off + qoff) : s.off;
    size_t n = std::min<size_t>(s.len - off, iov[vi].iov_len - voff);
    std::memcpy(static_cast<uint8_t*>(iov[vi].iov_base) + voff, rs->rbuf.data() + size_t(s.idx) * rs->seg + off, n);
    copied += n;
    voff += n;
    if (voff == iov[vi].iov_len) vi++, voff = 0;
    if (peek) {
      qoff += n;
      if (s.off + qoff == s.len) qi++, qoff = 0;
    } else {
      s.off += uint32_t(n);
      if (s.off == s.len) consume_slot(rs);
    }
  }
  return copied;
}

// Copies from iov (from byte `done` on) into as many messages as credits and slots allow.
size_t copy_in(Rs* rs, const iovec* iov, int iovcnt, size_t done) {
  size_t sent = 0;
  int vi = 0;
  size_t voff = done;
  while (vi < iovcnt && voff >= iov[vi].iov_len) voff -= iov[vi++].iov_len;
  while (vi < iovcnt && rs->iomap_out.empty() && can_send(rs)) {
    const uint32_t slot = rs->free_sends.back();
    uint8_t* dst = rs->sbuf.data() + size_t(slot) * rs->peer_seg;
    uint32_t len = 0;
    while (vi < iovcnt && len < rs->peer_seg) {
      size_t n = std::min<size_t>(rs->peer_seg - len, iov[vi].iov_len - voff);
      std::memcpy(dst + len, static_cast<const uint8_t*>(iov[vi].iov_base) + voff, n);
      len += uint32_t(n);
      voff += n;
      if (voff == iov[vi].iov_len) vi++, voff = 0;
    }
    if (!len) break;
    if (post_send(rs, int(slot), len, make_imm(kOpData, rs->unreturned))) {
      mark_reset(rs, ECONNRESET);
      break;
    }
    rs->free_sends.pop_back();
    rs->credits--;
    rs->unreturned = 0;
    sent += len;
  }
  return sent;
}

bool nonblocking(const Rs* rs, int flags) { return (rs->fd_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT); }

}  // namespace

void fill_hdr(const Rs* rs, ConnHdr* h) {
  std::memset(h, 0, sizeof *h);
  h->magic = htonl(kMagic);
  h->version = kVersion;
  h->iomaps = htons(uint16_t(rs->iomap_size));
  h->credits = htonl(rs->nrecv);
  h->seg = htonl(rs->seg);
}

bool valid_hdr(const void* data, size_t len) {
  if (!data || len < sizeof(ConnHdr)) return false;
  ConnHdr h;
  std::memcpy(&h, data, sizeof h);
  return ntohl(h.magic) == kMagic && h.version == kVersion && ntohl(h.credits) > 0 && ntohl(h.seg) >= 512;
}

void take_peer_hdr(Rs* rs, const void* data, size_t len) {
  ConnHdr h;
  std::memcpy(&h, data, std::min(len, sizeof h));
  rs->credits = ntohl(h.credits);
  rs->peer_seg = std::min<uint32_t>(ntohl(h.seg), 1u << 20);
  rs->peer_iomaps = ntohs(h.iomaps);
}

// The CQ (with its completion channel), the RC QP in INIT with every receive posted, and the
// registered buffers: called before rdma_connect and rdma_accept.
int setup_connection(Rs* rs) {
  rdma_cm_id* id = rs->id;
  rs->seg = kDefaultSeg;
  rs->nrecv = clamp_count(rs->rcvbuf, rs->seg, rs->rq_size);
  rs->nsend = clamp_count(rs->sndbuf, rs->seg, rs->sq_size);
  rs->sq_depth = rs->nsend + kCtrlSends;
  rs->peer_maps.assign(size_t(rs->iomap_size), RemoteMap{});
  const uint32_t rq_depth = rs->nrecv + kCtrlRecvs;
  rs->cc = ibv_create_comp_channel(id->verbs);
  if (!rs->cc) return errno ? errno : ENOMEM;
  ::fcntl(rs->cc->fd, F_SETFL, ::fcntl(rs->cc->fd, F_GETFL) | O_NONBLOCK);
  rs->cq = ibv_create_cq(id->verbs, int(rs->sq_depth + rq_depth), rs, rs->cc, 0);
  if (!rs->cq) return errno ? errno : ENOMEM;
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = rs->cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = rs->sq_depth;
  qa.cap.max_recv_wr = rq_depth;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  if (rdma_create_qp(id, nullptr, &qa)) return errno ? errno : EINVAL;
  rs->rbuf.assign(size_t(rq_depth) * rs->seg, 0);
  rs->rmr = ibv_reg_mr(id->pd, rs->rbuf.data(), rs->rbuf.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!rs->rmr) return errno ? errno : ENOMEM;
  return post_all_recvs(rs);
}

int post_all_recvs(Rs* rs) {
  for (uint32_t i = 0; i < rs->nrecv + kCtrlRecvs; i++)
    if (int e = post_recv(rs, i)) return e;
  return 0;
}

// The send slots: sized once the peer said how large its receives are.
int setup_sends(Rs* rs) {
  rs->sbuf.assign(size_t(rs->nsend) * rs->peer_seg, 0);
  rs->smr = ibv_reg_mr(rs->id->pd, rs->sbuf.data(), rs->sbuf.size(), 0);
  if (!rs->smr) return errno ? errno : ENOMEM;
  for (uint32_t i = rs->nsend; i > 0; i--) rs->free_sends.push_back(i - 1);
  return 0;
}

void free_connection(Rs* rs) {
  free_iomaps(rs);
  if (rs->id && rs->id->qp) rdma_destroy_qp(rs->id);
  if (rs->rmr) ibv_dereg_mr(rs->rmr);
  if (rs->smr) ibv_dereg_mr(rs->smr);
  rs->rmr = rs->smr = nullptr;
  if (rs->cq) ibv_destroy_cq(rs->cq);
  rs->cq = nullptr;
  if (rs->cc) ibv_destroy_comp_channel(rs->cc);
  rs->cc = nullptr;
}

// Once disconnected the QP is in ERR: what is left in the CQ are flushes, not data (the CQ
// was drained before the disconnect).
void process_cq(Rs* rs) {
  if (!rs->cq || rs->disconnected) return;
  ibv_wc wc[16];
  for (;;) {
    int n = ibv_poll_cq(rs->cq, 16, wc);
    if (n <= 0) break;
    for (int i = 0; i < n; i++) handle(rs, wc[i]);
  }
  if (flush_iomaps(rs)) mark_reset(rs, ECONNRESET);
  maybe_send_credits(rs);
}

bool can_send(const Rs* rs) {
  return rs->state == State::kConnected && !rs->fin_sent && !rs->reset && !rs->disconnected && rs->credits > 0 &&
         !rs->free_sends.empty() && rs->sq_used < rs->sq_depth;
}

// Room for an RDMA WRITE: a send slot and a send queue entry (no credit: no receive is used).
bool can_write(const Rs* rs) {
  return rs->state == State::kConnected && !rs->fin_sent && !rs->reset && !rs->disconnected &&
         !rs->free_sends.empty() && rs->sq_used < rs->sq_depth;
}

// Room for a control message (no credit, no slot): one of the kCtrlSends send queue entries.
// Unlike data, allowed after our end of stream: the peer may still write into our mappings.
bool control_room(const Rs* rs) {
  return rs->state == State::kConnected && !rs->reset && !rs->disconnected && rs->id && rs->id->qp &&
         rs->sq_used < rs->sq_depth;
}

int send_control(Rs* rs, uint32_t imm) { return post_send(rs, -1, 0, imm); }

// One message of `op` with a payload, against a data credit (the caller checked can_send).
int send_message(Rs* rs, ImmOp op, const void* payload, uint32_t len) {
  const uint32_t slot = rs->free_sends.back();
  std::memcpy(rs->sbuf.data() + size_t(slot) * rs->peer_seg, payload, len);
  if (int e = post_send(rs, int(slot), len, make_imm(op, rs->unreturned))) return e;
  rs->free_sends.pop_back();
  rs->credits--;
  rs->unreturned = 0;
  return 0;
}

// `len` (at most a slot) bytes of src into the peer's memory at raddr (the caller checked can_write).
int write_remote(Rs* rs, const void* src, uint32_t len, uint64_t raddr, uint32_t rkey) {
  const uint32_t slot = rs->free_sends.back();
  std::memcpy(rs->sbuf.data() + size_t(slot) * rs->peer_seg, src, len);
  if (int e = post_write(rs, slot, len, raddr, rkey)) return e;
  rs->free_sends.pop_back();
  return 0;
}

bool readable(const Rs* rs) { return !rs->ready.empty() || rs->fin_rcvd || rs->reset || rs->disconnected; }

ssize_t recv_iov(Rs* rs, std::unique_lock<std::mutex>& lk, const iovec* iov, int iovcnt, int flags) {
  if (rs->state != State::kConnected) return fail(ENOTCONN);
  const size_t want = iov_total(iov, iovcnt);
  size_t done = 0;
  for (;;) {
    process_cq(rs);
    done += copy_out(rs, iov, iovcnt, done, flags & MSG_PEEK);
    maybe_send_credits(rs);
    if (done == want || (done && !(flags & MSG_WAITALL)) || ((flags & MSG_PEEK) && done)) return ssize_t(done);
    if (rs->ready.empty() && (rs->fin_rcvd || rs->rd_shut)) return ssize_t(done);  // end of stream
    if (rs->ready.empty() && (rs->reset || rs->disconnected)) return done ? ssize_t(done) : fail(ECONNRESET);
    if (!want) return 0;
    if (nonblocking(rs, flags)) return done ? ssize_t(done) : fail(EAGAIN);
    if (int e = wait_for(rs, lk, POLLIN)) return done ? ssize_t(done) : fail(e);
  }
}

ssize_t send_iov(Rs* rs, std::unique_lock<std::mutex>& lk, const iovec* iov, int iovcnt, int flags) {
  if (rs->state != State::kConnected) return fail(rs->state == State::kClosed ? EPIPE : ENOTCONN);
  const size_t want = iov_total(iov, iovcnt);
  size_t done = 0;
  for (;;) {
    process_cq(rs);
    if (rs->reset) return done ? ssize_t(done) : fail(rs->conn_error ? rs->conn_error : ECONNRESET);
    if (rs->fin_sent || rs->disconnected) return done ? ssize_t(done) : fail(EPIPE);
    if (flush_iomaps(rs)) mark_reset(rs, ECONNRESET);  // mappings go before later data
    done += copy_in(rs, iov, iovcnt, done);
    if (done == want) return ssize_t(done);
    if (nonblocking(rs, flags)) return done ? ssize_t(done) : fail(EAGAIN);
    if (int e = wait_for(rs, lk, POLLOUT)) return done ? ssize_t(done) : fail(e);
  }
}

// The end of our stream: a control message, so it needs no credit (rshutdown SHUT_WR, rclose).
int send_fin(Rs* rs) {
  if (rs->fin_sent || rs->state != State::kConnected || rs->reset || rs->disconnected) return 0;
  process_cq(rs);
  if (int e = post_send(rs, -1, 0, make_imm(kOpFin, rs->unreturned))) return e;
  rs->unreturned = 0;
  rs->fin_sent = true;
  return 0;
}

// Waits (bounded) until every send completed, so the peer has all our data and the end of
// stream before the CM disconnect reaches it.
void drain_sends(Rs* rs, int timeout_ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (rs->cq && rs->sq_used && !rs->reset && !rs->disconnected && std::chrono::steady_clock::now() < end) {
    process_cq(rs);
    if (!rs->sq_used || rs->reset) break;
    pollfd p[2];
    int n = arm(rs, p);
    process_cq(rs);
    if (!rs->sq_used) break;
    if (::poll(p, nfds_t(n), 20) > 0) {
      consume_cq_event(rs);
      process_cm_events(rs);
    }
  }
}

}  // namespace simnic::rdmacm::rs
