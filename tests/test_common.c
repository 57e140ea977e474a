/* test_common.c: unit tests of the common layer, run by `make test` at
 * NP = 1..4. Inputs are small integers, so every float sum is exact and
 * results are compared with ==. Failures on any rank are summed into the
 * verdict and the exit code. */
#define _POSIX_C_SOURCE 200809L /* sleep */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dt.h"
#include "train_internal.h" /* dt_fill_rows */
#include "unit.h"

/* A device buffer holding host values, and its contents back on the host. */
static float *upload(const float *host, size_t n, dt_tag tag) {
  float *buf = dt_alloc_f32(n, tag);
  dt_copy_from_host(buf, host, n * sizeof(float));
  return buf;
}
static float *download(const float *buf, size_t n) {
  float *host = malloc(n * sizeof(float) + 1);
  dt_copy_to_host(host, buf, n * sizeof(float));
  return host;
}
/* Rank r's i-th input: a small integer, unique per (r, i). */
static float value(int r, size_t i) { return (float)((r + 1) * 100 + (int)(i % 97)); }

static void test_rng(void) {
  EXPECT(dt_rng_u64(1, 2, 3) == dt_rng_u64(1, 2, 3), "same key, same value");
  EXPECT(dt_rng_u64(1, 2, 3) != dt_rng_u64(1, 3, 3), "streams differ");
  EXPECT(dt_rng_u64(1, 2, 3) != dt_rng_u64(2, 2, 3), "seeds differ");
  /* splitmix64's published first output for seed 0 is e220a8397b1dcdaf */
  EXPECT(dt_rng_u64(0, 0, 0) != 0, "nonzero");
  double sum = 0;
  for (uint64_t i = 0; i < 100000; i++) {
    float u = dt_rng_uniform(7, 0, i);
    if (u < 0.0f || u >= 1.0f) EXPECT(0, "uniform out of [0,1): %g", u);
    sum += u;
  }
  EXPECT(fabs(sum / 100000 - 0.5) < 0.01, "mean of uniforms %g", sum / 100000);
  /* the backend fill reproduces the host generator bit for bit */
  size_t n = 1000;
  float *buf = dt_alloc_f32(n, DT_OTHER);
  dt_fill_uniform(buf, n, 42, 5, 100, -2.0f, 2.0f);
  float *host = download(buf, n);
  int same = 1;
  for (size_t i = 0; i < n; i++) same &= host[i] == -2.0f + 4.0f * dt_rng_uniform(42, 5, 100 + i);
  EXPECT(same, "dt_fill_uniform matches dt_rng_uniform");
  free(host);
  dt_free(buf);
}

/* float32 -> 16 bits, on known values, round-to-nearest-even ties, fp16's
 * overflow and subnormals; every 16-bit pattern round-trips; the backend's
 * kernels agree bit for bit; 16-bit all-reduce sums exactly-representable
 * values exactly. */
static uint16_t half_of(float f, dt_dtype t) {
  float *d = dt_alloc_f32(1, DT_OTHER);
  uint16_t *h = dt_alloc(2, DT_OTHER), out;
  dt_copy_from_host(d, &f, 4);
  dt_to_half(d, h, 1, t);
  dt_copy_to_host(&out, h, 2);
  dt_free(d), dt_free(h);
  return out;
}

