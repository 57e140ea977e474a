/* 06_fsdp: sharded data parallelism, ZeRO stages 1-3 (FSDP is stage 3).
 *
 * Data parallel as in 05, but no rank keeps the whole training state. Each
 * layer's [W1 | W2] is one flat buffer of 2DH elements, padded to N shards of
 * S = ceil(2DH/N); rank r owns elements [r*S, (r+1)*S) of every layer and
 * steps only those, with their AdamW state (m, v):
 *   --zero 1    optimizer state sharded: all-reduce the gradients as in 05,
 *               step the shard, all-gather the parameters;
 *   --zero 2    gradients too: reduce-scatter each layer's gradient after its
 *               backward, keeping only this rank's shard of it;
 *   --zero 3    parameters too (FSDP, the default): all-gather a layer before
 *               its forward and again before its backward, free it after each;
 *   --prefetch  start the next layer's all-gather before computing this one,
 *               to hide it behind compute at the cost of one more layer;
 *   --precision bf16|fp16  parameters and gradients travel in 16 bits (half
 *               the bytes); master shards and AdamW state stay fp32.
 * It prints memory and bytes per rank next to ZeRO's formulas, then trains the
 * same model in one process and compares. With --ckpt, rank 0 gathers the
 * shards of w, m and v into whole tensors: a checkpoint resumes at any N. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

typedef struct {
  dt_train_config c;
  int zero, prefetch, rank;
  int64_t rows, S, NS;    /* samples per step on this rank; elements of a shard, a layer */
  float *w, *g;           /* full layers, l at l*NS: params (stage 1-2), grads (1) */
  float *ws, *gs, *m, *v; /* this rank's shards, l at l*S */
  float **full;           /* layer l's full parameters, while they exist */
  dt_request **pending;   /* layer l's all-gather, while in flight */
  float *x, *a, *h, *y, *dx, *dnext, *dh; /* activations of one step */
  float *norm;                            /* one float: the --clip norm's all-reduce */
  dt_dtype wire;                          /* what travels: DT_F32, or 16 bits */
  dt_op op;                               /* the gradients': DT_AVG, or DT_SUM in 16 bits */
  uint16_t **half, *gw; /* 16 bits: layer l while gathered; a layer's gradient + shard */
  int *bad;             /* fp16: one int, the overflow verdict's all-reduce */
  dt_counter verdict;   /* its traffic, kept out of the per-kind figures */
} fsdp_model;

static void *xcalloc(size_t n, size_t size) { /* zeroed host memory, or a clear abort */
  void *p = calloc(n, size);
  CHECK_ALLOC(p);
  return p;
}

/* This rank's shard of layer l: a slice of the full buffer when there is one. */
static float *shard_of(const fsdp_model *m, float *full, float *shards, int64_t l) {
  return full ? full + l * m->NS + m->rank * m->S : shards + l * m->S;
}

/* A gathered layer has arrived. In 16 bits it becomes fp32 again for compute,
 * which rounds its inputs to 16 bits anyway, so nothing is lost. Stages 1-2
 * skip their own slot [lo, hi): the fp32 master shard, stepped in place;
 * stage 3's buffer is fresh, all of it from the wire (lo = hi = NS). */
static void landed(fsdp_model *m, int64_t l) {
  if (m->pending[l]) dt_wait(m->pending[l]), m->pending[l] = NULL;
  if (!m->half[l]) return;
  int64_t lo = m->zero == 3 ? m->NS : m->rank * m->S, hi = m->zero == 3 ? m->NS : lo + m->S;
  dt_from_half(m->half[l], m->full[l], (size_t)lo, m->wire);
  dt_from_half(m->half[l] + hi, m->full[l] + hi, (size_t)(m->NS - hi), m->wire);
  dt_free(m->half[l]), m->half[l] = NULL;
}

/* Every rank's shard of layer l into its full buffer. Stage 3 allocates that
 * buffer now and frees it after use, so the accounting sees it come and go;
 * stages 1-2 gather in place into their resident copy. In 16 bits a 16-bit
 * copy of the shard travels instead, into a 16-bit layer (in place too). */
