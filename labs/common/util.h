/* util.h: the verbs boilerplate of labs 2-4, so this lab's file holds only what is new.
 * Two RC QPs, "A" and "B", on two devices (or twice the same device), in one process. */
#ifndef LAB_UTIL_H
#define LAB_UTIL_H

#include <infiniband/verbs.h>
#include <stdint.h>

struct side {
  const char *dev_name;
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  union ibv_gid gid;
  char *buf;            /* buf_size bytes, registered as mr */
  size_t buf_size;
  struct ibv_mr *mr;
  uint32_t sq_depth;     /* send queue slots */
  uint32_t max_inline;   /* bytes a WQE may carry inline (what ibv_create_qp granted) */
};

/* What RTR and RTS need besides the peer's address (IBA 11.2.4.2, table 92). */
struct conn_params {
  uint8_t timeout;        /* local ACK timeout: 4.096 us * 2^timeout */
  uint8_t retry_cnt;      /* resends after a timeout or a NAK-sequence error, 0..7 */
  uint8_t rnr_retry;      /* resends after an RNR NAK, 0..6, 7 = forever */
  uint8_t min_rnr_timer;  /* how long a peer should wait after OUR RNR NAK (code 0..31) */
};

#define BUF_SIZE 4096  /* side_open's buffer */

extern int g_gid_index;      /* -g: GID table index (0 on simnic; often 1 or 3 on RoCE NICs) */
extern enum ibv_mtu g_mtu;   /* -m: path MTU */

/* Opens the device and allocates PD, CQ, buffer, MR and an RC QP. Exits with a clear message
 * when there is no such device (e.g. no RDMA NIC and not run under `simnic run`). */
int side_open(struct side *s, const char *dev_name);
/* The same with a buffer of buf_size bytes and a send queue of sq_depth slots. */
int side_open_sized(struct side *s, const char *dev_name, size_t buf_size, uint32_t sq_depth);
int side_create_qp(struct side *s);          /* a fresh RC QP in RESET */
void side_close(struct side *s);

/* RESET -> INIT -> RTR -> RTS towards `peer`, as in lab 2. Returns 0 or the errno. */
int qp_connect(struct side *s, const struct side *peer, const struct conn_params *p);
/* Any state -> RESET (IBA 10.3.1: always allowed); the queues are emptied. */
int qp_reset(struct side *s);
/* Both QPs to RESET, then connected again: how an RC connection recovers from ERR. */
int reconnect_pair(struct side *a, struct side *b, const struct conn_params *p);

int post_send_op(struct side *s, enum ibv_wr_opcode op, uint64_t wr_id, uint32_t len,
                 uint64_t remote_addr, uint32_t rkey);
int post_recv_buf(struct side *s, uint64_t wr_id, uint32_t len);

/* Polls one completion, at most timeout_ms. 1: got one, 0: timed out. */
int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms);
const char *qp_state_str(enum ibv_qp_state s);
enum ibv_qp_state qp_state_of(struct ibv_qp *qp);

/* -a DEV -b DEV -g IDX -m MTU, plus the program's own options (getopt letters in extra_opts,
 * handled by extra(), which returns 0 when it knew the option). The rest of argv starts at the
 * returned index. */
int parse_common_args(int argc, char **argv, const char **dev_a, const char **dev_b, const char *usage,
                      const char *extra_opts, int (*extra)(int opt, const char *arg));

#endif
