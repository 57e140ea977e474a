/* 09_pp: pipeline parallelism, GPipe and 1F1B.
 *
 * The L layers are cut into N contiguous stages, one per rank, and the global
 * batch into M microbatches. A microbatch's activations flow forward from
 * stage to stage and its activation gradients flow back; each stage adds its
 * layers' gradients up over the M microbatches and takes one optimizer step
 * per global batch, so it trains exactly the single-process model. Two
 * schedules order the same 2M actions of a stage:
 *   --schedule gpipe  all M forwards, then all M backwards: M microbatches'
 *                     activations are held at the turn;
 *   --schedule 1f1b   N-1-s forwards of warm-up, then one forward one
 *                     backward, then the rest of the backwards: at most N-s.
 * Both leave the same bubble, (N-1)/(M+N-1) of the time idle, which this
 * program measures and draws as a timeline of the fastest step. Checkpoints
 * hold the whole model, so a run resumes at any number of stages. With
 * --precision bf16|fp16 the activations and their gradients travel in 16
 * bits: half the bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

enum { WIDTH = 100 }; /* columns of the timeline */

typedef struct {
  char type; /* 'F' or 'B' */
  int mb;
} action;

typedef struct {
  dt_train_config c;
  int s, N, *cnt, *off;   /* this stage, stages; each stage's run of a layer-major array */
  int64_t D, H, nl, R;    /* width, hidden, layers here, rows of a microbatch */
  int64_t S;              /* floats stashed per microbatch: x_0..x_nl, a and h of each layer */
  float *w, *g, *m, *v;   /* this stage's layers, layer-major: W1, W2 of each */
  float **stash, **spare; /* stash[mb] while mb is in flight; spare: slots to reuse */
  int nfree, live, peak_live;
  float *d[2], *dh;       /* activation gradients (ping-pong) and scratch */
  int res;                /* d[res] holds the last backward's result */
  float *bx, *by;         /* the global batch: x on stage 0, y on the last stage */
  double loss, scale;     /* scale: fp16's loss scale, 1 otherwise */
  dt_dtype wire;          /* what travels between stages (--precision) */
  uint16_t *out16, *in16; /* 16 bits: copies of what one exchange sends and receives */
} stage;

/* Stage s's 2M actions in order. 1F1B's warm-up fills the pipeline below
 * stage s; after it every forward is followed by the oldest backward. */
static int make_plan(int N, int s, int64_t M, int gpipe, action *p) {
  /* exercise: the schedules, 1F1B's warm-up, steady state and cool-down */
  int n = 0, warm = gpipe ? (int)M : (int)(N - 1 - s < M ? N - 1 - s : M);
  for (int m = 0; m < warm; m++) p[n++] = (action){'F', m};
  for (int m = warm; m < M; m++) p[n++] = (action){'F', m}, p[n++] = (action){'B', m - warm};
  for (int m = (int)M - warm; m < M; m++) p[n++] = (action){'B', m};
  return n;
  /* end of exercise */
}

/* Balanced stages: the first L%N get one layer more. */
static int64_t layers_of(int64_t L, int N, int r) { return L / N + (r < L % N); }
static int64_t first_layer(int64_t L, int N, int r) {
  return r * (L / N) + (r < L % N ? r : L % N);
}

static float *w1_of(stage *p, float *flat, int64_t l) { return flat + 2 * l * p->D * p->H; }
static float *w2_of(stage *p, float *flat, int64_t l) { return w1_of(p, flat, l) + p->D * p->H; }
static float *x_of(stage *p, int mb, int64_t l) { return p->stash[mb] + l * p->R * p->D; }
static float *a_of(stage *p, int mb, int64_t l) {
  return p->stash[mb] + (p->nl + 1) * p->R * p->D + l * p->R * p->H;
}
static float *h_of(stage *p, int mb, int64_t l) { return a_of(p, mb, l) + p->nl * p->R * p->H; }

