/* model.c: the training config and the residual MLP block, forward and
 * backward, on whatever slice of the weights a lesson holds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

/* What the tables of the lessons do not show, said where it exists. */
void dt_print_memory_uncounted(void) {
  size_t rounding = dt_rounding_bytes();
  if (rounding)
    dt_print0("    not in the table: matmul's 16-bit rounding copies of its inputs, %zu bytes "
              "(counted under '%s')\n",
              rounding, dt_tag_name(DT_OTHER));
#ifdef DT_CUDA
  dt_print_memory_outside();
#endif
}

const char *dt_loss_part(const dt_train_config *c) { return c->model == DT_MOE ? "balance" : NULL; }

int64_t dt_params_per_layer(const dt_train_config *c) {
  int64_t D = c->dim, H = c->hidden, E = c->experts;
  switch (c->model) {
  case DT_MOE: return D * E + 2 * E * D * H;
  case DT_TRANSFORMER: return 4 * D * D + 2 * D * H;
  case DT_GPT: return 2 * D + 4 * D * D + 2 * D * H;
  default: return 2 * D * H;
  }
}

/* A GPT's embeddings come before its layers and its final gain after them. */
static int64_t layers_start(const dt_train_config *c) {
  return c->model == DT_GPT ? (c->vocab + c->seq) * c->dim : 0;
}

int64_t dt_model_size(const dt_train_config *c) {
  int64_t layers = c->layers * dt_params_per_layer(c);
  return c->model == DT_GPT ? layers_start(c) + layers + c->dim : layers;
}

static int64_t tensors_per_layer(const dt_train_config *c) {
  switch (c->model) {
  case DT_MOE: return 1 + 2 * c->experts;
  case DT_TRANSFORMER: return 6;
  case DT_GPT: return 8;
  default: return 2;
  }
}

int64_t dt_model_tensors(const dt_train_config *c) {
  return c->layers * tensors_per_layer(c) + (c->model == DT_GPT ? 3 : 0);
}

/* nanoGPT's initialisation: normal(0, 0.02) for every matrix and both
 * embeddings, 0.02 / sqrt(2L) for the two projections into the residual
 * stream (Wo and W2), gains 1; only the gains take no weight decay. */
static dt_tensor gpt_tensor(const dt_train_config *c, int64_t t) {
  int64_t D = c->dim, H = c->hidden, L = c->layers, last = dt_gpt_tensor(L, 0);
  dt_tensor x = {.rows = D, .cols = D, .bound = 0.02f, .init = DT_INIT_NORMAL};
  if (t < 2 || t == last) { /* wte, wpe, ln_f */
    x.at = t == 0 ? 0 : t == 1 ? c->vocab * D : layers_start(c) + L * dt_params_per_layer(c);
    x.rows = t == 0 ? c->vocab : t == 1 ? c->seq : 1;
    snprintf(x.name, sizeof x.name, "%s", t == 0 ? "wte" : t == 1 ? "wpe" : "ln_f");
  } else {
    int64_t l = (t - 2) / DT_GPT_PER_LAYER, j = (t - 2) % DT_GPT_PER_LAYER;
    /* each tensor's offset in the layer: ln1, wq, wk, wv, wo, ln2, w1, w2 */
    int64_t at[8] = {0,
                     D,
                     D + D * D,
                     D + 2 * D * D,
                     D + 3 * D * D,
                     D + 4 * D * D,
                     2 * D + 4 * D * D,
                     2 * D + 4 * D * D + D * H};
    static const char *names[8] = {"ln1", "wq", "wk", "wv", "wo", "ln2", "w1", "w2"};
    x.at = layers_start(c) + l * dt_params_per_layer(c) + at[j];
    x.rows = j == DT_GPT_LN1 || j == DT_GPT_LN2 ? 1 : j == DT_GPT_W2 ? H : D;
    x.cols = j == DT_GPT_W1 ? H : D;
    if (j == DT_GPT_WO || j == DT_GPT_W2) x.bound = 0.02f / sqrtf((float)(2 * L));
    snprintf(x.name, sizeof x.name, "layers.%lld.%s", (long long)l, names[j]);
  }
  if (x.rows == 1) { /* the gains */
    x.init = DT_INIT_ONES;
    x.vector = x.plain = 1;
  }
  return x;
}

