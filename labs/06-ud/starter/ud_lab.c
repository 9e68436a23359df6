/* Lab 6: UD datagrams and address handles -- a tiny service-discovery protocol.
 *
 * Three roles, each a process with one UD QP, and no TCP anywhere:
 *   registry  answers "where is service NAME?" with the service's QPN, GID and Q_Key;
 *   service   registers its name with the registry, then answers REQUESTs (upper-cases them);
 *   client    looks NAME up at the registry, makes an address handle from the answer and
 *             sends its REQUEST straight to the service.
 * Every answer goes back to where the question came from: an address handle made from the
 * receive completion (ibv_create_ah_from_wc), the sender's QPN from wc.src_qp, and the Q_Key
 * the question carried. The registry's own QPN and GID are the only thing known in advance:
 * it writes them to a bootstrap file (-f).
 *
 *   ud_lab registry [-d DEV] [-g GID_INDEX] [-f BOOT] [-c LOOKUPS]
 *   ud_lab service  [-d DEV] [-g GID_INDEX] [-f BOOT] [-n REQUESTS] NAME
 *   ud_lab client   [-d DEV] [-g GID_INDEX] [-f BOOT] NAME TEXT
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "labutil.h"
#include "ud_common.h"

/* ---- UD plumbing ----------------------------------------------------------------------- */

/* RESET -> INIT -> RTR -> RTS for a UD QP (IBA 11.2.4.2): INIT takes the P_Key index, the
 * port and the Q_Key this QP accepts; RTR needs nothing (no peer: every datagram names its
 * own destination); RTS needs only the send PSN. */
static void ud_ready(struct ud_node *n, uint32_t qkey) {
  /* TODO(lab 6, step 1): walk the UD QP through RESET -> INIT -> RTR -> RTS.
   *   INIT: IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY (qkey: the Q_Key this
   *         QP accepts; datagrams carrying another one are dropped by the NIC)
   *   RTR:  IBV_QP_STATE only (UD has no peer)
   *   RTS:  IBV_QP_STATE | IBV_QP_SQ_PSN
   * Then post every receive slot: for (i = 0; i < SLOTS; ++i) post_slot(n, i). */
  (void)n;
  (void)qkey;
  lab_die("TODO(lab 6, step 1): ud_ready() does not bring the UD QP to RTS yet");
}

/* An address handle for the port with GID `gid`: on RoCE the GID is the address (it holds the
 * IPv4 address), so the AH is "global" and names it in the GRH. */
static struct ibv_ah *ah_to(struct ud_node *n, const uint8_t gid[16]) {
  /* TODO(lab 6, step 2): build a struct ibv_ah_attr for the GID `gid` (is_global = 1,
   * grh.dgid = gid, grh.sgid_index = n->gid_index, grh.hop_limit = 64, port_num = 1) and
   * return ibv_create_ah(n->pd, &attr). */
  (void)n;
  (void)gid;
  lab_die("TODO(lab 6, step 2): ah_to() makes no address handle yet");
  return NULL;
}

/* The address handle back to whoever sent the datagram in receive slot `slot`. */
static struct ibv_ah *ah_back(struct ud_node *n, struct ibv_wc *wc) {
  /* TODO(lab 6, step 4): the address handle back to the sender of the datagram this receive
   * completion describes: ibv_create_ah_from_wc(n->pd, wc, <the GRH at the start of the
   * slot: slot_grh(n, (int)wc->wr_id)>, 1). */
  (void)n;
  (void)wc;
  lab_die("TODO(lab 6, step 4): ah_back() makes no address handle yet");
  return NULL;
}

/* Sends n->send_msg as one datagram to QP `qpn` behind `ah`, with Q_Key `qkey`. */
static void send_to(struct ud_node *n, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey) {
  struct ibv_sge sge = {.addr = (uintptr_t)&n->send_msg, .length = sizeof n->send_msg, .lkey = n->send_mr->lkey};
  struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_SIGNALED}, *bad = NULL;
  /* TODO(lab 6, step 3): a UD work request names its destination itself: set wr.wr.ud.ah,
   * wr.wr.ud.remote_qpn and wr.wr.ud.remote_qkey. */
  (void)ah;
  (void)qpn;
  (void)qkey;
  if (ibv_post_send(n->qp, &wr, &bad)) lab_die("ibv_post_send(UD): %s", strerror(errno));
  struct ibv_wc wc;
  if (!node_wait(n->send_cq, &wc, 5000)) lab_die("no send completion within 5 s");
  if (wc.status != IBV_WC_SUCCESS) lab_die("send failed: %s", ibv_wc_status_str(wc.status));
}

