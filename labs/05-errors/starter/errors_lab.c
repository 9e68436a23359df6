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
  /* TODO(lab 5, step 1): post an RDMA WRITE of 64 bytes from A to b->buf with an rkey B never
   * registered (e.g. b->mr->rkey ^ 0x5a5a00), wr_id 1, with post_send_op(); then
   * return expect_wc(a, "bad_rkey", <the status you expect>). */
  (void)a;
  (void)b;
  (void)expect_wc;  /* (only so that the starter compiles without a warning) */
  return -1;
}

/* 2. INIT -> RTR without IBV_QP_DEST_QPN: the verbs layer refuses the transition with EINVAL
 * (IBA 11.2.4.2 lists the attributes each transition requires) and the QP stays in INIT. */
static int scenario_missing_attr(struct side *a, struct side *b) {
  /* TODO(lab 5, step 2): move A RESET -> INIT (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
   * IBV_QP_ACCESS_FLAGS), then try INIT -> RTR with every attribute lab 2 used EXCEPT
   * IBV_QP_DEST_QPN. Print what ibv_modify_qp returned and the QP's state (qp_state_of), and
   * return 0 only if it returned EINVAL. */
  (void)a;
  (void)b;
  return -1;
}

/* 3. A SEND when B has no receive posted: B answers RNR NAK (receiver not ready). With
 * rnr_retry = 0 A does not try again: the first RNR NAK fails the SEND. */
static int scenario_rnr(struct side *a, struct side *b) {
  /* TODO(lab 5, step 3): connect B with k_normal and A with a copy of k_normal whose rnr_retry
   * is 0 (qp_connect), post a 64-byte SEND from A (wr_id 3) while B has NO receive posted, and
   * return expect_wc(a, "rnr", <the status you expect>). */
  (void)a;
  (void)b;
  return -1;
}

/* 4. A dead peer: B's QP is destroyed, so nothing ever acknowledges A's SEND. A resends after
 * each ACK timeout (4.096 us * 2^8 = 1 ms) and gives up after retry_cnt = 1 retry. */
static int scenario_retry(struct side *a, struct side *b) {
  /* TODO(lab 5, step 4): connect B with k_normal and A with timeout 8 and retry_cnt 1, then
   * kill the peer: ibv_destroy_qp(b->qp) and set b->qp = NULL. Post a SEND from A (wr_id 4),
   * expect_wc(a, "retry", <the status you expect>), and give B a new QP with side_create_qp(b)
   * (the next scenarios need one). */
  (void)a;
  (void)b;
  return -1;
}

/* 5. Flush: B has receives posted and is moved to ERR; every outstanding receive completes
 * with IBV_WC_WR_FLUSH_ERR. A send posted on a QP in ERR is flushed the same way. */
static int scenario_flush(struct side *a, struct side *b) {
  /* TODO(lab 5, step 5): post 3 receives on B (post_recv_buf, wr_ids 50..52), move B to
   * IBV_QPS_ERR with ibv_modify_qp, and expect 3 completions on B with the status you expect.
   * Then post a SEND on B (wr_id 60): it must complete with the same status. */
  (void)a;
  (void)b;
  return -1;
}

/* 6. Recovery: the QPs are as the flush left them (B in ERR). From ERR the only way back is
 * RESET -> INIT -> RTR -> RTS, on both sides (IBA 10.3.1). Then a SEND moves data again and
 * the bytes are compared. */
static int scenario_recover(struct side *a, struct side *b) {
  /* TODO(lab 5, step 6): bring both QPs back with reconnect_pair(a, b, &k_normal) (read it in
   * util.c: RESET, then INIT -> RTR -> RTS), post a receive on B and SEND a string from A
   * (copy it into a->buf first), expect SUCCESS on both, and compare the bytes B received. */
  (void)a;
  (void)b;
  return -1;
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
