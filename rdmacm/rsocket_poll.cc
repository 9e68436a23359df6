// rpoll and rselect over a mix of rsockets and ordinary descriptors, and the blocking wait of
// the other calls. An rsocket is waited for through two descriptors: its rdma_cm event channel
// (connection progress, DISCONNECTED) and its CQ's completion channel, armed before the CQ is
// polled one last time so that no completion can slip between the check and the sleep.
#include <poll.h>
#include <sys/select.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <vector>

#include "rdmacm/rsocket.h"

namespace simnic::rdmacm::rs {
namespace {

void progress(Rs* rs) {
  process_cm_events(rs);
  process_cq(rs);
}

// As Linux's tcp_poll: the peer's end of stream is POLLIN|POLLRDHUP, POLLHUP only once both
// directions are shut (or the connection was reset: then with POLLERR). A peer that closed
// cannot take our data any more: POLLOUT, and the send fails with EPIPE.
short connected_events(const Rs* rs, short events) {
  const bool aborted = rs->reset || (rs->disconnected && !rs->fin_rcvd);
  short r = 0;
  if (readable(rs)) r |= POLLIN | POLLRDNORM;
  if (can_send(rs) || rs->disconnected || aborted) r |= POLLOUT | POLLWRNORM;
  if (rs->fin_rcvd) r |= POLLRDHUP;
  if (aborted || (rs->fin_rcvd && rs->fin_sent)) r |= POLLHUP;
  if (aborted) r |= POLLERR;
  return short(r & (events | POLLHUP | POLLERR));
}

int remaining_ms(int timeout, std::chrono::steady_clock::time_point start) {
  if (timeout < 0) return -1;
  auto used = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  return used >= timeout ? 0 : int(timeout - used);
}

struct Entry {
  Rs* rs;        // null: an ordinary descriptor, at sys[first]
  size_t first;  // its descriptors in the system poll set
  int count;
};

// One pass: the rsockets' states (arming them), and the system poll set to sleep on.
int scan(pollfd* fds, nfds_t nfds, std::vector<Entry>& map, std::vector<pollfd>& sys) {
  int ready = 0;
  map.clear();
  sys.clear();
  for (nfds_t i = 0; i < nfds; i++) {
    fds[i].revents = 0;
    Rs* rs = fds[i].fd >= 0 ? lookup(fds[i].fd) : nullptr;
    if (!rs) {
      map.push_back({nullptr, sys.size(), 1});
      sys.push_back({fds[i].fd, fds[i].events, 0});
      continue;
    }
    std::lock_guard lk(rs->mu);
    pollfd p[2];
    int n = arm(rs, p);
    progress(rs);
    fds[i].revents = poll_events(rs, fds[i].events);
    if (fds[i].revents) ready++;
    map.push_back({rs, sys.size(), n});
    sys.insert(sys.end(), p, p + n);
  }
  return ready;
}

// After the system poll: ordinary descriptors take its answer, rsockets are looked at again.
int collect(pollfd* fds, nfds_t nfds, const std::vector<Entry>& map, const std::vector<pollfd>& sys) {
  int cnt = 0;
  for (nfds_t i = 0; i < nfds; i++) {
    const Entry& e = map[i];
    if (!e.rs) {
      fds[i].revents = sys[e.first].revents;
    } else {
      std::lock_guard lk(e.rs->mu);
      consume_cq_event(e.rs);
      progress(e.rs);
      fds[i].revents = poll_events(e.rs, fds[i].events);
    }
    if (fds[i].revents) cnt++;
  }
  return cnt;
}

}  // namespace

int arm(Rs* rs, pollfd* out) {
  int n = 0;
  if (rs->ch) out[n++] = {rs->ch->fd, POLLIN, 0};
  if (rs->cq && rs->cc) {
    ibv_req_notify_cq(rs->cq, 0);
    out[n++] = {rs->cc->fd, POLLIN, 0};
  }
  return n;
}

void consume_cq_event(Rs* rs) {
  if (!rs->cc) return;
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  while (ibv_get_cq_event(rs->cc, &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
}

short poll_events(Rs* rs, short events) {
  switch (rs->state) {
    case State::kListening: return short(rs->pending.empty() ? 0 : (events & (POLLIN | POLLRDNORM)));
    case State::kResolving:
    case State::kConnecting: return 0;
    case State::kConnected: return connected_events(rs, events);
    case State::kClosed: return POLLNVAL;
    default:  // never connected, or the connection attempt failed
      return short(rs->conn_error ? (POLLOUT | POLLERR | POLLHUP) & (events | POLLERR | POLLHUP) : POLLHUP);
  }
}

// Sleeps until the rsocket may have `events` (a CQ event or a CM event), with rs->mu released.
int wait_for(Rs* rs, std::unique_lock<std::mutex>& lk, short events) {
  return wait_until(rs, lk, [events](Rs* r) { return poll_events(r, events) != 0; });
}

// The same for a condition that is not a poll event (riowrite's room, which needs no credit).
int wait_until(Rs* rs, std::unique_lock<std::mutex>& lk, const std::function<bool(Rs*)>& ready) {
  pollfd p[2];
  int n = arm(rs, p);
  progress(rs);
  if (ready(rs)) return 0;
  lk.unlock();
  int r = ::poll(p, nfds_t(n), -1);
  int err = errno;
  lk.lock();
  if (r < 0) return err;
  consume_cq_event(rs);
  process_cm_events(rs);
  return 0;
}

}  // namespace simnic::rdmacm::rs

using namespace simnic::rdmacm::rs;

extern "C" {

int rpoll(struct pollfd* fds, nfds_t nfds, int timeout) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<Entry> map;
  std::vector<pollfd> sys;
  for (;;) {
    int ready = scan(fds, nfds, map, sys);
    int wait = ready ? 0 : remaining_ms(timeout, start);
    int r = ::poll(sys.data(), sys.size(), wait);
    if (r < 0) return -1;
    int cnt = collect(fds, nfds, map, sys);
    if (cnt || wait == 0) return cnt;
  }
}

int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, struct timeval* timeout) {
  std::vector<pollfd> fds;
  for (int fd = 0; fd < nfds; fd++) {
    short ev = 0;
    if (readfds && FD_ISSET(fd, readfds)) ev |= POLLIN;
    if (writefds && FD_ISSET(fd, writefds)) ev |= POLLOUT;
    if (exceptfds && FD_ISSET(fd, exceptfds)) ev |= POLLPRI;
    if (ev) fds.push_back({fd, ev, 0});
  }
  int ms = timeout ? int(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;
  int r = rpoll(fds.data(), fds.size(), ms);
  if (r < 0) return r;
  if (readfds) FD_ZERO(readfds);
  if (writefds) FD_ZERO(writefds);
  if (exceptfds) FD_ZERO(exceptfds);
  int cnt = 0;
  for (const pollfd& p : fds) {
    if (readfds && (p.events & POLLIN) && (p.revents & (POLLIN | POLLHUP | POLLERR))) FD_SET(p.fd, readfds), cnt++;
    if (writefds && (p.events & POLLOUT) && (p.revents & (POLLOUT | POLLHUP | POLLERR))) FD_SET(p.fd, writefds), cnt++;
    if (exceptfds && (p.revents & POLLPRI)) FD_SET(p.fd, exceptfds), cnt++;
  }
  return cnt;
}

}  // extern "C"
