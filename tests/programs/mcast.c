/* UD multicast through plain verbs (ibv_attach_mcast, an AH to a multicast GID, DestQP 0xFFFFFF),
 * for the integration test: one sender and several receivers, on any NICs, that meet through
 * files in SYNC_DIR. Every datagram's payload is checked byte by byte.
 *
 *   simnic-mcast recv DEVICE GROUP N M SYNC_DIR NAME
 *     Two UD QPs, "main" then "witness", both attached to GROUP (a dotted IPv4 group, used as the
 *     IPv4-mapped MGID ::ffff:GROUP). Waits until both have received the N datagrams of round 1,
 *     detaches main, and waits until the witness has the M datagrams of round 2: main must have
 *     received none of them (the NIC hands a datagram to its attached QPs in attach order, so
 *     main's completion would already be in the shared CQ).
 *   simnic-mcast send DEVICE GROUP N M SYNC_DIR RECEIVERS
 *     Waits for RECEIVERS "ready" files, sends round 1, waits for RECEIVERS "detached" files,
 *     sends round 2, waits for RECEIVERS "finished" files; its own QP, not attached, must have
 *     received nothing.
 * Prints one line per outcome and exits 0 when everything was as expected. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define QKEY 0x11111111u
#define SLOT 4096u /* bytes of buffer per datagram: 40 of GRH, then the payload */
#define MAX_MSGS 512

struct nic {
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_cq* cq;
  struct ibv_mr* mr;
  char* buf;
  size_t buf_len;
};

static int fail(const char* what, int err) {
  fprintf(stderr, "simnic-mcast: %s: %s\n", what, strerror(err));
  exit(1);
}

static uint32_t payload_len(uint32_t seq) { return 8 + (seq * 37u) % 1000u; }
static uint8_t payload_byte(uint32_t seq, uint32_t k) { return (uint8_t)(seq * 131u + k * 7u + 1u); }

static void fill_payload(char* p, uint32_t seq) {
  uint32_t be = htonl(seq);
  memcpy(p, &be, 4);
  for (uint32_t k = 4; k < payload_len(seq); ++k) p[k] = (char)payload_byte(seq, k);
}

/* The sequence number of a received datagram whose payload is what the sender wrote, else -1. */
static long check_payload(const char* p, uint32_t byte_len) {
  uint32_t be;
  memcpy(&be, p, 4);
  uint32_t seq = ntohl(be);
  if (seq >= MAX_MSGS || byte_len != 40 + payload_len(seq)) return -1;
  for (uint32_t k = 4; k < payload_len(seq); ++k)
    if ((uint8_t)p[k] != payload_byte(seq, k)) return -1;
  return seq;
}

static void open_nic(struct nic* n, const char* name, size_t slots) {
  int count = 0;
  struct ibv_device** list = ibv_get_device_list(&count);
  for (int i = 0; list && i < count && !n->ctx; ++i)
    if (strcmp(ibv_get_device_name(list[i]), name) == 0) n->ctx = ibv_open_device(list[i]);
  if (list) ibv_free_device_list(list);
  if (!n->ctx) fail(name, ENODEV);
  n->buf_len = slots * SLOT;
  n->buf = calloc(1, n->buf_len);
  n->pd = ibv_alloc_pd(n->ctx);
  n->cq = ibv_create_cq(n->ctx, (int)(2 * slots + 16), NULL, NULL, 0);
  if (!n->buf || !n->pd || !n->cq) fail("pd/cq", errno);
  n->mr = ibv_reg_mr(n->pd, n->buf, n->buf_len, IBV_ACCESS_LOCAL_WRITE);
  if (!n->mr) fail("ibv_reg_mr", errno);
}

static struct ibv_qp* ud_qp(struct nic* n, uint32_t depth) {
  struct ibv_qp_init_attr init = {0};
  init.send_cq = init.recv_cq = n->cq;
  init.qp_type = IBV_QPT_UD;
  init.cap.max_send_wr = init.cap.max_recv_wr = depth;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  struct ibv_qp* qp = ibv_create_qp(n->pd, &init);
  if (!qp) fail("ibv_create_qp", errno);
  struct ibv_qp_attr a = {0};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = QKEY;
  int e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
  a.qp_state = IBV_QPS_RTR;
  if (!e) e = ibv_modify_qp(qp, &a, IBV_QP_STATE);
  a.qp_state = IBV_QPS_RTS;
  if (!e) e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
  if (e) fail("ibv_modify_qp", e);
  return qp;
}

