/* cost.c: lesson 13, the cost model. A training step is compute +
 * communication + bubble, and each part is predictable from what lessons
 * 01-12 measured (and 14, whose GPT the model prices like theirs):
 *   compute        every operation of the step (the lessons' products,
 *                  attention blocks, elementwise passes, the optimizer) at
 *                  the rate this machine measured for it, or from a
 *                  datasheet: a GEMM by its tiles' waves over the SMs, the
 *                  rest by its bytes at the memory bandwidth (compute.c lists
 *                  them, device.c costs them);
 *   communication  every collective of every axis at alpha + bytes x beta per
 *                  message, with the algorithm the lessons use: the ring
 *                  all-reduce 2(n-1) messages carrying 2(n-1)/n of the buffer
 *                  (03), all-gather and reduce-scatter (n-1) and (n-1)/n (06),
 *                  the pipeline's sendrecv (09), the ring attention's hops
 *                  (11), overlapped where the lessons (and real runs)
 *                  overlap them; on a cluster the same ring where NCCL lays
 *                  it, NVLink or the node's NICs, or NCCL's tree (network.c);
 *   bubble         the idle slots of 09's plan of the schedule: (N-1)
 *                  microbatches, (N-1)/(M+N-1) of the step; 1/V of it with
 *                  V virtual stages a rank; ZB-H1's (N-1)/(3M+N-1) where
 *                  M >= N. The slowest stage waits while the others fill
 *                  and drain the pipeline: the microbatches are theirs.
 * Bytes and memory per rank are the formulas the lessons print (formulas.c,
 * a lesson's reached through its kind's table, kinds.h), and the planner's
 * GPT block's (block.c). The tool around the model (tools/plan/, its main
 * the program 13_plan/plan) fills that table, measures alpha, beta and the
 * rates here (--measure), reads a cluster's datasheet (--cluster), sets the
 * lessons' measured figures beside the prediction (--verify) and published
 * runs' beside theirs (--verify-published), and ranks every mesh
 * (--search); the model needs none of it. */
#include <math.h>
#include <string.h>

#include "compute.h"
#include "cost.h"
#include "formulas.h"
#include "network.h"

/* 09's plan of each schedule (plans.c); schedule.c, interleave.c and zb.c
 * make them (named here so that the Makefile links them into the program) */
#include "09_pp/interleave.h"
#include "09_pp/plans.h"
#include "09_pp/schedule.h"
#include "09_pp/zb.h"

/* The alpha-beta cost of one collective over n ranks on channel k, with
 * `bytes` the buffer each rank holds (the whole vector; for a sendrecv, the
 * message): every step of the algorithm is a message (alpha), and the
 * bytes each rank sends cross its channel (beta). */
double collective_seconds(int coll, int64_t n, double bytes, const channel *k) {
  if (n <= 1 && coll != P2P) return 0;
  double N = (double)n;
  switch (coll) {
  case AR:
    /* exercise: the alpha-beta cost of the ring all-reduce */
    return 2 * (N - 1) * k->alpha + 2 * (N - 1) / N * bytes * k->beta;
    /* end of exercise */
  case AG:
  case RS: return (N - 1) * k->alpha + (N - 1) / N * bytes * k->beta;
  default: return k->alpha + bytes * k->beta;
  }
}

/* The channel an axis's group crosses: inside one node when the ranks it
 * spans (tp fastest, then cp, pp, dp) fit in a node. On a measured
 * machine the collectives take the library all-reduce's own fit. */
static channel axis_link(const machine *c, const mesh *x, int a, int coll, int *intra) {
  int64_t span = x->n[TP];
  for (int b = CP; a != TP && b >= (a == DC ? DP : a); b--) span *= x->n[b];
  if (a == DC && x->n[DP] == 1) span = x->n[TP] * x->n[CP];
  *intra = span <= c->gpus_per_node;
  const channel *own = coll == AR ? &c->ar : coll == RS ? &c->rs : &c->ag;
  if (c->measured && coll != P2P && *intra && own->beta > 0) return *own;
  channel k = *intra ? c->intra : c->inter;
  if (coll == P2P) /* 09's and 11's messages, both ways at once between computations */
    k.alpha = fmax(k.alpha, c->swap[!*intra]);
  return k;
}

/* One call of a collective on axis a (of n ranks), `buf` as
 * collective_seconds takes it: on the machine --measure fitted, the
 * alpha-beta cost above; on a cluster the same ring on NCCL's channel, its
 * NVLink or its NICs' share, and its fixed latency (network.c), or NCCL's
 * tree where an all-reduce across nodes is faster so. */