static void test_half(dt_comm *w) {
  struct {
    float f;
    uint16_t bf16, f16;
  } known[] = {
      {1.0f, 0x3f80, 0x3c00},           {-2.0f, 0xc000, 0xc000},
      {1.00390625f, 0x3f80, 0x3c04}, /* 1 + 2^-8: a bf16 tie, to even (down) */
      {1.01171875f, 0x3f82, 0x3c0c}, /* 1 + 3 x 2^-8: a bf16 tie, to even (up) */
      {65504.0f, 0x4780, 0x7bff},    /* fp16's largest; 0x477fe000 rounds bf16 up */
      {65519.0f, 0x4780, 0x7bff},       {65520.0f, 0x4780, 0x7c00}, /* fp16: a tie, to inf */
      {5.9604645e-08f, 0x3380, 0x0001}, /* 2^-24: fp16's smallest subnormal */
      {2.9802322e-08f, 0x3300, 0x0000}, /* 2^-25: a tie, to even (zero) */
      {4.4703484e-08f, 0x3340, 0x0001}, /* 1.5 x 2^-25 rounds up */
      {0.33333334f, 0x3eab, 0x3555},    {-0.0f, 0x8000, 0x8000},
      {1e30f, 0x714a, 0x7c00},          {-1e30f, 0xf14a, 0xfc00}};
  for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
    uint16_t b = half_of(known[i].f, DT_BF16), h = half_of(known[i].f, DT_F16);
    EXPECT(b == known[i].bf16 && h == known[i].f16,
           "%g -> bf16 %04x (want %04x), fp16 %04x (want %04x)", known[i].f, b, known[i].bf16, h,
           known[i].f16);
  }
  EXPECT(half_of(NAN, DT_BF16) == 0x7fc0 && (half_of(NAN, DT_F16) & 0x7e00) == 0x7e00,
         "NaN stays NaN");
  /* every pattern survives the trip to float32 and back (NaNs aside) */
  enum { ALL = 65536 };
  uint16_t *pat = malloc(ALL * 2), *back = malloc(ALL * 2);
  float *asf = malloc(ALL * 4);
  for (int i = 0; i < ALL; i++) pat[i] = (uint16_t)i;
  uint16_t *d16 = dt_alloc(ALL * 2, DT_OTHER);
  float *d32 = dt_alloc_f32(ALL, DT_OTHER);
  dt_dtype types[2] = {DT_BF16, DT_F16};
  for (int t = 0; t < 2; t++) {
    dt_copy_from_host(d16, pat, ALL * 2);
    dt_from_half(d16, d32, ALL, types[t]);
    dt_to_half(d32, d16, ALL, types[t]);
    dt_copy_to_host(back, d16, ALL * 2);
    dt_copy_to_host(asf, d32, ALL * 4);
    int bad = 0;
    for (int i = 0; i < ALL; i++) bad += !isnan(asf[i]) && back[i] != pat[i];
    EXPECT(bad == 0, "type %d: %d patterns do not round-trip", types[t], bad);
  }
  /* a 16-bit all-reduce of small integers (exact in both formats) is exact */
  int N = w->size;
  float v[4] = {(float)w->rank, 1.0f, -3.0f, 0.5f}, got[4];
  for (int t = 0; t < 2; t++) {
    dt_copy_from_host(d32, v, 16);
    dt_to_half(d32, d16, 4, types[t]);
    dt_all_reduce(w, d16, d16, 4, types[t], DT_SUM);
    dt_from_half(d16, d32, 4, types[t]);
    dt_copy_to_host(got, d32, 16);
    EXPECT(got[0] == (float)(N * (N - 1) / 2) && got[1] == (float)N && got[2] == -3.0f * N &&
               got[3] == 0.5f * N,
           "16-bit all-reduce type %d: %g %g %g %g", types[t], got[0], got[1], got[2], got[3]);
  }
  free(pat), free(back), free(asf);
  dt_free(d16), dt_free(d32);
}

static void test_all_reduce(dt_comm *w, size_t n) {
  int N = w->size;
  float *in = malloc(n * sizeof(float) + 1);
  for (size_t i = 0; i < n; i++) in[i] = value(w->rank, i);
  float *send = upload(in, n, DT_COMMBUF), *recv = dt_alloc_f32(n, DT_COMMBUF);
  dt_op ops[3] = {DT_SUM, DT_AVG, DT_MAX};
  for (int o = 0; o < 3; o++) {
    dt_comm_reset(w);
    dt_all_reduce(w, send, recv, n, DT_F32, ops[o]);
    float *out = download(recv, n);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
      float sum = 0, max = 0;
      for (int r = 0; r < N; r++) sum += value(r, i), max = unit_max(max, value(r, i));
      float want = ops[o] == DT_SUM ? sum : ops[o] == DT_AVG ? sum / N : max;
      bad += fabsf(out[i] - want) > (ops[o] == DT_AVG ? 1e-4f * want : 0.0f);
    }
    EXPECT(bad == 0, "all_reduce op %d n=%zu: %d wrong", o, n, bad);
    /* one rank: a no-op, counted as nothing */
    EXPECT(w->count[DT_ALL_REDUCE].calls == (N > 1) &&
               w->count[DT_ALL_REDUCE].bytes_sent == 2 * (uint64_t)(N - 1) * n * 4 / N,
           "all_reduce bytes %llu", (unsigned long long)w->count[DT_ALL_REDUCE].bytes_sent);
    free(out);
  }
  /* in place, and asynchronous */
  dt_all_reduce(w, send, send, n, DT_F32, DT_SUM);
  dt_request *req = dt_all_reduce_async(w, recv, recv, n, DT_F32, DT_SUM);
  while (!dt_test(req)) {
  }
  dt_wait(req);
  float *a = download(send, n), *b = download(recv, n);
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    float sum = 0;
    for (int r = 0; r < N; r++) sum += value(r, i);
    bad += a[i] != sum || b[i] != (float)N * value(N - 1, i); /* recv held the MAX */
  }
  EXPECT(bad == 0, "in-place and async all_reduce n=%zu: %d wrong", n, bad);
  free(a), free(b), free(in);
  dt_free(send), dt_free(recv);
}

