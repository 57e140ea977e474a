/* send_recv.c: lesson 1, point-to-point communication.
 *
 * Every algorithm of this course is built from one operation: rank A sends a
 * buffer, rank B receives it. Four ways: 1. rank 0 sends to every other rank;
 * 2. a ping-pong between ranks 0 and 1 measures latency and bandwidth (OSU
 * style); 3. a token goes around a ring; 4. ring neighbours exchange a large
 * message with sendrecv, the cure for the classic deadlock (deadlock.c, --deadlock,
 * runs it). Then the bytes each rank sent, counted, beside the formula. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "deadlock.h"

/* Sizes are bytes for the reader but the calls count elements: floats of 4
 * bytes, so 8 B is 2 floats and every size must be a multiple of 4. */
static int64_t min_bytes = 8, max_bytes = 64 << 20, msg_bytes = 4 << 20, iters = 100;

/* OSU cuts the iterations of large messages so that the sweep does not spend
 * minutes at the top: here a size moves at most this much one way, so 64 MiB
 * gets 4 timed round trips where 2 MiB and below get --iters. */
enum { SIZE_BUDGET = 256 << 20 };
static int64_t timed_iters(int64_t bytes) {
  int64_t n = SIZE_BUDGET / bytes;
  return n < 1 ? 1 : n < iters ? n : iters;
}
/* The first round trips pay for connection setup and cold caches. */
static int64_t warmup_iters(int64_t bytes) { return timed_iters(bytes) / 10 + 1; }

/* What sender puts at index i: small integers, exact in a float, that change
 * along the buffer so a shifted or truncated copy cannot pass. */
static float pattern(int sender, size_t i) { return (float)(sender * 1024 + (int)(i % 1021)); }

/* Buffers live in backend memory (the GPU on cuda): fill on the host, copy
 * in; verify by copying out. host: scratch of at least n floats. */
static void fill(float *buf, float *host, size_t n, int sender) {
  for (size_t i = 0; i < n; i++) host[i] = pattern(sender, i);
  dt_copy_from_host(buf, host, n * sizeof(float));
}
static uint64_t count_wrong(const float *buf, float *host, size_t n, int sender) {
  dt_copy_to_host(host, buf, n * sizeof(float));
  uint64_t wrong = 0;
  for (size_t i = 0; i < n; i++) wrong += host[i] != pattern(sender, i);
  return wrong;
}

static uint64_t checked = 0; /* elements compared on this rank, for the verdict */

static uint64_t part1_one_to_all(dt_comm *w, float *buf, float *host, size_t n) {
  dt_print0("\n1. rank 0 sends %zu B (%zu floats) to every other rank, one blocking send at a "
            "time\n",
            n * sizeof(float), n);
  if (w->rank == 0) fill(buf, host, n, 0);
  dt_barrier(w); /* everyone starts the clock together */
  double t0 = dt_now();
  if (w->rank == 0) {
    for (int r = 1; r < w->size; r++) dt_send(w, buf, n, DT_F32, r);
    dt_print_ranks("sent %zu B to every other rank (%d send%s) in %.3f ms\n", n * sizeof(float),
                   w->size - 1, w->size > 2 ? "s" : "", (dt_now() - t0) * 1e3);
    return 0;
  }
  /* The sends are serial, so rank r waits for the r-1 sends before its own. */
  dt_recv(w, buf, n, DT_F32, 0);
  double waited = dt_now() - t0;
  uint64_t wrong = count_wrong(buf, host, n, 0);
  checked += n;
  dt_print_ranks("received %zu B from rank 0 after waiting %.3f ms: %" PRIu64 " wrong elements\n",
                 n * sizeof(float), waited * 1e3, wrong);
  return wrong;
}

static uint64_t part2_ping_pong(dt_comm *w, float *sbuf, float *rbuf, float *host) {
  dt_print0("\n2. ping-pong between ranks 0 and 1: one-way time = round trip / 2, "
            "GB/s = bytes / one-way time%s\n",
            w->size > 2 ? " (the other ranks wait at a barrier)" : "");
  dt_print0("%12s %8s %14s %10s %8s\n", "bytes", "iters", "latency (us)", "GB/s", "wrong");
  uint64_t wrong = 0;
  if (w->rank <= 1) {
    if (w->rank == 0) fill(sbuf, host, (size_t)max_bytes / sizeof(float), 0);
    for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
      size_t n = (size_t)bytes / sizeof(float);
      int64_t warm = warmup_iters(bytes), timed = timed_iters(bytes);
      dt_zero(rbuf, (size_t)bytes); /* what the last size left there must not pass the check */
      double t0 = 0;
      for (int64_t it = 0; it < warm + timed; it++) {
        if (it == warm) t0 = dt_now();
        if (w->rank == 0) {
          dt_send(w, sbuf, n, DT_F32, 1);
          dt_recv(w, rbuf, n, DT_F32, 1);
        } else { /* echo what arrived, so rank 0's check covers both legs */
          dt_recv(w, rbuf, n, DT_F32, 0);
          dt_send(w, rbuf, n, DT_F32, 0);
        }
      }
      double one_way = (dt_now() - t0) / (2.0 * (double)timed);
      if (w->rank == 0) {
        uint64_t bad = count_wrong(rbuf, host, n, 0);
        wrong += bad;
        checked += n;
        dt_print0("%12" PRId64 " %8" PRId64 " %14.2f %10.3f %8" PRIu64 "\n", bytes, timed,
                  one_way * 1e6, (double)bytes / one_way * 1e-9, bad);
      }
    }
  }
  dt_barrier(w);
  return wrong;
}

