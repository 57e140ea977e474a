/* formulas.c: bytes, memory and FLOPs per rank per step, in one place.
 *
 * For the lessons' models each formula is the one that lesson prints beside
 * what it measured: called from the lesson's own formulas file (05_dp,
 * 06_fsdp, 09_pp, 11_cp's formulas.c) or, for 12, written as its report.c
 * computes it, so that --verify can ask for equality. For a GPT
 * block (two layer norms, attention, an MLP, the embeddings and the output
 * layer) the planner's own, each with its source: the ZeRO paper
 * (Rajbhandari et al. 2020) for the model states, Korthikanti et al. 2022
 * ("Reducing Activation Recomputation in Large Transformer Models") for the
 * activations, PaLM (Chowdhery et al. 2022, appendix B) for model FLOPs. */
#include <stdlib.h>
#include <string.h>

#include "05_dp/formulas.h"
#include "06_fsdp/formulas.h"
#include "09_pp/formulas.h"
#include "09_pp/schedule.h"
#include "11_cp/formulas.h"
#include "12_mesh/formulas.h"
#include "14_gpt/formulas.h"
#include "block.h"
#include "dt.h"
#include "formulas.h"

static int64_t up(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The stage's exchanges that have a neighbour, on 09's plan (09_pp/formulas.c) */
static int64_t exchanges(const mesh *x, int64_t s) {
  return pp_exchanges((int)x->n[PP], (int)s, x->M, x->gpipe);
}

double parameters_of(const model *m) {
  int64_t D = m->D, H = m->H, L = m->L, V = m->V;
  switch (m->kind) {
  case STATES: return m->params;
  case GPT: return block_params(m);
  case GPT14: return (double)(V * D + m->S * D + L * (4 * D * D + 2 * D * H + 2 * D) + D);
  case MESH12:
  case CP11: return (double)(L * (4 * D * D + 2 * D * H)); /* dt_params_per_layer: 4D^2 + 2DH */
  default: return (double)(L * 2 * D * H);                 /* 05-09's MLP: 2DH a layer */
  }
}

/* PaLM's model FLOPs: 6 x parameters x tokens, plus 12 L D S per token for
 * attention's two products (QK^T and PV, forward and backward, full S^2). */
double model_flops(const model *m) {
  double T = (double)m->B * (double)(m->S ? m->S : 1);
  if (m->kind == GPT14) /* 14's own count, nanoGPT's: wpe's parameters left out */
    return gpt_model_flops(m->L, m->D, m->H, m->V, m->S, m->B);
  return 6 * parameters_of(m) * T + 12.0 * (double)(m->L * m->D * m->S) * T;
}

/* with full recomputation each layer's forward runs twice; with selective
 * recomputation its attention products (QK^T and PV) */
double hardware_flops(const model *m, const mesh *x) {
  double T = (double)m->B * (double)(m->S ? m->S : 1), att = 4.0 * (double)(m->L * m->D * m->S);
  if (m->kind == GPT14)
    return model_flops(m) + (x->recompute ? gpt_recompute_flops(m->L, m->D, m->H, m->S, m->B) : 0);
  return model_flops(m) + (x->recompute == RECOMPUTE_FULL        ? (2 * parameters_of(m) + att) * T
                           : x->recompute == RECOMPUTE_SELECTIVE ? att * T
                                                                 : 0);
}

static void set(traffic *t, int64_t calls, int64_t bytes) { *t = (traffic){calls, bytes}; }

/* Stage s of a mesh12 model as 12's formulas take a rank's share (12_mesh/buffers.c's sizes) */
static mesh_share mesh_share_of(const model *m, const mesh *x, int64_t s) {
  int64_t T = x->n[TP], C = x->n[CP], G = x->n[DP] * x->n[CP], D = m->D, W = D / T;
  int64_t n = 4 * D * W + 2 * D * (m->H / T);
  return (mesh_share){.n = x->n,
                      .s = s,
                      .L = stage_layers(m, x, s),
                      .M = x->M,
                      .R = rows_per_micro(m, x),
                      .D = D,
                      .W = W,
                      .A = m->A / T,
                      .Hs = m->H / T,
                      .C = m->S / (C * (x->zigzag ? 2 : 1)),
                      .n_layer = n,
                      .shard = x->zero ? up(n, G) : 0,
                      .gpipe = x->gpipe,
                      .adamw = x->adamw};
}

/* Stage s of gpt14 as 14's formulas take a rank's share (14_gpt/buffers.c's
 * sizes, report.c's share_of): rank 0 of its dp x cp group, tp rank 0 */
static gpt_share gpt_share_of(const model *m, const mesh *x, int64_t s) {
  int64_t T = x->n[TP], G = x->n[DP] * x->n[CP], P = x->n[PP], D = m->D, W = D / T;
  int64_t L = stage_layers(m, x, s), R = rows_per_micro(m, x), Vs = m->V / T;
  int first = s == 0, last = s == P - 1;
  int64_t nw = L * (4 * D * W + 2 * D * (m->H / T)) + (first || last) * Vs * D +
               (2 * L + last) * D + first * m->S * D;
  int64_t shard = x->zero ? up(nw, G) : 0;
  return (gpt_share){.n = x->n,
                     .s = s,
                     .L = L,
                     .M = x->M,
                     .R = R,
                     .Rs = x->sp ? R / T : R,
                     .D = D,
                     .W = W,
                     .A = m->A / T,
                     .Hs = m->H / T,
                     .C = m->S / (x->n[CP] * (x->zigzag ? 2 : 1)),
                     .Vs = Vs,
                     .S = m->S,
                     .nw = nw,
                     .shard = shard,
                     .own = x->zero ? (shard < nw ? shard : nw) : nw,
                     .first = first,
                     .last = last,
                     .gpipe = x->gpipe,
                     .adamw = x->adamw,
                     .sp = x->sp,
                     .recompute = x->recompute == RECOMPUTE_FULL};
}

/* 14's traffic as 13's axes hold it: tp's all-reduces summed (the
 * activations' or the gains', the loss's max and sums: one row of its
 * report JSON), and the tied weight's all-reduce between the first and the
 * last stage (14's emb: two ranks of the pipeline axis) as pp's all-reduce */
static void gpt14_traffic(const model *m, const mesh *x, int64_t s, traffic t[NCOMM][NCOLL]) {
  gpt_share sh = gpt_share_of(m, x, s);
  gpt_traffic f = gpt_traffic_of(&sh);
  mesh_flow ar[4] = {f.activ, f.gains, f.max, f.sums};
  for (int i = 0; i < 4; i++)
    t[TP][AR] = (traffic){t[TP][AR].calls + ar[i].calls, t[TP][AR].bytes + ar[i].bytes};
  set(&t[TP][AG], f.gather.calls, f.gather.bytes);
  set(&t[TP][RS], f.scatter.calls, f.scatter.bytes);
  set(&t[CP][P2P], f.cp.calls, f.cp.bytes);
  set(&t[PP][P2P], f.pp.calls, f.pp.bytes);
  set(&t[PP][AR], f.emb.calls, f.emb.bytes);
  set(&t[DC][AR], f.grads.calls, f.grads.bytes);
  set(&t[DC][AG], f.params.calls, f.params.bytes);
}

void traffic_of(const model *m, const mesh *x, int64_t s, traffic t[NCOMM][NCOLL]) {
  memset(t, 0, sizeof(traffic) * NCOMM * NCOLL);
  int64_t C = x->n[CP], P = x->n[PP], G = x->n[DP] * x->n[CP];
  int64_t L = stage_layers(m, x, s), D = m->D, R = rows_per_micro(m, x), H = m->H;
  int64_t es = x->bf16 ? 2 : 4;
  switch (m->kind) {
  case MESH12: { /* 12_mesh/formulas.c */
    mesh_share sh = mesh_share_of(m, x, s);
    mesh_traffic f = mesh_traffic_of(&sh);
    set(&t[TP][AR], f.tp.calls, f.tp.bytes);
    set(&t[CP][P2P], f.cp.calls, f.cp.bytes);
    set(&t[PP][P2P], f.pp.calls, f.pp.bytes);
    set(&t[DC][AR], f.grads.calls, f.grads.bytes);
    if (x->zero) set(&t[DC][AG], f.params.calls, f.params.bytes);
    break;
  }
  case CP11: { /* the ring's hops and the gradients' all-reduce (11_cp/formulas.c) */
    int64_t want[2], hops = cp_attention_bytes(L, C, R, D, 4, 0, want);
    set(&t[CP][P2P], hops, want[0] + want[1]);
    set(&t[DC][AR], 1, cp_gradient_bytes(C, L * (4 * D * D + 2 * D * H), 4));
    break;
  }
  case DP05: { /* one all-reduce per tensor, each rounded down (05_dp/formulas.c) */
    size_t *counts = dt_host_alloc((size_t)(2 * L), sizeof *counts);
    for (int64_t i = 0; i < 2 * L; i++) counts[i] = (size_t)(D * H);
    int rounded;
    set(&t[DC][AR], 2 * L,
        (int64_t)dp_ring_bytes(counts, (int)(2 * L), (uint64_t)G, (uint64_t)es, &rounded));
    free(counts);
    break;
  }
  case FSDP06: { /* 06_fsdp/formulas.c: the gathers and scatters of shards of S = 2DH/N */
    int64_t calls[FSDP_KINDS], bytes[FSDP_KINDS];
    fsdp_traffic(L, G, up(2 * D * H, G), es, x->zero, 1, 1, calls, bytes);
    set(&t[DC][AG], calls[FSDP_GATHER], bytes[FSDP_GATHER]);
    set(&t[DC][RS], calls[FSDP_SCATTER], bytes[FSDP_SCATTER]);
    set(&t[DC][AR], calls[FSDP_REDUCE], bytes[FSDP_REDUCE]);
    break;
  }
  case PP09: /* a stage's activations forward, gradients back (09_pp/formulas.c) */
    set(&t[PP][P2P], exchanges(x, s), pp_bytes((int)P, (int)s, m->B, D, es));
    break;
  case GPT: block_traffic(m, x, s, t); break;   /* block.c */
  case GPT14: gpt14_traffic(m, x, s, t); break; /* 14_gpt/formulas.c */
  default: break;
  }
}

memory memory_of(const model *m, const mesh *x, int64_t s) {
  memory y = {0};
  int64_t mem[DT_NTAGS] = {0}; /* a lesson's formulas by dt.h's tags */
  int64_t T = x->n[TP], C = x->n[CP], P = x->n[PP], G = x->n[DP] * x->n[CP], M = x->M;
  int64_t L = stage_layers(m, x, s), D = m->D, H = m->H, A = m->A, R = rows_per_micro(m, x);
  switch (m->kind) {
  case MESH12: { /* 12_mesh/formulas.c */
    mesh_share sh = mesh_share_of(m, x, s);
    mesh_memory(&sh, mem);
    break;
  }
  case CP11: /* 11_cp/formulas.c: C here the tokens of a chunk */
    cp_memory(L, R, D, H, A, m->S / (C * (x->zigzag ? 2 : 1)), 0, 0, x->adamw, mem);
    break;
  case DP05: /* 05_dp/formulas.c */ dp_memory(L, D, H, R, x->adamw, 0, mem); break;
  case FSDP06: /* 06_fsdp/formulas.c: the shards, and what is whole at the worst moment */
    fsdp_memory(L, G, up(2 * D * H, G), D, H, R, x->zero, 0, x->adamw, 0, mem);
    break;
  case PP09: /* 09_pp/formulas.c */
    pp_memory((int)P, (int)s, L, M, R, m->B, D, H, x->gpipe, x->adamw, mem);
    break;
  case GPT14: { /* 14_gpt/formulas.c */
    gpt_share sh = gpt_share_of(m, x, s);
    gpt_memory(&sh, mem);
    break;
  }
  case GPT:
  case STATES: { /* ZeRO's model states: 16-bit params and grads, fp32 master, m, v (K = 12) */
    double Ps = m->kind == GPT ? block_stage_params(m, x, s) : m->params / (double)(T * P);
    double pb = x->bf16 ? 2 : 4, ob = x->adamw ? (x->bf16 ? 12 : 8) : (x->bf16 ? 4 : 0);
    y.params = (int64_t)(pb * Ps / (x->zero == 3 ? (double)G : 1));
    y.grads = (int64_t)(pb * Ps / (x->zero >= 2 ? (double)G : 1));
    y.optim = (int64_t)(ob * Ps / (x->zero >= 1 ? (double)G : 1));
    if (m->kind == GPT) y.activ = block_activ(m, x, s); /* block.c */
    break;
  }
  default: break;
  }
  if (m->kind <= GPT14) { /* the lessons' */
    y.params = mem[DT_PARAMS];
    y.grads = mem[DT_GRADS];
    y.optim = mem[DT_OPTIM];
    y.activ = mem[DT_ACTIV];
    y.comm = mem[DT_COMMBUF];
    y.data = mem[DT_DATA];
  }
  y.total = y.params + y.grads + y.optim + y.activ + y.comm + y.data;
  return y;
}
