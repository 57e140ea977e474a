/* shard.c: ZeRO stages 1-3 and FSDP over one communicator (shard.h). */
#include <stdlib.h>

#include "shard.h"

/* Stage 3 on a communicator of one rank: the shard is the whole layer, used
 * in place (no gather, no transient), as 08's columns of one rank need. */
static int alone(const fsdp *f) { return f->comm->size == 1 && f->zero == 3; }

void fsdp_init(fsdp *f, dt_comm *comm, const dt_train_config *c, int64_t L, int64_t n, int zero,
               int prefetch) {
  int64_t F = comm->size, S = (n + F - 1) / F; /* padded: any n and F work */
  *f = (fsdp){.comm = comm, .zero = zero, .prefetch = prefetch, .L = L, .n = n, .S = S};
  f->NS = F * S;
  if (zero < 3) f->w = dt_alloc_f32((size_t)(L * F * S), DT_PARAMS);
  if (zero == 3) f->ws = dt_alloc_f32((size_t)(L * S), DT_PARAMS);
  if (zero == 1) f->g = dt_alloc_f32((size_t)(L * F * S), DT_GRADS);
  if (zero >= 2) f->gs = dt_alloc_f32((size_t)(L * S), DT_GRADS);
  f->full = dt_host_alloc((size_t)L, sizeof(float *));
  f->pending = dt_host_alloc((size_t)L, sizeof(dt_request *));
  f->half = dt_host_alloc((size_t)L, sizeof(uint16_t *));
  for (int64_t l = 0; f->w && l < L; l++) f->full[l] = f->w + l * f->NS; /* resident */
  dt_wire_init(&f->wire, c, alone(f) ? 0 : (size_t)(F * S + (zero >= 2 ? S : 0)));
  f->op = dt_wire_op(&f->wire, DT_AVG);
}

void fsdp_range(const fsdp *f, int64_t *lo, int64_t *hi) {
  *lo = f->comm->rank * f->S;
  *hi = *lo + f->S < f->n ? *lo + f->S : f->n;
  if (*hi < *lo) *hi = *lo;
}

/* This rank's shard of layer l: a slice of the full buffer when there is one. */
static float *shard_of(const fsdp *f, float *full, float *shards, int64_t l) {
  return full ? full + l * f->NS + f->comm->rank * f->S : shards + l * f->S;
}

int fsdp_register(fsdp *f, dt_run *r) {
  if (f->zero == 3) return dt_run_segment(r, f->ws, f->gs, (size_t)(f->L * f->S));
  int first = r->nseg; /* stages 1-2: each shard is a slice of a full layer */
  for (int64_t l = 0; l < f->L; l++)
    dt_run_segment(r, shard_of(f, f->w, NULL, l), shard_of(f, f->g, f->gs, l), (size_t)f->S);
  return first;
}

int fsdp_segment(const fsdp *f, int first, int64_t l, int64_t *off) {
  *off = f->zero == 3 ? l * f->S : 0;
  return f->zero == 3 ? first : first + (int)l;
}

/* A gathered layer has arrived. In 16 bits it becomes fp32 again for compute,
 * which rounds its inputs to 16 bits anyway, so nothing is lost. Stages 1-2
 * skip their own slot [lo, hi): the fp32 master shard, stepped in place;
 * stage 3's buffer is fresh, all of it from the wire (lo = hi = NS). */
static void landed(fsdp *f, int64_t l) {
  if (f->pending[l]) {
    dt_wait(f->pending[l]);
    f->pending[l] = NULL;
  }
  if (!f->half[l]) return;
  int64_t lo = f->zero == 3 ? f->NS : f->comm->rank * f->S, hi = f->zero == 3 ? f->NS : lo + f->S;
  dt_from_half(f->half[l], f->full[l], (size_t)lo, f->wire.type);
  dt_from_half(f->half[l] + hi, f->full[l] + hi, (size_t)(f->NS - hi), f->wire.type);
  dt_free(f->half[l]);
  f->half[l] = NULL;
}

/* Every rank's shard of layer l into its full buffer. Stage 3 allocates that
 * buffer now and frees it after use, so the accounting sees it come and go;
 * stages 1-2 gather in place into their resident copy. In 16 bits a 16-bit
 * copy of the shard travels instead, into a 16-bit layer (in place too). */
static void gather(fsdp *f, int64_t l, int async) {
  if (f->zero == 3) f->full[l] = dt_alloc_f32((size_t)f->NS, DT_PARAMS);
  const void *mine = shard_of(f, f->w, f->ws, l);
  void *all = f->full[l];
  if (f->wire.type != DT_F32) {
    all = f->half[l] = dt_alloc((size_t)f->NS * 2, DT_COMMBUF);
    dt_to_half(mine, f->half[l] + f->comm->rank * f->S, (size_t)f->S, f->wire.type);
    mine = f->half[l] + f->comm->rank * f->S;
  }
  /* exercise: FSDP, 1 of 2: all-gather a layer's shards */
  if (async)
    f->pending[l] = dt_all_gather_async(f->comm, mine, all, (size_t)f->S, f->wire.type);
  else
    dt_all_gather(f->comm, mine, all, (size_t)f->S, f->wire.type);
  /* end of exercise */
  if (!async) landed(f, l);
}