static uint64_t part3_token_ring(dt_comm *w, int32_t *token) {
  int N = w->size, next = (w->rank + 1) % N, prev = (w->rank + N - 1) % N;
  dt_print0("\n3. a token goes around the ring of %d ranks (rank r sends to r+1, rank %d to 0), "
            "each rank adding its rank\n",
            N, N - 1);
  int32_t got = 0, sent = 0;
  /* exercise: the token ring (who sends first, to whom, and what) */
  if (w->rank == 0) {
    /* Someone must send first: if every rank began with dt_recv, all would
     * wait forever for a token that nobody sent. */
    dt_copy_from_host(token, &sent, sizeof sent);
    dt_send(w, token, 1, DT_I32, next);
    dt_recv(w, token, 1, DT_I32, prev);
    dt_copy_to_host(&got, token, sizeof got);
  } else {
    dt_recv(w, token, 1, DT_I32, prev);
    dt_copy_to_host(&got, token, sizeof got);
    sent = got + w->rank;
    dt_copy_from_host(token, &sent, sizeof sent);
    dt_send(w, token, 1, DT_I32, next);
  }
  /* end of exercise */
  /* Rank r > 0 gets 0 + 1 + ... + (r-1); rank 0 gets the whole sum back. */
  int32_t want = w->rank == 0 ? N * (N - 1) / 2 : w->rank * (w->rank - 1) / 2;
  checked += 1;
  if (w->rank == 0)
    dt_print_ranks("started the token at 0, sent 0 to rank %d, got %d back from rank %d "
                   "(formula N(N-1)/2 = %d)\n",
                   next, got, prev, want);
  else
    dt_print_ranks("got %d from rank %d (formula r(r-1)/2 = %d), sent %d to rank %d\n", got, prev,
                   want, sent, next);
  return got != want;
}

static uint64_t part4_exchange(dt_comm *w, float *sbuf, float *rbuf, float *host, size_t n) {
  int N = w->size, next = (w->rank + 1) % N, prev = (w->rank + N - 1) % N;
  dt_print0("\n4. every rank sends %zu B to rank+1 and receives from rank-1 at the same time, "
            "with sendrecv\n",
            n * sizeof(float));
  /* The obvious code, dt_send(next) then dt_recv(prev) on every rank,
   * deadlocks once the message is larger than MPI can buffer (the eager
   * limit): each send waits for its receive, which its neighbour never posts
   * because it is itself stuck sending. sendrecv posts both halves together
   * (MPI_Sendrecv; on NCCL ncclSend and ncclRecv in one group), so every send
   * finds its receive. */
  fill(sbuf, host, n, w->rank);
  dt_zero(rbuf, n * sizeof(float));
  double t0 = dt_now();
  dt_sendrecv(w, sbuf, n, next, rbuf, n, prev, DT_F32);
  double t = dt_now() - t0;
  uint64_t wrong = count_wrong(rbuf, host, n, prev);
  checked += n;
  dt_print_ranks("sent %zu B to rank %d, received %zu B from rank %d in %.3f ms: %" PRIu64
                 " wrong elements\n",
                 n * sizeof(float), next, n * sizeof(float), prev, t * 1e3, wrong);
  return wrong;
}

/* The bytes each rank must have handed to send and sendrecv, from the
 * algorithm alone; the comm layer counted what really went out. */
