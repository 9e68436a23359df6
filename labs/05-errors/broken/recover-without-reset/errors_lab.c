/* Lab 5: errors and the QP state machine.
 *
 * Two RC QPs, A (on DEV_A) and B (on DEV_B), in one process. Each scenario provokes one error
 * on purpose, prints the completion status (or errno) it got, and the connection is then
 * recovered the only way RC allows: both QPs back to RESET, then INIT -> RTR -> RTS again.
 *
 *   errors_lab [-a DEV_A] [-b DEV_B] [-g GID_INDEX] [-m MTU] [SCENARIO...]
 *   SCENARIO: bad_rkey missing_attr rnr retry flush recover (default: all, in this order)
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

/* Generous defaults: a 4 ms ACK timeout, 7 retries, RNR NAKs retried forever. */
static const struct conn_params k_normal = {.timeout = 10, .retry_cnt = 7, .rnr_retry = 7, .min_rnr_timer = 1};

/* Waits for one completion on `s` and checks it has the status the scenario expects. */
static int expect_wc(struct side *s, const char *scenario, enum ibv_wc_status want) {
  struct ibv_wc wc;
  int got = wait_wc(s->cq, &wc, 5000);
  if (got != 1) {
    printf("%s: no completion within 5 s (want %s)\n", scenario, ibv_wc_status_str(want));
    return 1;
  }
  printf("%s: wr_id %llu completed with %s (status %d); QP %s\n", scenario, (unsigned long long)wc.wr_id,
         ibv_wc_status_str(wc.status), wc.status, qp_state_str(qp_state_of(s->qp)));
  return wc.status == want ? 0 : 1;
}

/* 1. An RDMA WRITE naming an rkey B never handed out: B's responder answers with a NAK
 * "remote access error" (IBA 9.7.5.2.4) and both QPs go to ERR. */
static int scenario_bad_rkey(struct side *a, struct side *b) {
  uint32_t wrong_rkey = b->mr->rkey ^ 0x5a5a00;
  if (post_send_op(a, IBV_WR_RDMA_WRITE, 1, 64, (uintptr_t)b->buf, wrong_rkey)) return 1;
  return expect_wc(a, "bad_rkey", IBV_WC_REM_ACCESS_ERR);
}

/* 2. INIT -> RTR without IBV_QP_DEST_QPN: the verbs layer refuses the transition with EINVAL
 * (IBA 11.2.4.2 lists the attributes each transition requires) and the QP stays in INIT. */
