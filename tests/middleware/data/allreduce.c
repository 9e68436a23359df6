/* An MPI program for tests/middleware/mpi_test.cc: two MPI_Allreduce (MPI_SUM) over
 * MPI_COMM_WORLD whose results every rank checks element by element.
 *  - 2 MiB of doubles: above every eager limit, so UCX moves it with its rendezvous protocol
 *    (RDMA GET/PUT into the ranks' buffers);
 *  - one int: the eager path.
 * Each rank prints one line ending in "OK" or "FAIL" and exits non-zero on any mismatch.
 * Rank r contributes r*1000 + i to element i, so element i must be 1000*n(n-1)/2 + n*i. The
 * values stay below 2^53: exact in doubles whatever order the reduction adds them in. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { kBigCount = (2 << 20) / sizeof(double) };

static long big_mismatches(int rank, int size) {
  double* in = malloc(kBigCount * sizeof *in);
  double* out = malloc(kBigCount * sizeof *out);
  if (!in || !out) return -1;
  for (long i = 0; i < kBigCount; i++) in[i] = rank * 1000.0 + (double)i;
  MPI_Allreduce(in, out, kBigCount, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  long bad = 0;
  for (long i = 0; i < kBigCount; i++)
    if (out[i] != 1000.0 * size * (size - 1) / 2 + (double)size * (double)i) bad++;
  free(in);
  free(out);
  return bad;
}

static int small_sum(int rank) {
  int mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return sum;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long bad = big_mismatches(rank, size);
  const int sum = small_sum(rank), want = size * (size + 1) / 2;
  const char* dev = getenv("UCX_NET_DEVICES");
  const int ok = bad == 0 && sum == want;
  printf("rank %d/%d dev %s: 2 MiB allreduce mismatches %ld, int allreduce %d (want %d) -> %s\n", rank, size,
         dev ? dev : "-", bad, sum, want, ok ? "OK" : "FAIL");
  fflush(stdout);
  MPI_Finalize();
  return ok ? 0 : 1;
}