static void gather(fsdp_model *m, dt_comm *world, int64_t l, int async) {
  if (m->zero == 3) m->full[l] = dt_alloc_f32((size_t)m->NS, DT_PARAMS);
  const void *mine = shard_of(m, m->w, m->ws, l);
  void *all = m->full[l];
  if (m->wire != DT_F32) {
    all = m->half[l] = dt_alloc((size_t)m->NS * 2, DT_COMMBUF);
    dt_to_half(mine, m->half[l] + m->rank * m->S, (size_t)m->S, m->wire);
    mine = m->half[l] + m->rank * m->S;
  }
  /* exercise: FSDP, 1 of 2: all-gather a layer's shards */
  if (async)
    m->pending[l] = dt_all_gather_async(world, mine, all, (size_t)m->S, m->wire);
  else
    dt_all_gather(world, mine, all, (size_t)m->S, m->wire);
  /* end of exercise */
  if (!async) landed(m, l);
}

/* Layer l's full parameters, ready to compute with: gathered now unless a
 * prefetch already started it, in which case only its end is waited for. */
static float *params_of(fsdp_model *m, dt_comm *world, int64_t l) {
  if (!m->full[l]) gather(m, world, l, 0);
  landed(m, l);
  return m->full[l];
}
static void prefetch(fsdp_model *m, dt_comm *world, int64_t l) {
  if (m->prefetch && l >= 0 && l < m->c.layers && !m->full[l]) gather(m, world, l, 1);
}
static void release(fsdp_model *m, int64_t l) {
  if (m->zero == 3) dt_free(m->full[l]), m->full[l] = NULL;
}

/* Files and the check hold layer-major host arrays (W1_0, W2_0, W1_1, ...):
 * layer l's [W1 | W2] is W1_l, W2_l in a row, so a shard is a slice of it and
 * the rest padding (zero; so is its gradient). Weights, m and v alike; full:
 * the weights' resident copy (stages 1-2), else NULL and the shards. */
static int64_t shard_end(const fsdp_model *m) {
  int64_t hi = (m->rank + 1) * m->S, n = dt_params_per_layer(&m->c);
  return hi < n ? hi : n;
}
static void from_host(fsdp_model *m, float *full, float *shards, const float *host) {
  int64_t n = dt_params_per_layer(&m->c), lo = m->rank * m->S, hi = shard_end(m);
  for (int64_t l = 0; l < m->c.layers && hi > lo; l++)
    dt_copy_from_host(shard_of(m, full, shards, l), host + l * n + lo, (size_t)(hi - lo) * 4);
}

/* The reverse: each layer all-gathered, for rank 0. Not training's traffic,
 * so the counters are put back after; but the all-gathers that stages 1-2
 * leave in flight with --prefetch are training's, and finish first. */
static void to_host(fsdp_model *m, dt_comm *world, float *full, float *shards, float *host) {
  size_t n = (size_t)dt_params_per_layer(&m->c);
  for (int64_t l = 0; l < m->c.layers; l++) landed(m, l);
  dt_counter kept[DT_NKINDS];
  memcpy(kept, world->count, sizeof kept);
  float *layer = dt_alloc_f32((size_t)m->NS, DT_OTHER);
  for (int64_t l = 0; l < m->c.layers; l++) {
    dt_all_gather(world, shard_of(m, full, shards, l), layer, (size_t)m->S, DT_F32);
    if (m->rank == 0) dt_copy_to_host(host + (size_t)l * n, layer, n * 4);
  }
  dt_free(layer), memcpy(world->count, kept, sizeof kept);
}

/* Element e of the flat [W1 | W2] is element e of W1 (row-major) or e - DH of
 * W2, and the RNG is keyed by that index: a rank makes its own shard without
 * talking to anyone, even when it starts mid-row. Bounds as in dt_init_w1/w2.
 * Or it slices a file. Stages 1-2 then gather their full copy. */
