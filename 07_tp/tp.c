/* 07_tp: tensor parallelism, the Megatron MLP.
 *
 * Data parallelism (05) copies the whole model to every rank; here the model
 * itself is cut. Each block's H hidden units are split into N slices: rank r
 * holds the columns r*H/N .. (r+1)*H/N-1 of W1 and the same rows of W2, in
 * every layer, and every rank runs the whole global batch. relu acts on each
 * hidden unit alone, so a rank computes its slice of h = relu(x W1) without
 * talking to anyone; h W2 is a sum over the slices, so one all-reduce of the
 * [B, D] partial outputs finishes the block (Megatron's g). Backward mirrors
 * it: the block input fed every slice, so its gradient is again a sum, one
 * more all-reduce (Megatron's f). The weight gradients are complete on their
 * own rank, since every rank saw the whole batch: gradients are never
 * all-reduced and weights never gathered. With --precision bf16|fp16 the
 * activations travel in 16 bits: half the bytes. It ends by training the
 * same model in one process and comparing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

typedef struct {
  dt_train_config c;
  dt_comm *world;
  int64_t Hs;                             /* hidden units on this rank: H/N */
  float *w, *g, *m, *v;                   /* flat shards: layer l's [W1_s | W2_s] */
  float *x, *a, *h, *y, *dx, *dnext, *dh; /* x, dx: [B, D] on every rank; a, h: [B, Hs] */
  dt_dtype wire;                          /* what activations travel in (--precision) */
  uint16_t *x16;                          /* 16 bits: the copy of a [B, D] partial */
  float *scalar;                          /* one float: the clip norm, the overflow flag */
  dt_counter norm, flag;                  /* their all-reduces, counted apart from f/g */
} tp_model;

static void *xmalloc(size_t bytes) { /* host memory, or a clear abort */
  void *p = malloc(bytes);
  CHECK_ALLOC(p);
  return p;
}

static float *w1_of(const tp_model *m, float *flat, int64_t l) { /* [D, Hs] */
  return flat + 2 * l * m->c.dim * m->Hs;
}
static float *w2_of(const tp_model *m, float *flat, int64_t l) { /* [Hs, D] */
  return flat + (2 * l + 1) * m->c.dim * m->Hs;
}

/* In 16 bits a partial [B, D] travels as a 16-bit copy, is summed in 16 bits
 * as NCCL does, and comes back to fp32 before the residual is added. A SUM:
 * the partials are pieces of the value. In fp32 the buffer itself travels. */
static void *to_wire(tp_model *m, float *buf) {
  if (m->wire == DT_F32) return buf;
  dt_to_half(buf, m->x16, (size_t)(m->c.batch * m->c.dim), m->wire);
  return m->x16;
}
static void from_wire(tp_model *m, float *buf) {
  if (m->wire != DT_F32) dt_from_half(m->x16, buf, (size_t)(m->c.batch * m->c.dim), m->wire);
}

/* exercise: the f/g pair (forward and backward of the tensor-parallel blocks) */
static void forward(tp_model *m) {
  int64_t B = m->c.batch, D = m->c.dim, Hs = m->Hs;
  for (int64_t l = 0; l < m->c.layers; l++) {
    float *x = m->x + l * B * D, *out = m->x + (l + 1) * B * D;
    /* f, forward: the identity. x is already whole on every rank. */
    double t0 = dt_span_begin();
    dt_block_forward(x, w1_of(m, m->w, l), w2_of(m, m->w, l), m->a + l * B * Hs, m->h + l * B * Hs,
                     out, B, D, Hs, 0); /* out = h_s W2_s, a partial sum */
    dt_span_end("forward", "compute", t0);
    /* g, forward: sum the partials, in place where x_{l+1} lives ... */
    void *p = to_wire(m, out);
    dt_all_reduce(m->world, p, p, (size_t)(B * D), m->wire, DT_SUM);
    from_wire(m, out);
    dt_add(out, x, (size_t)(B * D)); /* ... then the residual, once, not once per rank */
  }
}

