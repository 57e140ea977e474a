/* report.c: what 12_mesh prints after the run (the mesh's table before it
 * is table.c's): each axis's calls and bytes, the time blocked on each,
 * memory by kind, each beside its formula and checked on every rank, the
 * replicas, and the pipeline's bubble (09's timeline). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "09_pp/formulas.h"
#include "09_pp/interleave.h"
#include "formulas.h"
#include "mesh.h"

/* This rank's share, as the formulas take it (formulas.c) */
static mesh_share share_of(const model *m, const dt_run *r) {
  return (mesh_share){.n = m->n,
                      .s = m->at[PP],
                      .L = m->L,
                      .M = m->M,
                      .R = m->R,
                      .D = m->D,
                      .W = m->W,
                      .A = m->A,
                      .Hs = m->Hs,
                      .C = m->cr.C,
                      .n_layer = m->n_layer,
                      .shard = m->zero ? m->f.S : 0,
                      .gpipe = m->gpipe,
                      .adamw = r->c.optimizer[0] == 'a',
                      .wire16 = m->wire.type != DT_F32,
                      .V = m->V,
                      .zb = m->zb};
}

static void bytes(const model *m, const dt_run *r, uint64_t steps, int *bad) {
  mesh_share x = share_of(m, r);
  mesh_traffic t = mesh_traffic_of(&x);
  if (m->V > 1 || m->zb) t.pp.calls = m->nev; /* the interleaved or ZB-H1 plan's exchanges */
  char hb[120]; /* each row's formula, its bytes an element E written out */
  int E = x.wire16 ? 2 : 4;
#define HOW(how) mesh_how(how, E, hb, sizeof hb)
  if (x.wire16)
    dt_print0("  messages in %s: E = 2 bytes an element, half of fp32's (master weights and "
              "optimizer state stay fp32)\n",
              r->c.precision);
  dt_print0("  per rank per step (rank 0)          calls formula  bytes sent     formula\n");
  mesh_row("tp", "all_reduce (activ)", m->axis[TP]->count[DT_ALL_REDUCE], steps,
           (uint64_t)t.tp.calls, (uint64_t)t.tp.bytes,
           HOW("4LM x 2(tp-1)/tp x RD x E: after Wo and W2, their mirrors in backward"), bad);
  mesh_row("cp", "sendrecv (K|V, dK|dV)", m->axis[CP]->count[DT_SENDRECV], steps,
           (uint64_t)t.cp.calls, (uint64_t)t.cp.bytes,
           HOW("LM(3cp-2) x 2RW x E: (cp-1) hops forward, (cp-1) + cp backward"), bad);
  mesh_row("pp", "sendrecv (activ)", m->axis[PP]->count[DT_SENDRECV], steps, (uint64_t)t.pp.calls,
           (uint64_t)t.pp.bytes,
           m->V > 1 ? HOW("M x (2V - [s = 0] - [s = pp-1]) x RD x E, V chunks; calls: the plan's")
           : m->zb  ? HOW("M x (s < pp-1: forward out + s > 0: gradient back) x RD x E; calls: "
                           "ZB-H1's plan's")
                    : HOW("M x (s < pp-1: forward out + s > 0: gradient back) x RD x E; calls: "
                           "the plan's"),
           bad);
  mesh_row("dp x cp", "all_reduce (grads)", m->dc->count[DT_ALL_REDUCE], steps,
           (uint64_t)t.grads.calls, (uint64_t)t.grads.bytes,
           m->zero ? HOW("2 x L x (G-1) x S x E, as 06 --zero 1")
                   : HOW("2(G-1)/G x L x (4DW + 2DHs) x E, G = dp x cp"),
           bad);
  if (m->zero)
    mesh_row("dp x cp", "all_gather (params)", m->dc->count[DT_ALL_GATHER], steps,
             (uint64_t)t.params.calls, (uint64_t)t.params.bytes,
             HOW("L x (G-1) x S x E: the stepped shards back to every rank"), bad);
#undef HOW
}

/* Seconds blocked per step in each axis's calls, rank 0's. */
static void times(const model *m, uint64_t steps) {
  double ms = 1e3 / (double)steps;
  dt_print0("  time blocked per step (rank 0): tp %.2f ms, cp %.2f ms, pp %.2f ms, dp x cp %.2f ms "
            "(the rest of the step is compute, above)\n",
            dt_comm_total(m->axis[TP]).seconds * ms, dt_comm_total(m->axis[CP]).seconds * ms,
            dt_comm_total(m->axis[PP]).seconds * ms, dt_comm_total(m->dc).seconds * ms);
}