static void test_gather_scatter(dt_comm *w, size_t c) {
  int N = w->size;
  float *in = malloc(c * N * sizeof(float) + 1);
  for (size_t i = 0; i < c * N; i++) in[i] = value(w->rank, i);
  float *shard = upload(in, c, DT_COMMBUF), *full = dt_alloc_f32(c * N, DT_COMMBUF);
  dt_comm_reset(w);
  dt_all_gather(w, shard, full, c, DT_F32);
  float *out = download(full, c * N);
  int bad = 0;
  for (int r = 0; r < N; r++)
    for (size_t i = 0; i < c; i++) bad += out[r * c + i] != value(r, i);
  EXPECT(bad == 0, "all_gather c=%zu: %d wrong", c, bad);
  EXPECT(w->count[DT_ALL_GATHER].bytes_sent == (uint64_t)(N - 1) * c * 4, "all_gather bytes");
  free(out);

  float *whole = upload(in, c * N, DT_COMMBUF), *mine = dt_alloc_f32(c, DT_COMMBUF);
  dt_request *req = dt_reduce_scatter_async(w, whole, mine, c, DT_F32, DT_SUM);
  dt_wait(req);
  out = download(mine, c);
  bad = 0;
  for (size_t i = 0; i < c; i++) {
    float sum = 0;
    for (int r = 0; r < N; r++) sum += value(r, w->rank * c + i);
    bad += out[i] != sum;
  }
  EXPECT(bad == 0, "reduce_scatter c=%zu: %d wrong", c, bad);
  EXPECT(w->count[DT_REDUCE_SCATTER].bytes_sent == (uint64_t)(N - 1) * c * 4,
         "reduce_scatter bytes");
  /* in-place all_gather: the shard already sits at rank*c inside full */
  dt_copy(full + (size_t)w->rank * c, shard, c * sizeof(float));
  dt_wait(dt_all_gather_async(w, full + (size_t)w->rank * c, full, c, DT_F32));
  free(out);
  out = download(full, c * N);
  bad = 0;
  for (int r = 0; r < N; r++)
    for (size_t i = 0; i < c; i++) bad += out[r * c + i] != value(r, i);
  EXPECT(bad == 0, "in-place async all_gather c=%zu: %d wrong", c, bad);
  free(out), free(in);
  dt_free(shard), dt_free(full), dt_free(whole), dt_free(mine);
}

