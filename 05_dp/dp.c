/* 05_dp: data parallelism.
 *
 * Every rank holds the whole model and trains on its own share of each global
 * batch, drawn through the DistributedSampler of lesson 04. After backward the
 * gradients are averaged across ranks with all-reduce, so every rank takes the
 * identical optimizer step and the replicas never drift apart. Three ways to
 * run that all-reduce:
 *   (a) default        one all-reduce per gradient tensor, after backward;
 *   (b) --bucket-mb M  gradients in one flat buffer, all-reduced in ~M MiB
 *                      buckets: fewer, larger messages, less latency paid;
 *   (c) --overlap      each bucket's all-reduce starts during backward as soon
 *                      as its gradients are complete, hiding it behind the
 *                      backward of the layers below.
 * Across several machines, --hierarchical reduces each bucket inside every
 * node first and sends only the node leaders' all-reduce over the network.
 * It ends by training the same model in one process and comparing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

typedef struct {        /* whole gradient tensors, all-reduced together */
  size_t offset, count; /* elements of the flat gradient buffer */
  int64_t ready_layer;  /* complete once this layer's backward is done */
  dt_request *pending;
} bucket;

typedef struct {
  dt_train_config c;
  int64_t rows;                           /* samples per micro-step on this rank */
  float *w, *g, *m, *v;                   /* flat: layer l's [W1 | W2] at layer_offset(l) */
  float *x, *a, *h, *y, *dx, *dnext, *dh; /* activations of one micro-step */
  bucket *buckets;
  int nbuckets;
  dt_dtype wire;   /* what gradients travel in: DT_F32, or 16 bits (--precision) */
  uint16_t *g16;   /* their 16-bit copy */
  dt_nodes *nodes; /* --hierarchical: the ranks by node; NULL: the flat all-reduce */
} dp_model;

/* Backward finishes the last layer first, so the flat buffers hold the layers
 * in reverse: a bucket's tensors are ready together, early ones first. */
static size_t layer_offset(const dp_model *m, int64_t l) {
  return (size_t)((m->c.layers - 1 - l) * dt_params_per_layer(&m->c));
}
static float *w1_of(const dp_model *m, float *flat, int64_t l) { return flat + layer_offset(m, l); }
static float *w2_of(const dp_model *m, float *flat, int64_t l) {
  return flat + layer_offset(m, l) + m->c.dim * m->c.hidden;
}

/* Greedy, like PyTorch DDP: add tensors in ready order until a bucket holds
 * at least cap bytes. cap 0 gives one bucket per tensor: mode (a). */
static void make_buckets(dp_model *m, double cap_bytes) {
  int64_t L = m->c.layers, P = m->c.dim * m->c.hidden; /* elements per tensor */
  m->buckets = calloc((size_t)(2 * L), sizeof(bucket));
  CHECK_ALLOC(m->buckets);
  m->nbuckets = 0;
  bucket *b = NULL;
  for (int64_t t = 0; t < 2 * L; t++) { /* tensor t of the flat buffer */
    if (!b || (double)b->count * 4 >= cap_bytes)
      b = &m->buckets[m->nbuckets++], b->offset = (size_t)(t * P);
    b->count += (size_t)P;
    b->ready_layer = L - 1 - t / 2;
  }
}

static void forward(dp_model *m) {
  int64_t D = m->c.dim, H = m->c.hidden, R = m->rows;
  for (int64_t l = 0; l < m->c.layers; l++) {
    double t0 = dt_span_begin();
    dt_block_forward(m->x + l * R * D, w1_of(m, m->w, l), w2_of(m, m->w, l), m->a + l * R * H,
                     m->h + l * R * H, m->x + (l + 1) * R * D, R, D, H, 1);
    dt_span_end("forward", "compute", t0);
  }
}

/* In 16 bits a bucket travels in half the bytes. Each rank divides by N
 * before converting, so the sum keeps the mean's size, as PyTorch DDP does,
 * and converts the sum back. In fp32 the all-reduce averages by itself. */