static double call_seconds(const machine *m, const mesh *x, int a, int coll, int64_t n,
                           double buf) {
  int intra;
  channel k = axis_link(m, x, a, coll, &intra);
  if (m->measured) return collective_seconds(coll, n, buf, &k);
  int64_t local = coll == P2P ? 1 + intra : group_local(x, a, m->gpus_per_node);
  double base, ring;
  k = nccl_ring(coll, n, local, m, &base);
  ring = base + collective_seconds(coll, n, buf, &k);
  return coll == AR ? fmin(ring, nccl_tree_seconds(n, local, buf, m)) : ring;
}

/* One axis's traffic of a step in seconds, each collective's apart: each
 * call's buffer from the bytes it sent (the ring model's inverse), then
 * its cost. */
static double axis_seconds(const traffic t[NCOLL], int64_t n, const machine *m, const mesh *x,
                           int a, double part[NCOLL]) {
  double s = 0;
  for (int c = 0; c < NCOLL; c++) {
    part[c] = 0;
    if (!t[c].calls) continue;
    double per = (double)t[c].bytes / (double)t[c].calls, N = (double)n;
    double buf = c == AR ? per * N / (2 * (N - 1)) : c == P2P ? per : per * N / (N - 1);
    part[c] = (double)t[c].calls * call_seconds(m, x, a, c, n, n > 1 ? buf : 0);
    s += part[c];
  }
  return s;
}

/* What one microbatch costs stage s on cp rank r: its compute, and the
 * blocking communication inside it: tp's collectives (with --tp-overlap
 * behind the stage's products, as Megatron's userbuffers hide them: each
 * collective in tp chunks beside the product's, the first chunk's exposed
 * and what exceeds the products); cp's hops, forward hidden behind the
 * attention blocks as 11's ring does, backward's dK|dV blocking. */
typedef struct {
  double fwd, bwd, once, tp, cp, pp, dc, grads, params, last_bwd, layers;
} stage_cost;

static stage_cost cost_stage(const model *m, const mesh *x, const machine *c, int64_t s,
                             int64_t r) {
  static op o[MAXOPS];
  traffic t[NCOMM][NCOLL];
  double part[NCOLL], gemm = 0;
  stage_cost k = {0};
  int n = ops_of(m, x, s, r, o, MAXOPS);
  for (int i = 0; i < n; i++) {
    double sec = o[i].count * op_seconds(&o[i], c);
    *(o[i].per_micro ? (o[i].backward ? &k.bwd : &k.fwd) : &k.once) += sec;
    gemm += o[i].k == GEMM || o[i].k == BGEMM ? sec : 0;
  }
  traffic_of(m, x, s, t);
  double M = (double)x->M, L = (double)stage_layers(m, x, s), C = (double)x->n[CP];
  k.tp = axis_seconds(t[TP], x->n[TP], c, x, TP, part);
  if (x->tp_overlap) k.tp = fmax(k.tp / (double)x->n[TP], k.tp - gemm); /* a chunk's first */
  if (t[CP][P2P].calls) {
    double hop =
        call_seconds(c, x, CP, P2P, x->n[CP], (double)t[CP][P2P].bytes / (double)t[CP][P2P].calls);
    double f = attention_seconds(m, x, s, r, c, 0), b = attention_seconds(m, x, s, r, c, 1);
    double hidden_f = (C - 1) * hop - f, hidden_b = (C - 1) * hop - b;
    k.cp = M * L * ((hidden_f > 0 ? hidden_f : 0) + C * hop + (hidden_b > 0 ? hidden_b : 0));
  }
  traffic tied[NCOLL] = {[AR] = t[PP][AR]}; /* 14's tied weight: first and last stage, 2 ranks */
  t[PP][AR] = (traffic){0, 0};
  k.pp = axis_seconds(t[PP], x->n[PP], c, x, PP, part) + axis_seconds(tied, 2, c, x, PP, part);
  k.dc = axis_seconds(t[DC], x->n[DP] * x->n[CP], c, x, DC, part);
  k.grads = part[AR] + part[RS];
  k.params = part[AG];
  k.last_bwd = k.bwd / M;
  k.layers = L;
  return k;
}

/* The planner's sync over dp x cp that a step cannot hide (--overlap, as
 * real runs overlap it): the gradients' reduction behind the last
 * microbatch's backward (ZeRO 2: each microbatch's behind its own), the
 * stepped parameters' gather behind the next step's first forward
 * (Megatron's distributed optimizer); ZeRO 3's gathers and scatters beside
 * each microbatch's compute, prefetched a layer ahead as FSDP does, all
 * but the first layer's gather hidden where the compute is longer. */