static int scenario_missing_attr(struct side *a, struct side *b) {
  struct ibv_qp_attr init = {.qp_state = IBV_QPS_INIT, .port_num = 1,
                             .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
  if (ibv_modify_qp(a->qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return 1;
  struct ibv_qp_attr rtr = {.qp_state = IBV_QPS_RTR, .path_mtu = g_mtu, .rq_psn = 0,
                            .max_dest_rd_atomic = 1, .min_rnr_timer = 1};
  rtr.ah_attr.is_global = 1;
  rtr.ah_attr.grh.dgid = b->gid;
  rtr.ah_attr.grh.sgid_index = g_gid_index;
  rtr.ah_attr.grh.hop_limit = 64;
  rtr.ah_attr.port_num = 1;
  int rc = ibv_modify_qp(a->qp, &rtr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | /* no IBV_QP_DEST_QPN */
                                          IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  printf("missing_attr: INIT->RTR without IBV_QP_DEST_QPN returned %d (%s); QP %s\n", rc,
         rc ? strerror(rc) : "accepted!", qp_state_str(qp_state_of(a->qp)));
  return rc == EINVAL ? 0 : 1;
}

/* 3. A SEND when B has no receive posted: B answers RNR NAK (receiver not ready). With
 * rnr_retry = 0 A does not try again: the first RNR NAK fails the SEND. */
static int scenario_rnr(struct side *a, struct side *b) {
  struct conn_params impatient = k_normal;
  impatient.rnr_retry = 0;
  if (qp_connect(b, a, &k_normal) || qp_connect(a, b, &impatient)) return 1;
  if (post_send_op(a, IBV_WR_SEND, 3, 64, 0, 0)) return 1;
  return expect_wc(a, "rnr", IBV_WC_RNR_RETRY_EXC_ERR);
}

/* 4. A dead peer: B's QP is destroyed, so nothing ever acknowledges A's SEND. A resends after
 * each ACK timeout (4.096 us * 2^8 = 1 ms) and gives up after retry_cnt = 1 retry. */
static int scenario_retry(struct side *a, struct side *b) {
  struct conn_params short_fuse = k_normal;
  short_fuse.timeout = 8;
  short_fuse.retry_cnt = 1;
  if (qp_connect(b, a, &k_normal) || qp_connect(a, b, &short_fuse)) return 1;
  ibv_destroy_qp(b->qp);  /* the peer dies */
  b->qp = NULL;
  if (post_send_op(a, IBV_WR_SEND, 4, 64, 0, 0)) return 1;
  int rc = expect_wc(a, "retry", IBV_WC_RETRY_EXC_ERR);
  return rc || side_create_qp(b);  /* the peer restarts with a new QP */
}

/* 5. Flush: B has receives posted and is moved to ERR; every outstanding receive completes
 * with IBV_WC_WR_FLUSH_ERR. A send posted on a QP in ERR is flushed the same way. */
static int scenario_flush(struct side *a, struct side *b) {
  (void)a;
  for (uint64_t i = 0; i < 3; ++i)
    if (post_recv_buf(b, 50 + i, 64)) return 1;
  struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
  if (ibv_modify_qp(b->qp, &err, IBV_QP_STATE)) return 1;
  int rc = 0;
  for (int i = 0; i < 3; ++i) rc |= expect_wc(b, "flush (receive)", IBV_WC_WR_FLUSH_ERR);
  if (post_send_op(b, IBV_WR_SEND, 60, 64, 0, 0)) return 1;
  return rc | expect_wc(b, "flush (send)", IBV_WC_WR_FLUSH_ERR);
}

/* 6. Recovery: the QPs are as the flush left them (B in ERR). From ERR the only way back is
 * RESET -> INIT -> RTR -> RTS, on both sides (IBA 10.3.1). Then a SEND moves data again and
 * the bytes are compared. */
static int scenario_recover(struct side *a, struct side *b) {
  /* Mistake: straight back to INIT/RTR/RTS, without going through RESET first. */
  if (qp_connect(a, b, &k_normal) || qp_connect(b, a, &k_normal)) return 1;
  const char *msg = "back in business after ERR -> RESET -> INIT -> RTR -> RTS";
  memset(b->buf, 0, BUF_SIZE);
  strcpy(a->buf, msg);
  if (post_recv_buf(b, 70, BUF_SIZE) || post_send_op(a, IBV_WR_SEND, 71, (uint32_t)strlen(msg) + 1, 0, 0))
    return 1;
  int rc = expect_wc(b, "recover (receive)", IBV_WC_SUCCESS) | expect_wc(a, "recover (send)", IBV_WC_SUCCESS);
  if (strcmp(b->buf, msg) != 0) rc = 1;
  printf("recover: B received \"%s\"\n", b->buf);
  return rc;
}

enum { CONNECT, RESET, KEEP };

struct scenario {
  const char *name;
  int (*run)(struct side *, struct side *);
  int before;  /* what to do first: CONNECT both QPs, RESET both, or KEEP them as they are */
};

static const struct scenario k_scenarios[] = {
    {"bad_rkey", scenario_bad_rkey, CONNECT}, {"missing_attr", scenario_missing_attr, RESET},
    {"rnr", scenario_rnr, RESET},             {"retry", scenario_retry, RESET},
    {"flush", scenario_flush, CONNECT},       {"recover", scenario_recover, KEEP},
};
#define N_SCENARIOS (int)(sizeof k_scenarios / sizeof *k_scenarios)

static int run_scenario(const struct scenario *sc, struct side *a, struct side *b) {
  if (sc->before == CONNECT && reconnect_pair(a, b, &k_normal)) return 1;
  if (sc->before == RESET && (qp_reset(a) || qp_reset(b))) return 1;
  int rc = sc->run(a, b);  /* 0 ok, 1 failed, -1 not written yet */
  printf("scenario %s: %s\n", sc->name, rc < 0 ? "TODO" : rc ? "FAILED" : "ok");
  fflush(stdout);
  return rc;
}

int main(int argc, char **argv) {
  const char *dev_a = "simnic0", *dev_b = "simnic1";
  int first = parse_common_args(argc, argv, &dev_a, &dev_b, "[bad_rkey|missing_attr|rnr|retry|flush|recover]...",
                                NULL, NULL);
  struct side a, b;
  if (side_open(&a, dev_a) || side_open(&b, dev_b)) return 1;
  int failed = 0;
  for (int i = 0; i < N_SCENARIOS; ++i) {
    int wanted = first >= argc;
    for (int j = first; j < argc; ++j) wanted |= strcmp(argv[j], k_scenarios[i].name) == 0;
    if (wanted) failed += run_scenario(&k_scenarios[i], &a, &b) != 0;
  }
  side_close(&a);
  side_close(&b);
  printf("%d scenario(s) failed\n", failed);
  return failed ? 1 : 0;
}