static void *wire_of(dp_model *m, bucket *k) {
  return m->wire == DT_F32 ? (void *)(m->g + k->offset) : (void *)(m->g16 + k->offset);
}
static dt_op wire_op(dp_model *m) { return m->wire == DT_F32 ? DT_AVG : DT_SUM; }
static void to_wire(dp_model *m, bucket *k, int N) {
  if (m->wire == DT_F32) return;
  dt_scale(m->g + k->offset, k->count, 1.0f / (float)N);
  dt_to_half(m->g + k->offset, m->g16 + k->offset, k->count, m->wire);
}
static void from_wire(dp_model *m, bucket *k) {
  if (m->wire != DT_F32) dt_from_half(m->g16 + k->offset, m->g + k->offset, k->count, m->wire);
}

/* Gradients accumulate into m->g across micro-steps. With overlap, a bucket's
 * all-reduce starts the moment its last layer is done. */
static void backward(dp_model *m, dt_comm *world, int overlap) {
  int64_t D = m->c.dim, H = m->c.hidden, R = m->rows;
  for (int64_t l = m->c.layers - 1; l >= 0; l--) {
    double t0 = dt_span_begin();
    dt_block_backward(m->x + l * R * D, m->a + l * R * H, m->h + l * R * H, w1_of(m, m->w, l),
                      w2_of(m, m->w, l), m->dx, m->dnext, w1_of(m, m->g, l), w2_of(m, m->g, l),
                      m->dh, R, D, H, 1);
    dt_span_end("backward", "compute", t0);
    float *t = m->dx;
    m->dx = m->dnext, m->dnext = t;
    for (int b = 0; overlap && b < m->nbuckets; b++) {
      bucket *k = &m->buckets[b];
      if (k->ready_layer == l) {
        to_wire(m, k, world->size);
        k->pending =
            dt_all_reduce_async(world, wire_of(m, k), wire_of(m, k), k->count, m->wire, wire_op(m));
      } else if (k->pending)
        dt_test(k->pending); /* MPI progresses only inside MPI calls */
    }
  }
}

/* After backward every bucket is averaged: waited on, or all-reduced now. */
static void average_gradients(dp_model *m, dt_comm *world, int overlap) {
  for (int b = 0; m->nodes && b < m->nbuckets; b++) { /* --hierarchical (never overlapped) */
    bucket *k = &m->buckets[b];
    to_wire(m, k, world->size);
    dt_all_reduce_hierarchical(m->nodes, wire_of(m, k), k->count, m->wire, wire_op(m));
    from_wire(m, k);
  }
  if (m->nodes) return;
  /* exercise: averaging the gradients across ranks */
  for (int b = 0; b < m->nbuckets; b++) {
    bucket *k = &m->buckets[b];
    if (overlap)
      dt_wait(k->pending), k->pending = NULL;
    else
      to_wire(m, k, world->size),
          dt_all_reduce(world, wire_of(m, k), wire_of(m, k), k->count, m->wire, wire_op(m));
    from_wire(m, k);
  }
  /* end of exercise */
}

/* --compress topk:R. Each rank sends only its k = R*P largest gradient
 * entries, as (index, value) pairs to every rank (all-gather), and keeps what
 * it did not send as a residual added to next step's gradient (error
 * feedback), so no gradient is lost, only delayed. Every rank then sums the
 * same N sparse vectors in the same order: the replicas stay identical. */
typedef struct {
  int64_t k;
  float *residual, *vals, *all_vals; /* backend memory */
  int32_t *idx, *all_idx;
  float *host; /* P floats: the selection runs on the host */
  int32_t *host_idx;
  float *host_vals;
} topk;

