/* model.c: the training config and the residual MLP block, forward and
 * backward, on whatever slice of the weights a lesson holds. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "train_internal.h"

static double adamw_lr(const dt_train_config *c) { return c->adamw_lr > 0 ? c->adamw_lr : 0.003; }

const char *dt_lr_help(const dt_train_config *c) {
  static char help[64];
  snprintf(help, sizeof help, "learning rate (0: 0.2 for sgd, %g for adamw)", adamw_lr(c));
  return help;
}

void dt_train_resolve(dt_train_config *c) {
  if (c->hidden == 0) c->hidden = 4 * c->dim;
  if (c->samples == 0) c->samples = 8 * c->batch;
  if (c->lr == 0) c->lr = c->optimizer[0] == 'a' ? adamw_lr(c) : 0.2;
  if (c->samples % c->batch != 0)
    dt_fail("--samples %lld is not a multiple of --batch %lld: every epoch must split into whole "
            "global batches, so that every world size sees the same batches",
            (long long)c->samples, (long long)c->batch);
  dt_set_matmul_inputs(dt_precision_type(c));
  dt_kernels_init(); /* now, not inside the first timed step */
  if (c->resume && dt_precision_type(c) == DT_F16)
    dt_fail("--resume with --precision fp16 is not supported: checkpoints do not hold the loss "
            "scaler's state");
  if ((c->save_every > 0 || c->resume) && !c->ckpt)
    dt_fail("--save-every and --resume need --ckpt DIR, the checkpoint folder");
  if (c->model == DT_MOE && c->topk > c->experts)
    dt_fail("--topk %lld is more than --experts %lld: a token cannot choose more experts than "
            "there are",
            (long long)c->topk, (long long)c->experts);
  if (c->model == DT_TRANSFORMER && c->dim % c->heads != 0)
    dt_fail("--heads %lld: the width D = %lld does not split into %lld heads; choose --heads "
            "dividing --dim",
            (long long)c->heads, (long long)c->dim, (long long)c->heads);
  dt_check_outputs(c); /* before any training, not after it */
  /* Every lesson holds the whole model somewhere (rank 0 checks it), so a
   * model larger than the memory left is refused before anything runs. */
  double bytes = 4.0 * (double)c->layers * (double)dt_params_per_layer(c);
  double available = dt_memory_available();
  if (bytes > available)
    dt_fail("the model needs %.2f GiB for its weights alone (%s x 4 bytes); only %.2f GiB are "
            "available (%s): choose a smaller --layers, --dim or --hidden%s",
            bytes / 1073741824.0,
            c->model == DT_MOE           ? "L x (DE + 2EDH)"
            : c->model == DT_TRANSFORMER ? "L x (4D^2 + 2DH)"
                                         : "L x 2 x D x H",
            available / 1073741824.0, dt_memory_source(),
            c->model == DT_MOE ? " or --experts" : "");
}

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
  default: return 2 * D * H;
  }
}

static int64_t tensors_per_layer(const dt_train_config *c) {
  switch (c->model) {
  case DT_MOE: return 1 + 2 * c->experts;
  case DT_TRANSFORMER: return 6;
  default: return 2;
  }
}

int64_t dt_model_tensors(const dt_train_config *c) { return c->layers * tensors_per_layer(c); }

dt_tensor dt_model_tensor(const dt_train_config *c, int64_t t) {
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

/* The layer's tensors in order, from dt_model_tensor: one description of the layout. */
int64_t dt_tensor_at(const dt_train_config *c, int64_t at) {
  int64_t t = at / dt_params_per_layer(c) * tensors_per_layer(c);
  for (dt_tensor x = dt_model_tensor(c, t); at >= x.at + x.rows * x.cols; x = dt_model_tensor(c, t))
    t++;
  return t;
}

void dt_initial_weights(const dt_train_config *c, float *dst, int64_t at, int64_t n) {
  for (int64_t i = 0; i < n;) { /* a run of elements of one tensor at a time */
    int64_t t = dt_tensor_at(c, at + i);
    dt_tensor x = dt_model_tensor(c, t);
    int64_t end = x.at + x.rows * x.cols, m = end - (at + i) < n - i ? end - (at + i) : n - i;
    for (int64_t k = 0; k < m; k++)
      dst[i + k] = -x.bound + 2 * x.bound *
                                  dt_rng_uniform((uint64_t)c->seed, (uint64_t)t,
                                                 (uint64_t)(at + i + k - x.at));
    i += m;
  }
}

void dt_train_print(const dt_train_config *c) {
  dt_print0("model: L=%lld D=%lld H=%lld (%lld parameters, %.2f MiB fp32) | batch B=%lld, "
            "%lld samples | %lld steps of %s, lr %g%s | precision %s\n",
            (long long)c->layers, (long long)c->dim, (long long)c->hidden,
            (long long)(c->layers * dt_params_per_layer(c)),
            4.0 * (double)(c->layers * dt_params_per_layer(c)) / (1 << 20), (long long)c->batch,
            (long long)c->samples, (long long)c->steps, c->optimizer, c->lr,
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
  dt_matmul(0, 0, rows, Hs, D, x, w1, a, 0);   /* a = x W1     [rows, Hs] */
  dt_kinks_meet(where, x, w1, a, rows, D, Hs); /* for the check: relu's a > 0 near 0 */
  dt_relu_forward(a, h, (size_t)(rows * Hs));  /* h = relu(a) */
  if (residual) dt_copy(out, x, (size_t)(rows * D) * sizeof(float));
  dt_matmul(0, 0, rows, D, Hs, h, w2, out, residual); /* out (+)= h W2 */
}

void dt_block_backward(const float *x, const float *a, const float *h, const float *w1,
                       const float *w2, const float *dout, float *dx, float *dw1, float *dw2,
                       float *dh, int64_t rows, int64_t D, int64_t Hs, int residual) {
  dt_matmul(1, 0, Hs, D, rows, h, dout, dw2, 1);    /* dW2 += h^T dout   [Hs, D] */
  dt_matmul(0, 1, rows, Hs, D, dout, w2, dh, 0);    /* dh = dout W2^T    [rows, Hs] */
  dt_relu_backward(a, dh, dh, (size_t)(rows * Hs)); /* da = dh * (a > 0), in place */
  dt_matmul(1, 0, D, Hs, rows, x, dh, dw1, 1);      /* dW1 += x^T da     [D, Hs] */
  /* the residual path carries dout straight through to dx */
  if (residual) dt_copy(dx, dout, (size_t)(rows * D) * sizeof(float));
  dt_matmul(0, 1, rows, D, Hs, dh, w1, dx, residual); /* dx (+)= da W1^T */
}

void dt_optimizer_step(const dt_train_config *c, float *w, const float *g, float *m, float *v,
                       size_t n, int64_t t, float grad_scale) {
  if (c->optimizer[0] == 'a')
    dt_adamw_step(w, g, m, v, n, (float)c->lr, (float)c->weight_decay, t, grad_scale);
  else
    dt_sgd_step(w, g, n, (float)c->lr, grad_scale);
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
