/* moe_kernels.cu: lesson 10's router on the GPU, moe.c's loops as kernels
 * over moe_core.h's bodies, one thread per token (or per expert, for the
 * balance loss's column sums); its GEMMs are dt_matmul's (cuBLAS). The
 * router's results stay on the device; what the host needs (the choices,
 * for the counts MPI sends, the balance loss's figure) it copies itself. */
#include "moe_core.h"
#include "train_internal.h"

#define ROWS(n)    (unsigned)(((n) + 255) / 256), 256, 0, dt_stream()
#define INDEX      (blockIdx.x * (size_t)blockDim.x + threadIdx.x)
#define LAUNCHED() CHECK_CUDA(cudaGetLastError())

__global__ static void router_kernel(float *probs, int64_t R, int64_t E, int64_t k,
                                     int32_t *choice) {
  size_t t = INDEX;
  if (t < (size_t)R) dt_router_row(probs + t * E, E, k, choice + t * k);
}

extern "C" void dt_router_forward(const float *x, const float *wr, int64_t R, int64_t D, int64_t E,
                                  int64_t k, float *probs, int32_t *choice) {
  DT_OP("dt_router_forward", R, D, E, k, 0);
  dt_matmul(0, 0, R, E, D, x, wr, probs, 0); /* the logits, softmaxed in place */
  if (R <= 0) return;
  router_kernel<<<ROWS(R)>>>(probs, R, E, k, choice);
  LAUNCHED();
}

__global__ static void gates_kernel(const float *probs, const int32_t *choice, int64_t R, int64_t E,
                                    int64_t k, float *gate) {
  size_t t = INDEX;
  if (t < (size_t)R) dt_router_gate_row(probs + t * E, choice + t * k, k, gate + t * k);
}

extern "C" void dt_router_gates(const float *probs, const int32_t *choice, int64_t R, int64_t E,
                                int64_t k, float *gate) {
  DT_OP("dt_router_gates", R, E, k, 0, 0);
  if (R <= 0) return;
  gates_kernel<<<ROWS(R)>>>(probs, choice, R, E, k, gate);
  LAUNCHED();
}

__global__ static void prob_sums_kernel(const float *probs, int64_t R, int64_t E, double *P) {
  size_t e = INDEX;
  if (e < (size_t)E) P[e] = dt_moe_prob_sum(probs, R, E, (int64_t)e);
}

/* probs and daux on the device, f on the host: the E column sums come to
 * the host for the loss (a printed figure), daux goes back (E floats). */
extern "C" double dt_moe_aux(const dt_train_config *c, const float *probs, int64_t R,
                             const float *f, double scale, float *daux) {
  DT_OP("dt_moe_aux", R, c->experts, 0, 0, 0);
  int64_t E = c->experts;
  static double *P, *hP;
  static float *hd;
  static int64_t cap;
  if (E > cap) {
    dt_free(P);
    free(hP);
    free(hd);
    P = (double *)dt_alloc((size_t)E * sizeof *P, DT_OTHER);
    hP = (double *)dt_host_alloc((size_t)E, sizeof *hP);
    hd = (float *)dt_host_alloc((size_t)E, sizeof *hd);
    cap = E;
  }
  prob_sums_kernel<<<ROWS(E)>>>(probs, R, E, P);
  LAUNCHED();
  dt_copy_to_host(hP, P, (size_t)E * sizeof *P);
  double loss = 0;
  for (int64_t e = 0; e < E; e++) { /* moe.c's loop, on the sums */
    loss += f[e] * hP[e] / (double)R;
    hd[e] = (float)(scale * c->aux_coef * (double)E * f[e] / (double)R);
  }
  dt_copy_from_host(daux, hd, (size_t)E * sizeof *hd);
  return c->aux_coef * (double)E * loss;
}

__global__ static void router_grad_kernel(const float *probs, const int32_t *choice,
                                          const float *gate, const float *dgate, const float *daux,
                                          int64_t R, int64_t E, int64_t k, float *dlogits) {
  size_t t = INDEX;
  if (t < (size_t)R)
    dt_router_grad_row(probs + t * E, gate + t * k, dgate + t * k, choice + t * k, daux, E, k,
                       dlogits + t * E);
}