static void test_point_to_point(dt_comm *w, size_t n) {
  int N = w->size, next = (w->rank + 1) % N, prev = (w->rank + N - 1) % N;
  float *in = malloc(n * sizeof(float) + 1);
  for (size_t i = 0; i < n; i++) in[i] = value(w->rank, i);
  float *buf = upload(in, n, DT_COMMBUF), *got = dt_alloc_f32(n, DT_COMMBUF);
  dt_comm_reset(w);
  dt_sendrecv(w, buf, n, next, got, n, prev, DT_F32);
  float *out = download(got, n);
  int bad = 0;
  for (size_t i = 0; i < n; i++) bad += out[i] != value(prev, i);
  EXPECT(bad == 0, "sendrecv ring n=%zu: %d wrong", n, bad);
  EXPECT(w->count[DT_SENDRECV].bytes_sent == n * 4, "sendrecv bytes");
  free(out);
  /* the same ring hop in flight (11_cp): the received block from prev, its bytes counted */
  dt_zero(got, n * sizeof(float));
  dt_wait(dt_sendrecv_async(w, buf, n, next, got, n, prev, DT_F32));
  out = download(got, n);
  bad = 0;
  for (size_t i = 0; i < n; i++) bad += out[i] != value(prev, i);
  EXPECT(bad == 0, "async sendrecv ring n=%zu: %d wrong", n, bad);
  EXPECT(w->count[DT_SENDRECV].bytes_sent == (N > 1 ? 2 * n * 4 : n * 4),
         "async sendrecv bytes counted (one rank: a copy, uncounted)");
  free(out);
  if (N >= 2 && w->rank < 2) { /* rank 0 sends, rank 1 receives */
    if (w->rank == 0)
      dt_send(w, buf, n, DT_F32, 1);
    else
      dt_recv(w, got, n, DT_F32, 0);
    if (w->rank == 1) {
      out = download(got, n);
      bad = 0;
      for (size_t i = 0; i < n; i++) bad += out[i] != value(0, i);
      EXPECT(bad == 0, "send/recv n=%zu: %d wrong", n, bad);
      free(out);
    }
  }
  for (int root = 0; root < N; root++) {
    dt_copy_from_host(got, in, n * sizeof(float));
    dt_comm_reset(w);
    dt_broadcast(w, got, n, DT_F32, root);
    out = download(got, n);
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += out[i] != value(root, i);
    EXPECT(bad == 0, "broadcast root %d n=%zu: %d wrong", root, n, bad);
    uint64_t want = w->rank == (root + N - 1) % N ? 0 : n * 4;
    EXPECT(w->count[DT_BROADCAST].bytes_sent == want, "broadcast bytes");
    free(out);
  }
  for (int root = 0; root < N; root++) { /* reduce: the sum lands on root only */
    dt_copy_from_host(buf, in, n * sizeof(float));
    dt_comm_reset(w);
    dt_reduce(w, buf, got, n, DT_F32, DT_SUM, root);
    if (w->rank == root) {
      out = download(got, n);
      bad = 0;
      for (size_t i = 0; i < n; i++) {
        float sum = 0;
        for (int r = 0; r < N; r++) sum += value(r, i);
        bad += out[i] != sum;
      }
      EXPECT(bad == 0, "reduce to root %d n=%zu: %d wrong", root, n, bad);
      free(out);
    }
    EXPECT(w->count[DT_REDUCE].bytes_sent == (w->rank == root ? 0 : n * 4), "reduce bytes");
  }
  dt_barrier(w);
  free(in);
  dt_free(buf), dt_free(got);
}

/* Element i of the block rank s sends rank d: unique, so a block that lands
 * in the wrong place is seen. */
static float a2a_value(int s, int d, size_t i) { return (float)((size_t)(s * 8 + d) * 131072 + i); }

