// simnic-cm-check: the rdma_cm outcomes a program must be able to rely on, one scenario per
// run. Prints each event it sees ("event NAME status N private 'TEXT'") and exits 0 when the
// scenario ended as the kernel's rdma_cm would end it, 1 otherwise.
//
//   server ADDR PORT accept|reject|disconnect|wait    (one connection)
//   server ADDR PORT accept-null       (rdma_accept(id, NULL) of the first request, then exits)
//   server ADDR PORT accept-from=IP   (rejects requests from other addresses, 10 ms each, as a
//                                      program with an allow list; accepts the first from IP)
//   client ADDR PORT SRC expect-established|expect-rejected|expect-unreachable|disconnect|wait|die
//   addrinfo DST PORT SRC              (rdma_getaddrinfo with no node and no service: the answer
//                                      is the hints' own addresses, as rdma-core's addrinfo.c)
// The server prints where rdma_bind_addr put it: "bound to DEVICE|no device, local IP:PORT"
// (a loopback address no device has binds to no device, like the wildcard, as in the kernel).
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

rdma_event_channel* g_ch;

// The next event, printed; exits on failure to get one.
rdma_cm_event* next_event() {
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(g_ch, &ev)) {
    std::perror("rdma_get_cm_event");
    std::exit(1);
  }
  const void* priv = ev->param.conn.private_data;
  std::string text = priv ? std::string(static_cast<const char*>(priv),
                                        strnlen(static_cast<const char*>(priv), ev->param.conn.private_data_len))
                          : "";
  std::printf("event %s status %d private '%s'\n", rdma_event_str(ev->event), ev->status, text.c_str());
  std::fflush(stdout);
  return ev;
}

rdma_cm_event_type expect(rdma_cm_event_type want) {
  rdma_cm_event* ev = next_event();
  rdma_cm_event_type got = ev->event;
  rdma_ack_cm_event(ev);
  if (got != want) {
    std::printf("expected %s\n", rdma_event_str(want));
    std::exit(1);
  }
  return got;
}

sockaddr_in addr_of(const char* ip, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

void make_qp(rdma_cm_id* id) {
  ibv_qp_init_attr attr{};
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  attr.qp_type = IBV_QPT_RC;
  if (rdma_create_qp(id, nullptr, &attr)) {
    std::perror("rdma_create_qp");
    std::exit(1);
  }
}

// The first CONNECT_REQUEST from `peer`; the others are rejected, each after 10 ms (a slow
// program: a flood of forged requests outpaces it). Exits on any other event.
rdma_cm_id* first_request_from(const std::string& peer) {
  int rejected = 0;
  for (;;) {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(g_ch, &ev)) {
      std::perror("rdma_get_cm_event");
      std::exit(1);
    }
    if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
      std::printf("event %s status %d\n", rdma_event_str(ev->event), ev->status);
      std::exit(1);
    }
    rdma_cm_id* id = ev->id;
    rdma_ack_cm_event(ev);
    char from[INET_ADDRSTRLEN] = "";
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(rdma_get_peer_addr(id))->sin_addr, from, sizeof from);
    if (peer == from) {
      std::printf("request from %s after rejecting %d others\n", from, rejected);
      std::fflush(stdout);
      return id;
    }
    ::usleep(10 * 1000);
    if (rdma_reject(id, nullptr, 0) || rdma_destroy_id(id)) {
      std::perror("rdma_reject");
      std::exit(1);
    }
    ++rejected;
  }
}

// ESTABLISHED for `id`; CONNECT_REQUESTs that come meanwhile are rejected. Exits on anything else.
void established_rejecting_others(rdma_cm_id* id) {
  for (;;) {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(g_ch, &ev)) std::exit(1);
    const rdma_cm_event_type type = ev->event;
    rdma_cm_id* other = ev->id;
    rdma_ack_cm_event(ev);
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST && other != id) {
      rdma_reject(other, nullptr, 0);
      rdma_destroy_id(other);
      continue;
    }
    std::printf("event %s\n", rdma_event_str(type));
    if (type != RDMA_CM_EVENT_ESTABLISHED || other != id) std::exit(1);
    return;
  }
}

