/* Lab 7: performance engineering.
 *
 * A streams RDMA WRITEs into B's buffer and times them. Four variants of the same loop show
 * what each trick saves, then two sweeps measure message size and queue depth:
 *
 *   baseline   one ibv_post_send per WR, every WR signalled (one CQE each)
 *   inline     + IBV_SEND_INLINE: the payload travels inside the WQE, no DMA read of it
 *   selective  + only the last WR of each window signalled (one CQE per window)
 *   batched    + the window's WRs linked in one list: one ibv_post_send, one doorbell
 *
 * Every variant runs on its own pair of device contexts so the NIC's trace tells them apart.
 * Results go to a CSV file (-o, default results.csv); plot.py draws them.
 *
 *   perf_lab [-a DEV_A] [-b DEV_B] [-g GID_INDEX] [-m MTU] [-o results.csv] [-n MESSAGES]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

#define MAX_DEPTH 64
#define MAX_SIZE (64 * 1024)

struct variant {
  const char *name;
  int use_inline;  /* IBV_SEND_INLINE when the message fits in max_inline */
  int selective;   /* signal only the last WR of a window */
  int batched;     /* post the whole window with one ibv_post_send */
};

static const struct variant k_variants[] = {
    {"baseline", 0, 0, 0}, {"inline", 1, 0, 0}, {"selective", 1, 1, 0}, {"batched", 1, 1, 1}};
static const struct conn_params k_params = {.timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .min_rnr_timer = 1};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static long g_post_calls;  /* ibv_post_send calls so far: each one rings the doorbell once */

static int post(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  ++g_post_calls;
  return ibv_post_send(qp, wr, bad);
}

/* Fills one WR of a window: an RDMA WRITE of `size` bytes from A's buffer to B's. */
static void fill_wr(struct ibv_send_wr *wr, struct ibv_sge *sge, const struct side *a, const struct side *b,
                    const struct variant *v, uint32_t size, uint64_t wr_id, int last) {
  *sge = (struct ibv_sge){.addr = (uintptr_t)a->buf, .length = size, .lkey = a->mr->lkey};
  memset(wr, 0, sizeof *wr);
  wr->wr_id = wr_id;
  wr->sg_list = sge;
  wr->num_sge = 1;
  wr->opcode = IBV_WR_RDMA_WRITE;
  wr->wr.rdma.remote_addr = (uintptr_t)b->buf;
  wr->wr.rdma.rkey = b->mr->rkey;
  wr->send_flags = IBV_SEND_SIGNALED;
  /* TODO(lab 7, step 2): inline. When v->use_inline is set and the message fits
   * (size <= a->max_inline), add IBV_SEND_INLINE to send_flags. */
  /* TODO(lab 7, step 3): selective signalling. When v->selective is set, only the window's
   * last WR (`last`) may carry IBV_SEND_SIGNALED. Why is one CQE per window enough on RC? */
  (void)v;
  (void)last;
}

/* Posts one window of `depth` WRITEs, the way the variant says. Returns how many of them are
 * signalled (the CQEs to wait for), or -1. */
static int post_window(struct side *a, const struct side *b, const struct variant *v, uint32_t size, int depth,
                       uint64_t *next_id) {
  struct ibv_send_wr wrs[MAX_DEPTH], *bad = NULL;
  struct ibv_sge sges[MAX_DEPTH];
  int signalled = 0;
  for (int i = 0; i < depth; ++i) {
    fill_wr(&wrs[i], &sges[i], a, b, v, size, (*next_id)++, i == depth - 1);
    signalled += (wrs[i].send_flags & IBV_SEND_SIGNALED) != 0;
  }
  /* TODO(lab 7, step 4): batching. When v->batched is set, link the WRs into one list
   * (wrs[i - 1].next = &wrs[i]) and post the whole window with a single ibv_post_send. */
  for (int i = 0; i < depth; ++i)
    if (post(a->qp, &wrs[i], &bad)) return -1;
  return signalled;
}

/* Sends `count` messages in windows of `depth`; returns the seconds it took, or -1. */
static double run_point(struct side *a, const struct side *b, const struct variant *v, uint32_t size, int depth,
                        int count) {
  uint64_t next_id = 0;
  double t0 = now_s();
  for (int sent = 0; sent < count; sent += depth) {
    int expected = post_window(a, b, v, size, depth, &next_id);
    if (expected < 0) {
      fprintf(stderr, "ibv_post_send failed (%s, size %u, depth %d)\n", v->name, size, depth);
      return -1;
    }
    for (int i = 0; i < expected; ++i) {
      struct ibv_wc wc;
      if (wait_wc(a->cq, &wc, 10000) != 1 || wc.status != IBV_WC_SUCCESS) {
        fprintf(stderr, "%s: completion missing or failed\n", v->name);
        return -1;
      }
    }
  }
  return now_s() - t0;
}