static void topk_average(dp_model *m, dt_comm *world, topk *t, size_t P) {
  int64_t k = t->k, N = world->size;
  dt_add(t->residual, m->g, P); /* what to send: this step's gradient + the residual */
  dt_copy_to_host(t->host, t->residual, P * 4);
  dt_topk_indices(t->host, (int64_t)P, k, t->host_idx);
  for (int64_t j = 0; j < k; j++)
    t->host_vals[j] = t->host[t->host_idx[j]], t->host[t->host_idx[j]] = 0;
  dt_copy_from_host(t->residual, t->host, P * 4); /* what stays behind */
  dt_copy_from_host(t->idx, t->host_idx, (size_t)k * 4);
  dt_copy_from_host(t->vals, t->host_vals, (size_t)k * 4);
  dt_all_gather(world, t->idx, t->all_idx, (size_t)k, DT_I32);
  dt_all_gather(world, t->vals, t->all_vals, (size_t)k, DT_F32);
  int32_t *idx = malloc((size_t)(N * k) * 4);
  float *vals = malloc((size_t)(N * k) * 4);
  CHECK_ALLOC(idx);
  CHECK_ALLOC(vals);
  dt_copy_to_host(idx, t->all_idx, (size_t)(N * k) * 4);
  dt_copy_to_host(vals, t->all_vals, (size_t)(N * k) * 4);
  memset(t->host, 0, P * 4);
  for (int64_t j = 0; j < N * k; j++) t->host[idx[j]] += vals[j] / (float)N;
  dt_copy_from_host(m->g, t->host, P * 4);
  free(idx), free(vals);
}

/* Between a flat buffer (weights, m or v) and its layer-major host copy
 * (W1_0, W2_0, W1_1, ...), the order of checkpoints and of the check. */
static void to_host(const dp_model *m, float *flat, float *host) {
  size_t P = (size_t)(m->c.dim * m->c.hidden);
  for (int64_t l = 0; l < m->c.layers; l++) {
    dt_copy_to_host(host + 2 * l * P, w1_of(m, flat, l), P * 4);
    dt_copy_to_host(host + (2 * l + 1) * P, w2_of(m, flat, l), P * 4);
  }
}
static void from_host(const dp_model *m, float *flat, const float *host) {
  size_t P = (size_t)(m->c.dim * m->c.hidden);
  for (int64_t l = 0; l < m->c.layers; l++) {
    dt_copy_from_host(w1_of(m, flat, l), host + 2 * l * P, P * 4);
    dt_copy_from_host(w2_of(m, flat, l), host + (2 * l + 1) * P, P * 4);
  }
}

/* Every rank holds the whole state, so rank 0 alone writes it. */
static void checkpoint(const dp_model *m, int64_t steps_done, float *w, float *mh, float *vh) {
  if (dt_rank() != 0) return;
  to_host(m, m->w, w);
  if (m->m) to_host(m, m->m, mh), to_host(m, m->v, vh);
  dt_ckpt_save(&m->c, steps_done, w, m->m ? mh : NULL, m->m ? vh : NULL);
}

/* What top-k sends, beside what the dense all-reduce would have sent. */
static void print_topk_bytes(dt_comm *world, int64_t k, int64_t P, uint64_t trained) {
  int N = world->size;
  uint64_t sent = world->count[DT_ALL_GATHER].bytes_sent / trained;
  uint64_t dense = 2 * (uint64_t)(N - 1) * (uint64_t)P * 4 / (uint64_t)N;
  dt_print0("  top-k: k = %lld of %lld gradients per rank; bytes sent per rank per step %llu, "
            "formula (N-1) x k x (4 + 4) = %llu; the dense all-reduce's 2(N-1)/N x P x 4 = %llu "
            "(%.1fx more)\n",
            (long long)k, (long long)P, (unsigned long long)sent,
            (unsigned long long)((uint64_t)(N - 1) * (uint64_t)k * 8), (unsigned long long)dense,
            sent ? (double)dense / (double)sent : 0.0);
}

/* Seconds blocked in communication, the node communicators included. */
static double comm_seconds(dt_comm *world, const dt_nodes *n) {
  double s = dt_comm_total(world).seconds;
  return n ? s + dt_comm_total(n->node).seconds + dt_comm_total(n->leaders).seconds : s;
}