/* m->dx holds dLoss/dx_L on entry; the same [B, D] on every rank. */
static void backward(tp_model *m) {
  int64_t B = m->c.batch, D = m->c.dim, Hs = m->Hs;
  for (int64_t l = m->c.layers - 1; l >= 0; l--) {
    /* g, backward: the identity. Every slice's W2_s gets the whole dout. */
    double t0 = dt_span_begin();
    dt_block_backward(m->x + l * B * D, m->a + l * B * Hs, m->h + l * B * Hs, w1_of(m, m->w, l),
                      w2_of(m, m->w, l), m->dx, m->dnext, w1_of(m, m->g, l), w2_of(m, m->g, l),
                      m->dh, B, D, Hs, 0); /* dnext = da_s W1_s^T, a partial sum */
    dt_span_end("backward", "compute", t0);
    /* f, backward: x_l fed every slice, so its gradient sums over them. Layer
     * 0's is not needed here (x_0 is data), but under a real network there is
     * an embedding below that needs it: every block does the same. */
    void *p = to_wire(m, m->dnext);
    dt_all_reduce(m->world, p, p, (size_t)(B * D), m->wire, DT_SUM);
    from_wire(m, m->dnext);
    dt_add(m->dnext, m->dx, (size_t)(B * D)); /* the residual path */
    float *t = m->dx;
    m->dx = m->dnext, m->dnext = t;
  }
}
/* end of exercise */

/* Facts about the whole model, which no rank holds, from one float per rank
 * (summed or maxed over the ranks), counted on its own row. */
static float all_reduce_scalar(tp_model *m, float v, dt_op op, dt_counter *row) {
  dt_copy_from_host(m->scalar, &v, sizeof v);
  uint64_t bytes0 = m->world->count[DT_ALL_REDUCE].bytes_sent;
  dt_all_reduce(m->world, m->scalar, m->scalar, 1, DT_F32, op);
  row->calls++, row->bytes_sent += m->world->count[DT_ALL_REDUCE].bytes_sent - bytes0;
  dt_copy_to_host(&v, m->scalar, sizeof v);
  return v;
}

/* The global norm: each rank squares its own shards, one all-reduce adds. */
static double global_sq_norm(tp_model *m, size_t n) {
  if (m->c.clip <= 0) return 0; /* not needed */
  return all_reduce_scalar(m, (float)dt_sum_squares(m->g, n), DT_SUM, &m->norm);
}

/* fp16: were any gradients too large for 16 bits? The shards differ from rank
 * to rank, so the verdict is a flag maxed over the ranks: all skip, or none. */
static int overflowed(tp_model *m, size_t n) {
  if (m->wire != DT_F16) return 0;
  return all_reduce_scalar(m, dt_count_nonfinite(m->g, n) > 0, DT_MAX, &m->flag) > 0;
}

/* A formula's value, whole or to two decimals. The counters add whole bytes
 * per call: at NP=3 they fall short of 2(N-1)/N x bytes by under 1 per call. */
static const char *num(char *buf, double v) {
  snprintf(buf, 32, v == floor(v) ? "%.0f" : "%.2f", v);
  return buf;
}

/* Between a flat shard buffer (weights, m or v) and the whole model's
 * layer-major host copy (W1_0, W2_0, W1_1, ...), the order of files and of
 * the check. to_shards: each rank slices its columns of W1 and rows of W2. */
static void to_shards(const tp_model *m, float *flat, const float *host) {
  int64_t D = m->c.dim, H = m->c.hidden, Hs = m->Hs, P = D * H, col0 = m->world->rank * Hs;
  float *tmp = xmalloc((size_t)(D * Hs) * 4);
  for (int64_t l = 0; l < m->c.layers; l++) {
    for (int64_t d = 0; d < D; d++) /* W1[:, col0 : col0+Hs], row by row */
      memcpy(tmp + d * Hs, host + 2 * l * P + d * H + col0, (size_t)Hs * 4);
    dt_copy_from_host(w1_of(m, flat, l), tmp, (size_t)(D * Hs) * 4);
    dt_copy_from_host(w2_of(m, flat, l), host + (2 * l + 1) * P + col0 * D, (size_t)(Hs * D) * 4);
  }
  free(tmp);
}

