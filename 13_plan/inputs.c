/* inputs.c: the names of the collectives and models (the axes' are
 * 12_mesh/topology.c's); a mesh's size; and what stops a model on a mesh,
 * with each refusal's sentence. */
#include <stdio.h>

#include "inputs.h"

const char *const coll_name[NCOLL] = {"all_reduce", "all_gather", "reduce_scatter", "sendrecv"};
const char *const kind_name[NKINDS] = {"mesh12", "cp11", "dp05", "fsdp06", "pp09", "gpt", "states"};

int64_t mesh_size(const mesh *x) { return topo_ranks(x->n); }

/* The axis a one-axis lesson runs on (11: cp; 05, 06: dp; 09: pp). */
static int one_axis(model_kind k) { return k == CP11 ? CP : k == PP09 ? PP : DP; }

/* cp's chunks of a sequence: two a rank when zigzag (11's split) */
static int64_t chunks(const mesh *x) { return x->n[CP] * (x->zigzag ? 2 : 1); }

/* The first thing that stops the model on the mesh, in this order, or RUNS. */
mesh_refusal mesh_problem(const model *m, const mesh *x, int64_t gpn) {
  int64_t T = x->n[TP], C = x->n[CP], P = x->n[PP];
  if (m->kind == STATES) return RUNS;
  if (m->kind >= CP11 && m->kind <= PP09 && x->n[one_axis(m->kind)] != mesh_size(x))
    return ONE_AXIS;
  if (m->A % T || m->H % T) return TP_HEADS;
  if (m->kind != PP09 && m->L % P) return PP_LAYERS;
  if (m->S && m->S % chunks(x)) return SEQ_CHUNKS;
  if (x->M < 1 || m->B % (x->n[DP] * x->M)) return BATCH_MICRO;
  if (T > gpn && m->kind == GPT) return TP_NODE; /* the planner's rule; the lessons run any */
  if (m->kind != GPT && (x->bf16 || x->recompute || !x->flash)) return LESSONS_FP32;
  if (m->kind == MESH12 && x->zero > 1) return ZERO_12;
  if ((m->kind == FSDP06) != (x->zero > 0) && m->kind != MESH12 && m->kind != GPT) return ZERO_06;
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
    [TP_NODE] = "tp %lld beyond a node of %lld",
    [LESSONS_FP32] =
        "the lessons train fp32, without recomputation, attention by blocks (no S x S scores)",
    [ZERO_12] = "12 shards the optimizer alone (--zero 0|1)",
    [ZERO_06] = "ZeRO stages are 06's (and 12's --zero 1)",
    [RING_FLASH] = "ring attention (cp) computes by blocks: --attention flash"};

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
  default: snprintf(out, size, "%s", s);
  }
}