static void init_weights(fsdp_model *m, dt_comm *world, const float *host) {
  const dt_train_config *c = &m->c;
  int64_t DH = c->dim * c->hidden, lo = m->rank * m->S, hi = shard_end(m);
  if (host) from_host(m, m->w, m->ws, host);
  for (int64_t l = 0; l < c->layers; l++) {
    float *dst = shard_of(m, m->w, m->ws, l);
    for (int64_t e = lo, end; !host && e < hi; e = end) { /* W1's tail, then W2's head */
      int t = e >= DH;
      end = t || hi < DH ? hi : DH;
      dt_fill_block(dst + (e - lo), 1, end - e, 0, 0, e - t * DH, (uint64_t)c->seed,
                    (uint64_t)(2 * l + t), 1.0f / sqrtf((float)(t ? c->hidden : c->dim)));
    }
    if (m->zero < 3) gather(m, world, l, 0);
  }
}

static void forward(fsdp_model *m, dt_comm *world) {
  int64_t D = m->c.dim, H = m->c.hidden, R = m->rows;
  for (int64_t l = 0; l < m->c.layers; l++) {
    float *w = params_of(m, world, l);
    prefetch(m, world, l + 1);
    double t0 = dt_span_begin();
    dt_block_forward(m->x + l * R * D, w, w + D * H, m->a + l * R * H, m->h + l * R * H,
                     m->x + (l + 1) * R * D, R, D, H, 1);
    dt_span_end("forward", "compute", t0);
    release(m, l);
  }
}

/* In 16 bits a layer's gradient travels as a 16-bit copy. Each rank divides
 * by N before converting, so the sum keeps the mean's size (as PyTorch does),
 * and the collective sums; in fp32 it averages by itself. */
static void *grad_to_wire(fsdp_model *m, float *g, int N) {
  if (m->wire == DT_F32) return g;
  dt_scale(g, (size_t)m->NS, 1.0f / (float)N);
  dt_to_half(g, m->gw, (size_t)m->NS, m->wire);
  return m->gw;
}

/* Stage 1 keeps every gradient and all-reduces each layer's as in 05. Stages
 * 2-3 make a layer's gradient in a transient buffer and reduce-scatter it at
 * once: the average of this rank's shard is all that survives. */
static void backward(fsdp_model *m, dt_comm *world) {
  int64_t D = m->c.dim, H = m->c.hidden, R = m->rows;
  for (int64_t l = m->c.layers - 1; l >= 0; l--) {
    float *w = params_of(m, world, l);
    prefetch(m, world, l - 1);
    float *g = m->g ? m->g + l * m->NS : dt_alloc_f32((size_t)m->NS, DT_GRADS); /* zeroed */
    double t0 = dt_span_begin();
    dt_block_backward(m->x + l * R * D, m->a + l * R * H, m->h + l * R * H, w, w + D * H, m->dx,
                      m->dnext, g, g + D * H, m->dh, R, D, H, 1);
    dt_span_end("backward", "compute", t0);
    float *t = m->dx;
    m->dx = m->dnext, m->dnext = t;
    void *send = grad_to_wire(m, g, world->size), *recv = send;
    if (!m->g) recv = m->wire == DT_F32 ? (void *)(m->gs + l * m->S) : (void *)(m->gw + m->NS);
    /* exercise: FSDP, 2 of 2: reduce-scatter the layer's gradient */
    if (m->g)
      dt_all_reduce(world, send, recv, (size_t)m->NS, m->wire, m->op);
    else
      dt_reduce_scatter(world, send, recv, (size_t)m->S, m->wire, m->op), dt_free(g);
    /* end of exercise */
    if (m->wire != DT_F32) /* back to fp32: only this rank's shard, all its optimizer reads */
      dt_from_half((uint16_t *)recv + (m->g ? m->rank * m->S : 0), shard_of(m, m->g, m->gs, l),
                   (size_t)m->S, m->wire);
    release(m, l);
  }
}

/* fp16: did any gradient overflow? Each rank sees only its shards, so the
 * verdict is a MAX over ranks: every rank must skip the same steps. */