static double dc_exposed(const mesh *x, const stage_cost *k) {
  double M = (double)x->M;
  if (!x->overlap) return k->dc;
  if (x->zero == 3) return fmax(0, k->dc - k->fwd - k->bwd) + k->params / (2 * M * k->layers);
  return fmax(0, k->grads - (x->zero == 2 ? k->bwd : k->last_bwd)) +
         fmax(0, k->params - k->fwd / M);
}

/* The bubble as 09 runs it: its plan of the schedule played in the slot
 * model (every action one slot), T - busy of a stage's slots idle, each
 * 1/busy of the stage's compute: GPipe's and 1F1B's 2(pp-1) of 2M (pp-1
 * microbatches), interleaved 1F1B's 2(pp-1) of 2VM (Narayanan et al.
 * 2021: 1/V of it), ZB-H1's pp-1 of 3M where M >= pp (Qi et al. 2024;
 * above it where M < pp, zb.h). The step's share of the stage's work. */
static double bubble_share(const mesh *x, prediction *p) {
  int64_t P = x->n[PP], V = x->V > 1 ? x->V : 1;
  pp_shape k = {0, 0, (int)(2 * x->M), (int)(2 * x->M), 0};
  if (P > 1) k = pp_plan_count((int)P, 0, x->M, (int)V, x->gpipe, x->zb);
  p->slots = k.T;
  p->busy_slots = k.busy;
  return (double)(k.T - k.busy) / (double)k.busy;
}

/* The step: M microbatches of the slowest stage and cp rank, the bubble
 * (bubble_share of them), the pipeline's exchanges, the data and the
 * optimizer, and the gradients' sync over dp x cp. */
void predict(const model *m, const mesh *x, const machine *c, prediction *p) {
  memset(p, 0, sizeof *p);
  p->parameters = parameters_of(m);
  p->tokens = (double)m->B * (double)(m->S ? m->S : 1);
  p->model_flops = model_flops(m);
  p->hardware_flops = hardware_flops(m, x);
  int64_t P = x->n[PP], C = x->zigzag ? 1 : x->n[CP]; /* zigzag: every cp rank alike */
  /* the lessons' stages each; the planner's first, one middle and the last (the middle ones are
   * alike: the embeddings live on the first, the output layer on the last) */
  int planner = m->kind == GPT || m->kind == STATES;
  int64_t few[3] = {0, P > 2 ? 1 : P - 1, P - 1}, nstages = planner ? 3 : P;
  for (int64_t i = 1; planner && i < 3; i++) /* the fullest stage */
    if (memory_of(m, x, few[i]).total > memory_of(m, x, p->stage).total) p->stage = few[i];
  p->mem = memory_of(m, x, p->stage); /* the lessons print rank 0's */
  traffic_of(m, x, p->stage, p->t);
  if (m->kind == STATES) return;
  for (int a = 0; a < NCOMM; a++) axis_link(c, x, a, P2P, &p->intra[a]);
  stage_cost w = {0}, k;
  double worst = -1, all = 0, pp = 0, once = 0, dc = 0, hidden = 0;
  for (int64_t i = 0; i < nstages; i++) {
    double slowest = 0; /* the stage's microbatch: its slowest cp rank's */
    for (int64_t r = 0; r < C; r++) {
      k = cost_stage(m, x, c, planner ? few[i] : i, r);
      double mb = (k.fwd + k.bwd + k.tp + k.cp) / (double)x->M;
      slowest = fmax(slowest, mb);
      if (mb > worst) {
        worst = mb;
        w = k;
      }
      pp = k.pp > pp ? k.pp : pp;
      once = k.once > once ? k.once : once;
      dc = k.dc > dc ? k.dc : dc;
      hidden = fmax(hidden, dc_exposed(x, &k));
    }
    /* the planner's middle stage stands for the pp - 2 between the ends */
    all += slowest * (double)(planner && i == 1 ? (P > 2 ? P - 2 : 0) : 1);
  }
  /* the slowest stage idles while the others fill and drain the pipeline:
   * a microbatch of each other stage, not of its own (the same where the
   * stages are alike) */
  double others = P > 1 ? (all - worst) / (double)(P - 1) : worst;
  /* the lessons' --overlap (05): the sync behind the last backward */
  double exposed = m->kind == GPT ? hidden : x->overlap ? dc - w.last_bwd : dc;
  p->compute_s = w.fwd + w.bwd + once;
  p->once_s = once;
  p->comm_s[TP] = w.tp;
  p->comm_s[CP] = w.cp;
  p->comm_s[PP] = pp;
  p->comm_s[DC] = exposed > 0 ? exposed : 0;
  p->others_s = others;
  p->bubble_s = bubble_share(x, p) * others * (double)x->M; /* 09's plan's idle slots */
  p->step_s = p->compute_s + w.tp + w.cp + pp + p->comm_s[DC] + p->bubble_s;
}