dt_tensor dt_model_tensor(const dt_train_config *c, int64_t t) {
  if (c->model == DT_GPT) return gpt_tensor(c, t);
  int64_t D = c->dim, H = c->hidden, E = c->model == DT_MOE ? c->experts : 0,
          per = tensors_per_layer(c), l = t / per, j = t % per;
  int attn = c->model == DT_TRANSFORMER;
  dt_tensor x = {.at = l * dt_params_per_layer(c)};
  if (attn && j < 4) { /* the attention's projections, then the MLP as below */
    x.at += j * D * D;
    x.rows = x.cols = D;
    snprintf(x.name, sizeof x.name, "layers.%lld.w%c", (long long)l, "qkvo"[j]);
  } else if (attn) {
    x.at += 4 * D * D + (j - 4) * D * H;
    x.rows = j == 4 ? D : H;
    x.cols = j == 4 ? H : D;
    snprintf(x.name, sizeof x.name, "layers.%lld.w%lld", (long long)l, (long long)(j - 3));
  } else if (E && j == 0) {
    x.rows = D;
    x.cols = E;
    snprintf(x.name, sizeof x.name, "layers.%lld.router", (long long)l);
  } else {
    int64_t e = E ? (j - 1) / 2 : 0, w2 = E ? (j - 1) % 2 : j;
    x.at += (E ? D * E : 0) + (2 * e + w2) * D * H;
    x.rows = w2 ? H : D;
    x.cols = w2 ? D : H;
    if (E)
      snprintf(x.name, sizeof x.name, "layers.%lld.experts.%lld.w%lld", (long long)l, (long long)e,
               (long long)(1 + w2));
    else
      snprintf(x.name, sizeof x.name, "layers.%lld.w%lld", (long long)l, (long long)(1 + w2));
  }
  x.bound = 1.0f / sqrtf((float)x.rows);
  return x;
}

/* The tensors in order, from dt_model_tensor: one description of the
 * layout. A start in the right layer, then a walk. */
int64_t dt_tensor_at(const dt_train_config *c, int64_t at) {
  int64_t start = layers_start(c), head = c->model == DT_GPT ? 2 : 0;
  int64_t layer = at < start ? 0 : (at - start) / dt_params_per_layer(c);
  int64_t t =
      at < start ? 0 : head + (layer < c->layers ? layer : c->layers) * tensors_per_layer(c);
  for (dt_tensor x = dt_model_tensor(c, t); at >= x.at + x.rows * x.cols; x = dt_model_tensor(c, t))
    t++;
  return t;
}

static float initial_value(const dt_train_config *c, const dt_tensor *x, int64_t t, int64_t i) {
  switch (x->init) {
  case DT_INIT_NORMAL: return x->bound * dt_rng_normal((uint64_t)c->seed, (uint64_t)t, (uint64_t)i);
  case DT_INIT_ONES: return 1.0f;
  default:
    return -x->bound + 2 * x->bound * dt_rng_uniform((uint64_t)c->seed, (uint64_t)t, (uint64_t)i);
  }
}

void dt_initial_weights(const dt_train_config *c, float *dst, int64_t at, int64_t n) {
  for (int64_t i = 0; i < n;) { /* a run of elements of one tensor at a time */
    int64_t t = dt_tensor_at(c, at + i);
    dt_tensor x = dt_model_tensor(c, t);
    int64_t end = x.at + x.rows * x.cols, m = end - (at + i) < n - i ? end - (at + i) : n - i;
    for (int64_t k = 0; k < m; k++) dst[i + k] = initial_value(c, &x, t, at + i + k - x.at);
    i += m;
  }
}

