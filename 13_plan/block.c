/* block.c: the planner's GPT block, the formulas of its bytes and memory.
 *
 * A layer is two norms, attention and an MLP, each product split over tp
 * as Megatron splits it (QKV and the MLP's first products by columns, the
 * attention's output projection and the MLP's last by rows). Its variants
 * are the ones real runs use: grouped-query attention (KV heads of their
 * own, Ainslie et al. 2023), SwiGLU's three matrices (Shazeer 2020), the
 * llama-style block (no biases, no learned positions, an output layer of
 * its own), the vocabulary padded to a multiple of pad x tp (Megatron's
 * --make-vocab-size-divisible-by). Sources: the ZeRO paper (Rajbhandari et
 * al. 2020) for the model states; Korthikanti et al. 2022 ("Reducing
 * Activation Recomputation in Large Transformer Models", section 4) for
 * the activations, with sequence parallelism (section 4.2.2), selective
 * recomputation (section 5) and the interleaved schedule's first stage
 * (section 4.2.3); Megatron-LM's code for the traffic. */
#include "block.h"

#include "09_pp/formulas.h"
#include "09_pp/plans.h"

static int64_t up(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static void set(traffic *t, int64_t calls, int64_t bytes) { *t = (traffic){calls, bytes}; }

int64_t kv_heads(const model *m) { return m->KV ? m->KV : m->A; }

/* a tp rank's rows of the embedding and of the output layer */
static int64_t vocab_shard(const model *m, int64_t T) {
  return m->pad > 0 ? up(m->V, m->pad * T) * m->pad : up(m->V, T);
}

int64_t padded_vocab(const model *m, int64_t T) { return vocab_shard(m, T) * T; }

/* A layer's parameters: those split over tp (the products' weights and the
 * column-parallel biases) and those every tp rank holds whole (the
 * row-parallel biases, the norms). */
typedef struct {
  double split, whole;
} layer_params;

static layer_params layer_of(const model *m) {
  double D = (double)m->D, F = (double)m->H, kv = (double)(kv_heads(m) * (m->D / m->A));
  layer_params p = {2 * D * D + 2 * D * kv + (m->swiglu ? 3 : 2) * D * F, 0};
  if (m->llama) {
    p.whole = 2 * D; /* two RMSNorms' gains */
    return p;
  }
  p.split += D + 2 * kv + (m->swiglu ? 2 : 1) * F; /* QKV's biases, the MLP's first */
  p.whole += 2 * D + 4 * D;                        /* Wo's and W2's biases, two LayerNorms */
  return p;
}

/* L(4D^2 + 2DF + 9D + F) + VD + SD + 2D for GPT-2's block (tied output
 * layer, learned positions); llama's: L(2D^2 + 2D kv + 3DF + 2D) + 2VD + D */
double block_params(const model *m) {
  layer_params l = layer_of(m);
  double D = (double)m->D, V = (double)padded_vocab(m, 1);
  double ends = m->llama ? 2 * V * D + D : V * D + (double)m->S * D + 2 * D;
  return (double)m->L * (l.split + l.whole) + ends;
}

/* One tp rank's share of stage s: its layers; the first stage the token
 * (and position) embeddings, vocabulary parallel; the last the output
 * layer (tied: a copy of the embedding where pp > 1, as Megatron) and the
 * final norm. */
double block_stage_params(const model *m, const mesh *x, int64_t s) {
  layer_params l = layer_of(m);
  int64_t T = x->n[TP], P = x->n[PP];
  double D = (double)m->D, Vs = (double)vocab_shard(m, T);
  double p = (double)stage_layers(m, x, s) * (l.split / (double)T + l.whole);
  if (s == 0) p += Vs * D + (m->llama ? 0 : (double)(m->S * m->D));
  if (s == P - 1) p += (m->llama || P > 1 ? Vs * D : 0) + (m->llama ? D : 2 * D);
  return p;
}

/* One layer's activations for one microbatch on one rank (Korthikanti et
 * al.): s b (10h + 24h/t) + 5 a s^2 b / t in 16 bits, written for any
 * block: the part split over tp is Q, K, V and Wo's input (2 + 4 KV/A + 2)h
 * and the MLP's 4F (GELU's input and W2's) or SwiGLU's 6F (gate, up and
 * their product); the 10h outside tp (norms' inputs, dropout masks, the
 * products' inputs) is split too with sequence parallelism; flash keeps the
 * softmax's log-sum-exp (4 a s b / t, fp32) in place of the scores, and
 * selective recomputation keeps neither. */
double block_layer_activ(const model *m, const mesh *x) {
  double s = (double)(m->S / x->n[CP]), b = (double)(m->B / (x->n[DP] * x->M)), h = (double)m->D;
  double t = (double)x->n[TP], a = (double)m->A, F = (double)m->H;
  double kvr = (double)kv_heads(m) / a;
  double spread = (2 + 4 * kvr + 2) * h + (m->swiglu ? 6 : 4) * F,
         shared = 10 * h / (x->sp ? t : 1);
  double scores = x->flash                              ? 4 * a * s * b / t
                  : x->recompute == RECOMPUTE_SELECTIVE ? 0
                                                        : 5 * a * s * s * b / t;
  return (s * b * (shared + spread / t) + scores) * (x->bf16 ? 1 : 2);
}

/* ZB-H1: what B keeps for W, a layer's, as 12 and 14 keep it
 * (12_mesh/zb.c, 14_gpt/formulas.c's gpt_kept: L(2RD + RHs + 3RW)):
 * the output gradient of each product whose weight's gradient W takes,
 * s b (2h + (q k v + the MLP's first products)/t), whole h for Wo's and
 * W2's (each tp rank's input gradient of the row-parallel products) */
static double block_kept(const model *m, const mesh *x) {
  double s = (double)(m->S / x->n[CP]), b = (double)(m->B / (x->n[DP] * x->M)), h = (double)m->D;
  double qkv = h * (1 + 2 * (double)kv_heads(m) / (double)m->A), F = (double)m->H;
  return s * b * (2 * h + (qkv + (m->swiglu ? 2 : 1) * F) / (double)x->n[TP]) * (x->bf16 ? 2 : 4);
}

/* A stage's activations: live microbatches (1F1B: min(pp - s, M); GPipe:
 * M; ZB-H1: min(pp, M), each held until its W, 09's pp_live_zb) of its
 * layers; with full recomputation each layer's input (2 s b h) and one
 * layer whole; the interleaved schedule's first stage holds 1 + (pp -
 * 1)/(pp V) times as many layers' worth (Korthikanti et al.); the last
 * stage the logits in fp32 for the loss. */
int64_t block_activ(const model *m, const mesh *x, int64_t s) {
  int64_t P = x->n[PP], M = x->M, T = x->n[TP], R = rows_per_micro(m, x), D = m->D;
  int64_t live = x->gpipe ? M : x->zb ? pp_live_zb((int)P, M) : min64(P - s, M);
  int full = x->recompute == RECOMPUTE_FULL;
  double layer = block_layer_activ(m, x);
  double keep = full ? 2.0 * (double)(R * D) * (x->bf16 ? 1 : 2) / (double)(x->sp ? T : 1) : layer;
  keep += x->zb ? block_kept(m, x) : 0;
  double layers = (double)(live * stage_layers(m, x, s));
  if (x->V > 1) layers *= 1 + (double)(P - 1) / (double)(P * x->V);
  double a = layers * keep + (full ? layer : 0);
  if (s == P - 1) a += 4.0 * (double)R * (double)vocab_shard(m, T); /* the logits, fp32 */
  return (int64_t)a;
}

/* The pipeline's exchanges of stage s: the sendrecv calls of 09's plan of
 * the schedule (09_pp/plans.c); with V virtual stages each microbatch
 * crosses every virtual stage's boundary, V times a rank each way, less
 * the model's two ends, in the calls of its lockstep. */
int64_t block_exchanges(const mesh *x, int64_t s) {
  int64_t P = x->n[PP];
  if (P < 2) return 0;
  return pp_plan_count((int)P, (int)s, x->M, (int)(x->V > 1 ? x->V : 1), x->gpipe, x->zb).nev;
}

/* tp: Megatron's 2 all-reduces of [b s, D] in forward, 2 in backward, per
 * layer (2 more with full recomputation; sequence parallelism turns each
 * into an all-gather and a reduce-scatter of the same bytes); cp: 11's ring
 * of K and V chunks; pp: the activations forward, the gradients back (1/tp
 * of them with sequence parallelism); dp x cp: ZeRO (Rajbhandari et al.):
 * 0 all-reduces the gradients once; 1 reduce-scatters them once and
 * all-gathers the stepped parameters (the same bytes); 2 keeps only its
 * shard of the gradients, so each microbatch's are reduce-scattered; 3
 * also gathers the parameters for each microbatch's forward and backward. */
void block_traffic(const model *m, const mesh *x, int64_t s, traffic t[NCOMM][NCOLL]) {
  int64_t T = x->n[TP], C = x->n[CP], P = x->n[PP], G = x->n[DP] * x->n[CP], M = x->M;
  int64_t L = stage_layers(m, x, s), D = m->D, tok = rows_per_micro(m, x), es = x->bf16 ? 2 : 4;
  int64_t kv = kv_heads(m) * (D / m->A) / T, k = (4 + 2 * (x->recompute == RECOMPUTE_FULL)) * L * M;
  if (T > 1 && !x->sp) set(&t[TP][AR], k, k * (2 * (T - 1) * tok * D * es / T));
  if (T > 1 && x->sp) set(&t[TP][AG], k, k * ((T - 1) * tok * D * es / T));
  if (T > 1 && x->sp) set(&t[TP][RS], k, k * ((T - 1) * tok * D * es / T));
  if (C > 1) set(&t[CP][P2P], L * M * (3 * C - 2), L * M * (3 * C - 2) * 2 * tok * kv * es);
  int64_t sends = P > 1 ? 2 * (x->V > 1 ? x->V : 1) - (s == 0) - (s == P - 1) : 0;
  set(&t[PP][P2P], block_exchanges(x, s), M * sends * tok * D * es / (x->sp ? T : 1));
  double Ps = block_stage_params(m, x, s);
  int64_t grads = (int64_t)(Ps * (double)es),
          sh = (int64_t)((double)(G - 1) / (double)G * Ps * (double)es);
  int64_t rs = x->zero == 1 ? 1 : x->zero >= 2 ? M : 0, ag = x->zero == 3 ? 2 * M : x->zero ? 1 : 0;
  if (G > 1 && !x->zero) set(&t[DC][AR], 1, 2 * (G - 1) * grads / G);
  if (G > 1 && rs) set(&t[DC][RS], rs, rs * sh);
  if (G > 1 && ag) set(&t[DC][AG], ag, ag * sh);
}