extern "C" void dt_router_backward(const float *x, const float *wr, const float *probs,
                                   const int32_t *choice, const float *gate, const float *dgate,
                                   const float *daux, int64_t R, int64_t D, int64_t E, int64_t k,
                                   float *dlogits, float *dwr, float *dx) {
  DT_OP("dt_router_backward", R, D, E, k, 0);
  if (R > 0) {
    router_grad_kernel<<<ROWS(R)>>>(probs, choice, gate, dgate, daux, R, E, k, dlogits);
    LAUNCHED();
  }
  dt_matmul(1, 0, D, E, R, x, dlogits, dwr, 1); /* dWr += x^T dlogits */
  dt_matmul(0, 1, R, D, E, dlogits, wr, dx, 1); /* dx += dlogits Wr^T */
}

/* ------------------------------------------------------- the tokens' trip */
__global__ static void dispatch_kernel(const float *x, const int32_t *pos, int64_t R, int64_t k,
                                       int64_t D, float *send) {
  size_t e = INDEX;
  if (e >= (size_t)(R * k * D)) return;
  int64_t i = (int64_t)e / D, d = (int64_t)e % D;
  if (pos[i] >= 0) send[(int64_t)pos[i] * D + d] = x[i / k * D + d];
}
__global__ static void combine_kernel(const float *x, const float *gate, const float *ret,
                                      const int32_t *pos, int64_t R, int64_t k, int64_t D,
                                      float *xn) {
  size_t e = INDEX;
  if (e < (size_t)(R * D))
    xn[e] = dt_moe_combine_core(x, gate, ret, pos, k, D, (int64_t)e / D, (int64_t)e % D);
}
__global__ static void gate_grad_kernel(const float *dy, const float *gate, const float *ret,
                                        const int32_t *pos, int64_t R, int64_t k, int64_t D,
                                        float *back, float *dgate) {
  size_t i = INDEX;
  if (i >= (size_t)(R * k)) return;
  int64_t p = pos[i];
  dgate[i] =
      p < 0 ? 0.0f
            : dt_moe_gate_grad_core(dy + (int64_t)i / k * D, ret + p * D, gate[i], back + p * D, D);
}
__global__ static void combine_grad_kernel(const float *dy, const float *back, const int32_t *pos,
                                           const int32_t *expert, int64_t R, int64_t k, int64_t D,
                                           float *dx) {
  size_t e = INDEX;
  if (e < (size_t)(R * D))
    dx[e] = dt_moe_combine_grad_core(dy, back, pos, expert, k, D, (int64_t)e / D, (int64_t)e % D);
}

extern "C" void dt_moe_dispatch_rows(const float *x, const int32_t *pos, int64_t R, int64_t k,
                                     int64_t D, float *send) {
  DT_OP("dt_moe_dispatch_rows", R, k, D, 0, 0);
  if (R * k * D <= 0) return;
  dispatch_kernel<<<ROWS(R * k * D)>>>(x, pos, R, k, D, send);
  LAUNCHED();
}
extern "C" void dt_moe_combine(const float *x, const float *gate, const float *ret,
                               const int32_t *pos, int64_t R, int64_t k, int64_t D, float *xn) {
  DT_OP("dt_moe_combine", R, k, D, 0, 0);
  if (R * D <= 0) return;
  combine_kernel<<<ROWS(R * D)>>>(x, gate, ret, pos, R, k, D, xn);
  LAUNCHED();
}
extern "C" void dt_moe_gate_backward(const float *dy, const float *gate, const float *ret,
                                     const int32_t *pos, int64_t R, int64_t k, int64_t D,
                                     float *back, float *dgate) {
  DT_OP("dt_moe_gate_backward", R, k, D, 0, 0);
  if (R * k <= 0) return;
  gate_grad_kernel<<<ROWS(R * k)>>>(dy, gate, ret, pos, R, k, D, back, dgate);
  LAUNCHED();
}
extern "C" void dt_moe_combine_backward(const float *dy, const float *back, const int32_t *pos,
                                        const int32_t *expert, int64_t R, int64_t k, int64_t D,
                                        float *dx) {
  DT_OP("dt_moe_combine_backward", R, k, D, 0, 0);
  if (R * D <= 0) return;
  combine_grad_kernel<<<ROWS(R * D)>>>(dy, back, pos, expert, R, k, D, dx);
  LAUNCHED();
}