int server(const char* ip, int port, const std::string& mode) {
  rdma_cm_id* listen = nullptr;
  rdma_create_id(g_ch, &listen, nullptr, RDMA_PS_TCP);
  sockaddr_in a = addr_of(ip, port);
  if (rdma_bind_addr(listen, reinterpret_cast<sockaddr*>(&a)) || rdma_listen(listen, 4)) {
    std::perror("bind/listen");
    return 1;
  }
  char local[INET_ADDRSTRLEN] = "";
  const auto* la = reinterpret_cast<const sockaddr_in*>(rdma_get_local_addr(listen));
  inet_ntop(AF_INET, &la->sin_addr, local, sizeof local);
  std::printf("bound to %s, local %s:%d\n", listen->verbs ? ibv_get_device_name(listen->verbs->device) : "no device",
              local, ntohs(rdma_get_src_port(listen)));
  std::printf("listening\n");
  std::fflush(stdout);
  rdma_cm_id* id = mode.rfind("accept-from=", 0) == 0 ? first_request_from(mode.substr(12)) : nullptr;
  if (!id) {
    rdma_cm_event* ev = next_event();
    if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) return 1;
    id = ev->id;
    rdma_ack_cm_event(ev);
  }
  if (mode == "reject") {
    const char why[] = "go away";
    return rdma_reject(id, why, sizeof why) ? 1 : 0;
  }
  make_qp(id);
  if (mode == "accept-null") {  // the request's own responder resources and initiator depth
    const int r = rdma_accept(id, nullptr);
    std::printf("rdma_accept: %s\n", r ? std::strerror(errno) : "ok");
    return r ? 1 : 0;
  }
  rdma_conn_param p{};
  const char hello[] = "welcome";
  p.private_data = hello;
  p.private_data_len = sizeof hello;
  if (rdma_accept(id, &p)) return 1;
  if (mode.rfind("accept-from=", 0) == 0) {  // other requests keep coming: turn them away
    established_rejecting_others(id);
    return 0;
  }
  expect(RDMA_CM_EVENT_ESTABLISHED);
  if (mode == "disconnect") {
    if (rdma_disconnect(id)) return 1;
  }
  if (mode == "accept" || mode.rfind("accept-from=", 0) == 0) return 0;
  expect(RDMA_CM_EVENT_DISCONNECTED);
  if (mode == "wait") rdma_disconnect(id);  // the DREP
  rdma_destroy_qp(id);
  rdma_destroy_id(id);
  rdma_destroy_id(listen);
  return 0;
}

int client(const char* ip, int port, const char* src, const std::string& mode) {
  rdma_cm_id* id = nullptr;
  rdma_create_id(g_ch, &id, nullptr, RDMA_PS_TCP);
  sockaddr_in s = addr_of(src, 0), d = addr_of(ip, port);
  if (rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&s), reinterpret_cast<sockaddr*>(&d), 2000)) return 1;
  expect(RDMA_CM_EVENT_ADDR_RESOLVED);
  if (rdma_resolve_route(id, 2000)) return 1;
  expect(RDMA_CM_EVENT_ROUTE_RESOLVED);
  make_qp(id);
  if (mode == "accept-null") {  // the request's own responder resources and initiator depth
    const int r = rdma_accept(id, nullptr);
    std::printf("rdma_accept: %s\n", r ? std::strerror(errno) : "ok");
    return r ? 1 : 0;
  }
  rdma_conn_param p{};
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  const char hi[] = "hello";
  p.private_data = hi;
  p.private_data_len = sizeof hi;
  if (rdma_connect(id, &p)) return 1;
  rdma_cm_event* ev = next_event();
  const rdma_cm_event_type got = ev->event;
  const int status = ev->status;
  const std::string priv = ev->param.conn.private_data ? static_cast<const char*>(ev->param.conn.private_data) : "";
  rdma_ack_cm_event(ev);
  if (mode == "expect-rejected") return got == RDMA_CM_EVENT_REJECTED ? 0 : 1;
  if (mode == "expect-unreachable") return got == RDMA_CM_EVENT_UNREACHABLE && status == -ETIMEDOUT ? 0 : 1;
  if (got != RDMA_CM_EVENT_ESTABLISHED || priv != "welcome") return 1;
  if (mode == "expect-established") return 0;
  if (mode == "die") _exit(0);  // no disconnect: the NIC must tell the peer
  if (mode == "disconnect" && rdma_disconnect(id)) return 1;
  expect(RDMA_CM_EVENT_DISCONNECTED);
  if (mode == "wait") rdma_disconnect(id);
  rdma_destroy_qp(id);
  rdma_destroy_id(id);
  return 0;
}

