// rsockets' IO mappings (rsocket(7) riomap, riounmap, riowrite): a buffer of the program's
// registered on the rsocket's PD and, with PROT_WRITE, offered to the peer at an offset; the
// peer's riowrite to that offset is an RDMA WRITE straight into it. The messages that carry a
// mapping to the peer, and the ordering riowrite guarantees, are described in rsocket.h.
#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rdmacm/rsocket.h"

namespace simnic::rdmacm::rs {
namespace {

IomapMsg to_wire(const IomapMsg& m) {
  return {htonl(m.index), htonl(m.rkey), htobe64(m.offset), htobe64(m.addr), htobe64(m.len)};
}

IomapMsg from_wire(const IomapMsg& w) {
  return {ntohl(w.index), ntohl(w.rkey), be64toh(w.offset), be64toh(w.addr), be64toh(w.len)};
}

// The lowest index of the peer's table that no PROT_WRITE mapping of ours holds; -1 if the peer
// accepts no more (rdma-core's riomap then fails with ENOMEM too).
int free_index(const Rs* rs) {
  for (uint32_t i = 0; i < rs->peer_iomaps; i++) {
    bool taken = std::any_of(rs->maps.begin(), rs->maps.end(), [&](const LocalMap& m) { return m.index == int(i); });
    if (!taken) return int(i);
  }
  return -1;
}

// Remote mappings must not overlap: the peer could not tell which one an offset means.
bool overlaps_remote(const Rs* rs, uint64_t offset, size_t len) {
  return std::any_of(rs->maps.begin(), rs->maps.end(), [&](const LocalMap& m) {
    return m.index >= 0 && offset < m.offset + m.len && m.offset < offset + len;
  });
}

const RemoteMap* find_remote(const Rs* rs, uint64_t offset) {
  for (const RemoteMap& m : rs->peer_maps)
    if (m.used && offset >= m.offset && offset - m.offset < m.len) return &m;
  return nullptr;
}

void queue_iomap(Rs* rs, const LocalMap& m) {
  IomapMsg msg{uint32_t(m.index), m.mr->rkey, m.offset, reinterpret_cast<uintptr_t>(m.buf), m.len};
  rs->iomap_out.push_back({kOpIomap, msg});
}

// Withdraws mapping `index` from the peer: a mapping the peer was never told of is simply
// dropped from the queue.
void queue_iounmap(Rs* rs, int index) {
  auto it = std::find_if(rs->iomap_out.begin(), rs->iomap_out.end(),
                         [&](const IomapOut& o) { return o.op == kOpIomap && o.msg.index == uint32_t(index); });
  if (it != rs->iomap_out.end()) {
    rs->iomap_out.erase(it);
    return;
  }
  IomapMsg msg{};
  msg.index = uint32_t(index);
  rs->iomap_out.push_back({kOpIounmap, msg});
}

bool nonblocking(const Rs* rs, int flags) { return (rs->fd_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT); }

// As many RDMA WRITEs as slots allow, each within one of the peer's mappings; stops at the
// first byte no mapping covers. Returns the bytes posted, or -1 with *err set.
ssize_t write_chunks(Rs* rs, const uint8_t* src, size_t count, uint64_t offset, size_t done, int* err) {
  while (done < count && can_write(rs)) {
    const RemoteMap* m = find_remote(rs, offset + done);
    if (!m) break;
    size_t n = std::min<size_t>({count - done, rs->peer_seg, m->len - (offset + done - m->offset)});
    if (write_remote(rs, src + done, uint32_t(n), m->addr + (offset + done - m->offset), m->rkey)) {
      *err = ECONNRESET;
      return -1;
    }
    done += n;
  }
  return ssize_t(done);
}

size_t fail_size(int err) {
  errno = err;
  return size_t(-1);
}

size_t do_riowrite(Rs* rs, std::unique_lock<std::mutex>& lk, const uint8_t* src, size_t count, uint64_t offset,
                   int flags) {
  if (rs->state != State::kConnected) return fail_size(rs->state == State::kClosed ? EPIPE : ENOTCONN);
  size_t done = 0;
  for (;;) {
    process_cq(rs);  // mapping messages the peer sent are taken here
    if (rs->reset) return done ? done : fail_size(rs->conn_error ? rs->conn_error : ECONNRESET);
    if (rs->fin_sent || rs->disconnected) return done ? done : fail_size(EPIPE);
    if (flush_iomaps(rs)) return done ? done : fail_size(ECONNRESET);
    if (!find_remote(rs, offset + done)) return done ? done : fail_size(EINVAL);  // not (or no longer) mapped
    int err = 0;
    ssize_t n = write_chunks(rs, src, count, offset, done, &err);
    if (n < 0) return done ? done : fail_size(err);
    done = size_t(n);
    if (done == count) return done;
    if (can_write(rs)) continue;  // the next byte is in another mapping, or in none
    if (nonblocking(rs, flags)) return done ? done : fail_size(EAGAIN);
    // A send slot (no credit: POLLOUT would also wait for one the peer may never return).
    auto room = [](Rs* r) { return can_write(r) || r->reset || r->disconnected; };
    if (int e = wait_until(rs, lk, room)) return done ? done : fail_size(e);
  }
}

}  // namespace

// Sends queued mapping messages while there is room: withdrawals as control messages, new
// mappings against data credits (those wait for the peer's next credit update). Messages about
// different indices need no order between them; one index's are never both queued (a mapping
// withdrawn before it was sent is dropped from the queue).
int flush_iomaps(Rs* rs) {
  for (auto it = rs->iomap_out.begin(); it != rs->iomap_out.end();) {
    int e = 0;
    if (it->op == kOpIounmap && control_room(rs)) {
      e = send_control(rs, make_imm(kOpIounmap, it->msg.index));
    } else if (it->op == kOpIomap && can_send(rs)) {
      IomapMsg wire = to_wire(it->msg);
      e = send_message(rs, kOpIomap, &wire, sizeof wire);
    } else {
      ++it;
      continue;
    }
    if (e) return e;
    it = rs->iomap_out.erase(it);
  }
  return 0;
}

// A mapping the peer offers; one naming an index beyond what we accept is ignored (a riowrite
// to its offset then fails with EINVAL here, never writes elsewhere).
void take_iomap(Rs* rs, const uint8_t* data, uint32_t len) {
  IomapMsg wire{};
  if (len < sizeof wire) return;
  std::memcpy(&wire, data, sizeof wire);
  const IomapMsg m = from_wire(wire);
  if (m.index >= rs->peer_maps.size() || !m.len) return;
  rs->peer_maps[m.index] = {true, m.offset, m.addr, m.len, m.rkey};
}

void drop_iomap(Rs* rs, uint32_t index) {
  if (index < rs->peer_maps.size()) rs->peer_maps[index] = RemoteMap{};
}

void free_iomaps(Rs* rs) {
  for (LocalMap& m : rs->maps)
    if (m.mr) ibv_dereg_mr(m.mr);
  rs->maps.clear();
  rs->peer_maps.clear();
  rs->iomap_out.clear();
}

}  // namespace simnic::rdmacm::rs