static void post_recv(struct nic* n, struct ibv_qp* qp, uint32_t slot) {
  struct ibv_sge sge = {(uintptr_t)(n->buf + (size_t)slot * SLOT), SLOT, n->mr->lkey};
  struct ibv_recv_wr wr = {0}, *bad;
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (ibv_post_recv(qp, &wr, &bad)) fail("ibv_post_recv", errno);
}

static union ibv_gid group_gid(const char* group) {
  union ibv_gid g = {0};
  struct in_addr a;
  if (inet_pton(AF_INET, group, &a) != 1) fail(group, EINVAL);
  g.raw[10] = g.raw[11] = 0xff;
  memcpy(&g.raw[12], &a, 4);
  return g;
}

static void touch(const char* dir, const char* what, const char* name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%s", dir, what, name);
  int fd = open(path, O_CREAT | O_WRONLY, 0600);
  if (fd < 0) fail(path, errno);
  close(fd);
}

/* Waits (the test bounds the whole run) until `count` files named "<what>.*" are in `dir`. */
static void await_files(const char* dir, const char* what, int count) {
  size_t len = strlen(what);
  for (;;) {
    int found = 0;
    DIR* d = opendir(dir);
    if (!d) fail(dir, errno);
    for (struct dirent* e; (e = readdir(d));)
      if (strncmp(e->d_name, what, len) == 0 && e->d_name[len] == '.') ++found;
    closedir(d);
    if (found >= count) return;
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

struct tally {
  struct ibv_qp* qp;
  uint32_t first_slot;
  int got;
  unsigned char seen[MAX_MSGS];
};

static void count_wc(struct nic* n, const struct ibv_wc* wc, struct tally* t, int ntally, const char* group_be) {
  if (wc->status != IBV_WC_SUCCESS) {
    fprintf(stderr, "simnic-mcast: completion %s\n", ibv_wc_status_str(wc->status));
    exit(1);
  }
  for (int i = 0; i < ntally; ++i) {
    if (wc->qp_num != t[i].qp->qp_num || wc->opcode != IBV_WC_RECV) continue;
    const char* slot = n->buf + (size_t)wc->wr_id * SLOT;
    long seq = check_payload(slot + 40, wc->byte_len);
    if (seq < 0 || t[i].seen[seq] || memcmp(slot + 36, group_be, 4) != 0) {
      fprintf(stderr, "simnic-mcast: QP 0x%x got a wrong or repeated datagram (seq %ld, %u bytes)\n", wc->qp_num, seq,
              wc->byte_len);
      exit(1);
    }
    t[i].seen[seq] = 1;
    ++t[i].got;
  }
}

static void poll_until(struct nic* n, struct tally* t, int ntally, int which, int want, const char* group_be) {
  struct ibv_wc wc[16];
  while (t[which].got < want) {
    int k = ibv_poll_cq(n->cq, 16, wc);
    if (k < 0) fail("ibv_poll_cq", EIO);
    for (int i = 0; i < k; ++i) count_wc(n, &wc[i], t, ntally, group_be);
  }
}

static int receiver(const char* dev, const char* group, int n1, int n2, const char* dir, const char* name) {
  struct nic n = {0};
  open_nic(&n, dev, 2 * (size_t)(n1 + n2));
  union ibv_gid g = group_gid(group);
  struct tally t[2] = {{ud_qp(&n, n1 + n2), 0, 0, {0}}, {ud_qp(&n, n1 + n2), (uint32_t)(n1 + n2), 0, {0}}};
  for (int q = 0; q < 2; ++q) {
    int e = ibv_attach_mcast(t[q].qp, &g, 0xc000);
    if (e) fail("ibv_attach_mcast", e);
    for (int i = 0; i < n1 + n2; ++i) post_recv(&n, t[q].qp, t[q].first_slot + (uint32_t)i);
  }
  touch(dir, "ready", name);
  poll_until(&n, t, 2, 0, n1, (const char*)&g.raw[12]);
  poll_until(&n, t, 2, 1, n1, (const char*)&g.raw[12]);
  printf("%s: main and witness each received all %d datagrams of round 1, every byte as sent\n", name, n1);
  int e = ibv_detach_mcast(t[0].qp, &g, 0xc000);
  if (e) fail("ibv_detach_mcast", e);
  e = ibv_detach_mcast(t[0].qp, &g, 0xc000);
  printf("%s: detach again: %s\n", name, e == EINVAL ? "EINVAL" : strerror(e));
  touch(dir, "detached", name);
  poll_until(&n, t, 2, 1, n1 + n2, (const char*)&g.raw[12]);
  touch(dir, "finished", name);
  printf("%s: witness received all %d datagrams of round 2; main, detached, received %d of them\n", name, n2,
         t[0].got - n1);
  e = ibv_destroy_qp(t[1].qp);
  printf("%s: destroy while attached: %s\n", name, e == EBUSY ? "EBUSY" : strerror(e));
  if (ibv_detach_mcast(t[1].qp, &g, 0xc000) || ibv_destroy_qp(t[1].qp) || ibv_destroy_qp(t[0].qp))
    fail("cleanup", errno);
  return t[0].got == n1 ? 0 : 1;
}

static int sender(const char* dev, const char* group, int n1, int n2, const char* dir, int receivers) {
  struct nic n = {0};
  open_nic(&n, dev, (size_t)(n1 + n2) + 8);
  struct ibv_qp* qp = ud_qp(&n, (uint32_t)(n1 + n2) + 8);
  for (uint32_t i = 0; i < 8; ++i) post_recv(&n, qp, (uint32_t)(n1 + n2) + i); /* must stay unused */
  struct ibv_ah_attr aa = {0};
  aa.is_global = 1;
  aa.dlid = 0xc000;
  aa.port_num = 1;
  aa.grh.dgid = group_gid(group);
  aa.grh.hop_limit = 1;
  struct ibv_ah* ah = ibv_create_ah(n.pd, &aa);
  if (!ah) fail("ibv_create_ah", errno);
  int sent = 0, done = 0;
  struct ibv_wc wc[16];
  for (int round = 0; round < 2; ++round) {
    await_files(dir, round ? "detached" : "ready", receivers);
    for (int end = sent + (round ? n2 : n1); sent < end; ++sent) {
      char* p = n.buf + (size_t)sent * SLOT;
      fill_payload(p, (uint32_t)sent);
      struct ibv_sge sge = {(uintptr_t)p, payload_len((uint32_t)sent), n.mr->lkey};
      struct ibv_send_wr wr = {0}, *bad;
      wr.wr_id = (uint64_t)sent;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_SEND;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.wr.ud.ah = ah;
      wr.wr.ud.remote_qpn = 0xffffff;
      wr.wr.ud.remote_qkey = QKEY;
      if (ibv_post_send(qp, &wr, &bad)) fail("ibv_post_send", errno);
    }
    while (done < sent) {
      int k = ibv_poll_cq(n.cq, 16, wc);
      if (k < 0) fail("ibv_poll_cq", EIO);
      for (int i = 0; i < k; ++i) {
        if (wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != IBV_WC_SEND) fail("send completion", EIO);
        ++done;
      }
    }
    printf("sender: round %d: %d datagrams sent to %s\n", round + 1, round ? n2 : n1, group);
  }
  await_files(dir, "finished", receivers);
  int k = ibv_poll_cq(n.cq, 16, wc);
  printf("sender: its own QP, not attached, received %d datagrams\n", k);
  return k == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc != 8 || (strcmp(argv[1], "recv") && strcmp(argv[1], "send"))) {
    fprintf(stderr, "usage: %s recv|send DEVICE GROUP N M SYNC_DIR NAME|RECEIVERS\n", argv[0]);
    return 2;
  }
  int n1 = atoi(argv[4]), n2 = atoi(argv[5]);
  if (n1 < 1 || n2 < 1 || n1 + n2 > MAX_MSGS) return 2;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argv[1][0] == 'r') return receiver(argv[2], argv[3], n1, n2, argv[6], argv[7]);
  return sender(argv[2], argv[3], n1, n2, argv[6], atoi(argv[7]));
}
