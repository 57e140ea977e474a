/* data.c: the synthetic data set, read through the sampler (sampler.c).
 *
 * Sample i is x_i ~ uniform[-1, 1)^D keyed by (data seed, i) and its target
 * y_i = teacher(x_i) = x_i + relu(x_i T1) T2, one residual block of hidden
 * width D whose weights come from the fixed seed TEACHER_SEED. The student
 * (L blocks) can fit it, so the loss falls; any rank can make any sample. */
#include <math.h>
#include <stdlib.h>

#include "train_internal.h"

#define TEACHER_SEED 0x7eac4e5ULL
#define X_STREAM     0

int64_t dt_batches_per_epoch(const dt_train_config *c) { return c->samples / c->batch; }

void dt_step_samples(const dt_train_config *c, int replicas, int rank, int64_t step, int64_t *out) {
  static int64_t *shard, cached_epoch = -1, cached_size;
  static int cached_replicas = -1, cached_rank = -1;
  dt_sampler s = {.dataset_size = c->samples,
                  .replicas = replicas,
                  .rank = rank,
                  .shuffle = 1,
                  .seed = (uint64_t)c->data_seed};
  int64_t epoch = step / dt_batches_per_epoch(c), per_step = c->batch / replicas;
  /* a new epoch reshuffles; within one, the rank walks its shard in order */
  if (epoch != cached_epoch || replicas != cached_replicas || rank != cached_rank ||
      c->samples != cached_size) {
    free(shard);
    shard = malloc((size_t)dt_sampler_num_samples(&s) * sizeof *shard);
    CHECK_ALLOC(shard);
    dt_sampler_indices(&s, epoch, shard);
    cached_epoch = epoch;
    cached_replicas = replicas;
    cached_rank = rank;
    cached_size = c->samples;
  }
  int64_t first = (step % dt_batches_per_epoch(c)) * per_step;
  for (int64_t k = 0; k < per_step; k++) out[k] = shard[first + k];
}

/* The teacher's weights and scratch, made once and grown as needed, so the
 * step loop allocates nothing. */
static struct {
  int64_t dim, rows;
  float *t1, *t2, *a, *h;
} teacher;

static void teacher_ready(int64_t D, int64_t rows) {
  if (teacher.dim != D) {
    dt_free(teacher.t1);
    dt_free(teacher.t2);
    teacher.t1 = dt_alloc_f32((size_t)(D * D), DT_DATA);
    teacher.t2 = dt_alloc_f32((size_t)(D * D), DT_DATA);
    dt_train_config tc = {.dim = D, .hidden = D, .seed = (int64_t)TEACHER_SEED};
    dt_init_w1(&tc, 0, teacher.t1, 0, D);
    dt_init_w2(&tc, 0, teacher.t2, 0, D);
    teacher.dim = D;
    teacher.rows = 0;
  }
  if (teacher.rows < rows) {
    dt_free(teacher.a);
    dt_free(teacher.h);
    teacher.a = dt_alloc_f32((size_t)(rows * D), DT_DATA);
    teacher.h = dt_alloc_f32((size_t)(rows * D), DT_DATA);
    teacher.rows = rows;
  }
}

void dt_make_batch(const dt_train_config *c, const int64_t *samples, int64_t count, float *x,
                   float *y) {
  DT_OP("dt_make_batch", count, c->dim, 0, 0, 0);
  int64_t D = c->dim;
  dt_fill_rows(x, samples, count, D, (uint64_t)c->data_seed, X_STREAM, 1.0f);
  teacher_ready(D, count);
  dt_block_forward(x, teacher.t1, teacher.t2, teacher.a, teacher.h, y, count, D, D, 1, NULL);
}

/* Sequences (lesson 11): token t of sample i is e_{i,t} ~ uniform[-1, 1)^D
 * keyed by (data seed, i, t), and its target the mean of the last WINDOW
 * tokens, y_t = (e_t + e_{t-1} + ... + e_{t-WINDOW+1}) / WINDOW (those before
 * the start count as 0): a model that ignored earlier positions could fit
 * e_t / WINDOW of it at best. Positions are not in x: the lesson adds them
 * (dt_add_position), from each token's place in the whole sequence. */
#define SEQ_STREAM 1
#define WINDOW     4

static float token(const dt_train_config *c, int64_t i, int64_t t, int64_t d) {
  uint64_t at = (uint64_t)((i * c->seq + t) * c->dim + d);
  return -1.0f + 2.0f * (float)dt_rng_uniform((uint64_t)c->data_seed, SEQ_STREAM, at);
}

void dt_make_sequences(const dt_train_config *c, const int64_t *samples, int64_t count, int64_t t0,
                       int64_t len, int64_t ld, float *x, float *y) {
  int64_t D = c->dim;
  for (int64_t k = 0; k < count; k++)
    for (int64_t t = t0; t < t0 + len; t++) {
      float *xr = x + (k * ld + t - t0) * D, *yr = y + (k * ld + t - t0) * D;
      for (int64_t d = 0; d < D; d++) {
        float sum = 0;
        for (int64_t j = 0; j < WINDOW && j <= t; j++) sum += token(c, samples[k], t - j, d);
        xr[d] = token(c, samples[k], t, d);
        yr[d] = sum / WINDOW;
      }
    }
}

/* The sinusoidal encoding of "Attention is all you need". */
void dt_add_position(float *x, int64_t D, int64_t t) {
  for (int64_t d = 0; d < D; d++) {
    double angle = (double)t / pow(10000.0, (double)(d - d % 2) / (double)D);
    x[d] += (float)(d % 2 ? cos(angle) : sin(angle));
  }
}

void dt_sequence_batch(const dt_train_config *c, int64_t step, int64_t *samples, float *x,
                       float *y) {
  int64_t S = c->seq, D = c->dim;
  dt_step_samples(c, 1, 0, step, samples);
  dt_make_sequences(c, samples, c->batch, 0, S, S, x, y);
  for (int64_t t = 0; t < c->batch * S; t++) dt_add_position(x + t * D, D, t % S);
}