static void test_all_to_all(dt_comm *w, size_t n) {
  int N = w->size, me = w->rank;
  float *in = malloc((size_t)N * n * sizeof *in + 1);
  for (int d = 0; d < N; d++)
    for (size_t i = 0; i < n; i++) in[(size_t)d * n + i] = a2a_value(me, d, i);
  float *send = upload(in, (size_t)N * n, DT_COMMBUF),
        *recv = dt_alloc_f32((size_t)N * n, DT_COMMBUF);
  dt_comm_reset(w);
  dt_all_to_all(w, send, recv, n, DT_F32);
  float *out = download(recv, (size_t)N * n);
  int bad = 0;
  for (int s = 0; s < N; s++)
    for (size_t i = 0; i < n; i++) bad += out[(size_t)s * n + i] != a2a_value(s, me, i);
  EXPECT(bad == 0, "all_to_all n=%zu: %d wrong", n, bad);
  EXPECT(w->count[DT_ALL_TO_ALL].bytes_sent == (uint64_t)(N - 1) * n * 4,
         "all_to_all bytes %llu, want (N-1) x n x 4",
         (unsigned long long)w->count[DT_ALL_TO_ALL].bytes_sent);
  free(out);
  /* uneven blocks: rank s sends rank d (s + 2d + n) % 5 elements, at
   * displacements with a gap of 3 between blocks on both sides */
  size_t sc[64], sd[64], rc[64], rd[64], at = 0, rat = 0, want_bytes = 0;
  for (int p = 0; p < N; p++) {
    sc[p] = ((size_t)me + 2 * (size_t)p + n) % 5;
    rc[p] = ((size_t)p + 2 * (size_t)me + n) % 5;
    sd[p] = at, at += sc[p] + 3;
    rd[p] = rat, rat += rc[p] + 3;
    if (p != me) want_bytes += sc[p] * 4;
  }
  float *sv = malloc((at + 1) * sizeof *sv), *rv;
  for (int p = 0; p < N; p++)
    for (size_t i = 0; i < sc[p]; i++) sv[sd[p] + i] = a2a_value(me, p, i);
  float *vs = upload(sv, at, DT_COMMBUF), *vr = dt_alloc_f32(rat + 1, DT_COMMBUF);
  dt_fill_uniform(vr, rat + 1, 9, 9, 0, -7.0f, -7.0f); /* the gaps must keep this */
  dt_comm_reset(w);
  dt_all_to_allv(w, vs, sc, sd, vr, rc, rd, DT_F32);
  rv = download(vr, rat + 1);
  bad = 0;
  size_t gap = 0;
  for (int p = 0; p < N; p++) {
    for (size_t i = 0; i < rc[p]; i++) bad += rv[rd[p] + i] != a2a_value(p, me, i);
    for (size_t i = rd[p] + rc[p]; i < rd[p] + rc[p] + 3; i++) gap += rv[i] != -7.0f;
  }
  EXPECT(bad == 0 && gap == 0, "all_to_allv n=%zu: %d wrong, %zu gap elements overwritten", n, bad,
         gap);
  EXPECT(w->count[DT_ALL_TO_ALL].bytes_sent == want_bytes,
         "all_to_allv bytes %llu, want %zu (what goes to the other ranks)",
         (unsigned long long)w->count[DT_ALL_TO_ALL].bytes_sent, want_bytes);
  free(sv), free(rv), free(in);
  dt_free(send), dt_free(recv), dt_free(vs), dt_free(vr);
}

static void test_split(dt_comm *w) {
  dt_comm *half = dt_comm_split(w, w->rank % 2, w->rank);
  EXPECT(half->size == (w->size + 1 - w->rank % 2) / 2 && half->rank == w->rank / 2,
         "split sizes: got %d/%d", half->rank, half->size);
  int32_t mine = w->rank, sum = 0;
  int32_t *buf = dt_alloc(sizeof mine, DT_OTHER);
  dt_copy_from_host(buf, &mine, sizeof mine);
  dt_all_reduce(half, buf, buf, 1, DT_I32, DT_SUM);
  dt_copy_to_host(&sum, buf, sizeof sum);
  int want = 0;
  for (int r = w->rank % 2; r < w->size; r += 2) want += r;
  EXPECT(sum == want, "sum over the sub-communicator: %d, want %d", sum, want);
  dt_free(buf);
  dt_comm_free(half);
}

