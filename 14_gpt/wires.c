/* wires.c: --precision bf16|fp16 on the mesh (state.h). Every message but the
 * cross-entropy's pieces travels as a 16-bit copy, half the bytes: the
 * residual stream's rows along tp (07's all-reduce, or sequence
 * parallelism's gather and scatter) and pp, the ring's blocks (11's, its
 * own wires), the gradients over dp x cp (06's wire with --zero 1), between
 * the tied weight's two stages and the gains' over tp. The pieces, a row's
 * max and sums of exponentials, are the loss itself, R floats a microbatch:
 * they stay fp32. Weights, gradients and AdamW's state stay fp32. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

/* The gradients' copy: the whole buffer where dp x cp sums it, else the
 * larger of wte's rows (two stages) and the gains (sequence parallelism) */
static int64_t grads_copy(const model *m) {
  int64_t ends = m->mesh.emb->size > 1 ? m->weights.Vs * m->weights.D : 0;
  int64_t gains = m->step.sp && m->mesh.n[TP] > 1 ? gpt_gains_n(m) : 0;
  if (!m->weights.zero && m->mesh.dc->size > 1) return m->weights.nw;
  return ends > gains ? ends : gains;
}

void gpt_wires(model *m, const dt_train_config *c) {
  int travels = m->mesh.n[TP] > 1 || m->mesh.n[PP] > 1 ||
                m->step.sp; /* sp: gathered, scattered: R + Rs rows */
  dt_wire_init(&m->step.wire, c, (size_t)(travels ? (m->step.R + m->step.Rs) * m->weights.D : 0));
  dt_wire_init(&m->weights.grads, c, (size_t)grads_copy(m));
}

const char *gpt_comm_how(const model *m, char *buf, size_t n) {
  int travels = m->mesh.n[TP] > 1 || m->mesh.n[PP] > 1 || m->step.sp;
  int64_t g = grads_copy(m);
  const char *what = g == 0                              ? ""
                     : g == m->weights.nw                ? "n"
                     : g == m->weights.Vs * m->weights.D ? "Vs D"
                                                         : "(2L + last) D";
  if (m->step.wire.type == DT_F32)
    snprintf(buf, n, "8RW x 4: the ring's [K|V] and [dK|dV], two each");
  else if (!travels && !g && !m->weights.zero)
    snprintf(buf, n,
             "8RW x 2: the ring's [K|V] and [dK|dV] as sent and received (their floats "
             "are activ)");
  else
    snprintf(buf, n,
             "8RW x 2: the ring's [K|V] and [dK|dV] as sent and received (their floats are "
             "activ); 2 x (%s%s%s%s%s): 16-bit copies of the rows, the gradients",
             travels ? "(R + Rs) D" : "", travels && (g || m->weights.zero) ? " + " : "", what,
             g && m->weights.zero ? " + " : "", m->weights.zero ? "2 G S, 06's" : "");
  return buf;
}

/* Whether the copies of [at, at + n) of the weights differ along c, in
 * 16 bits where `half` is one (bookkeeping) */
static int differ(dt_comm *c, const float *w, int64_t n, dt_dtype half) {
  float *mine = dt_host_alloc((size_t)n + 1, 4), *root = dt_host_alloc((size_t)n + 1, 4);
  float *t = (float *)w;
  dt_mem_aside(1);
  if (half != DT_F32) {
    dt_copy(t = dt_alloc_f32((size_t)n + 1, DT_OTHER), w, (size_t)n * 4);
    dt_round_half(t, (size_t)n, half);
  }
  dt_copy_to_host(mine, t, (size_t)n * 4);
  if (t != w) dt_free(t);
  dt_mem_aside(0);
  memcpy(root, mine, (size_t)n * 4);
  dt_host_broadcast(c, root, (size_t)n, DT_F32, 0);
  int d = memcmp(mine, root, (size_t)n * 4) != 0;
  free(mine);
  free(root);
  return d;
}

void gpt_replicas(const model *m) {
  dt_dtype half = m->weights.zero ? m->weights.f.wire.type : DT_F32;
  int d[3] = {differ(m->mesh.dc, m->weights.w, m->weights.nw, half),
              differ(m->mesh.axis[TP], m->weights.w + m->weights.at_of[REPLICAS],
                     m->weights.nw - m->weights.at_of[REPLICAS], half),
              m->mesh.first || m->mesh.last ? differ(m->mesh.emb, gpt_wte(m, m->weights.w),
                                                     m->weights.Vs * m->weights.D, half)
                                            : 0};
  dt_host_all_reduce(m->mesh.world, d, 3, DT_I32, DT_MAX);
  int64_t G = m->mesh.n[DP] * m->mesh.n[CP];
  dt_print0("  replicas: every dp x cp group's %lld cop%s of its weights %s; the tp groups' "
            "copies of the gains and wpe %s; wte's rows on the first and the last stage %s%s\n",
            (long long)G, G == 1 ? "y" : "ies",
            d[0]     ? "DIFFER"
            : G == 1 ? "is the only one"
                     : "are bit-identical",
            d[1]     ? "DIFFER"
            : G == 1 ? "are bit-identical"
                     : "too",
            d[2]                ? "DIFFER"
            : m->mesh.n[PP] > 1 ? "too"
                                : "(one stage)",
            half != DT_F32 ? ", in 16 bits (a shard's owner's fp32 master rounded)" : "");
}