std::string text_of(const sockaddr* a) {
  if (!a || a->sa_family != AF_INET) return "none";
  const auto* in = reinterpret_cast<const sockaddr_in*>(a);
  char ip[INET_ADDRSTRLEN] = "";
  inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(in->sin_port));
}

// rdma_getaddrinfo(NULL, NULL, hints): the hints' addresses and fields come back as given;
// hints without addresses give an answer without addresses; no hints at all is EINVAL.
int addrinfo(const char* dst, int port, const char* src) {
  sockaddr_in d = addr_of(dst, port), s = addr_of(src, 0);
  rdma_addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_qp_type = IBV_QPT_RC;
  hints.ai_port_space = RDMA_PS_TCP;
  hints.ai_dst_addr = reinterpret_cast<sockaddr*>(&d);
  hints.ai_dst_len = sizeof d;
  hints.ai_src_addr = reinterpret_cast<sockaddr*>(&s);
  hints.ai_src_len = sizeof s;
  rdma_addrinfo* rai = nullptr;
  if (rdma_getaddrinfo(nullptr, nullptr, &hints, &rai)) {
    std::perror("rdma_getaddrinfo(NULL, NULL, hints)");
    return 1;
  }
  std::printf("dst %s src %s family %d qp_type %d port_space %d\n", text_of(rai->ai_dst_addr).c_str(),
              text_of(rai->ai_src_addr).c_str(), rai->ai_family, rai->ai_qp_type, rai->ai_port_space);
  const bool same = text_of(rai->ai_dst_addr) == text_of(hints.ai_dst_addr) &&
                    text_of(rai->ai_src_addr) == text_of(hints.ai_src_addr) && rai->ai_dst_len == sizeof d &&
                    rai->ai_src_len == sizeof s && rai->ai_family == AF_INET && rai->ai_qp_type == IBV_QPT_RC &&
                    rai->ai_port_space == RDMA_PS_TCP && !rai->ai_next;
  rdma_freeaddrinfo(rai);
  rdma_addrinfo bare{};
  bare.ai_port_space = RDMA_PS_TCP;
  rai = nullptr;
  const int bare_rc = rdma_getaddrinfo(nullptr, nullptr, &bare, &rai);
  std::printf("no addresses in the hints: %d, dst %s src %s\n", bare_rc, rai ? text_of(rai->ai_dst_addr).c_str() : "-",
              rai ? text_of(rai->ai_src_addr).c_str() : "-");
  const bool bare_ok = bare_rc == 0 && rai && !rai->ai_dst_addr && !rai->ai_src_addr;
  if (rai) rdma_freeaddrinfo(rai);
  rai = nullptr;
  errno = 0;
  const int none_rc = rdma_getaddrinfo(nullptr, nullptr, nullptr, &rai);
  const int none_errno = errno;
  std::printf("no hints: %d errno %s\n", none_rc, std::strerror(none_errno));
  return same && bare_ok && none_rc != 0 && none_errno == EINVAL ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s server ADDR PORT MODE | client ADDR PORT SRC MODE\n", argv[0]);
    return 2;
  }
  g_ch = rdma_create_event_channel();
  if (!g_ch) {
    std::perror("rdma_create_event_channel");
    return 1;
  }
  const std::string role = argv[1];
  if (role == "server") return server(argv[2], std::atoi(argv[3]), argv[4]);
  if (role == "addrinfo") return addrinfo(argv[2], std::atoi(argv[3]), argv[4]);
  if (argc < 6) return 2;
  return client(argv[2], std::atoi(argv[3]), argv[4], argv[5]);
}