/* A microbatch's activations live from its input's arrival to the end of its
 * backward. Freed slots are reused, like PyTorch's caching allocator, so the
 * DT_ACTIV peak counts the slots the schedule really needed at once. */
static void stash_open(stage *p, int mb) {
  if (p->stash[mb]) return;
  p->stash[mb] = p->nfree ? p->spare[--p->nfree] : dt_alloc_f32((size_t)p->S, DT_ACTIV);
  if (++p->live > p->peak_live) p->peak_live = p->live;
}
static void stash_close(stage *p, int mb) {
  p->spare[p->nfree++] = p->stash[mb], p->stash[mb] = NULL, p->live--;
}

static void forward(stage *p, int mb) {
  stash_open(p, mb);
  if (p->s == 0) dt_copy(x_of(p, mb, 0), p->bx + mb * p->R * p->D, (size_t)(p->R * p->D) * 4);
  for (int64_t l = 0; l < p->nl; l++)
    dt_block_forward(x_of(p, mb, l), w1_of(p, p->w, l), w2_of(p, p->w, l), a_of(p, mb, l),
                     h_of(p, mb, l), x_of(p, mb, l + 1), p->R, p->D, p->H, 1);
}

/* The incoming gradient is in d[1-res]; the last stage makes it from the loss:
 * each microbatch's share of the mean over all B*D elements. */
static void backward(stage *p, int mb) {
  int64_t D = p->D, R = p->R;
  int k = 1 - p->res;
  if (p->s == p->N - 1) {
    p->loss += dt_mse_forward_backward(x_of(p, mb, p->nl), p->by + mb * R * D, p->d[k],
                                       (size_t)(R * D), 1.0 / ((double)p->c.batch * D));
    if (p->scale != 1.0) dt_scale(p->d[k], (size_t)(R * D), (float)p->scale);
  }
  for (int64_t l = p->nl - 1; l >= 0; l--, k = 1 - k)
    dt_block_backward(x_of(p, mb, l), a_of(p, mb, l), h_of(p, mb, l), w1_of(p, p->w, l),
                      w2_of(p, p->w, l), p->d[k], p->d[1 - k], w1_of(p, p->g, l), w2_of(p, p->g, l),
                      p->dh, R, D, p->H, 1);
  p->res = k;
  stash_close(p, mb);
}

/* Between two actions: send what `done` produced and receive what `next`
 * needs, in ONE sendrecv. In 1F1B's steady state stage s sends a forward to
 * s+1 while s+1 sends a backward to s: two blocking sends would wait for each
 * other forever once messages are too big for MPI's eager buffers. */
static void exchange(stage *p, dt_comm *world, const action *done, const action *next) {
  size_t n = (size_t)(p->R * p->D);
  const float *out = NULL;
  float *in = NULL;
  int dst = DT_NOBODY, src = DT_NOBODY, last = p->N - 1;
  if (done && done->type == 'F' && p->s < last) out = x_of(p, done->mb, p->nl), dst = p->s + 1;
  if (done && done->type == 'B' && p->s > 0) out = p->d[p->res], dst = p->s - 1;
  if (next && next->type == 'F' && p->s > 0)
    stash_open(p, next->mb), in = x_of(p, next->mb, 0), src = p->s - 1;
  if (next && next->type == 'B' && p->s < last) in = p->d[1 - p->res], src = p->s + 1;
  if (dst == DT_NOBODY && src == DT_NOBODY) return;
  /* In 16 bits: convert before sending, convert back after receiving. */
  int half = p->wire != DT_F32;
  if (half && out) dt_to_half(out, p->out16, n, p->wire);
  dt_sendrecv(world, half && out ? (const void *)p->out16 : out, out ? n : 0, dst,
              half && in ? (void *)p->in16 : in, in ? n : 0, src, p->wire);
  if (half && in) dt_from_half(p->in16, in, n, p->wire);
}