float *fsdp_params(fsdp *f, int64_t l) {
  if (alone(f)) return f->ws + l * f->S;
  if (!f->full[l]) gather(f, l, 0);
  landed(f, l);
  return f->full[l];
}

void fsdp_prefetch(fsdp *f, int64_t l) {
  if (f->prefetch && !alone(f) && l >= 0 && l < f->L && !f->full[l]) gather(f, l, 1);
}

void fsdp_release(fsdp *f, int64_t l) {
  if (f->zero < 3) return;
  dt_free(f->full[l]);
  f->full[l] = NULL;
}

float *fsdp_grad(fsdp *f, int64_t l) {
  if (alone(f)) { /* the shard's own gradient, made in place */
    dt_zero(f->gs + l * f->S, (size_t)f->S * 4);
    return f->gs + l * f->S;
  }
  return f->g ? f->g + l * f->NS : dt_alloc_f32((size_t)f->NS, DT_GRADS); /* zeroed */
}

/* Stage 1 keeps every gradient and all-reduces each layer's as in 05. Stages
 * 2-3 made the layer's gradient in a transient buffer and reduce-scatter it
 * at once: the average of this rank's shard is all that survives. In 16
 * bits each rank divides by F first, so the 16-bit sum is the mean. */
void fsdp_reduce(fsdp *f, int64_t l, float *g) {
  if (alone(f)) { /* nothing to reduce; held in 16 bits as a reduce-scatter leaves it */
    if (f->wire.type != DT_F32) dt_round_half(g, (size_t)f->S, f->wire.type);
    return;
  }
  void *send = dt_wire_pack(&f->wire, g, (size_t)f->NS, 0, f->comm->size), *recv = send;
  if (!f->g)
    recv = f->wire.type == DT_F32 ? (void *)(f->gs + l * f->S) : (void *)(f->wire.buf + f->NS);
  /* exercise: FSDP, 2 of 2: reduce-scatter the layer's gradient */
  if (f->g) {
    dt_all_reduce(f->comm, send, recv, (size_t)f->NS, f->wire.type, f->op);
  } else {
    dt_reduce_scatter(f->comm, send, recv, (size_t)f->S, f->wire.type, f->op);
    dt_free(g);
  }
  /* end of exercise */
  if (f->wire.type != DT_F32) /* back to fp32: this rank's shard only, all its optimizer reads */
    dt_from_half((uint16_t *)recv + (f->g ? f->comm->rank * f->S : 0), shard_of(f, f->g, f->gs, l),
                 (size_t)f->S, f->wire.type);
}

void fsdp_step_taken(fsdp *f) {
  for (int64_t l = 0; f->zero < 3 && l < f->L; l++) gather(f, l, f->prefetch);
}

void fsdp_start(fsdp *f, dt_run *r) {
  fsdp_step_taken(f);
  fsdp_land(f);
  dt_run_reset(r);
}

void fsdp_land(fsdp *f) {
  for (int64_t l = 0; l < f->L; l++) landed(f, l);
}

void fsdp_describe(const fsdp *f, int64_t w1, int64_t R, int64_t B) {
  static const char *what[4] = {"", ": optimizer state", ": gradients and optimizer state",
                                " (FSDP): parameters, gradients and optimizer state"};
  int64_t lo, hi, in1, in2;
  fsdp_range(f, &lo, &hi);
  in1 = (hi < w1 ? hi : w1) - lo; /* W1's part of [lo, hi), then W2's */
  in1 = in1 < 0 ? 0 : in1;
  in2 = hi - lo - in1;
  dt_print0("ZeRO-%d%s sharded; a layer's [W1 | W2] is 2DH = %lld elements, padded to N x S "
            "= %d x %lld; %lld of the %lld samples per rank; prefetch %s\n",
            f->zero, what[f->zero], (long long)f->n, f->comm->size, (long long)f->S, (long long)R,
            (long long)B, f->prefetch ? "on" : "off");
  dt_print_ranks("owns [%lld, %lld) of every layer: %lld of W1, %lld of W2, %lld padding\n",
                 (long long)lo, (long long)(lo + f->S), (long long)in1, (long long)in2,
                 (long long)(lo + f->S - hi));
}

void fsdp_free(fsdp *f) {
  fsdp_land(f);
  free(f->full);
  free(f->pending);
  free(f->half);
}