static int overflowed(fsdp_model *m, dt_comm *world) {
  if (m->wire != DT_F16) return 0;
  int64_t L = m->c.layers, S = m->S;
  int bad = m->gs ? dt_count_nonfinite(m->gs, (size_t)(L * S)) > 0 : 0;
  for (int64_t l = 0; !m->gs && l < L; l++)
    bad |= dt_count_nonfinite(m->g + l * m->NS + m->rank * S, (size_t)S) > 0;
  dt_counter *ar = &world->count[DT_ALL_REDUCE], kept = *ar;
  dt_copy_from_host(m->bad, &bad, 4);
  dt_all_reduce(world, m->bad, m->bad, 1, DT_I32, DT_MAX);
  dt_copy_to_host(&bad, m->bad, 4);
  m->verdict.calls += ar->calls - kept.calls,
      m->verdict.bytes_sent += ar->bytes_sent - kept.bytes_sent;
  m->verdict.seconds += ar->seconds - kept.seconds, *ar = kept;
  return bad;
}

/* Each rank steps its own shard only; stages 1-2 then all-gather the updated
 * shards into every rank's full copy (with --prefetch the next forward waits
 * for each layer just before it needs it). fp16 skips a step that overflowed,
 * gathering nothing: the weights did not change. */
static void optimizer_step(fsdp_model *m, dt_comm *world, dt_loss_scaler *scaler) {
  int64_t L = m->c.layers, S = m->S;
  double used = 1.0;
  if (!dt_scaler_update(scaler, &m->c, overflowed(m, world), &used)) return;
  double sq = 0;       /* unscale and clip ride in the optimizer's pass */
  if (m->c.clip > 0) { /* the global norm: the shards' squares, summed over ranks */
    for (int64_t l = 0; l < L; l++) sq += dt_sum_squares(shard_of(m, m->g, m->gs, l), (size_t)S);
    float part = (float)sq;
    dt_copy_from_host(m->norm, &part, 4);
    dt_all_reduce(world, m->norm, m->norm, 1, DT_F32, DT_SUM);
    dt_copy_to_host(&part, m->norm, 4);
    sq = part;
  }
  for (int64_t l = 0; l < L; l++) {
    float *g = shard_of(m, m->g, m->gs, l);
    dt_optimizer_step(&m->c, shard_of(m, m->w, m->ws, l), g, m->m ? m->m + l * S : NULL,
                      m->v ? m->v + l * S : NULL, (size_t)S, scaler->taken,
                      dt_grad_scale(&m->c, used, sq));
    if (m->zero < 3) gather(m, world, l, m->prefetch);
  }
}