/* A stage's layers are one run of the layer-major host array W1_0, W2_0, W1_1,
 * ...: slice it in, or Gatherv all runs to rank 0 (host MPI: not counted). */
static void slice_in(stage *p, float *flat, const float *host) {
  dt_copy_from_host(flat, host + p->off[p->s], (size_t)p->cnt[p->s] * 4);
}
static void gather_layers(stage *p, const float *flat, float *host) {
  float *mine = host + p->off[p->s];
  dt_copy_to_host(mine, flat, (size_t)p->cnt[p->s] * 4);
  DT_MPI(MPI_Gatherv(p->s ? mine : MPI_IN_PLACE, p->cnt[p->s], MPI_FLOAT, host, p->cnt, p->off,
                     MPI_FLOAT, 0, MPI_COMM_WORLD));
}
static void checkpoint(stage *p, int64_t steps_done, float *w, float *m, float *v) {
  gather_layers(p, p->w, w);
  if (p->m) gather_layers(p, p->m, m), gather_layers(p, p->v, v);
  if (p->s == 0) dt_ckpt_save(&p->c, steps_done, w, p->m ? m : NULL, p->m ? v : NULL);
}

/* One row per stage, one column per 1/WIDTH of the step: "F3>>" a forward of
 * microbatch 3, "B3<<" a backward, '.' idle. rec: t0, t1, type, mb. */
static void draw_timeline(const double *rec, int N, int n, double T) {
  double busy = 0;
  dt_print0("\ntimeline of the fastest step (%.2f ms, %d columns; F<mb>>> forward, B<mb><< "
            "backward, . idle):\n",
            T * 1e3, WIDTH);
  for (int s = 0; s < N; s++) {
    char row[WIDTH + 1], label[16];
    memset(row, '.', WIDTH), row[WIDTH] = 0;
    for (const double *r = rec + 4 * s * n; r < rec + 4 * (s + 1) * n; r += 4) {
      int c0 = (int)(r[0] / T * WIDTH), c1 = (int)(r[1] / T * WIDTH + 0.5);
      if (c1 <= c0) c1 = c0 + 1;
      busy += r[1] - r[0];
      int len = snprintf(label, sizeof label, "%c%d", r[2] > 0 ? 'B' : 'F', (int)r[3]);
      for (int c = c0; c < c1 && c < WIDTH; c++)
        row[c] = c - c0 < len ? label[c - c0] : (r[2] > 0 ? '<' : '>');
    }
    dt_print0("  stage %d |%s|\n", s, row);
  }
  dt_print0("bubble of this step: measured idle / (N x step) = %.1f%%; formula (N-1)/(M+N-1) = "
            "%.1f%%\n",
            100 * (1 - busy / (N * T)), 100.0 * (N - 1) / (n / 2 + N - 1));
}