using namespace simnic::rdmacm::rs;

extern "C" {

// rsocket(7): registers buf on the rsocket's device; PROT_WRITE also offers it to the peer at
// `offset` (-1: the library picks one, the buffer's address as rdma-core does). The peer can use
// it once it has received data we send after this call.
off_t riomap(int socket, void* buf, size_t len, int prot, int, off_t offset) {
  Rs* rs = lookup(socket);
  if (!rs) return fail(EBADF);
  std::lock_guard lk(rs->mu);
  if ((prot & ~PROT_WRITE) || !buf || !len || offset < -1) return fail(EINVAL);
  if (rs->state != State::kConnected || !rs->id || !rs->id->pd) return fail(EINVAL);  // no device yet, as rdma-core
  const bool remote = prot & PROT_WRITE;
  const uint64_t off = offset == -1 ? reinterpret_cast<uintptr_t>(buf) : uint64_t(offset);
  int index = -1;
  if (remote) {
    index = free_index(rs);
    if (index < 0) return fail(ENOMEM);  // the peer accepts no more (its RDMA_IOMAPSIZE)
    if (overlaps_remote(rs, off, len)) return fail(EINVAL);
  }
  // IBA 10.6.3.1: remote write access requires local write access.
  int access = IBV_ACCESS_LOCAL_WRITE | (remote ? IBV_ACCESS_REMOTE_WRITE : 0);
  ibv_mr* mr = ibv_reg_mr(rs->id->pd, buf, len, access);
  if (!mr) return fail(errno ? errno : ENOMEM);
  rs->maps.push_back({buf, len, off, mr, index});
  if (remote) {
    queue_iomap(rs, rs->maps.back());
    process_cq(rs);  // sends it now if a credit is there
  }
  return off_t(off);
}

// Deregisters the mapping of exactly (buf, len) at once and withdraws it from the peer: its
// riowrites to the offset fail with EINVAL once it has received data we send after this call.
int riounmap(int socket, void* buf, size_t len) {
  Rs* rs = lookup(socket);
  if (!rs) return fail(EBADF);
  std::lock_guard lk(rs->mu);
  auto it =
      std::find_if(rs->maps.begin(), rs->maps.end(), [&](const LocalMap& m) { return m.buf == buf && m.len == len; });
  if (it == rs->maps.end()) return fail(EINVAL);
  const int index = it->index;
  ibv_dereg_mr(it->mr);
  rs->maps.erase(it);
  if (index >= 0 && rs->state == State::kConnected && !rs->disconnected) {
    queue_iounmap(rs, index);
    process_cq(rs);
  }
  return 0;
}

// rsocket(7): writes into the peer's mapping at `offset` (RDMA WRITE), like rwrite: blocking
// unless O_NONBLOCK or MSG_DONTWAIT, a partial count when it stops early. Fails with EINVAL
// when no mapping of the peer covers `offset` (rdma-core returns 0 there).
size_t riowrite(int socket, const void* buf, size_t count, off_t offset, int flags) {
  Rs* rs = lookup(socket);
  if (!rs) return fail_size(EBADF);
  std::unique_lock lk(rs->mu);
  if (offset < 0) return fail_size(EINVAL);
  if (!count) return 0;
  return do_riowrite(rs, lk, static_cast<const uint8_t*>(buf), count, uint64_t(offset), flags);
}

}  // extern "C"