static void test_memory(void) {
  size_t base = dt_mem_current(DT_PARAMS);
  dt_mem_reset_peaks();
  void *a = dt_alloc(1000, DT_PARAMS), *b = dt_alloc(500, DT_PARAMS), *g = dt_alloc(64, DT_GRADS);
  EXPECT(dt_mem_current(DT_PARAMS) == base + 1500, "current params");
  dt_free(a);
  EXPECT(dt_mem_current(DT_PARAMS) == base + 500 && dt_mem_peak(DT_PARAMS) == base + 1500,
         "after free: current %zu peak %zu", dt_mem_current(DT_PARAMS), dt_mem_peak(DT_PARAMS));
  dt_mem_reset_peaks();
  EXPECT(dt_mem_peak(DT_PARAMS) == base + 500, "peak after reset");
  EXPECT(dt_mem_current(DT_GRADS) == 64, "grads tag");
  dt_free(b), dt_free(g);
  EXPECT(dt_mem_current(DT_PARAMS) == base && dt_mem_current(DT_GRADS) == 0, "all freed");
  /* the check's buffers, made aside, count nowhere: not when made, not when
   * freed (even outside the aside), and a counted buffer freed aside still
   * leaves its count */
  void *c = dt_alloc(300, DT_PARAMS);
  dt_mem_aside(1);
  void *d = dt_alloc(4000, DT_PARAMS);
  dt_free(c);
  dt_mem_aside(0);
  EXPECT(dt_mem_current(DT_PARAMS) == base && dt_mem_peak(DT_PARAMS) == base + 500,
         "aside: current %zu peak %zu", dt_mem_current(DT_PARAMS), dt_mem_peak(DT_PARAMS));
  dt_free(d);
  EXPECT(dt_mem_current(DT_PARAMS) == base, "an aside buffer freed: current %zu",
         dt_mem_current(DT_PARAMS));

  /* a buffer of a size just freed (reused from the cache on a GPU) is zero-filled too */
  enum { N = 1000 };
  float ones[N], *got;
  for (int i = 0; i < N; i++) ones[i] = 1.0f;
  float *x = upload(ones, N, DT_OTHER);
  dt_free(x);
  x = dt_alloc_f32(N, DT_OTHER);
  got = download(x, N);
  int nonzero = 0;
  for (int i = 0; i < N; i++) nonzero += got[i] != 0.0f;
  EXPECT(nonzero == 0, "a reallocated buffer holds %d nonzero values", nonzero);
  free(got);

  /* dt_copy of overlapping ranges, either way: memmove's result */
  float v[N];
  for (int i = 0; i < N; i++) v[i] = (float)i;
  for (int shift = -3; shift <= 3; shift += 6) {
    dt_copy_from_host(x, v, sizeof v);
    size_t len = N - 3;
    float *dst = shift > 0 ? x + shift : x, *src = shift > 0 ? x : x - shift;
    dt_copy(dst, src, len * sizeof(float));
    got = download(x, N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
      int from = shift > 0 ? (i < shift ? i : i - shift) : (i < (int)len ? i - shift : i);
      bad += got[i] != (float)from;
    }
    EXPECT(bad == 0, "dt_copy overlapping by %d: %d wrong values", shift, bad);
    free(got);
  }
  dt_free(x);
}

/* A batch's rows in one call equal the rows made one by one. */
static void test_fill_rows(void) {
  enum { D = 24, K = 5 };
  const int64_t rows[K] = {7, 0, 123456, 7, 42};
  float *all = dt_alloc_f32(K * D, DT_DATA), *one = dt_alloc_f32(D, DT_DATA);
  dt_fill_rows(all, rows, K, D, 99, 0, 1.0f);
  float *got = download(all, K * D);
  int bad = 0;
  for (int k = 0; k < K; k++) {
    dt_fill_block(one, 1, D, D, rows[k], 0, 99, 0, 1.0f);
    float *want = download(one, D);
    bad += memcmp(want, got + k * D, D * sizeof(float)) != 0;
    free(want);
  }
  EXPECT(bad == 0, "dt_fill_rows: %d of %d rows differ from dt_fill_block", bad, K);
  free(got), dt_free(all), dt_free(one);
}

int main(int argc, char **argv) {
  int hang = 0;
  dt_option options[] = {
      DT_FLAG("--hang", &hang, "rank 0 skips an all-reduce: the watchdog must end the job"),
      DT_END};
  dt_lesson lesson = {"test_common", "unit tests of the common layer", 1};
  dt_comm *w = dt_init(&argc, &argv, &lesson, options);
  if (hang) { /* the others block inside MPI_Allreduce, which only the watchdog thread can see */
    int32_t *x = dt_alloc(4, DT_OTHER);
    if (w->rank == 0)
      sleep(120);
    else
      dt_all_reduce(w, x, x, 1, DT_I32, DT_SUM);
  }
  test_rng();
  test_memory();
  test_fill_rows();
  size_t sizes[] = {1, 3, 7, 64, 1000, 4099, 1 << 16};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    test_all_reduce(w, sizes[s]);
    test_gather_scatter(w, sizes[s]);
    test_point_to_point(w, sizes[s]);
    test_all_to_all(w, sizes[s]);
  }
  test_split(w);
  test_half(w);
  return unit_verdict();
}
