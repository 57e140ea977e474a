/* ep.h: what the files of 10_ep share: the part of the model a rank holds,
 * and each layer's routing, kept from forward for backward. */
#ifndef EP_H
#define EP_H

#include "train.h"

typedef struct {             /* one layer's routing of this rank's R tokens */
  float *probs, *gate;       /* [R,E] softmax of the logits; [R,k] the chosen, renormalised */
  float *dgate, *ret;        /* [R,k]; [R*k, D]: the experts' outputs, back in send order */
  int32_t *choice, *pos;     /* [R,k] the expert; its row in the send buffer, -1: dropped */
  int32_t *dchoice, *dpos;   /* the same on the backend (on the cpu, the same arrays) */
  int64_t *count, *scount;   /* [E] kept per expert; the same by rank, then expert of the rank */
  int64_t *rcount;           /* [N, E/N] what each rank sent my experts */
  size_t *sc, *sd, *rc, *rd; /* [N] elements to and from each rank, and where they sit */
  float *xin, *a, *h;        /* this rank's experts: the rows they received, expert-major */
  int64_t *rows;             /* [E/N] rows of each of this rank's experts */
} route;

typedef struct {
  dt_comm *world;
  int64_t L, D, H, E, k, N, El, R, C, M;  /* El = E/N experts here; C: capacity per expert of
                                           * a rank's R tokens; M = N C El: rows they can get */
  float *rw, *rg;                         /* the router [L][D,E], replicated */
  float *ew, *eg;                         /* this rank's experts [L][El][W1 | W2] */
  float *x, *y, *dx, *dnext;              /* x_0 .. x_L [R,D] and backward's gradients */
  route *rt;                              /* [L] */
  float *send, *recv, *xe, *dh, *dlogits; /* scratch of the step */
  float *chosen, *daux; /* [L][E]: choices per expert over all ranks; d aux / d p */
  /* cuda backend: chosen and the counts on the device, for the collectives
   * (on the cpu, chosen itself and NULL) */
  float *dchosen;
  int64_t *dcount;
  int64_t *samples;
  int verify;      /* --verify-dispatch: verify.c looks at every layer's dispatch */
  int hand;        /* --all-to-all hand: exchange.c's pairwise rounds */
  dt_wire ws, wr;  /* --precision bf16: 16-bit copies of what an exchange sends and gets */
  size_t *cn, *cd; /* [N] the counts' blocks: E/N each, at r E/N */
  int32_t *record; /* [steps][L][R][k]: the routing, for the check */
  dt_kinks *kinks; /* the experts' ReLU decisions near 0, for the check */
  /* what report.c prints, summed over steps and layers */
  uint64_t bytes[5], rows_out, rows_in; /* per phase; rows to and from other ranks */
  int64_t dropped, *kept;               /* kept [E]: choices kept per expert */
} model;

enum { COUNTS, DISPATCH, COMBINE, DISPATCH_BACK, COMBINE_BACK }; /* the phases */

/* buffers.c: everything but the weights, by tag (report.c's formulas) */
void ep_buffers(model *m, const dt_train_config *c);
/* verify.c: the send counts, displacements and rows of a dispatch, as the
 * receivers will read them; any mismatch named per rank, then dt_fail */
void verify_dispatch(model *m, const route *q);
/* exchange.c: phase p's all-to-all-v of float rows (counts and
 * displacements in elements), the library's or N-1 rounds of sendrecv,
 * its bytes added to m->bytes[p]; and the counts' all-to-all */
void exchange(model *m, int p, const float *send, const size_t *sc, const size_t *sd, float *recv,
              const size_t *rc, const size_t *rd);
void exchange_counts(model *m, const int64_t *send, int64_t *recv);
/* the hand all-to-all-v alone, counts and displacements in elements of t
 * (tests/bench_all_to_all.c times it beside the library's) */
void hand_all_to_allv(dt_comm *w, const void *send, const size_t *sc, const size_t *sd, void *recv,
                      const size_t *rc, const size_t *rd, dt_dtype t);
/* received rows sit by source rank, then expert; the experts want them by
 * expert, then source: copy between the two, to_experts or back */
void reorder(const model *m, const route *q, float *rank_major, float *expert_major,
             int to_experts);
/* report.c: a layer's dispatch counted (tokens to and from other ranks,
 * kept per expert); tokens per expert, bytes and memory beside formulas */
void tally(model *m, const route *q);
void report(model *m, dt_run *r);

#endif
