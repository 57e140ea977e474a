/* inputs.c: the names of the collectives and models (the axes' are
 * 12_mesh/topology.c's); a mesh's size; and what stops a model on a mesh,
 * with each refusal's sentence. */
#include <stdio.h>

#include "inputs.h"

const char *const coll_name[NCOLL] = {"all_reduce", "all_gather", "reduce_scatter", "sendrecv"};
const char *const recompute_name[3] = {"none", "full", "selective"};
const char *const kind_name[NKINDS] = {"mesh12", "cp11",  "dp05", "fsdp06",
                                       "pp09",   "gpt14", "gpt",  "states"};

int64_t mesh_size(const mesh *x) { return topo_ranks(x->n); }

/* 09's balanced split (the first L % pp stages a layer more); 12 needs L %
 * pp == 0. The planner's first and last stage may hold fewer (--first-stage-
 * layers, --last-stage-layers: the embedding and the output layer are their
 * work), the stages between them the rest evenly. */
int64_t stage_layers(const model *m, const mesh *x, int64_t s) {
  int64_t P = x->n[PP];
  if (!x->first && !x->last) return m->L / P + (s < m->L % P);
  if (s == 0 && x->first) return x->first;
  if (s == P - 1 && x->last) return x->last;
  int64_t given = (x->first > 0) + (x->last > 0);
  return P > given ? (m->L - x->first - x->last) / (P - given) : 0;
}

/* 11's and 12's split of a sequence: R = B/(dp M) x S/cp rows (12_mesh/buffers.c) */
int64_t rows_per_micro(const model *m, const mesh *x) {
  if (x->n[DP] * x->M == 0) return 0; /* --params: no batch, no shape */
  int64_t Bm = m->B / (x->n[DP] * x->M);
  return m->S ? Bm * (m->S / x->n[CP]) : Bm;
}

/* The axis a one-axis lesson runs on (11: cp; 05, 06: dp; 09: pp). */
static int one_axis(model_kind k) { return k == CP11 ? CP : k == PP09 ? PP : DP; }

/* the key-value heads: every head's own unless grouped */
static int64_t kv(const model *m) { return m->KV ? m->KV : m->A; }

/* cp's chunks of a sequence: two a rank when zigzag (11's split) */
static int64_t chunks(const mesh *x) { return x->n[CP] * (x->zigzag ? 2 : 1); }

/* The planner's stages: the first and last stage's layers (where given)
 * and the rest evenly over the stages between, each a multiple of the
 * virtual stages a rank. */
static int stages_split(const model *m, const mesh *x) {
  int64_t P = x->n[PP], V = x->V > 1 ? x->V : 1, given = (x->first > 0) + (x->last > 0);
  int64_t rest = m->L - x->first - x->last, mids = P - given;
  if (given && (P < 2 || rest < 0 || (mids ? rest % mids || !rest : rest))) return 0;
  if (!given && m->L % P) return 0;
  int64_t each = given ? (mids ? rest / mids : V) : m->L / P;
  return !(each % V || x->first % V || x->last % V) && (V == 1 || P > 1);
}

/* The planner's own features asked of a lesson's model (14 runs Megatron's
 * sequence parallelism) */
static int gpt_only(const model *m, const mesh *x) {
  return x->first || x->last || (x->sp && m->kind != GPT14) || x->tp_overlap || x->dropout ||
         m->KV || m->swiglu || m->llama || m->pad;
}

/* The schedules as 09 runs them (09_pp/interleave.h, zb.h), and 12 and 14
 * through 09's plans: V chunks a stage (interleaved 1F1B: 1f1b, 2 stages
 * or more, M a multiple of pp, each stage's layers a multiple of V), ZB-H1
 * with one chunk a stage; the planner's GPT block takes both. */
static int schedule_runs(const model *m, const mesh *x) {
  int64_t P = x->n[PP], V = x->V > 1 ? x->V : 1;
  int pp_lesson = m->kind == PP09 || m->kind == MESH12 || m->kind == GPT14;
  if (x->zb) return V == 1 && (pp_lesson || m->kind == GPT);
  if (V == 1) return 1;
  if ((!pp_lesson && m->kind != GPT) || x->gpipe || P < 2 || x->M % P) return 0;
  return m->kind == GPT || m->L % (P * V) == 0;
}

/* What a lesson's model runs: fp32, attention by blocks, no recomputation
 * but 14's (--recompute: each layer's forward again, full) */
static int lesson_runs(const model *m, const mesh *x) {
  int recompute = x->recompute && !(m->kind == GPT14 && x->recompute == RECOMPUTE_FULL);
  return !x->bf16 && !recompute && x->flash;
}