/* to_host: all-gather the shards; rank 0 gets the whole tensors. Only for the
 * check, --save and checkpoints, never inside a step: TP gathers no weight. */
static void to_host(const tp_model *m, float *flat, float *host) {
  int64_t D = m->c.dim, H = m->c.hidden, Hs = m->Hs, P = D * H, N = m->world->size;
  float *gathered = dt_alloc_f32((size_t)P, DT_OTHER), *tmp = xmalloc((size_t)P * 4);
  for (int64_t l = 0; l < m->c.layers; l++) {
    dt_all_gather(m->world, w1_of(m, flat, l), gathered, (size_t)(D * Hs), DT_F32);
    if (m->world->rank == 0) { /* [N][D][Hs]: rank r's block is W1[:, r*Hs : (r+1)*Hs] */
      dt_copy_to_host(tmp, gathered, (size_t)P * 4);
      for (int64_t r = 0; r < N; r++)
        for (int64_t d = 0; d < D; d++)
          memcpy(host + 2 * l * P + d * H + r * Hs, tmp + (r * D + d) * Hs, (size_t)Hs * 4);
    }
    /* [N][Hs][D] is W2 [H, D] already: row blocks are contiguous */
    dt_all_gather(m->world, w2_of(m, flat, l), gathered, (size_t)(Hs * D), DT_F32);
    if (m->world->rank == 0) dt_copy_to_host(host + (2 * l + 1) * P, gathered, (size_t)P * 4);
  }
  dt_free(gathered), free(tmp);
}

/* --ckpt: no rank holds the whole state, so rank 0 gathers it and writes it.
 * Those gathers are not training traffic: the counters are put back after. */
static void checkpoint(tp_model *m, int64_t steps_done, float *w, float *mh, float *vh) {
  dt_counter kept[DT_NKINDS];
  memcpy(kept, m->world->count, sizeof kept);
  to_host(m, m->w, w);
  if (m->m) to_host(m, m->m, mh), to_host(m, m->v, vh);
  if (m->world->rank == 0) dt_ckpt_save(&m->c, steps_done, w, m->m ? mh : NULL, m->m ? vh : NULL);
  memcpy(m->world->count, kept, sizeof kept);
}