void dt_train_print(const dt_train_config *c) {
  if (c->model == DT_GPT) { /* lines of 100 characters or so: only what applies */
    const dt_text *t = c->corpus;
    dt_print0("model: GPT L=%lld D=%lld H=%lld A=%lld S=%lld V=%lld (%lld parameters, %.2f MiB "
              "fp32), precision %s\n",
              (long long)c->layers, (long long)c->dim, (long long)c->hidden, (long long)c->heads,
              (long long)c->seq, (long long)c->vocab, (long long)dt_model_size(c),
              4.0 * (double)dt_model_size(c) / (1 << 20), c->precision);
    const char *kind = t->vocab.merges ? "BPE" : t->vocab.bytes ? "byte" : "character";
    if (t->ids && c->steps) /* read: it trains */
      dt_print0("text %s: %lld %s tokens, %lld train, %lld validation; batch B=%lld windows\n",
                c->text, (long long)t->n, kind, (long long)t->train, (long long)(t->n - t->train),
                (long long)c->batch);
    else if (t->ids) /* --steps 0: the text's vocabulary is the model's */
      dt_print0("text %s: %lld %s tokens (--steps 0: its vocabulary alone)\n", c->text,
                (long long)t->n, kind);
    if (c->steps == 0)
      dt_print0("training: none (--steps 0): %s%s\n", c->load ? "the weights of " : "",
                c->load ? c->load : "the initial weights");
    else if (c->optimizer[0] == 'a')
      dt_print0("training: %lld steps of adamw, lr %g (warm-up %lld, cosine to %g at step %lld),\n"
                "  weight decay %g, betas (0.9, %g)%s\n",
                (long long)c->steps, c->lr, (long long)c->warmup, c->lr / 10,
                (long long)c->decay_steps, c->weight_decay, c->beta2,
                c->clip > 0 ? ", clipped" : "");
    else
      dt_print0("training: %lld steps of %s, lr %g (warm-up %lld, cosine to %g at step %lld)%s\n",
                (long long)c->steps, c->optimizer, c->lr, (long long)c->warmup, c->lr / 10,
                (long long)c->decay_steps, c->clip > 0 ? ", clipped" : "");
    return;
  }
  dt_print0("model: L=%lld D=%lld H=%lld (%lld parameters, %.2f MiB fp32) | batch B=%lld, "
            "%lld samples | %lld steps of %s, lr %g%s | precision %s\n",
            (long long)c->layers, (long long)c->dim, (long long)c->hidden,
            (long long)dt_model_size(c), 4.0 * (double)dt_model_size(c) / (1 << 20),
            (long long)c->batch, (long long)c->samples, (long long)c->steps, c->optimizer, c->lr,
            c->clip > 0 ? ", clipped" : "", c->precision);
}

/* PyTorch's nn.Linear draws from uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
void dt_init_w1(const dt_train_config *c, int64_t layer, float *w1, int64_t col0, int64_t cols) {
  dt_fill_block(w1, c->dim, cols, c->hidden, 0, col0, (uint64_t)c->seed, (uint64_t)(2 * layer),
                1.0f / sqrtf((float)c->dim));
}

void dt_init_w2(const dt_train_config *c, int64_t layer, float *w2, int64_t row0, int64_t rows) {
  dt_fill_block(w2, rows, c->dim, c->dim, row0, 0, (uint64_t)c->seed, (uint64_t)(2 * layer + 1),
                1.0f / sqrtf((float)c->hidden));
}

void dt_block_forward(const float *x, const float *w1, const float *w2, float *a, float *h,
                      float *out, int64_t rows, int64_t D, int64_t Hs, int residual,
                      const dt_rows *where) {
  DT_OP("dt_block_forward", rows, D, Hs, residual, 0);
  dt_matmul(0, 0, rows, Hs, D, x, w1, a, 0);   /* a = x W1     [rows, Hs] */
  dt_kinks_meet(where, x, w1, a, rows, D, Hs); /* for the check: relu's a > 0 near 0 */
  dt_relu_forward(a, h, (size_t)(rows * Hs));  /* h = relu(a) */
  if (residual) dt_copy(out, x, (size_t)(rows * D) * sizeof(float));
  dt_matmul(0, 0, rows, D, Hs, h, w2, out, residual); /* out (+)= h W2 */
}

void dt_block_backward(const float *x, const float *a, const float *h, const float *w1,
                       const float *w2, const float *dout, float *dx, float *dw1, float *dw2,
                       float *dh, int64_t rows, int64_t D, int64_t Hs, int residual) {
  DT_OP("dt_block_backward", rows, D, Hs, residual, 0);
  dt_matmul(1, 0, Hs, D, rows, h, dout, dw2, 1);    /* dW2 += h^T dout   [Hs, D] */
  dt_matmul(0, 1, rows, Hs, D, dout, w2, dh, 0);    /* dh = dout W2^T    [rows, Hs] */
  dt_relu_backward(a, dh, dh, (size_t)(rows * Hs)); /* da = dh * (a > 0), in place */
  dt_matmul(1, 0, D, Hs, rows, x, dh, dw1, 1);      /* dW1 += x^T da     [D, Hs] */
  /* the residual path carries dout straight through to dx */
  if (residual) dt_copy(dx, dout, (size_t)(rows * D) * sizeof(float));
  dt_matmul(0, 1, rows, D, Hs, dh, w1, dx, residual); /* dx (+)= da W1^T */
}

