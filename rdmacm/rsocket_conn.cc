// rsockets' connection setup over rdma_cm: each rsocket has its own event channel (its fd is
// the rsocket's number), kept non-blocking; blocking calls wait for it with poll. The active
// side goes ADDR_RESOLVED -> ROUTE_RESOLVED (QP and receives ready, rdma_connect with our
// ConnHdr) -> ESTABLISHED (the peer's ConnHdr gives the send credits). The passive side queues
// CONNECT_REQUESTs on the listener; raccept takes one, moves its id to a channel of its own,
// and accepts with its ConnHdr.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rdmacm/rsocket.h"

namespace simnic::rdmacm::rs {
namespace {

// The attempt is over; the QP (moved to ERR by librdmacm on a reject) holds only flushes now.
void connect_failed(Rs* rs, int err) {
  rs->conn_error = rs->so_error = err;
  rs->disconnected = true;
  rs->state = State::kInit;
}

rdma_conn_param conn_param(const ConnHdr* h) {
  rdma_conn_param p{};
  p.private_data = h;
  p.private_data_len = sizeof *h;
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.flow_control = 1;
  p.retry_count = 7;
  p.rnr_retry_count = 7;  // credits keep receives posted ahead; RNR is only a safety net
  return p;
}

void on_route_resolved(Rs* rs) {
  if (int e = setup_connection(rs)) return connect_failed(rs, e);
  ConnHdr h;
  fill_hdr(rs, &h);
  rdma_conn_param p = conn_param(&h);
  if (rdma_connect(rs->id, &p)) return connect_failed(rs, errno ? errno : ECONNREFUSED);
  rs->state = State::kConnecting;
}

void on_established(Rs* rs, const rdma_cm_event* ev) {
  if (rs->state != State::kConnecting) return;  // the passive side is connected since raccept
  const rdma_conn_param& c = ev->param.conn;
  if (!valid_hdr(c.private_data, c.private_data_len)) {
    rdma_disconnect(rs->id);
    return connect_failed(rs, ECONNREFUSED);
  }
  take_peer_hdr(rs, c.private_data, c.private_data_len);
  if (int e = setup_sends(rs)) {
    rdma_disconnect(rs->id);
    return connect_failed(rs, e);
  }
  rs->state = State::kConnected;
}

// The peer disconnected (or its process died and its NIC sent the DREQ): whatever arrived
// before stays readable; without an end-of-stream marker the stream was reset.
void on_disconnected(Rs* rs) {
  process_cq(rs);
  if (rs->disconnected) return;
  rs->disconnected = true;
  if (!rs->fin_rcvd && !rs->conn_error) rs->conn_error = ECONNRESET;
  rdma_disconnect(rs->id);  // the DREP; our QP goes to ERR and flushes
}

void on_failure(Rs* rs, rdma_cm_event_type type) {
  if (rs->state == State::kResolving || rs->state == State::kConnecting)
    return connect_failed(rs, type == RDMA_CM_EVENT_REJECTED      ? ECONNREFUSED
                              : type == RDMA_CM_EVENT_UNREACHABLE ? ETIMEDOUT
                                                                  : EHOSTUNREACH);
  rs->reset = true;
  if (!rs->conn_error) rs->conn_error = ECONNRESET;
}

// A listener's channel also carries events for the ids it queued and raccept has not taken.
void on_child_event(Rs* listener, rdma_cm_event* ev, rdma_cm_id** dead) {
  if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
    const rdma_conn_param& c = ev->param.conn;
    if (!valid_hdr(c.private_data, c.private_data_len)) {
      rdma_reject(ev->id, nullptr, 0);
      *dead = ev->id;
      return;
    }
    Pending p{ev->id, {}};
    std::memcpy(&p.hdr, c.private_data, sizeof p.hdr);
    listener->pending.push_back(p);
    return;
  }
  auto it = std::find_if(listener->pending.begin(), listener->pending.end(),
                         [&](const Pending& p) { return p.id == ev->id; });
  if (it == listener->pending.end()) return;
  if (ev->event == RDMA_CM_EVENT_DISCONNECTED || ev->event == RDMA_CM_EVENT_REJECTED ||
      ev->event == RDMA_CM_EVENT_CONNECT_ERROR || ev->event == RDMA_CM_EVENT_UNREACHABLE) {
    *dead = it->id;
    listener->pending.erase(it);
  }
}

void handle_event(Rs* rs, rdma_cm_event* ev, rdma_cm_id** dead) {
  if (ev->id != rs->id) return on_child_event(rs, ev, dead);
  switch (ev->event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma_resolve_route(rs->id, kConnectTimeoutMs)) connect_failed(rs, errno ? errno : EHOSTUNREACH);
      break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: on_route_resolved(rs); break;
    case RDMA_CM_EVENT_ESTABLISHED: on_established(rs, ev); break;
    case RDMA_CM_EVENT_DISCONNECTED: on_disconnected(rs); break;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_DEVICE_REMOVAL: on_failure(rs, ev->event); break;
    default: break;
  }
}