/* --hierarchical: what crosses between nodes (rank 0 leads node 0), beside
 * the flat all-reduce's bytes. Per step; S = P x es bytes of gradients. */
static void print_hierarchical_bytes(const dt_nodes *n, uint64_t P, size_t es, uint64_t steps) {
  uint64_t M = (uint64_t)n->nodes, N = (uint64_t)n->ranks, S = P * es;
  dt_counter red = n->node->count[DT_REDUCE], bc = n->node->count[DT_BROADCAST];
  dt_print0("  hierarchical           %d node%s; inside node 0 (%d ranks) %llu reduce + broadcast "
            "calls/step, rank 0 sent %llu bytes/step (common's ring model: the root sends the "
            "broadcast's P x %zu = %llu)\n",
            n->nodes, n->nodes == 1 ? "" : "s", n->node->size,
            (unsigned long long)((red.calls + bc.calls) / steps),
            (unsigned long long)((red.bytes_sent + bc.bytes_sent) / steps), es,
            (unsigned long long)(n->node->size > 1 ? S : 0));
  dt_print0("  across nodes           bytes sent per leader per step %llu, formula 2(M-1)/M x P x "
            "%zu = %llu (a flat all-reduce: 2(N-1)/N x P x %zu = %llu per rank)\n",
            (unsigned long long)(n->leaders->count[DT_ALL_REDUCE].bytes_sent / steps), es,
            (unsigned long long)(2 * (M - 1) * S / M), es,
            (unsigned long long)(2 * (N - 1) * S / N));
}