void dt_optimizer_step(const dt_train_config *c, float *w, const float *g, float *m, float *v,
                       size_t n, const dt_spans *plain, dt_step_scalars k) {
  if (c->optimizer[0] != 'a') {
    dt_sgd_step(w, g, n, k.lr, k.grad_scale);
    return;
  }
  /* AdamW in runs: decayed, then a plain span without decay, and so on */
  float decay = (float)c->weight_decay, beta2 = (float)c->beta2;
  size_t at = 0;
  for (int i = 0; plain && i <= plain->n; i++) {
    size_t lo = i < plain->n ? (size_t)plain->at[2 * i] : n;
    size_t hi = i < plain->n ? (size_t)plain->at[2 * i + 1] : n;
    if (lo > at)
      dt_adamw_step(w + at, g + at, m + at, v + at, lo - at, k.lr, decay, k.t, k.grad_scale, beta2);
    if (hi > lo)
      dt_adamw_step(w + lo, g + lo, m + lo, v + lo, hi - lo, k.lr, 0, k.t, k.grad_scale, beta2);
    at = hi;
  }
  if (!plain) dt_adamw_step(w, g, m, v, n, k.lr, decay, k.t, k.grad_scale, beta2);
}

/* nanoGPT's get_lr: (it + 1) / (warm-up + 1) of the rate while warming up,
 * then a cosine from the rate at the warm-up's end to a tenth of it at
 * lr_decay_iters (decay_steps), a tenth after. Every other model keeps its
 * rate. */
double dt_lr_at(const dt_train_config *c, int64_t step) {
  if (c->model != DT_GPT) return c->lr;
  if (step < c->warmup) return c->lr * (double)(step + 1) / (double)(c->warmup + 1);
  if (step > c->decay_steps) return c->lr / 10;
  double ratio = (double)(step - c->warmup) / (double)(c->decay_steps - c->warmup);
  double least = c->lr / 10, coeff = 0.5 * (1.0 + cos(3.14159265358979323846 * ratio));
  return least + coeff * (c->lr - least);
}

dt_spans dt_model_plain(const dt_train_config *c) {
  dt_spans s = {0};
  for (int64_t t = 0; t < dt_model_tensors(c); t++) {
    dt_tensor x = dt_model_tensor(c, t);
    if (!x.plain) continue;
    if (s.n && s.at[2 * s.n - 1] == x.at) { /* adjacent: one span */
      s.at[2 * s.n - 1] += x.rows * x.cols;
      continue;
    }
    s.at = realloc(s.at, (size_t)(2 * (s.n + 1)) * sizeof *s.at);
    CHECK_ALLOC(s.at);
    s.at[2 * s.n] = x.at;
    s.at[2 * s.n + 1] = x.at + x.rows * x.cols;
    s.n++;
  }
  return s;
}

float dt_clip_factor(const dt_train_config *c, double global_sq_norm) {
  if (c->clip <= 0) return 1.0f;
  double factor = c->clip / (sqrt(global_sq_norm) + 1e-6);
  return factor < 1.0 ? (float)factor : 1.0f;
}

float dt_grad_scale(const dt_train_config *c, double scale_used, double sq_norm) {
  return (float)(1.0 / scale_used) * dt_clip_factor(c, sq_norm / (scale_used * scale_used));
}

int dt_ckpt_due(const dt_train_config *c, int64_t step) {
  return c->ckpt && c->save_every > 0 && (step + 1) % c->save_every == 0;
}

dt_dtype dt_precision_type(const dt_train_config *c) {
  return strcmp(c->precision, "bf16") == 0   ? DT_BF16
         : strcmp(c->precision, "fp16") == 0 ? DT_F16
                                             : DT_F32;
}

void dt_scaler_init(dt_loss_scaler *s, const dt_train_config *c) {
  *s = (dt_loss_scaler){.scale = dt_precision_type(c) == DT_F16 ? c->loss_scale : 1.0,
                        .taken = c->start_step};
}

int dt_scaler_update(dt_loss_scaler *s, const dt_train_config *c, int found_nonfinite,
                     double *scale_used) {
  *scale_used = s->scale;
  if (found_nonfinite) { /* skip the step, back off; every rank reaches this alike */
    if (!s->quiet)
      dt_print0("step %4lld: fp16 gradients overflowed at loss scale %g: step skipped, scale "
                "halved\n",
                (long long)(s->taken + s->skipped + 1), s->scale);
    s->scale *= 0.5;
    s->good_steps = 0;
    s->skipped++;
    return 0;
  }
  if (dt_precision_type(c) == DT_F16 && ++s->good_steps == c->growth_interval) {
    s->scale *= 2.0;
    s->good_steps = 0;
  }
  s->taken++;
  return 1;
}
