/* wire.c: --precision's wire format (train.h). In bf16 or fp16 what travels
 * is a 16-bit copy of the floats, in half the bytes, summed in 16 bits as
 * NCCL sums; the floats themselves stay fp32 for compute and the optimizer. */
#include "train_internal.h"

void dt_wire_init(dt_wire *w, const dt_train_config *c, size_t count) {
  w->type = dt_precision_type(c);
  w->buf = w->type == DT_F32 || count == 0 ? NULL : dt_alloc(count * 2, DT_COMMBUF);
}

void *dt_wire_pack(const dt_wire *w, float *x, size_t n, size_t at, int divide) {
  if (w->type == DT_F32) return x;
  if (divide > 1) dt_scale(x, n, 1.0f / (float)divide);
  dt_to_half(x, w->buf + at, n, w->type);
  return w->buf + at;
}

void dt_wire_unpack(const dt_wire *w, float *x, size_t n, size_t at) {
  if (w->type != DT_F32) dt_from_half(w->buf + at, x, n, w->type);
}

dt_op dt_wire_op(const dt_wire *w, dt_op op) {
  return w->type != DT_F32 && op == DT_AVG ? DT_SUM : op;
}