/* The first thing that stops the model on the mesh, in this order, or RUNS. */
mesh_refusal mesh_problem(const model *m, const mesh *x, int64_t gpn) {
  int64_t T = x->n[TP], C = x->n[CP], P = x->n[PP];
  if (m->kind == STATES) return RUNS;
  if (m->kind != GPT && gpt_only(m, x)) return GPT_ONLY;
  if (m->kind >= CP11 && m->kind <= PP09 && x->n[one_axis(m->kind)] != mesh_size(x))
    return ONE_AXIS;
  if (m->A % T || m->H % T) return TP_HEADS;
  if (m->kind == GPT && (m->A % kv(m) || kv(m) % T)) return KV_HEADS;
  if (m->kind == GPT && (x->first || x->last || x->V > 1) && !stages_split(m, x)) return STAGES;
  if (m->kind != PP09 && !x->first && !x->last && m->L % P) return PP_LAYERS;
  if (m->S && m->S % chunks(x)) return SEQ_CHUNKS;
  if (x->M < 1 || m->B % (x->n[DP] * x->M)) return BATCH_MICRO;
  if (!schedule_runs(m, x)) return SCHEDULE;
  if (m->kind == GPT14 && x->zb && x->recompute == RECOMPUTE_FULL)
    return ZB_RECOMPUTE; /* 14_gpt/layer.c's */
  if (m->kind == GPT14 && x->sp && rows_per_micro(m, x) % T) return SP_ROWS;
  if (T > gpn && m->kind == GPT) return TP_NODE; /* the planner's rule; the lessons run any */
  if (m->kind != GPT && !lesson_runs(m, x)) return LESSONS_FP32;
  if ((m->kind == MESH12 || m->kind == GPT14) && x->zero > 1) return ZERO_12;
  if ((m->kind == FSDP06) != (x->zero > 0) && m->kind != MESH12 && m->kind != GPT14 &&
      m->kind != GPT)
    return ZERO_06;
  if (m->kind == GPT && C > 1 && !x->flash) return RING_FLASH;
  return RUNS;
}

/* Every refusal's sentence; refusal_text gives each its numbers. */
static const char *const sentence[NREFUSALS] = {
    [ONE_AXIS] = "%s runs one axis: --%s alone",
    [TP_HEADS] = "tp %lld does not divide the heads (%lld) or the MLP (%lld)",
    [PP_LAYERS] = "pp %lld does not divide the %lld layers",
    [SEQ_CHUNKS] = "the sequence (%lld) does not split into %lld chunks",
    [BATCH_MICRO] = "the batch (%lld) does not split into dp x M = %lld x %lld",
    [BATCH_DP] = "the batch does not divide over dp",
    [SP_ROWS] = "--sequence-parallel: the %lld rows of a microbatch do not split over tp %lld",
    [TP_NODE] = "tp %lld beyond a node of %lld",
    [LESSONS_FP32] = "the lessons are predicted in fp32 (12's and 14's --precision bf16|fp16 is "
                     "not modelled here), without recomputation (14: full, --recompute full), "
                     "attention by blocks (no S x S scores)",
    [ZERO_12] = "12 and 14 shard the optimizer alone (--zero 0|1)",
    [ZERO_06] = "ZeRO stages are 06's (and 12's --zero 1)",
    [RING_FLASH] = "ring attention (cp) computes by blocks: --attention flash",
    [KV_HEADS] = "the %lld key-value heads must divide the %lld heads and be divided by tp %lld",
    [STAGES] = "the stages do not split the %lld layers: pp %lld, the first stage %lld, the last "
               "%lld (0: an even split), %lld virtual stages a rank (every stage's layers a "
               "multiple of them)",
    [SCHEDULE] = "--schedule %s with %lld virtual stage(s) a rank (pp %lld, M %lld, %lld layers) "
                 "is run by no lesson: V > 1 is interleaved 1F1B (09, 12, 14: 1f1b, pp >= 2, M "
                 "a multiple of pp, the layers of pp x V), zb1 is ZB-H1 (09, 12, 14: V 1)",
    [ZB_RECOMPUTE] = "--schedule zb1 keeps each layer's activations until its W runs: 14 runs it "
                     "without --recompute full, which keeps a layer's input alone",
    [GPT_ONLY] =
        "uneven stages, --sequence-parallel, --tp-overlap, --dropout, "
        "--kv-heads, --mlp, --arch and --vocab-pad are the planner's GPT block's (--model gpt "
        "...)"};

void refusal_text(mesh_refusal r, const model *m, const mesh *x, int64_t gpn, char *out,
                  size_t size) {
  const char *s = sentence[r] ? sentence[r] : "";
  long long T = x->n[TP];
  switch (r) {
  case ONE_AXIS: snprintf(out, size, s, kind_name[m->kind], axis_name[one_axis(m->kind)]); break;
  case TP_HEADS: snprintf(out, size, s, T, (long long)m->A, (long long)m->H); break;
  case PP_LAYERS: snprintf(out, size, s, (long long)x->n[PP], (long long)m->L); break;
  case SEQ_CHUNKS: snprintf(out, size, s, (long long)m->S, (long long)chunks(x)); break;
  case BATCH_MICRO:
    snprintf(out, size, s, (long long)m->B, (long long)x->n[DP], (long long)x->M);
    break;
  case TP_NODE: snprintf(out, size, s, T, (long long)gpn); break;
  case SP_ROWS: snprintf(out, size, s, (long long)rows_per_micro(m, x), T); break;
  case KV_HEADS: snprintf(out, size, s, (long long)kv(m), (long long)m->A, T); break;
  case STAGES:
    snprintf(out, size, s, (long long)m->L, (long long)x->n[PP], (long long)x->first,
             (long long)x->last, (long long)(x->V > 1 ? x->V : 1));
    break;
  case SCHEDULE:
    snprintf(out, size, s,
             x->gpipe ? "gpipe"
             : x->zb  ? "zb1"
                      : "1f1b",
             (long long)(x->V > 1 ? x->V : 1), (long long)x->n[PP], (long long)x->M,
             (long long)m->L);
    break;
  default: snprintf(out, size, "%s", s);
  }
}
