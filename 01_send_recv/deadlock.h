/* deadlock.h: lesson 1's --deadlock (deadlock.c), called by send_recv.c. */
#ifndef DEADLOCK_H
#define DEADLOCK_H

#include "dt.h"

/* Every rank sends n floats to rank+1 first, then receives from rank-1:
 * above the eager limit the watchdog ends the job; below it, returns 1. */
int run_deadlock(dt_comm *w, float *sbuf, float *rbuf, size_t n);

#endif