int main(int argc, char **argv) {
  dt_train_config c = DT_TRAIN_DEFAULTS;
  int64_t zero = 3;
  int prefetch = 0;
  dt_option options[] = {
      DT_TRAIN_OPTIONS(&c),
      DT_INT("--zero", &zero, 1, 3,
             "ZeRO stage: 1 shards the optimizer state, 2 also grads, 3 also params (FSDP)"),
      DT_FLAG("--prefetch", &prefetch, "start the next layer's all-gather before computing"),
      DT_END};
  dt_lesson lesson = {"06_fsdp", "sharded data parallel, ZeRO-1/2/3 and FSDP", 1};
  dt_comm *world = dt_init(&argc, &argv, &lesson, options);
  dt_train_resolve(&c);
  int N = world->size;
  if (c.batch % N != 0)
    dt_fail("global batch %lld does not split over %d ranks: choose --batch divisible by %d",
            (long long)c.batch, N, N);
  dt_trace_enable(c.trace != NULL);
  if (c.dump_data) dt_dump_data(c.dump_data, &c);

  int64_t L = c.layers, D = c.dim, H = c.hidden, R = c.batch / N, P = L * dt_params_per_layer(&c);
  int64_t S = (dt_params_per_layer(&c) + N - 1) / N; /* padded: any D, H and N work */
  fsdp_model m = {.c = c, .zero = (int)zero, .prefetch = prefetch, .rank = world->rank};
  m.rows = R, m.S = S, m.NS = N * S;
  if (zero < 3) m.w = dt_alloc_f32((size_t)(L * N * S), DT_PARAMS);
  if (zero == 3) m.ws = dt_alloc_f32((size_t)(L * S), DT_PARAMS);
  if (zero == 1) m.g = dt_alloc_f32((size_t)(L * N * S), DT_GRADS);
  if (zero >= 2) m.gs = dt_alloc_f32((size_t)(L * S), DT_GRADS);
  if (c.optimizer[0] == 'a')
    m.m = dt_alloc_f32((size_t)(L * S), DT_OPTIM), m.v = dt_alloc_f32((size_t)(L * S), DT_OPTIM);
  m.full = xcalloc((size_t)L, sizeof(float *)), m.pending = xcalloc((size_t)L, sizeof(void *));
  for (int64_t l = 0; m.w && l < L; l++) m.full[l] = m.w + l * N * S; /* resident */
  float **act[] = {&m.x, &m.a, &m.h, &m.dx, &m.dnext, &m.dh};
  int64_t len[] = {(L + 1) * R * D, L * R * H, L * R * H, R * D, R * D, R * H};
  for (int i = 0; i < 6; i++) *act[i] = dt_alloc_f32((size_t)len[i], DT_ACTIV);
  m.y = dt_alloc_f32((size_t)(R * D), DT_DATA);
  m.norm = dt_alloc_f32(1, DT_OTHER), m.bad = dt_alloc(4, DT_OTHER);
  m.wire = dt_precision_type(&c), m.op = m.wire == DT_F32 ? DT_AVG : DT_SUM;
  m.half = xcalloc((size_t)L, sizeof(uint16_t *));
  if (m.wire != DT_F32) m.gw = dt_alloc((size_t)(N * S + (zero >= 2 ? S : 0)) * 2, DT_COMMBUF);
  float *host_w = xcalloc((size_t)P, 4), *host_m = NULL, *host_v = NULL; /* whole model */
  if (m.m && c.ckpt) host_m = xcalloc((size_t)P, 4), host_v = xcalloc((size_t)P, 4);
  double *losses = xcalloc((size_t)c.steps, sizeof(double));
  int64_t *samples = xcalloc((size_t)R, sizeof(int64_t));
  /* Every rank makes its own shards from the counter-based RNG, or slices
   * them from the same file, or a checkpoint of any world size: no broadcast. */
  if (c.load) dt_load_model(c.load, &c, host_w);
  if (c.resume) dt_ckpt_resume(&c, host_w, host_m, host_v), m.c = c;
  init_weights(&m, world, c.load || c.resume ? host_w : NULL);
  if (c.resume && m.m) from_host(&m, NULL, m.m, host_m), from_host(&m, NULL, m.v, host_v);
  static const char *what[4] = {"", ": optimizer state", ": gradients and optimizer state",
                                " (FSDP): parameters, gradients and optimizer state"};
  dt_train_print(&c);
  dt_print0("ZeRO-%d%s sharded; a layer's [W1 | W2] is 2DH = %lld elements, padded to N x S "
            "= %d x %lld; %lld of the %lld samples per rank; prefetch %s\n",
            m.zero, what[zero], (long long)(2 * D * H), N, (long long)S, (long long)R,
            (long long)c.batch, prefetch ? "on" : "off");
  int64_t lo = m.rank * S, w1 = D * H - lo, pad = lo + S - 2 * D * H;
  w1 = w1 < 0 ? 0 : w1 > S ? S : w1, pad = pad < 0 ? 0 : pad > S ? S : pad;
  dt_print_ranks("owns [%lld, %lld) of every layer: %lld of W1, %lld of W2, %lld padding\n",
                 (long long)lo, (long long)(lo + S), (long long)w1, (long long)(S - w1 - pad),
                 (long long)pad);

  dt_loss_scaler scaler; /* fp16: scale the loss, skip steps that overflow */
  dt_scaler_init(&scaler, &c);
  dt_comm_reset(world);
  dt_mem_reset_peaks();
  double t_start = dt_now(), compute = 0;
  for (int64_t step = c.start_step; step < c.steps; step++) {
    double t0 = dt_now(), comm0 = dt_comm_total(world).seconds, loss;
    dt_step_samples(&c, N, world->rank, step, samples);
    if (m.g) dt_zero(m.g, (size_t)(L * N * S) * 4);
    dt_make_batch(&c, samples, R, m.x, m.y);
    forward(&m, world);
    loss =
        dt_mse_forward_backward(m.x + L * R * D, m.y, m.dx, (size_t)(R * D), 1.0 / (double)(R * D));
    if (scaler.scale != 1.0) dt_scale(m.dx, (size_t)(R * D), (float)scaler.scale);
    backward(&m, world);
    optimizer_step(&m, world, &scaler);
    if (dt_ckpt_due(&c, step)) { /* no rank holds all of w, m and v: rank 0 gathers them */
      to_host(&m, world, m.w, m.ws, host_w);
      if (m.m) to_host(&m, world, NULL, m.m, host_m), to_host(&m, world, NULL, m.v, host_v);
      if (m.rank == 0) dt_ckpt_save(&c, step + 1, host_w, host_m, host_v);
    }
    /* bookkeeping, not training: the loss for printing, on the host */
    DT_MPI(MPI_Allreduce(&loss, &losses[step], 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    losses[step] /= N;
    dt_sync();
    double dt = dt_now() - t0;
    compute += dt - (dt_comm_total(world).seconds - comm0);
    dt_print_step(&c, step, losses[step], "mean over ranks", dt);
  }
  size_t steps = (size_t)(c.steps - c.start_step); /* trained in this run */
  double ms = 1e3 / (double)steps;                 /* totals to ms per step */
  dt_print0("\nsummary (rank 0; every rank does the same work):\n");
  dt_print0(
      "  time per step          %8.2f ms   compute %.2f ms   communication %.2f ms (blocked)\n",
      (dt_now() - t_start) * ms, compute * ms, dt_comm_total(world).seconds * ms);
  /* Ring model (dt.h): gathering or scattering every layer sends L(N-1)S x E bytes per rank,
   * E = 4 in fp32, 2 in 16 bits; the --clip norm is one fp32 all-reduced */
  size_t es = dt_dtype_size(m.wire), ring = (size_t)(L * (N - 1) * S) * es;
  size_t clip = c.clip > 0 ? 2 * (size_t)(N - 1) * 4 / N : 0;
  dt_kind kind[3] = {DT_ALL_GATHER, DT_REDUCE_SCATTER, DT_ALL_REDUCE};
  size_t took = (size_t)(scaler.taken - c.start_step); /* stages 1-2 gather after a step */
  size_t want[3] = {zero == 3 ? 2 * ring : ring * took / steps, zero >= 2 ? ring : 0,
                    (zero == 1 ? 2 * ring : 0) + clip};
  char how[3][96];
  snprintf(how[0], 96,
           zero == 3 ? "2 x L x (N-1) x S x %zu: forward, backward" : "L x (N-1) x S x %zu", es);
  if (zero < 3 && took < steps)
    snprintf(how[0] + strlen(how[0]), 96 - strlen(how[0]), " x %zu/%zu steps taken", took, steps);
  snprintf(how[1], 96, zero >= 2 ? "L x (N-1) x S x %zu" : "0", es);
  snprintf(how[2], 96, zero == 1 ? "2 x L x (N-1) x S x %zu, as 05" : "0", es);
  dt_print0("  bytes sent per rank per step   calls    measured     formula\n");
  for (int i = 0; i < 3; i++)
    dt_print0("    %-24s %9zu %11zu %11zu   %s%s\n", dt_kind_name(kind[i]),
              (size_t)world->count[kind[i]].calls / steps,
              (size_t)world->count[kind[i]].bytes_sent / steps, want[i], how[i],
              i == 2 && clip ? " + 2(N-1)/N x 4, --clip" : "");
  dt_print0(
      "    %-24s %9s %11zu %11zu   %d(N-1)/N x L x N x S x %zu%s; DP (05): 2(N-1)/N x P x %zu "
      "= %zu\n",
      "total", "", (size_t)dt_comm_total(world).bytes_sent / steps, want[0] + want[1] + want[2],
      zero == 2 ? 2 : 3, es, clip ? " + clip" : "", es, 2 * (size_t)(N - 1) * (size_t)P * es / N);
  if (m.wire == DT_F16) {
    dt_print0("    %-24s %9zu %11zu %11zu   2(N-1)/N x 4: one int, MAX over ranks; not in the "
              "total\n",
              "overflow verdict (fp16)", (size_t)m.verdict.calls / steps,
              (size_t)m.verdict.bytes_sent / steps, 2 * (size_t)(N - 1) * 4 / N);
    dt_print0("  fp16 loss scaling      %lld step%s skipped on overflow; "
              "final loss scale %g\n",
              (long long)scaler.skipped, scaler.skipped == 1 ? "" : "s", scaler.scale);
  }
  /* Memory per rank: the shards, plus what is full-size at the worst moment. */
  size_t K = c.optimizer[0] == 'a' ? 8 : 0, LS = (size_t)(L * S), NS = (size_t)(N * S);
  size_t two = zero == 3 && prefetch && L > 1, mem[4], dp[4] = {4 * P, 4 * P, K * P, 0};
  mem[DT_PARAMS] = 4 * (zero == 3 ? LS + (1 + two) * NS : L * NS);
  mem[DT_GRADS] = 4 * (zero == 1 ? L * NS : LS + NS);
  mem[DT_OPTIM] = K * LS;
  mem[DT_ACTIV] = dp[DT_ACTIV] =
      (size_t)(((L + 1) * R * D + 2 * L * R * H + 2 * R * D + R * H) * 4);
  const char *why[4] = {zero < 3 ? "4 x L x NS: every layer"
                        : two    ? "4 x (LS + 2NS): shards, 2 gathered layers"
                                 : "4 x (LS + NS): shards, 1 gathered layer",
                        zero == 1 ? "4 x L x NS: every layer"
                                  : "4 x (LS + NS): shards, 1 layer's transient",
                        "K x LS: shards", "as 05, b = B/N"};
  dt_print0("  memory per rank (peak bytes)   measured     formula     DP (05)   (K = 8 for "
            "AdamW's m and v, 0 for sgd)\n");
  for (int t = DT_PARAMS; t <= DT_ACTIV; t++)
    dt_print0("    %-24s %11zu %11zu %11zu   %s\n", dt_tag_name((dt_tag)t), dt_mem_peak((dt_tag)t),
              mem[t], dp[t], why[t]);
  static const char *paper[4] = {"", "(4 + 4 + K/N) P", "(4 + (4+K)/N) P", "(8+K)/N x P"};
  double Z = ((zero == 3 ? 4.0 / N : 4) + (zero >= 2 ? 4.0 / N : 4) + (double)K / N) * P;
  dt_print0("    %-24s %11zu %11zu %11zu   ZeRO paper, fp32: %s = %.0f\n", "model states",
            dt_mem_peak(DT_PARAMS) + dt_mem_peak(DT_GRADS) + dt_mem_peak(DT_OPTIM),
            mem[0] + mem[1] + mem[2], dp[0] + dp[1] + dp[2], paper[zero], Z);
  if (m.wire != DT_F32) { /* the 16-bit copies that travel; 05 keeps one of every gradient */
    size_t fly = zero < 3 && prefetch ? (size_t)L : 1, gs = zero >= 2 ? (size_t)S : 0;
    dt_print0("    %-24s %11zu %11zu %11zu   2 x (%s x NS + NS%s): gathers in flight, a layer's "
              "gradient%s\n",
              dt_tag_name(DT_COMMBUF), dt_mem_peak(DT_COMMBUF), 2 * (fly * NS + NS + gs),
              2 * (size_t)P, fly > 1 ? "L" : "1", gs ? " + S" : "", gs ? " and its shard" : "");
  }
  dt_print_memory_uncounted();
  dt_print_ranks("peak params %zu, grads %zu, optim %zu, activ %zu bytes\n", dt_mem_peak(DT_PARAMS),
                 dt_mem_peak(DT_GRADS), dt_mem_peak(DT_OPTIM), dt_mem_peak(DT_ACTIV));

  to_host(&m, world, m.w, m.ws, host_w); /* after the summary: not training's gathers */
  if (c.save && world->rank == 0) dt_save_model(c.save, &c, c.steps, host_w);
  if (c.save) dt_print0("saved %s\n", c.save);
  if (c.trace) dt_trace_write(c.trace);
  int failed = c.no_check ? 0 : dt_check_against_reference(&c, losses, host_w, 0);
  free(host_w), free(host_m), free(host_v), free(losses), free(samples), free(m.full),
      free(m.pending), free(m.half);
  dt_free(m.gw), dt_free(m.bad);
  dt_finalize();
  return failed;
}
