/* deadlock.c: lesson 1's --deadlock, the classic mistake run for real. */
#include "deadlock.h"

/* --deadlock: the mistake part 4 avoids, run for real. Every rank sends
 * first and receives second. Above the eager limit a send returns only once
 * its receive is posted, and none ever is: every rank is stuck in its send.
 * The watchdog (--timeout) names the call and ends the job. */
int run_deadlock(dt_comm *w, float *sbuf, float *rbuf, size_t n) {
  int N = w->size, next = (w->rank + 1) % N, prev = (w->rank + N - 1) % N;
  dt_print0("\n--deadlock: every rank sends %zu B to rank+1 first, then receives from rank-1.\n"
            "No send can finish before its receive is posted, so this hangs; the watchdog "
            "aborts the job after --timeout %g s.\n",
            n * sizeof(float), dt_timeout());
  dt_send(w, sbuf, n, DT_F32, next);
  dt_recv(w, rbuf, n, DT_F32, prev);
  dt_print0("no deadlock: %zu B still fit in MPI's eager buffers; try a larger --msg-bytes\n",
            n * sizeof(float));
  return 1;
}