static int open_pair(struct side *a, struct side *b, const char *dev_a, const char *dev_b) {
  if (side_open_sized(a, dev_a, MAX_SIZE, MAX_DEPTH) || side_open_sized(b, dev_b, MAX_SIZE, MAX_DEPTH)) return -1;
  return qp_connect(a, b, &k_params) || qp_connect(b, a, &k_params);
}

/* One CSV row, and the same on stdout, with the QPN (which the grader looks up in the trace)
 * and the ibv_post_send calls made since the previous row. */
static void record(FILE *csv, const char *experiment, const struct side *a, uint32_t size, int depth, int count,
                   double secs) {
  static long calls_before = 0;
  double rate = count / secs, mbps = rate * size / 1e6;
  fprintf(csv, "%s,%u,%d,%d,%.6f,%.1f,%.2f\n", experiment, size, depth, count, secs, rate, mbps);
  printf("experiment %-10s qpn 0x%x size %6u depth %2d messages %4d posts %4ld  %8.4f s  %9.0f msg/s  %8.2f MB/s\n",
         experiment, a->qp->qp_num, size, depth, count, g_post_calls - calls_before, secs, rate, mbps);
  calls_before = g_post_calls;
  fflush(stdout);
}

/* Enough messages to measure, few enough that a sweep point stays short on simnic. */
static int messages_for(uint32_t size, int n) {
  int budget = (int)((4u << 20) / size);
  int count = budget < n ? budget : n;
  return count < 64 ? 64 : count;
}

static const char *g_out = "results.csv";
static int g_messages = 512;

static int own_option(int opt, const char *arg) {
  if (opt == 'o') g_out = arg;
  else if (opt == 'n') g_messages = atoi(arg) < 64 ? 64 : atoi(arg);
  else return -1;
  return 0;
}

int main(int argc, char **argv) {
  const char *dev_a = "simnic0", *dev_b = "simnic1";
  parse_common_args(argc, argv, &dev_a, &dev_b, "[-o CSV] [-n MESSAGES]", "o:n:", own_option);
  const char *out = g_out;
  int n = g_messages;
  FILE *csv = fopen(out, "w");
  if (!csv) {
    perror(out);
    return 1;
  }
  fprintf(csv, "experiment,msg_size,queue_depth,messages,seconds,msgs_per_sec,mbytes_per_sec\n");
  struct side a[5], b[5];
  int nv = (int)(sizeof k_variants / sizeof *k_variants);

  /* 1-4: the four variants, small messages (where per-message costs dominate), depth 16. */
  for (int i = 0; i < nv; ++i) {
    if (open_pair(&a[i], &b[i], dev_a, dev_b)) return 1;
    double s = run_point(&a[i], &b[i], &k_variants[i], 64, 16, n);
    if (s < 0) return 1;
    record(csv, k_variants[i].name, &a[i], 64, 16, n, s);
  }
  /* 5: message-size sweep at depth 16, then 6: queue-depth sweep at 4 KB, best variant. */
  const struct variant *best = &k_variants[nv - 1];
  if (open_pair(&a[4], &b[4], dev_a, dev_b)) return 1;
  /* TODO(lab 7, step 5): sweep the message size: 64, 256, 1024, 4096, 16384 and 65536 bytes. */
  static const uint32_t sizes[] = {64};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; ++i) {
    int count = messages_for(sizes[i], n);
    double s = run_point(&a[4], &b[4], best, sizes[i], 16, count);
    if (s < 0) return 1;
    record(csv, "size_sweep", &a[4], sizes[i], 16, count, s);
  }
  /* TODO(lab 7, step 6): sweep the queue depth: 1, 2, 4, 8, 16, 32 and 64 WRs per window. */
  static const int depths[] = {16};
  for (size_t i = 0; i < sizeof depths / sizeof *depths; ++i) {
    int count = messages_for(4096, n);
    double s = run_point(&a[4], &b[4], best, 4096, depths[i], count);
    if (s < 0) return 1;
    record(csv, "depth_sweep", &a[4], 4096, depths[i], count, s);
  }
  fclose(csv);
  for (int i = 0; i < 5; ++i) {
    side_close(&a[i]);
    side_close(&b[i]);
  }
  printf("wrote %s\n", out);
  return 0;
}