void destroy_failed_accept(Rs* rs) {
  free_connection(rs);
  if (rs->id) rdma_destroy_id(rs->id);
  if (rs->ch) rdma_destroy_event_channel(rs->ch);
  delete rs;
}

rdma_event_channel* nonblocking_channel() {
  rdma_event_channel* ch = rdma_create_event_channel();
  if (ch) ::fcntl(ch->fd, F_SETFL, ::fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
  return ch;
}

// The accepted socket takes the listener's buffer options (as TCP's accepted sockets do).
Rs* new_accepted(const Rs* l) {
  auto* rs = new Rs;
  rs->domain = l->domain;
  rs->rcvbuf = l->rcvbuf;
  rs->sndbuf = l->sndbuf;
  rs->sq_size = l->sq_size;
  rs->rq_size = l->rq_size;
  rs->inline_size = l->inline_size;
  rs->iomap_size = l->iomap_size;
  rs->nodelay = l->nodelay;
  rs->keepalive = l->keepalive;
  return rs;
}

}  // namespace

rdma_event_channel* make_channel() { return nonblocking_channel(); }

int start_connect(Rs* rs, const sockaddr* addr) {
  if (rdma_resolve_addr(rs->id, nullptr, const_cast<sockaddr*>(addr), kConnectTimeoutMs)) return errno ? errno : EINVAL;
  rs->state = State::kResolving;
  process_cm_events(rs);
  return 0;
}

void process_cm_events(Rs* rs) {
  if (!rs->ch) return;
  rdma_cm_event* ev = nullptr;
  while (rdma_get_cm_event(rs->ch, &ev) == 0) {
    rdma_cm_id* dead = nullptr;
    handle_event(rs, ev, &dead);
    rdma_ack_cm_event(ev);
    if (dead) rdma_destroy_id(dead);
  }
}

int accept_one(Rs* l, Rs** out) {
  process_cm_events(l);
  if (l->pending.empty()) return EAGAIN;
  Pending p = l->pending.front();
  l->pending.pop_front();
  Rs* rs = new_accepted(l);
  rs->id = p.id;
  rs->ch = nonblocking_channel();
  int e = rs->ch ? 0 : (errno ? errno : ENOMEM);
  if (!e) {
    rs->fd = rs->ch->fd;
    p.id->context = rs;
    if (rdma_migrate_id(p.id, rs->ch)) e = errno ? errno : EINVAL;
  }
  if (!e) e = setup_connection(rs);
  if (!e) {
    take_peer_hdr(rs, &p.hdr, sizeof p.hdr);
    e = setup_sends(rs);
  }
  ConnHdr h;
  fill_hdr(rs, &h);
  rdma_conn_param cp = conn_param(&h);
  if (!e && rdma_accept(p.id, &cp)) e = errno ? errno : ECONNABORTED;
  if (e) {
    rdma_reject(p.id, nullptr, 0);
    destroy_failed_accept(rs);
    return e == EAGAIN ? ECONNABORTED : e;
  }
  rs->state = State::kConnected;
  *out = rs;
  return 0;
}

void disconnect(Rs* rs) {
  if (rs->state != State::kConnected || rs->disconnected) return;
  rs->disconnected = true;
  rdma_disconnect(rs->id);
}

}  // namespace simnic::rdmacm::rs