int main(int argc, char **argv) {
  dt_train_config c = DT_TRAIN_DEFAULTS;
  const char *schedule = "1f1b";
  int64_t M = 8;
  dt_option options[] = {DT_TRAIN_OPTIONS(&c),
                         DT_STRING("--schedule", &schedule, "gpipe|1f1b",
                                   "gpipe: all forwards then all backwards; 1f1b: interleaved"),
                         DT_INT("--microbatches", &M, 1, 1 << 20,
                                "microbatches M per global batch (M must divide --batch)"),
                         DT_END};
  dt_lesson lesson = {"09_pp", "pipeline parallel training: stages, GPipe, 1F1B, bubble", 1};
  dt_comm *world = dt_init(&argc, &argv, &lesson, options);
  dt_train_resolve(&c);
  int N = world->size, s = world->rank, gpipe = schedule[0] == 'g';
  if (c.layers < N)
    dt_fail("--layers %lld cannot be split into %d stages: every stage needs at least one layer "
            "(use --layers >= %d or fewer ranks)",
            (long long)c.layers, N, N);
  if (c.batch % M != 0)
    dt_fail("--batch %lld does not split into %lld microbatches: --microbatches must divide the "
            "global batch",
            (long long)c.batch, (long long)M);
  dt_trace_enable(c.trace != NULL);
  if (c.dump_data) dt_dump_data(c.dump_data, &c);

  int64_t L = c.layers, D = c.dim, H = c.hidden, B = c.batch, R = B / M, P = 2 * D * H;
  int64_t nl = layers_of(L, N, s), l0 = first_layer(L, N, s);
  stage p = {.c = c, .s = s, .N = N, .D = D, .H = H, .nl = nl, .R = R};
  p.S = (nl + 1) * R * D + 2 * nl * R * H;
  p.w = dt_alloc_f32((size_t)(nl * P), DT_PARAMS), p.g = dt_alloc_f32((size_t)(nl * P), DT_GRADS);
  if (c.optimizer[0] == 'a')
    p.m = dt_alloc_f32((size_t)(nl * P), DT_OPTIM), p.v = dt_alloc_f32((size_t)(nl * P), DT_OPTIM);
  p.stash = calloc((size_t)M, sizeof(float *)), p.spare = calloc((size_t)M, sizeof(float *));
  for (int k = 0; k < 2; k++) p.d[k] = dt_alloc_f32((size_t)(R * D), DT_ACTIV);
  p.dh = dt_alloc_f32((size_t)(R * H), DT_ACTIV);
  p.wire = dt_precision_type(&c);
  if (p.wire != DT_F32)
    p.out16 = dt_alloc((size_t)(R * D) * 2, DT_COMMBUF),
    p.in16 = dt_alloc((size_t)(R * D) * 2, DT_COMMBUF);
  if (s == 0 || s == N - 1) /* the data: x for the first stage, y for the last */
    p.bx = dt_alloc_f32((size_t)(B * D), DT_DATA), p.by = dt_alloc_f32((size_t)(B * D), DT_DATA);
  action *plan = malloc((size_t)(2 * M) * sizeof(action));
  double *rec = malloc((size_t)(16 * M) * sizeof(double)), *losses = malloc((size_t)c.steps * 8);
  int mv = p.m && c.ckpt ? 2 : 0; /* AdamW's m and v on the host only to checkpoint them */
  float *host_w = malloc((size_t)(L * P * (1 + mv)) * 4); /* the whole model, layer-major */
  float *host_m = mv ? host_w + L * P : NULL, *host_v = mv ? host_w + 2 * L * P : NULL;
  int64_t *samples = malloc((size_t)B * sizeof(int64_t));
  p.cnt = malloc((size_t)(2 * N) * sizeof(int)), p.off = p.cnt + N;
  if (!p.stash || !p.spare || !plan || !rec || !losses || !host_w || !samples || !p.cnt)
    dt_fatal(__FILE__, __LINE__, "malloc", "out of memory");
  for (int r = 0; r < N; r++)
    p.cnt[r] = (int)(layers_of(L, N, r) * P), p.off[r] = (int)(first_layer(L, N, r) * P);
  /* Each stage makes only its own layers (the RNG is keyed by layer), or
   * slices them from a whole-model file or checkpoint, at any stage split. */
  if (c.load) dt_load_model(c.load, &c, host_w);
  if (c.resume) dt_ckpt_resume(&c, host_w, host_m, host_v), p.c = c;
  if (c.load || c.resume) slice_in(&p, p.w, host_w);
  if (c.resume && p.m) slice_in(&p, p.m, host_m), slice_in(&p, p.v, host_v);
  for (int64_t l = 0; l < nl && !c.load && !c.resume; l++) {
    dt_init_w1(&c, l0 + l, w1_of(&p, p.w, l), 0, H);
    dt_init_w2(&c, l0 + l, w2_of(&p, p.w, l), 0, H);
  }
  int n = make_plan(N, s, M, gpipe, plan);
  char line[512];
  int len = snprintf(line, sizeof line, "stage %d: layers %lld-%lld, plan", s, (long long)l0,
                     (long long)(l0 + nl - 1));
  for (int i = 0; i < n && i < 32 && len < 400; i++)
    len += snprintf(line + len, sizeof line - (size_t)len, " %c%d", plan[i].type, plan[i].mb);
  dt_train_print(&c);
  dt_print0("pipeline: %d stages, %lld microbatches of %lld rows, schedule %s\n", N, (long long)M,
            (long long)R, gpipe ? "gpipe (all F, then all B)" : "1f1b (warm-up, 1F1B, cool-down)");
  dt_print_ranks("%s%s\n", line, n > 32 ? " ..." : "");

  dt_loss_scaler scaler; /* fp16: scale the loss, skip steps that overflow */
  dt_scaler_init(&scaler, &c);
  dt_comm_reset(world);
  dt_mem_reset_peaks();
  double busy_sum = 0, span_sum = 0, T = 0, best_T = 1e30, *best = rec + 8 * M;
  for (int64_t step = c.start_step; step < c.steps; step++) {
    dt_step_samples(&c, 1, 0, step, samples);
    if (s == 0 || s == N - 1) dt_make_batch(&c, samples, B, p.bx, p.by);
    dt_zero(p.g, (size_t)(nl * P) * 4);
    p.loss = 0, p.scale = scaler.scale;
    dt_sync();
    DT_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* measurement only: every stage's clock starts together */
    double t_start = dt_now(), busy = 0;
    for (int i = 0; i < n; i++) {
      exchange(&p, world, i ? &plan[i - 1] : NULL, &plan[i]);
      double t0 = dt_span_begin();
      if (plan[i].type == 'F')
        forward(&p, plan[i].mb);
      else
        backward(&p, plan[i].mb);
      dt_sync();
      double t1 = dt_now();
      char name[16];
      snprintf(name, sizeof name, "%c%d", plan[i].type, plan[i].mb);
      dt_span_end(name, "compute", t0);
      double *r = rec + 4 * i;
      r[0] = t0 - t_start, r[1] = t1 - t_start, r[2] = plan[i].type == 'B', r[3] = plan[i].mb;
      busy += t1 - t0;
    }
    exchange(&p, world, &plan[n - 1], NULL);
    /* Gradients are held in 16 bits as the reference holds them: an fp16
     * one beyond 65504 becomes inf here. Each stage holds other layers, so
     * the fp16 verdict is one int maxed over the stages, and clipping needs
     * one norm summed over them: scalars on host MPI, not in the counters. */
    size_t np = (size_t)(nl * P);
    if (p.wire != DT_F32) dt_round_half(p.g, np, p.wire);
    int overflow = p.wire == DT_F16 && dt_count_nonfinite(p.g, np) > 0;
    if (p.wire == DT_F16)
      DT_MPI(MPI_Allreduce(MPI_IN_PLACE, &overflow, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    double used = 1.0;
    if (dt_scaler_update(&scaler, &c, overflow, &used)) {
      double sq = c.clip > 0 ? dt_sum_squares(p.g, np) : 0;
      if (c.clip > 0) DT_MPI(MPI_Allreduce(MPI_IN_PLACE, &sq, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
      dt_optimizer_step(&c, p.w, p.g, p.m, p.v, np, scaler.taken, dt_grad_scale(&c, used, sq));
    }
    if (dt_ckpt_due(&c, step)) checkpoint(&p, step + 1, host_w, host_m, host_v);
    /* bookkeeping: the loss lives on the last stage; the step's length is
     * from the common start to the last backward anywhere (stage 0's) */
    losses[step] = p.loss;
    DT_MPI(MPI_Bcast(&losses[step], 1, MPI_DOUBLE, N - 1, MPI_COMM_WORLD));
    DT_MPI(MPI_Allreduce(&rec[4 * n - 3], &T, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    busy_sum += busy, span_sum += T;
    if (T < best_T) best_T = T, memcpy(best, rec, (size_t)(8 * M) * sizeof(double));
    dt_print_step(&c, step, losses[step], "last stage, sum over the microbatches", T);
  }

  int64_t trained = c.steps - c.start_step; /* this run's steps, after a resume */
  double steps = (double)trained, idle = span_sum - busy_sum, all_idle = 0;
  DT_MPI(MPI_Reduce(&idle, &all_idle, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
  dt_counter sr = world->count[DT_SENDRECV];
  size_t es = dt_dtype_size(p.wire); /* bytes per activation on the wire */
  uint64_t want_bytes = (uint64_t)(B * D) * es * (uint64_t)((s < N - 1) + (s > 0));
  int64_t k1 = N - s < M ? N - s : M, want_live = gpipe ? M : k1, other = gpipe ? k1 : M;
  uint64_t slot = (uint64_t)p.S * 4, scratch = (uint64_t)(2 * R * D + R * H) * 4;
  dt_print0("\nsummary per stage (%lld steps; busy = forward and backward compute):\n",
            (long long)trained);
  dt_print_ranks("stage %d | busy %.3f ms idle %.3f ms per step (%.1f%% idle) | sendrecv bytes "
                 "per step %llu (formula %d fwd + %d bwd x B*D*%zu = %llu)\n",
                 s, busy_sum / steps * 1e3, idle / steps * 1e3, 100 * idle / span_sum,
                 (unsigned long long)(sr.bytes_sent / (uint64_t)trained), (s < N - 1), (s > 0), es,
                 (unsigned long long)want_bytes);
  dt_print0("bubble over all steps: measured idle / (N x step) = %.1f%%; formula (N-1)/(M+N-1) = "
            "%d/%lld = %.1f%%\n",
            100 * all_idle / (N * span_sum), N - 1, (long long)(M + N - 1),
            100.0 * (N - 1) / (double)(M + N - 1));
  dt_print_ranks(
      "stage %d peak in-flight microbatches %d (formula %lld) | activ peak %zu B (formula "
      "%lld x %llu + scratch %llu = %llu; %s would hold %lld: %llu B)\n",
      s, p.peak_live, (long long)want_live, dt_mem_peak(DT_ACTIV), (long long)want_live,
      (unsigned long long)slot, (unsigned long long)scratch,
      (unsigned long long)(want_live * slot + scratch), gpipe ? "1f1b" : "gpipe", (long long)other,
      (unsigned long long)(other * slot + scratch));
  dt_print_ranks("stage %d params %zu B grads %zu B optim %zu B (formula %lld layers x 2DH x 4 = "
                 "%llu each)\n",
                 s, dt_mem_peak(DT_PARAMS), dt_mem_peak(DT_GRADS), dt_mem_peak(DT_OPTIM),
                 (long long)nl, (unsigned long long)(nl * P * 4));
  dt_print_memory_uncounted();

  if (p.wire == DT_F16)
    dt_print0("fp16 loss scaling: %lld step%s skipped on overflow; final loss scale %g\n",
              (long long)scaler.skipped, scaler.skipped == 1 ? "" : "s", scaler.scale);

  double *all_rec = s == 0 ? malloc((size_t)(8 * M * N) * sizeof(double)) : NULL;
  DT_MPI(MPI_Gather(best, 4 * n, MPI_DOUBLE, all_rec, 4 * n, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  if (s == 0) draw_timeline(all_rec, N, n, best_T);

  gather_layers(&p, p.w, host_w); /* the final weights, on rank 0 for the check */
  if (c.save && s == 0) dt_save_model(c.save, &c, c.steps, host_w);
  if (c.save) dt_print0("saved %s\n", c.save);
  if (c.trace) dt_trace_write(c.trace);
  int failed = c.no_check ? 0 : dt_check_against_reference(&c, losses, host_w, 0);
  free(all_rec), free(p.cnt), free(plan), free(rec), free(losses);
  free(host_w), free(samples), free(p.stash), free(p.spare);
  dt_finalize();
  return failed;
}