static void memory(const model *m, const dt_run *r, int *bad) {
  int64_t R = m->R, W = m->W, A = m->A, Hs = m->Hs, C = m->cr.C, L = m->L;
  int64_t live = m->V > 1 ? pp_live_v((int)m->n[PP], (int)m->at[PP], m->M, (int)m->V)
                 : m->zb  ? pp_live_zb((int)m->n[PP], m->M)
                          : pp_live((int)m->n[PP], (int)m->at[PP], m->M, m->gpipe),
          mem[DT_NTAGS];
  mesh_share x = share_of(m, r);
  mesh_memory(&x, mem); /* formulas.c */
  char act[160], comm[200];
  snprintf(
      act, sizeof act,
      "(live x (RD + %s(4RW + RA + 2RD + 2RHs%s)) + 2RD + RHs + %dRW + C(W+A) + RA) x 4, live %lld",
      m->V > 1 ? "L/V" : "L", m->zb ? " + zb1's 2RD + 3RW" : "", x.wire16 ? 8 : 4, (long long)live);
  int travels = m->n[TP] > 1 || m->n[PP] > 1, G = (int)(m->n[DP] * m->n[CP]);
  snprintf(
      comm, sizeof comm, "8RW x %d: the ring's [K|V] and [dK|dV]%s%s%s%s%s", x.wire16 ? 2 : 4,
      x.wire16 ? " (16 bits: as sent and received; the blocks' floats are activ)" : ", two each",
      x.wire16 && (travels || m->zero || G > 1) ? ", + 2 x (" : "",
      x.wire16 && travels ? (m->zero || G > 1 ? "2RD + " : "2RD") : "",
      !x.wire16 ? ""
      : m->zero ? "2 G S"
      : G > 1   ? "L(4DW + 2DHs)"
                : "",
      x.wire16 && (travels || m->zero || G > 1) ? "): 16-bit copies of tp|pp's rows, grads" : "");
  dt_row rows[] = {{DT_PARAMS, mem[DT_PARAMS],
                    m->zero ? "4 x L x G S: the stage's layers, tp shards, padded"
                            : "4 x L x (4DW + 2DHs): the stage's layers, tp shards",
                    0},
                   {DT_GRADS, mem[DT_GRADS], "the same", 0},
                   {DT_OPTIM, mem[DT_OPTIM],
                    m->zero ? "AdamW m, v: 8 x L x S, its shard along dp x cp (sgd: 0)"
                            : "AdamW m, v: 8 x L x (4DW + 2DHs) (sgd: 0)",
                    0},
                   {DT_ACTIV, mem[DT_ACTIV], act, 0},
                   {DT_COMMBUF, mem[DT_COMMBUF], comm, 0},
                   {DT_DATA, mem[DT_DATA], "first or last stage: 2 x M x RD x 4, x and y", 0}};
  dt_print_memory(rows, 6, NULL);
  dt_print_memory_uncounted();
  for (int i = 0; i < 6; i++) *bad += (int64_t)dt_mem_peak(rows[i].tag) != rows[i].formula;
  dt_print0(
      "    with R = B/(dp M) x S/cp = %lld rows per microbatch, W = D/tp = %lld, A = heads/tp "
      "= %lld, Hs = H/tp = %lld, C = %lld tokens a chunk, L = %lld layers a stage\n",
      (long long)R, (long long)W, (long long)A, (long long)Hs, (long long)C, (long long)L);
}

/* The copies of each dp x cp group, element for element (bookkeeping). In
 * 16 bits with --zero 1 a shard's owner holds its fp32 master and the others
 * what the gather brought, the master in 16 bits: compared in 16 bits. */
static int replicas_differ(const model *m) {
  size_t n = (size_t)(m->L * m->ld);
  float *mine = dt_host_alloc(n, 4), *root = dt_host_alloc(n, 4), *w = m->w;
  dt_dtype half = m->zero ? m->f.wire.type : DT_F32;
  dt_mem_aside(1);
  if (half != DT_F32) {
    dt_copy(w = dt_alloc_f32(n, DT_OTHER), m->w, n * 4);
    dt_round_half(w, n, half);
  }
  dt_copy_to_host(mine, w, n * 4);
  if (w != m->w) dt_free(w);
  dt_mem_aside(0);
  memcpy(root, mine, n * 4);
  dt_host_broadcast(m->dc, root, n, DT_F32, 0);
  int differ = memcmp(mine, root, n * 4) != 0;
  dt_host_all_reduce(m->world, &differ, 1, DT_I32, DT_MAX);
  free(mine);
  free(root);
  return differ;
}

void mesh_report(model *m, dt_run *r) {
  uint64_t steps = (uint64_t)(r->c.steps - r->c.start_step);
  int bad = 0, worst;
  bytes(m, r, steps, &bad);
  worst = bad;
  dt_host_all_reduce(m->world, &worst, 1, DT_I32, DT_MAX);
  dt_print0("    every rank's calls and bytes equal their formulas: %s (%d ranks)\n",
            worst ? "NO" : "yes", m->world->size);
  times(m, steps);
  bad = 0;
  memory(m, r, &bad);
  dt_host_all_reduce(m->world, &bad, 1, DT_I32, DT_MAX);
  dt_print0("    every rank's memory equals its formulas: %s (%d ranks)\n", bad ? "NO" : "yes",
            m->world->size);
  int64_t G = m->n[DP] * m->n[CP];
  dt_print0("  replicas: every dp x cp group's %lld copies of its weights %s%s\n", (long long)G,
            replicas_differ(m) ? "DIFFER" : "are bit-identical",
            m->zero && m->f.wire.type != DT_F32 ? " in 16 bits (the owner's fp32 master rounded)"
                                                : "");
  if (m->V > 1 || m->zb) /* the plan's bubble, exact, before the clock's */
    pp_slot_model(m->T, (int)m->n[PP], m->M, m->V, m->zb);
  timeline_report(m->tl, m->axis[PP], m->M);
}