int main(int argc, char **argv) {
  dt_train_config c = DT_TRAIN_DEFAULTS;
  double bucket_mb = 0;
  int64_t accum = 1;
  int overlap = 0, hierarchical = 0;
  const char *compress = NULL;
  dt_option options[] = {
      DT_TRAIN_OPTIONS(&c),
      DT_DOUBLE("--bucket-mb", &bucket_mb, 0, 1 << 20,
                "all-reduce gradients in ~M MiB buckets (0: per tensor)"),
      DT_FLAG("--overlap", &overlap, "start each bucket's all-reduce during backward"),
      DT_INT("--accum", &accum, 1, 1 << 20, "micro-steps per step (gradient accumulation)"),
      DT_STRING("--compress", &compress, NULL, "topk:R sends the R fraction of largest gradients"),
      DT_FLAG("--hierarchical", &hierarchical,
              "all-reduce inside each node, then among node leaders only, then broadcast"),
      DT_END};
  dt_lesson lesson = {"05_dp", "data parallel training: all-reduce the gradients, buckets, overlap",
                      1};
  dt_comm *world = dt_init(&argc, &argv, &lesson, options);
  dt_train_resolve(&c);
  int N = world->size;
  if (c.batch % (N * accum) != 0)
    dt_fail("global batch %lld does not split over %d ranks x %lld micro-steps: choose --batch "
            "divisible by %lld",
            (long long)c.batch, N, (long long)accum, (long long)(N * accum));
  dt_trace_enable(c.trace != NULL);
  if (c.dump_data) dt_dump_data(c.dump_data, &c);

  dp_model m = {.c = c, .rows = c.batch / (N * accum)};
  int64_t L = c.layers, D = c.dim, H = c.hidden, R = m.rows, P = L * dt_params_per_layer(&c);
  m.w = dt_alloc_f32((size_t)P, DT_PARAMS);
  m.g = dt_alloc_f32((size_t)P, DT_GRADS);
  m.wire = dt_precision_type(&c);
  if (m.wire != DT_F32) m.g16 = dt_alloc((size_t)P * 2, DT_COMMBUF);
  if (c.optimizer[0] == 'a')
    m.m = dt_alloc_f32((size_t)P, DT_OPTIM), m.v = dt_alloc_f32((size_t)P, DT_OPTIM);
  m.x = dt_alloc_f32((size_t)((L + 1) * R * D), DT_ACTIV);
  m.a = dt_alloc_f32((size_t)(L * R * H), DT_ACTIV);
  m.h = dt_alloc_f32((size_t)(L * R * H), DT_ACTIV);
  m.dx = dt_alloc_f32((size_t)(R * D), DT_ACTIV);
  m.dnext = dt_alloc_f32((size_t)(R * D), DT_ACTIV);
  m.dh = dt_alloc_f32((size_t)(R * H), DT_ACTIV);
  m.y = dt_alloc_f32((size_t)(R * D), DT_DATA);
  float *host_w = malloc((size_t)P * 4), *host_m = malloc((size_t)P * 4),
        *host_v = malloc((size_t)P * 4);
  double *losses = malloc((size_t)c.steps * sizeof(double));
  int64_t *samples = malloc((size_t)(c.batch / N) * sizeof(int64_t));
  CHECK_ALLOC(host_w);
  CHECK_ALLOC(host_m);
  CHECK_ALLOC(host_v);
  CHECK_ALLOC(losses);
  CHECK_ALLOC(samples);
  /* Every rank makes the same initial model from the counter-based RNG, or
   * reads the same file: no broadcast needed. */
  if (c.load) dt_load_model(c.load, &c, host_w), from_host(&m, m.w, host_w);
  for (int64_t l = 0; l < L && !c.load; l++) {
    dt_init_w1(&c, l, w1_of(&m, m.w, l), 0, H);
    dt_init_w2(&c, l, w2_of(&m, m.w, l), 0, H);
  }
  if (c.resume) { /* the checkpoint replaces the initial state, at any world size */
    dt_ckpt_resume(&c, host_w, m.m ? host_m : NULL, m.m ? host_v : NULL);
    m.c = c;
    from_host(&m, m.w, host_w);
    if (m.m) from_host(&m, m.m, host_m), from_host(&m, m.v, host_v);
  }
  if (hierarchical && (overlap || compress))
    dt_fail("--hierarchical is blocking and dense: no --overlap or --compress");
  dt_nodes nodes = {0};
  if (hierarchical) nodes = dt_nodes_split(world, 0), m.nodes = &nodes;
  make_buckets(&m, bucket_mb > 0 ? bucket_mb * (1 << 20) : (overlap ? 1.0 : 0.0));
  topk tk = {0};
  if (compress && m.wire != DT_F32) dt_fail("--compress works in fp32 only");
  if (compress) {
    double ratio = 0;
    char rest = 0;
    if (sscanf(compress, "topk:%lf%c", &ratio, &rest) != 1 || !(ratio > 0 && ratio <= 1))
      dt_fail("--compress %s: expected topk:R with 0 < R <= 1, e.g. topk:0.01", compress);
    if (overlap || bucket_mb > 0)
      dt_fail("--compress replaces the all-reduce: no --overlap or --bucket-mb");
    if (c.ckpt) /* the residual is state a resumed run would lack: not exact */
      dt_fail("--compress with --ckpt: checkpoints do not hold top-k's error-feedback residual, "
              "so a resumed run could not continue exactly; drop --ckpt or --compress");
    tk.k = (int64_t)ceil(ratio * (double)P);
    tk.residual = dt_alloc_f32((size_t)P, DT_GRADS);
    tk.vals = dt_alloc_f32((size_t)tk.k, DT_COMMBUF);
    tk.idx = dt_alloc((size_t)tk.k * 4, DT_COMMBUF);
    tk.all_vals = dt_alloc_f32((size_t)(N * tk.k), DT_COMMBUF);
    tk.all_idx = dt_alloc((size_t)(N * tk.k) * 4, DT_COMMBUF);
    tk.host = malloc((size_t)P * 4), tk.host_idx = malloc((size_t)tk.k * 4),
    tk.host_vals = malloc((size_t)tk.k * 4);
    CHECK_ALLOC(tk.host);
    CHECK_ALLOC(tk.host_idx);
    CHECK_ALLOC(tk.host_vals);
  }
  dt_train_print(&c);
  dt_print0("data parallel: each rank runs %lld of the %lld samples per step (%lld micro-step%s of "
            "%lld); ",
            (long long)(c.batch / N), (long long)c.batch, (long long)accum, accum > 1 ? "s" : "",
            (long long)R);
  if (tk.k)
    dt_print0("gradients compressed to their top %lld entries per rank, all-gathered as (index, "
              "value) pairs, with error feedback\n",
              (long long)tk.k);
  else
    dt_print0("%d %sall-reduce%s per step (%s)\n", m.nbuckets, hierarchical ? "hierarchical " : "",
              m.nbuckets > 1 ? "s" : "",
              bucket_mb > 0
                  ? (overlap ? "buckets, overlapped with backward" : "buckets, after backward")
                  : (overlap ? "one per tensor, overlapped with backward"
                             : "one per tensor, after backward"));

  dt_loss_scaler scaler; /* fp16: scale the loss, skip steps that overflow */
  dt_scaler_init(&scaler, &c);
  dt_comm_reset(world);
  dt_mem_reset_peaks();
  if (m.nodes) dt_comm_reset(nodes.node), dt_comm_reset(nodes.leaders);
  double t_start = dt_now(), compute = 0;
  for (int64_t step = c.start_step; step < c.steps; step++) {
    double t0 = dt_now(), comm0 = comm_seconds(world, m.nodes), loss = 0;
    dt_step_samples(&c, N, world->rank, step, samples);
    dt_zero(m.g, (size_t)P * 4);
    for (int64_t k = 0; k < accum; k++) { /* communicate only after the last micro-step */
      dt_make_batch(&c, samples + k * R, R, m.x, m.y);
      forward(&m);
      /* mean over this micro-step, divided by accum: the sum is the local mean */
      loss += dt_mse_forward_backward(m.x + L * R * D, m.y, m.dx, (size_t)(R * D),
                                      1.0 / ((double)R * D * accum));
      if (scaler.scale != 1.0) dt_scale(m.dx, (size_t)(R * D), (float)scaler.scale);
      backward(&m, world, overlap && k == accum - 1);
    }
    if (tk.k)
      topk_average(&m, world, &tk, (size_t)P);
    else
      average_gradients(&m, world, overlap);
    /* grads are identical everywhere now: every rank reaches the same verdicts */
    double used = 1.0, sq = 0; /* the norm only for --clip; unscale and clip ride in the step */
    int ok = dt_scaler_update(&scaler, &c, m.wire == DT_F16 && dt_count_nonfinite(m.g, (size_t)P),
                              &used);
    if (ok && c.clip > 0) sq = dt_sum_squares(m.g, (size_t)P);
    float scale = dt_grad_scale(&c, used, sq);
    if (ok) dt_optimizer_step(&c, m.w, m.g, m.m, m.v, (size_t)P, scaler.taken, scale);
    if (dt_ckpt_due(&c, step)) checkpoint(&m, step + 1, host_w, host_m, host_v);
    /* bookkeeping, not training: the loss for printing, on the host */
    DT_MPI(MPI_Allreduce(&loss, &losses[step], 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    losses[step] /= N;
    dt_sync();
    double dt = dt_now() - t0;
    compute += dt - (comm_seconds(world, m.nodes) - comm0);
    dt_print_step(&c, step, losses[step], "mean over ranks", dt);
  }
  int64_t trained = c.steps - c.start_step;
  double per_step = (dt_now() - t_start) / (double)trained;
  dt_counter ar = world->count[DT_ALL_REDUCE];

  /* What overlap hid: the same buckets all-reduced blocking, timed now. */
  double blocking = 0;
  if (overlap) {
    double t0 = dt_now();
    for (int rep = 0; rep < 3; rep++) average_gradients(&m, world, 0);
    blocking = (dt_now() - t0) / 3;
  }
  size_t es = dt_dtype_size(m.wire); /* bytes per gradient on the wire */
  uint64_t formula = 2 * (uint64_t)(N - 1) * (uint64_t)P * es / (uint64_t)N;
  dt_print0("\nsummary (rank 0; every rank does the same work):\n");
  dt_print0("  time per step          %8.2f ms   compute %.2f ms   %s %.2f ms (rank "
            "blocked in it)\n",
            per_step * 1e3, compute / (double)trained * 1e3, tk.k ? "all-gather" : "all-reduce",
            comm_seconds(world, m.nodes) / (double)trained * 1e3);
  if (overlap)
    dt_print0("  hidden by overlap      %8.2f ms   (the same buckets all-reduced blocking take "
              "%.2f ms)\n",
              (blocking - ar.seconds / (double)trained) * 1e3, blocking * 1e3);
  if (m.nodes) print_hierarchical_bytes(&nodes, (uint64_t)P, es, (uint64_t)trained);
  if (!tk.k && !m.nodes)
    dt_print0("  all-reduce calls/step  %8llu      bytes sent per rank per step %llu, formula "
              "2(N-1)/N x P x %zu = %llu\n",
              (unsigned long long)(ar.calls / (uint64_t)trained),
              (unsigned long long)(ar.bytes_sent / (uint64_t)trained), es,
              (unsigned long long)formula);
  if (scaler.skipped || m.wire == DT_F16)
    dt_print0("  fp16 loss scaling      %lld step%s skipped on overflow; final loss scale %g\n",
              (long long)scaler.skipped, scaler.skipped == 1 ? "" : "s", scaler.scale);
  uint64_t want[DT_NTAGS] = {0};
  want[DT_PARAMS] = want[DT_GRADS] = (uint64_t)P * 4;
  if (tk.k) want[DT_GRADS] *= 2; /* the error-feedback residual */
  want[DT_OPTIM] = c.optimizer[0] == 'a' ? 2 * (uint64_t)P * 4 : 0;
  want[DT_ACTIV] = (uint64_t)(((L + 1) * R * D + 2 * L * R * H + 2 * R * D + R * H) * 4);
  const char *why[DT_NTAGS] = {"P x 4", tk.k ? "P x 4, and as much for the residual" : "P x 4",
                               "AdamW m and v: 2 x P x 4 (sgd: 0)",
                               "((L+1)bD + 2LbH + 2bD + bH) x 4, b = B/(N x accum)"};
  dt_print0("  memory per rank (peak bytes)   measured      formula\n");
  for (int t = DT_PARAMS; t <= DT_ACTIV; t++)
    dt_print0("    %-8s %21zu %12llu   %s\n", dt_tag_name((dt_tag)t), dt_mem_peak((dt_tag)t),
              (unsigned long long)want[t], why[t]);
  dt_print_memory_uncounted();

  to_host(&m, m.w, host_w);
  if (c.save && world->rank == 0) dt_save_model(c.save, &c, c.steps, host_w);
  if (c.save) dt_print0("saved %s\n", c.save);
  if (c.trace) dt_trace_write(c.trace);
  int failed = 0;
  /* Top-k changes the gradients, so no run can match one process bit for
   * bit: the check is that it still learns about as well. */
  if (tk.k) print_topk_bytes(world, tk.k, P, (uint64_t)trained);
  if (tk.k && !c.no_check)
    failed = dt_check_convergence(&c, losses, 1.25, "top-k");
  else if (!c.no_check)
    failed = dt_check_against_reference(&c, losses, host_w, 1);
  free(host_w), free(host_m), free(host_v), free(losses), free(samples), free(m.buckets);
  free(tk.host), free(tk.host_idx), free(tk.host_vals);
  dt_free(m.g16);
  if (m.nodes) dt_nodes_free(&nodes);
  dt_finalize();
  return failed;
}