static uint64_t check_counters(dt_comm *w) {
  uint64_t N = (uint64_t)w->size, S = (uint64_t)msg_bytes, ping_pong = 0;
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2)
    ping_pong += (uint64_t)(warmup_iters(bytes) + timed_iters(bytes)) * (uint64_t)bytes;
  uint64_t part1 = w->rank == 0 ? (N - 1) * S : 0, part2 = w->rank <= 1 ? ping_pong : 0;
  uint64_t part3 = sizeof(int32_t), want_send = part1 + part2 + part3, want_sendrecv = S;
  dt_counter send = w->count[DT_SEND], sendrecv = w->count[DT_SENDRECV];
  dt_print0("\nbytes sent per rank: comm counters vs formula (part 1 (N-1)*msg on rank 0, "
            "part 2 sum of (warm-up + iters) * bytes on ranks 0 and 1, part 3 one int32, "
            "part 4 msg)\n");
  dt_print_ranks("send %" PRIu64 " B in %" PRIu64 " calls, formula %" PRIu64 " = %" PRIu64
                 " + %" PRIu64 " + %" PRIu64 " | sendrecv %" PRIu64 " B, formula %" PRIu64 "\n",
                 send.bytes_sent, send.calls, want_send, part1, part2, part3, sendrecv.bytes_sent,
                 want_sendrecv);
  return (send.bytes_sent != want_send) + (sendrecv.bytes_sent != want_sendrecv);
}

int main(int argc, char **argv) {
  int deadlock = 0;
  dt_option options[] = {
      DT_SIZE("--min-bytes", &min_bytes, 4, 1 << 30, "smallest ping-pong message"),
      DT_SIZE("--max-bytes", &max_bytes, 4, 1 << 30, "largest ping-pong message (sizes double)"),
      DT_INT("--iters", &iters, 1, 1e6,
             "timed ping-pong round trips per size (fewer for large sizes)"),
      DT_SIZE("--msg-bytes", &msg_bytes, 4, 1 << 30, "message of parts 1 and 4"),
      DT_FLAG("--deadlock", &deadlock,
              "run the classic deadlock (send first on every rank) and "
              "let the watchdog catch it; try --timeout 5"),
      DT_END,
  };
  dt_lesson lesson = {"01_send_recv",
                      "point to point: blocking send/recv, ping-pong latency and bandwidth, a "
                      "token ring, sendrecv against deadlock",
                      2};
  dt_comm *w = dt_init(&argc, &argv, &lesson, options);
  for (dt_option *o = options; o->name; o++)
    if (o->kind == DT_OPT_SIZE && *(int64_t *)o->value % 4)
      dt_fail("%s %" PRId64 " is not a multiple of 4: the messages are floats of 4 bytes", o->name,
              *(int64_t *)o->value);
  if (max_bytes < min_bytes)
    dt_fail("--max-bytes %" PRId64 " is smaller than --min-bytes %" PRId64, max_bytes, min_bytes);
  int sizes = 0;
  for (int64_t b = min_bytes; b <= max_bytes; b *= 2) sizes++;
  dt_print0("config: ping-pong %" PRId64 " B to %" PRId64 " B (%d sizes), --iters %" PRId64
            " (fewer where they would move over %d MiB), --msg-bytes %" PRId64 " (%" PRId64
            " floats)\n",
            min_bytes, max_bytes, sizes, iters, SIZE_BUDGET >> 20, msg_bytes, msg_bytes / 4);

  /* Two buffers serve every part: ranks 0 and 1 also need room for the
   * largest ping-pong message. */
  size_t big = (size_t)(w->rank <= 1 && max_bytes > msg_bytes ? max_bytes : msg_bytes);
  float *sbuf = dt_alloc(big, DT_COMMBUF), *rbuf = dt_alloc(big, DT_COMMBUF);
  int32_t *token = dt_alloc(sizeof(int32_t), DT_COMMBUF);
  float *host = dt_host_alloc(big, 1);
  size_t n = (size_t)msg_bytes / sizeof(float);
  dt_comm_reset(w);
  if (deadlock) {
    int failed = run_deadlock(w, sbuf, rbuf, n);
    dt_finalize();
    return failed;
  }

  uint64_t wrong = part1_one_to_all(w, sbuf, host, n);
  wrong += part2_ping_pong(w, sbuf, rbuf, host);
  wrong += part3_token_ring(w, token);
  wrong += part4_exchange(w, sbuf, rbuf, host, n);
  int64_t total[3] = {(int64_t)wrong, (int64_t)checked, (int64_t)check_counters(w)};
  dt_host_all_reduce(w, total, 3, DT_I64, DT_SUM);

  int failed = total[0] != 0 || total[2] != 0;
  dt_report_string(NULL, "verdict", failed ? "FAILED" : "PASSED");
  dt_print0("\nCHECK %s: %" PRId64 " wrong elements of %" PRId64
            " checked over %d ranks (exact compare, tolerance 0); %" PRId64
            " byte counters differ from the formula\n",
            failed ? "FAILED" : "PASSED", total[0], total[1], w->size, total[2]);
  free(host);
  dt_free(token);
  dt_free(rbuf);
  dt_free(sbuf);
  dt_finalize();
  return failed;
}