int main(int argc, char **argv) {
  dt_train_config c = DT_TRAIN_DEFAULTS;
  dt_option options[] = {DT_TRAIN_OPTIONS(&c), DT_END};
  dt_lesson lesson = {"07_tp", "tensor parallel MLP (Megatron): W1 by columns, W2 by rows", 1};
  dt_comm *world = dt_init(&argc, &argv, &lesson, options);
  dt_train_resolve(&c);
  int N = world->size, rank = world->rank;
  if (c.hidden % N != 0)
    dt_fail("--hidden %lld does not split over %d ranks: each rank holds H/N hidden units (W1's "
            "columns, W2's rows), so H must be divisible by N; try --hidden %lld (or another "
            "multiple of %d)",
            (long long)c.hidden, N, (long long)((c.hidden / N + 1) * N), N);
  dt_trace_enable(c.trace != NULL);
  if (c.dump_data) dt_dump_data(c.dump_data, &c);

  tp_model m = {.c = c, .world = world, .Hs = c.hidden / N};
  int64_t L = c.layers, D = c.dim, H = c.hidden, B = c.batch, Hs = m.Hs, P = D * H;
  int64_t S = 2 * L * D * Hs; /* parameters on this rank */
  m.w = dt_alloc_f32((size_t)S, DT_PARAMS);
  m.g = dt_alloc_f32((size_t)S, DT_GRADS);
  if (c.optimizer[0] == 'a') /* AdamW's state for the shards only */
    m.m = dt_alloc_f32((size_t)S, DT_OPTIM), m.v = dt_alloc_f32((size_t)S, DT_OPTIM);
  m.x = dt_alloc_f32((size_t)((L + 1) * B * D), DT_ACTIV);
  m.a = dt_alloc_f32((size_t)(L * B * Hs), DT_ACTIV);
  m.h = dt_alloc_f32((size_t)(L * B * Hs), DT_ACTIV);
  m.dx = dt_alloc_f32((size_t)(B * D), DT_ACTIV);
  m.dnext = dt_alloc_f32((size_t)(B * D), DT_ACTIV);
  m.dh = dt_alloc_f32((size_t)(B * Hs), DT_ACTIV);
  m.y = dt_alloc_f32((size_t)(B * D), DT_DATA);
  m.wire = dt_precision_type(&c);
  if (m.wire != DT_F32) m.x16 = dt_alloc((size_t)(B * D) * 2, DT_COMMBUF);
  if (c.clip > 0 || m.wire == DT_F16) m.scalar = dt_alloc_f32(1, DT_COMMBUF);
  /* whole-model host arrays, for files and the check: weights, AdamW m and v */
  int adamw = c.optimizer[0] == 'a', state = adamw && c.ckpt;
  float *host_w = xmalloc((size_t)(2 * L * P) * 4);
  float *host_m = state ? xmalloc((size_t)(2 * L * P) * 4) : NULL;
  float *host_v = state ? xmalloc((size_t)(2 * L * P) * 4) : NULL;
  double *losses = xmalloc((size_t)c.steps * sizeof(double));
  int64_t *samples = xmalloc((size_t)B * sizeof(int64_t));
  /* Every rank makes its own shards from the counter-based RNG (the same
   * values a single process would put there), or slices them from a file. */
  int64_t col0 = rank * Hs;
  if (c.load) dt_load_model(c.load, &c, host_w), to_shards(&m, m.w, host_w);
  for (int64_t l = 0; l < L && !c.load; l++) {
    dt_init_w1(&c, l, w1_of(&m, m.w, l), col0, Hs);
    dt_init_w2(&c, l, w2_of(&m, m.w, l), col0, Hs);
  }
  if (c.resume) { /* a checkpoint of any world size replaces that start */
    dt_ckpt_resume(&c, host_w, host_m, host_v);
    m.c = c;
    to_shards(&m, m.w, host_w);
    if (adamw) to_shards(&m, m.m, host_m), to_shards(&m, m.v, host_v);
  }
  dt_train_print(&c);
  dt_print0("tensor parallel over %d rank%s: %lld of the %lld hidden units per rank; every rank "
            "runs the whole batch of %lld; 2 all-reduces of [B, D] per layer\n",
            N, N > 1 ? "s" : "", (long long)Hs, (long long)H, (long long)B);
  dt_print_ranks("W1[:, %lld:%lld] [%lld x %lld] and W2[%lld:%lld, :] [%lld x %lld] of every "
                 "layer: %lld of %lld parameters\n",
                 (long long)col0, (long long)(col0 + Hs), (long long)D, (long long)Hs,
                 (long long)col0, (long long)(col0 + Hs), (long long)Hs, (long long)D, (long long)S,
                 (long long)(2 * L * P));

  dt_loss_scaler scaler; /* fp16: scale the loss, skip steps that overflow */
  dt_scaler_init(&scaler, &c);
  dt_comm_reset(world);
  dt_mem_reset_peaks();
  double t_start = dt_now(), compute = 0, spread = 0;
  for (int64_t step = c.start_step; step < c.steps; step++) {
    double t0 = dt_now(), comm0 = world->count[DT_ALL_REDUCE].seconds;
    dt_step_samples(&c, 1, 0, step, samples); /* one replica: the whole global batch */
    dt_make_batch(&c, samples, B, m.x, m.y);
    forward(&m);
    /* x_L and y are whole and alike on every rank, so every rank computes the
     * same loss and the same dLoss/dx_L: no loss all-reduce needed. */
    losses[step] =
        dt_mse_forward_backward(m.x + L * B * D, m.y, m.dx, (size_t)(B * D), 1.0 / (double)(B * D));
    if (scaler.scale != 1.0) dt_scale(m.dx, (size_t)(B * D), (float)scaler.scale);
    dt_zero(m.g, (size_t)S * 4);
    backward(&m);
    /* Weight gradients never travel, but they are held in 16 bits as the
     * reference holds them: an fp16 gradient beyond 65504 becomes inf here. */
    if (m.wire != DT_F32) dt_round_half(m.g, (size_t)S, m.wire);
    double used = 1.0;
    if (dt_scaler_update(&scaler, &c, overflowed(&m, (size_t)S), &used)) {
      float scale = dt_grad_scale(&c, used, global_sq_norm(&m, (size_t)S));      /* unscale, clip */
      dt_optimizer_step(&c, m.w, m.g, m.m, m.v, (size_t)S, scaler.taken, scale); /* shards only */
    }
    if (dt_ckpt_due(&c, step)) checkpoint(&m, step + 1, host_w, host_m, host_v);
    dt_sync();
    double dt = dt_now() - t0;
    compute += dt - (world->count[DT_ALL_REDUCE].seconds - comm0);
    /* bookkeeping: do the ranks' losses really agree? (max of x and of -x) */
    double both[2] = {losses[step], -losses[step]};
    DT_MPI(MPI_Allreduce(MPI_IN_PLACE, both, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    spread = fmax(spread, both[0] + both[1]);
    dt_print_step(&c, step, losses[step], "rank 0; every rank computes it alike", dt);
  }
  int64_t trained = c.steps - c.start_step; /* fewer after --resume */
  double per_step = (dt_now() - t_start) / (double)trained;
  dt_counter ar = world->count[DT_ALL_REDUCE], all = dt_comm_total(world), act = ar;
  act.calls -= m.norm.calls + m.flag.calls; /* f/g: all but the norm's and the flag's */
  act.bytes_sent -= m.norm.bytes_sent + m.flag.bytes_sent;

  /* Per rank per step, ring model (dt.h). */
  uint64_t steps = (uint64_t)trained;
  double ring = 2.0 * (N - 1) / N, K = c.optimizer[0] == 'a' ? 8 : 0, b = (double)B / N;
  double flops = 12.0 * (double)(L * B * D * Hs); /* forward 2 matmuls, backward 4 */
  size_t es = dt_dtype_size(m.wire);              /* bytes per activation on the wire */
  double want_act = 2.0 * (double)L * ring * (double)(B * D) * (double)es, want_norm = ring * 4;
  double taken = (double)(scaler.taken - c.start_step) / (double)trained; /* fp16 skips some */
  double want_all = want_act + (c.clip > 0) * want_norm * taken + (m.wire == DT_F16) * want_norm;
  char f1[32], f2[32], f3[32];
  dt_print0("\nsummary (rank 0; every rank does the same work):\n");
  dt_print0("  time per step          %8.2f ms   compute %.2f ms   all-reduce %.2f ms (rank "
            "blocked in it)\n",
            per_step * 1e3, compute / (double)trained * 1e3, ar.seconds / (double)trained * 1e3);
  dt_print0("  bytes sent per rank per step    calls    measured     formula\n");
  dt_print0(
      "    %-26s %6llu %11llu %11s   2L x 2(N-1)/N x B x D x %zu: x_l+1 forward, dx_l backward\n",
      "all_reduce f/g (activ)", (unsigned long long)(act.calls / steps),
      (unsigned long long)(act.bytes_sent / steps), num(f1, want_act), es);
  if (c.clip > 0)
    dt_print0("    %-26s %6llu %11llu %11s   2(N-1)/N x 4: one float, the squared norm\n",
              "all_reduce norm (--clip)", (unsigned long long)(m.norm.calls / steps),
              (unsigned long long)(m.norm.bytes_sent / steps), num(f1, want_norm * taken));
  if (m.wire == DT_F16)
    dt_print0("    %-26s %6llu %11llu %11s   2(N-1)/N x 4: one float, 1 if a shard overflowed\n",
              "all_reduce overflow (fp16)", (unsigned long long)(m.flag.calls / steps),
              (unsigned long long)(m.flag.bytes_sent / steps), num(f1, want_norm));
  dt_print0("    %-26s %6llu %11llu %11d   no weight gathered, no gradient reduced\n",
            "any other collective", (unsigned long long)((all.calls - ar.calls) / steps),
            (unsigned long long)((all.bytes_sent - ar.bytes_sent) / steps), 0);
  dt_print0("    %-26s %6s %11llu %11s   DP (05): 2(N-1)/N x 2LDH x %zu = %s: TP/DP = B/H = %.4f\n",
            "total", "", (unsigned long long)(all.bytes_sent / steps), num(f1, want_all), es,
            num(f2, ring * (double)(2 * L * P) * (double)es), (double)B / (double)H);
  if (N > 1)
    dt_print0(
        "  FLOPs per rank per step 12 x L x B x D x H/N = %.0f: %.1f per byte of f/g, formula "
        "3H/(%zu(N-1)) = %.1f at any B\n",
        flops, flops / (double)(act.bytes_sent / steps), es,
        3.0 * (double)H / ((double)es * (N - 1)));
  double mem[4] = {4.0 * (double)S, 4.0 * (double)S, K * (double)S,
                   4.0 * (double)((L + 1) * B * D + 2 * L * B * Hs + 2 * B * D + B * Hs)};
  /* 05 runs B/N samples per rank: its activations are n/a where N does not divide B */
  double dp[4] = {4.0 * (double)(2 * L * P), 4.0 * (double)(2 * L * P), K * (double)(2 * L * P),
                  4 * ((double)(L + 1) * b * D + 2.0 * L * b * H + 2 * b * D + b * H)};
  const char *why[4] = {"4 x 2LDH/N: W1_s and W2_s", "4 x 2LDH/N", "K x 2LDH/N: shards only",
                        "4 x ((L+1)BD + 2LB(H/N) + 2BD + B(H/N)): [B, D] whole on every rank"};
  dt_print0("  memory per rank (peak bytes)   measured     formula     DP (05)   (K = 8 for "
            "AdamW's m and v, 0 for sgd)\n");
  for (int t = DT_PARAMS; t <= DT_ACTIV; t++)
    dt_print0("    %-24s %11zu %11s %11s   %s\n", dt_tag_name((dt_tag)t), dt_mem_peak((dt_tag)t),
              num(f1, mem[t]), t == DT_ACTIV && B % N ? "n/a" : num(f3, dp[t]), why[t]);
  dt_print_memory_uncounted();
  dt_print0("  loss on every rank: largest spread across ranks %.2e over %lld steps\n", spread,
            (long long)trained);
  if (m.wire == DT_F16)
    dt_print0("  fp16 loss scaling: %lld step%s skipped on overflow; final loss scale %g\n",
              (long long)scaler.skipped, scaler.skipped == 1 ? "" : "s", scaler.scale);

  dt_comm_reset(world); /* the export is not training: count it on its own */
  to_host(&m, m.w, host_w);
  dt_print0("export for the check: %llu all-gathers, %llu bytes sent per rank (after training)\n",
            (unsigned long long)world->count[DT_ALL_GATHER].calls,
            (unsigned long long)world->count[DT_ALL_GATHER].bytes_sent);
  if (c.save && rank == 0) dt_save_model(c.save, &c, c.steps, host_w);
  if (c.save) dt_print0("saved %s\n", c.save);
  if (c.trace) dt_trace_write(c.trace);
  int failed = c.no_check ? 0 : dt_check_against_reference(&c, losses, host_w, 0);
  free(host_w), free(host_m), free(host_v), free(losses), free(samples);
  dt_finalize();
  return failed;
}
