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
#include "dt.h"
#include "formulas.h"

static int64_t up(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* 09's balanced split (the first L % pp stages a layer more); 12 needs L % pp == 0 */
int64_t stage_layers(const model *m, const mesh *x, int64_t s) {
  int64_t P = x->n[PP];
  return m->L / P + (s < m->L % P);
}

/* 11's and 12's split of a sequence: R = B/(dp M) x S/cp rows (12_mesh/buffers.c) */
int64_t rows_per_micro(const model *m, const mesh *x) {
  if (x->n[DP] * x->M == 0) return 0; /* --params: no batch, no shape */
  int64_t Bm = m->B / (x->n[DP] * x->M);
  return m->S ? Bm * (m->S / x->n[CP]) : Bm;
}

/* The stage's exchanges that have a neighbour, on 09's plan (09_pp/formulas.c) */
static int64_t exchanges(const mesh *x, int64_t s) {
  return pp_exchanges((int)x->n[PP], (int)s, x->M, x->gpipe);
}

/* A GPT stage's parameters on one tp rank: per layer the column-parallel
 * weights and biases over tp (QKV, W1), the row-parallel weights (Wo, W2),
 * their biases and both layer norms whole; the first stage the token and
 * position embeddings (vocabulary parallel), the last the output layer (the
 * embedding, tied; a copy when pp > 1, as Megatron) and the final norm. */
static double gpt_stage_params(const model *m, const mesh *x, int64_t s) {
  int64_t D = m->D, F = m->H, T = x->n[TP], P = x->n[PP];
  double layer = (double)(4 * D * D + 2 * D * F + 3 * D + F) / (double)T + 6.0 * (double)D;
  double p = (double)stage_layers(m, x, s) * layer;
  if (s == 0) p += (double)(up(m->V, T) * D + m->S * D);
  if (s == P - 1) p += (double)((P > 1 ? up(m->V, T) * D : 0) + 2 * D);
  return p;
}

double parameters_of(const model *m) {
  int64_t D = m->D, H = m->H, L = m->L;
  switch (m->kind) {
  case STATES: return m->params;
  case GPT: return (double)(L * (4 * D * D + 2 * D * H + 9 * D + H) + m->V * D + m->S * D + 2 * D);
  case MESH12:
  case CP11: return (double)(L * (4 * D * D + 2 * D * H)); /* dt_params_per_layer: 4D^2 + 2DH */
  default: return (double)(L * 2 * D * H);                 /* 05-09's MLP: 2DH a layer */
  }
}

/* PaLM's model FLOPs: 6 x parameters x tokens, plus 12 L D S per token for
 * attention's two products (QK^T and PV, forward and backward, full S^2). */
double model_flops(const model *m) {
  double T = (double)m->B * (double)(m->S ? m->S : 1);
  return 6 * parameters_of(m) * T + 12.0 * (double)(m->L * m->D * m->S) * T;
}

/* with full recomputation, each layer's forward runs twice */
double hardware_flops(const model *m, const mesh *x) {
  double T = (double)m->B * (double)(m->S ? m->S : 1);
  return model_flops(m) +
         (x->recompute ? (2 * parameters_of(m) + 4.0 * (double)(m->L * m->D * m->S)) * T : 0);
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

void traffic_of(const model *m, const mesh *x, int64_t s, traffic t[NCOMM][NCOLL]) {
  memset(t, 0, sizeof(traffic) * NCOMM * NCOLL);
  int64_t T = x->n[TP], C = x->n[CP], P = x->n[PP], G = x->n[DP] * x->n[CP], M = x->M;
  int64_t L = stage_layers(m, x, s), D = m->D, R = rows_per_micro(m, x), W = D / T, H = m->H;
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
  case GPT: { /* Megatron: 2 all-reduces of [b s, D] in forward, 2 in backward, per layer */
    int64_t tok = R, per = 2 * (T - 1) * tok * D * es / T, k = (4 + 2 * x->recompute) * L * M;
    double Ps = gpt_stage_params(m, x, s);
    int64_t grads = (int64_t)(Ps * (double)es),
            sh = (int64_t)((double)(G - 1) / (double)G * Ps * (double)es);
    if (T > 1) set(&t[TP][AR], k, k * per);
    if (C > 1) set(&t[CP][P2P], L * M * (3 * C - 2), L * M * (3 * C - 2) * 2 * tok * W * es);
    set(&t[PP][P2P], P > 1 ? exchanges(x, s) : 0, M * ((s + 1 < P) + (s > 0)) * tok * D * es);
    /* ZeRO (Rajbhandari et al.): 0 all-reduces the gradients once; 1 reduce-scatters them
     * once and all-gathers the stepped parameters (the same bytes); 2 keeps only its
     * shard of the gradients, so each microbatch's are reduce-scattered; 3 also gathers
     * the parameters for each microbatch's forward and backward */
    int64_t rs = x->zero == 1   ? 1
                 : x->zero >= 2 ? M
                                : 0,
            ag = x->zero == 3 ? 2 * M
                 : x->zero    ? 1
                              : 0;
    if (G > 1 && !x->zero) set(&t[DC][AR], 1, 2 * (G - 1) * grads / G);
    if (G > 1 && rs) set(&t[DC][RS], rs, rs * sh);
    if (G > 1 && ag) set(&t[DC][AG], ag, ag * sh);
    break;
  }
  default: break;
  }
}

/* A GPT layer's activations for one microbatch on one rank, 16-bit:
 * Korthikanti et al.'s s b (10h + 24h/t) + 5 a s^2 b / t, with the MLP's
 * 16 s b h / t as 4 s b F / t for any F; flash keeps the softmax's
 * log-sum-exp (4 a s b / t, fp32) in place of the scores. */
static double gpt_layer_activ(const model *m, const mesh *x) {
  double s = (double)(m->S / x->n[CP]), b = (double)(m->B / (x->n[DP] * x->M)), h = (double)m->D;
  double t = (double)x->n[TP], a = (double)m->A, F = (double)m->H;
  double scores = x->flash ? 4 * a * s * b / t : 5 * a * s * s * b / t;
  return (s * b * (10 * h + (8 * h + 4 * F) / t) + scores) * (x->bf16 ? 1 : 2);
}

memory memory_of(const model *m, const mesh *x, int64_t s) {
  memory y = {0};
  int64_t mem[DT_NTAGS] = {0}; /* a lesson's formulas by dt.h's tags */
  int64_t T = x->n[TP], C = x->n[CP], P = x->n[PP], G = x->n[DP] * x->n[CP], M = x->M;
  int64_t L = stage_layers(m, x, s), D = m->D, H = m->H, A = m->A, R = rows_per_micro(m, x);
  int64_t live = x->gpipe ? M : min64(P - s, M);
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
  case GPT:
  case STATES: { /* ZeRO's model states: 16-bit params and grads, fp32 master, m, v (K = 12) */
    double Ps = m->kind == GPT ? gpt_stage_params(m, x, s) : m->params / (double)(T * P);
    double pb = x->bf16 ? 2 : 4, ob = x->adamw ? (x->bf16 ? 12 : 8) : (x->bf16 ? 4 : 0);
    y.params = (int64_t)(pb * Ps / (x->zero == 3 ? (double)G : 1));
    y.grads = (int64_t)(pb * Ps / (x->zero >= 2 ? (double)G : 1));
    y.optim = (int64_t)(ob * Ps / (x->zero >= 1 ? (double)G : 1));
    if (m->kind == STATES) break;
    double layer = gpt_layer_activ(m, x),
           keep = x->recompute ? 2.0 * (double)(R * D) * (x->bf16 ? 1 : 2) : layer;
    double a = (double)(live * L) * keep + (x->recompute ? layer : 0);
    if (s == P - 1) a += 4.0 * (double)R * (double)up(m->V, T); /* the logits, fp32, for the loss */
    y.activ = (int64_t)a;
    break;
  }
  default: break;
  }
  if (m->kind == MESH12 || m->kind == CP11 || m->kind == DP05 || m->kind == FSDP06 ||
      m->kind == PP09) {
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