/* Waits for the next datagram; returns its slot's message (*wc tells who sent it), NULL on
 * timeout. The caller reposts the slot once done with it. */
static struct msg *receive(struct ud_node *n, struct ibv_wc *wc, int timeout_ms) {
  if (!node_wait(n->recv_cq, wc, timeout_ms)) return NULL;
  if (wc->status != IBV_WC_SUCCESS) lab_die("receive failed: %s", ibv_wc_status_str(wc->status));
  return slot_msg(n, (int)wc->wr_id);
}

/* ---- registry ---------------------------------------------------------------------------- */

struct entry {
  char name[32];
  uint32_t qpn, qkey;
  uint8_t gid[16];
};

static void answer(struct ud_node *n, struct ibv_wc *wc, uint32_t reply_qkey) {
  struct ibv_ah *ah = ah_back(n, wc);
  send_to(n, ah, wc->src_qp, reply_qkey);
  ibv_destroy_ah(ah);
}

static int registry(struct ud_node *n, const char *boot, int lookups) {
  struct entry table[16];
  int entries = 0, answered = 0;
  ud_ready(n, REGISTRY_QKEY);
  if (bootstrap_write(boot, n->qp->qp_num, &n->gid)) lab_die("cannot write %s", boot);
  printf("registry: QPN 0x%x, Q_Key 0x%x, bootstrap file %s\n", n->qp->qp_num, REGISTRY_QKEY, boot);
  fflush(stdout);
  while (lookups == 0 || answered < lookups) {
    struct ibv_wc wc;
    struct msg *m = receive(n, &wc, 30000);
    if (!m) lab_die("registry: nothing received for 30 s");
    struct msg *r = &n->send_msg;
    memset(r, 0, sizeof *r);
    if (m->type == MSG_REGISTER && entries < 16) {
      struct entry *e = &table[entries++];
      snprintf(e->name, sizeof e->name, "%s", m->name);
      e->qpn = wc.src_qp;  /* the QPN is in the datagram's DETH: no need to trust the message */
      e->qkey = m->qkey;
      memcpy(e->gid, m->gid, 16);
      printf("registry: %s is QPN 0x%x (Q_Key 0x%x)\n", e->name, e->qpn, e->qkey);
      r->type = MSG_REGISTERED;
    } else if (m->type == MSG_LOOKUP) {
      r->type = MSG_NOT_FOUND;
      snprintf(r->name, sizeof r->name, "%s", m->name);
      for (int i = 0; i < entries; ++i)
        if (strcmp(table[i].name, m->name) == 0) {
          r->type = MSG_FOUND;
          r->qpn = table[i].qpn;
          r->qkey = table[i].qkey;
          memcpy(r->gid, table[i].gid, 16);
          ++answered;
        }
      printf("registry: lookup %s from QPN 0x%x: %s\n", m->name, wc.src_qp, r->type == MSG_FOUND ? "found" : "not found");
    }
    uint32_t reply_qkey = m->qkey;
    post_slot(n, (int)wc.wr_id);
    if (r->type) answer(n, &wc, reply_qkey);
    fflush(stdout);
  }
  return 0;
}

/* ---- service ----------------------------------------------------------------------------- */

static int service(struct ud_node *n, const char *boot, const char *name, int requests) {
  uint32_t reg_qpn;
  union ibv_gid reg_gid;
  ud_ready(n, SERVICE_QKEY);
  if (bootstrap_read(boot, &reg_qpn, &reg_gid, 10000)) lab_die("no registry bootstrap file %s", boot);
  struct ibv_ah *reg = ah_to(n, reg_gid.raw);
  struct msg *r = &n->send_msg;
  memset(r, 0, sizeof *r);
  r->type = MSG_REGISTER;
  r->qpn = n->qp->qp_num;
  r->qkey = SERVICE_QKEY;
  memcpy(r->gid, n->gid.raw, 16);
  snprintf(r->name, sizeof r->name, "%s", name);
  send_to(n, reg, reg_qpn, REGISTRY_QKEY);
  struct ibv_wc wc;
  struct msg *m = receive(n, &wc, 10000);
  if (!m || m->type != MSG_REGISTERED) lab_die("service: the registry did not confirm");
  post_slot(n, (int)wc.wr_id);
  printf("service %s: registered, QPN 0x%x\n", name, n->qp->qp_num);
  fflush(stdout);
  for (int done = 0; done < requests; ++done) {
    m = receive(n, &wc, 20000);
    if (!m) lab_die("service: no request for 20 s");
    if (m->type != MSG_REQUEST) continue;
    memset(r, 0, sizeof *r);
    r->type = MSG_REPLY;
    for (size_t i = 0; i + 1 < sizeof r->text && m->text[i]; ++i) r->text[i] = (char)toupper((unsigned char)m->text[i]);
    printf("service %s: request \"%s\" from QPN 0x%x\n", name, m->text, wc.src_qp);
    uint32_t reply_qkey = m->qkey;
    post_slot(n, (int)wc.wr_id);
    /* The reply goes back where the request came from: the sender's GID from the GRH, its
     * QPN from the DETH (wc.src_qp), and the Q_Key it asked for. */
    struct ibv_ah *back = ah_back(n, &wc);
    send_to(n, back, wc.src_qp, reply_qkey);
    ibv_destroy_ah(back);
    fflush(stdout);
  }
  ibv_destroy_ah(reg);
  return 0;
}

