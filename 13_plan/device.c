/* device.c: what one operation of compute.c costs a device.
 *
 * On a machine --measure timed: the time of that very kernel at that very
 * shape. Where it lacks the shape, or on a datasheet: the roofline, the
 * longer of the FLOPs at their rate and the bytes at the memory bandwidth.
 * A datasheet's rates, from first principles:
 *   a GEMM       its output cut into tiles of 128 x 256 or 256 x 128
 *                (cuBLAS's largest on A100 and H100, its kernels' names say:
 *                ..._256x128_...; laid whichever way wastes less),
 *                the tiles run in waves of one a streaming multiprocessor,
 *                a wave costing as much full as not (tile and wave
 *                quantization: NVIDIA's "Matrix Multiplication Background"
 *                guide; Anthony et al. 2024, "The Case for Co-Designing
 *                Model Architectures with Hardware"), each wave at the
 *                largest rate cuBLAS reaches (the preset's MAMF fraction of
 *                peak); or its bytes at the memory bandwidth where longer:
 *                small and skinny products fall far from peak, by shape;
 *   attention    fused (FlashAttention): at the attention kernels' own
 *                measured fraction of peak (the preset's, cited);
 *   the rest     norms, softmax, activations, residual adds, casts, the
 *                loss, the optimizer: bytes at the memory bandwidth. */
#include <math.h>
#include <string.h>

#include "device.h"

const char *const kernel_name[NKERNELS] = {
    "gemm",      "mlp_f",  "mlp_b",  "att_f", "att_b", "ew",    "loss",  "data05",
    "data11",    "adamw",  "sgd",    "flash", "alloc", "bgemm", "ln_f",  "ln_b",
    "gelu_f",    "gelu_b", "emb_f",  "emb_b", "ce_f",  "ce_b",  "sumsq", "att_start",
    "att_delta", "ce_sum", "ce_tgt", "pos_f", "pos_b", "relu_b"};

const char *op_kernel(const op *o) {
  static const char *const name[NKERNELS] = {[GEMM] = "dt_matmul",
                                             [MLP_F] = "dt_block_forward",
                                             [MLP_B] = "dt_block_backward",
                                             [ATT_F] = "dt_attn_block_forward",
                                             [ATT_B] = "dt_attn_block_backward",
                                             [LOSS] = "dt_mse_forward_backward",
                                             [DATA05] = "dt_make_batch",
                                             [ATT_START] = "dt_attn_start",
                                             [ATT_DELTA] = "dt_attn_delta",
                                             [RELU_B] = "dt_relu_backward",
                                             [ADAMW] = "dt_adamw_step",
                                             [SGD] = "dt_sgd_step",
                                             [LN_F] = "dt_layernorm_forward",
                                             [LN_B] = "dt_layernorm_backward",
                                             [GELU_F] = "dt_gelu_forward",
                                             [GELU_B] = "dt_gelu_backward",
                                             [EMB_F] = "dt_embed_forward",
                                             [EMB_B] = "dt_embed_backward",
                                             [CE_F] = "dt_ce_max",
                                             [CE_B] = "dt_ce_backward",
                                             [CE_SUM] = "dt_ce_sumexp",
                                             [CE_TGT] = "dt_ce_target",
                                             [POS_F] = "dt_positions_forward",
                                             [POS_B] = "dt_positions_backward",
                                             [SUMSQ] = "dt_sum_squares"};
  if (o->k != EW) return name[o->k];
  return o->s[1] == 1   ? "dt_zero"
         : o->s[1] == 3 ? "dt_add"
         : o->s[1] != 2 ? NULL
         : o->s[2] == 1 ? "dt_scale"
                        : "dt_copy";
}

enum { TILE_M = 128, TILE_N = 256 };

/* the waves of a GEMM's tiles, the tile laid whichever way wastes less */
static double waves(const op *o, const machine *c) {
  double m = (double)o->s[0], n = (double)o->s[1], batch = o->k == BGEMM ? (double)o->s[3] : 1;
  double a = ceil(m / TILE_M) * ceil(n / TILE_N), b = ceil(m / TILE_N) * ceil(n / TILE_M);
  return ceil(batch * fmin(a, b) / c->sms);
}

/* Each wave: its tiles' products at the large-GEMM rate, then their
 * output written (a weight's gradient, accumulated, read and written) at
 * the memory bandwidth: one thread block an SM, its epilogue after its
 * main loop. */
static double gemm_seconds(const op *o, const machine *c) {
  double m = (double)o->s[0], n = (double)o->s[1], k = (double)o->s[2];
  double es = o->bytes / ((m * k + k * n + m * n) * (o->k == BGEMM ? (double)o->s[3] : 1));
  double tile = TILE_M * TILE_N * c->sms, out = tile * es * (o->k == GEMM && o->s[3] ? 2 : 1);
  double wave = 2.0 * tile * k / (c->flops * c->eff) + out / c->hbm_bw;
  return fmax(waves(o, c) * wave, o->bytes / c->hbm_bw);
}

double op_seconds(const op *o, const machine *c) {
  for (int i = 0; c->measured && i < c->nops; i++)
    if (c->ops[i].k == o->k && !memcmp(c->ops[i].s, o->s, sizeof o->s)) return c->ops[i].seconds;
  if (c->sms > 0 && (o->k == GEMM || o->k == BGEMM)) return gemm_seconds(o, c);
  int product = o->k == GEMM || o->k == BGEMM || o->k == MLP_F || o->k == MLP_B || o->k == FLASH;
  double rate = c->flops * (c->sms > 0 && o->k == FLASH ? c->att_eff : c->eff);
  double f = product ? o->flops / rate : 0, b = o->bytes / c->hbm_bw;
  return f > b ? f : b;
}