/* ---- client ------------------------------------------------------------------------------ */

/* Asks the registry where `name` is, retrying a few times while the service starts up. */
static int lookup(struct ud_node *n, struct ibv_ah *reg, uint32_t reg_qpn, const char *name, struct msg *found) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    struct msg *q = &n->send_msg;
    memset(q, 0, sizeof *q);
    q->type = MSG_LOOKUP;
    q->qkey = CLIENT_QKEY;
    snprintf(q->name, sizeof q->name, "%s", name);
    send_to(n, reg, reg_qpn, REGISTRY_QKEY);
    struct ibv_wc wc;
    struct msg *m = receive(n, &wc, 5000);
    if (!m) lab_die("client: no answer from the registry within 5 s");
    *found = *m;
    post_slot(n, (int)wc.wr_id);
    if (found->type == MSG_FOUND) return 0;
    usleep(100 * 1000);
  }
  return -1;
}

static int client(struct ud_node *n, const char *boot, const char *name, const char *text) {
  uint32_t reg_qpn;
  union ibv_gid reg_gid;
  ud_ready(n, CLIENT_QKEY);
  if (bootstrap_read(boot, &reg_qpn, &reg_gid, 10000)) lab_die("no registry bootstrap file %s", boot);
  struct ibv_ah *reg = ah_to(n, reg_gid.raw);
  struct msg found;
  if (lookup(n, reg, reg_qpn, name, &found)) lab_die("client: the registry does not know %s", name);
  char g[40];
  lab_gid_str((const union ibv_gid *)found.gid, g);
  printf("client: %s is QPN 0x%x at GID %s, Q_Key 0x%x\n", name, found.qpn, g, found.qkey);
  struct ibv_ah *svc = NULL;
  /* TODO(lab 6, step 5): talk to the service directly: make an AH from the answer's GID
   * (ah_to), fill n->send_msg as a MSG_REQUEST (text, and qkey = CLIENT_QKEY: where the
   * reply should go), and send_to() the service's QPN with the service's Q_Key, both taken
   * from the answer `found`. */
  (void)text;
  lab_die("TODO(lab 6, step 5): the client does not send its request yet");
  struct ibv_wc wc;
  struct msg *m = receive(n, &wc, 5000);
  if (!m || m->type != MSG_REPLY) lab_die("client: no reply from %s within 5 s", name);
  printf("client: reply from QPN 0x%x: %s\n", wc.src_qp, m->text);
  ibv_destroy_ah(svc);
  ibv_destroy_ah(reg);
  return 0;
}

/* ---- main -------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
  const char *dev = "simnic0", *boot = "registry.addr";
  int gid_index = 0, count = 0, requests = 1, c;
  if (argc < 2) lab_die("usage: %s registry|service|client [-d DEV] [-g GID_INDEX] [-f BOOT] [-c N] [-n N] [NAME [TEXT]]", argv[0]);
  const char *role = argv[1];
  optind = 2;
  while ((c = getopt(argc, argv, "d:g:f:c:n:")) != -1) {
    switch (c) {
      case 'd': dev = optarg; break;
      case 'g': gid_index = atoi(optarg); break;
      case 'f': boot = optarg; break;
      case 'c': count = atoi(optarg); break;
      case 'n': requests = atoi(optarg); break;
      default: return 2;
    }
  }
  struct ud_node n;
  node_open(&n, dev, gid_index);
  int rc = 2;
  if (strcmp(role, "registry") == 0) rc = registry(&n, boot, count);
  else if (strcmp(role, "service") == 0 && optind < argc) rc = service(&n, boot, argv[optind], requests);
  else if (strcmp(role, "client") == 0 && optind + 1 < argc) rc = client(&n, boot, argv[optind], argv[optind + 1]);
  else fprintf(stderr, "unknown role or missing NAME/TEXT\n");
  node_close(&n);
  return rc;
}
