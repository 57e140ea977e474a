/* safetensors.c: checkpoints and data dumps in the safetensors format.
 *
 * The format: 8 bytes (little-endian length n), n bytes of JSON naming each
 * tensor's dtype, shape and byte range, then the raw data. Files are written
 * atomically: to a temporary name, fsync'd, then renamed, so an interrupted
 * save never leaves a truncated file under the final name. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

typedef struct {
  char name[64];
  int ndim;
  int64_t shape[3];
  const float *data; /* host */
} tensor;

static int64_t elements(const tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

static size_t header_json(char *out, size_t cap, const tensor *t, int n, const char *meta) {
  size_t len = (size_t)snprintf(out, cap, "{\"__metadata__\":{%s}", meta);
  uint64_t offset = 0;
  for (int i = 0; i < n; i++) {
    uint64_t bytes = (uint64_t)elements(&t[i]) * 4;
    len += (size_t)snprintf(out + len, len < cap ? cap - len : 0,
                            ",\"%s\":{\"dtype\":\"F32\",\"shape\":[", t[i].name);
    for (int d = 0; d < t[i].ndim; d++)
      len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%lld", d ? "," : "",
                              (long long)t[i].shape[d]);
    len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "],\"data_offsets\":[%llu,%llu]}",
                            (unsigned long long)offset, (unsigned long long)(offset + bytes));
    offset += bytes;
  }
  len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "}");
  while (len % 8 && len + 1 < cap) out[len++] = ' '; /* the data starts 8-byte aligned */
  out[len] = '\0';
  return len;
}

/* flag: what the user asked for it with ("--save"), named in any error. */
static void write_atomically(const char *path, const char *flag, const tensor *t, int n,
                             const char *meta) {
  size_t cap = 256 + (size_t)n * 160 + strlen(meta);
  char *header = malloc(cap);
  CHECK_ALLOC(header);
  uint64_t len = header_json(header, cap, t, n, meta);
  dt_out o;
  dt_out_open(&o, flag, path);
  unsigned char le[8];
  for (int i = 0; i < 8; i++) le[i] = (unsigned char)(len >> (8 * i));
  dt_out_write(&o, le, 8);
  dt_out_write(&o, header, len);
  for (int i = 0; i < n; i++) dt_out_write(&o, t[i].data, 4 * (size_t)elements(&t[i]));
  dt_out_close(&o);
  free(header);
}

static void meta_of(const dt_train_config *c, int64_t step, char *out, size_t cap) {
  snprintf(out, cap,
           "\"format\":\"pt\",\"step\":\"%lld\",\"layers\":\"%lld\",\"dim\":\"%lld\","
           "\"hidden\":\"%lld\",\"seed\":\"%lld\",\"optimizer\":\"%s\"",
           (long long)step, (long long)c->layers, (long long)c->dim, (long long)c->hidden,
           (long long)c->seed, c->optimizer);
}

/* The 2L tensors of a flat layer-major array (W1_0, W2_0, W1_1, ...), named
 * prefix + "layers.{l}.w1" / ".w2". */
static void model_tensors(tensor *t, const dt_train_config *c, const char *prefix,
                          const float *flat) {
  int64_t L = c->layers, D = c->dim, H = c->hidden;
  for (int64_t l = 0; l < L; l++) {
    t[2 * l] = (tensor){.ndim = 2, .shape = {D, H}, .data = flat + 2 * l * D * H};
    t[2 * l + 1] = (tensor){.ndim = 2, .shape = {H, D}, .data = flat + (2 * l + 1) * D * H};
    snprintf(t[2 * l].name, sizeof t->name, "%slayers.%lld.w1", prefix, (long long)l);
    snprintf(t[2 * l + 1].name, sizeof t->name, "%slayers.%lld.w2", prefix, (long long)l);
  }
}

void dt_save_state(const char *path, const dt_train_config *c, int64_t step, const float *w,
                   const float *m, const float *v) {
  int64_t n = 2 * c->layers;
  tensor *t = calloc((size_t)(3 * n), sizeof *t);
  CHECK_ALLOC(t);
  model_tensors(t, c, "", w);
  if (m)
    model_tensors(t + n, c, "optim.exp_avg.", m),
        model_tensors(t + 2 * n, c, "optim.exp_avg_sq.", v);
  char meta[512];
  meta_of(c, step, meta, sizeof meta);
  write_atomically(path, "--ckpt", t, (int)(m ? 3 * n : n), meta);
  free(t);
}

void dt_save_model(const char *path, const dt_train_config *c, int64_t step, const float *weights) {
  tensor *t = calloc((size_t)(2 * c->layers), sizeof *t);
  CHECK_ALLOC(t);
  model_tensors(t, c, "", weights);
  char meta[512];
  meta_of(c, step, meta, sizeof meta);
  write_atomically(path, "--save", t, (int)(2 * c->layers), meta);
  free(t);
}

/* Reads the 2L tensors named prefix + "layers.{l}.w{1,2}" and checks each
 * one's dtype, shape and byte range against the config; the metadata's step
 * goes to *step. On any mismatch, err says what and where. */
void dt_load_tensors(const char *path, const dt_train_config *c, const char *prefix, float *dst,
                     int64_t *step, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return;
  }
  unsigned char le[8];
  uint64_t len = 0;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  rewind(f);
  if (fread(le, 1, 8, f) != 8)
    len = UINT64_MAX;
  else
    for (int i = 0; i < 8; i++) len |= (uint64_t)le[i] << (8 * i);
  if (len == UINT64_MAX || len > (uint64_t)size - 8 || len > (64u << 20)) {
    snprintf(err, errlen, "%s: not a safetensors file (header length %llu, file %ld bytes)", path,
             (unsigned long long)len, size);
    fclose(f);
    return;
  }
  char *header = malloc(len + 1);
  CHECK_ALLOC(header);
  header[fread(header, 1, len, f) == len ? len : 0] = '\0';
  const char *at = strstr(header, "\"step\":\"");
  long long meta_step = -1;
  if (step && (!at || sscanf(at + 8, "%lld", &meta_step) != 1))
    snprintf(err, errlen, "%s: the metadata has no step", path);
  if (step) *step = meta_step;
  int64_t L = c->layers, D = c->dim, H = c->hidden;
  for (int64_t i = 0; i < 2 * L && !err[0]; i++) {
    char key[96];
    long long r = 0, k = 0, begin = 0, end = 0;
    snprintf(key, sizeof key, "\"%slayers.%lld.w%d\"", prefix, (long long)(i / 2),
             (int)(i % 2) + 1);
    at = strstr(header, key);
    long long want_r = i % 2 ? H : D, want_c = i % 2 ? D : H;
    if (!at || sscanf(at + strlen(key),
                      " : { \"dtype\" : \"F32\" , \"shape\" : [ %lld , %lld ] , "
                      "\"data_offsets\" : [ %lld , %lld ] }",
                      &r, &k, &begin, &end) != 4)
      snprintf(err, errlen, "%s: tensor %s is missing or not F32 [rows, cols]", path, key);
    else if (r != want_r || k != want_c)
      snprintf(err, errlen, "%s: %s has shape [%lld, %lld], the config needs [%lld, %lld]", path,
               key, r, k, want_r, want_c);
    else if (end - begin != r * k * 4 || begin < 0 || 8 + (long long)len + end > size)
      snprintf(err, errlen,
               "%s: %s's data range [%lld, %lld) is wrong or past the end (truncated file?)", path,
               key, begin, end);
    else if (fseek(f, (long)(8 + len + (uint64_t)begin), SEEK_SET) != 0 ||
             fread(dst + i * D * H, 4, (size_t)(r * k), f) != (size_t)(r * k))
      snprintf(err, errlen, "%s: cannot read %s", path, key);
  }
  free(header);
  fclose(f);
}

void dt_load_weights_host(const char *path, const dt_train_config *c, float *weights, char *err,
                          size_t errlen) {
  dt_load_tensors(path, c, "", weights, NULL, err, errlen);
}

/* Every rank reads; if any fails, all stop with the first rank's reason. */
void dt_load_model(const char *path, const dt_train_config *c, float *weights) {
  char err[512] = "", what[4200];
  snprintf(what, sizeof what, "reading --load %s", path);
  DT_WATCH(what);
  dt_load_weights_host(path, c, weights, err, sizeof err);
  dt_watch_done();
  int bad = err[0] != '\0', any = 0;
  DT_MPI(MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  if (any) dt_fail("--load %s", bad ? err : "failed on another rank");
}

void dt_dump_data(const char *path, const dt_train_config *c) {
  int64_t S = c->steps, B = c->batch, D = c->dim;
  if ((double)S * B * D * 8 > 2e9)
    dt_fail("--dump-data: %lld steps of [%lld, %lld] exceed 2 GB", (long long)S, (long long)B,
            (long long)D);
  if (dt_rank() != 0) return; /* every rank would write the same file */
  float *x = malloc((size_t)(S * B * D) * 4), *y = malloc((size_t)(S * B * D) * 4);
  float *xd = dt_alloc_f32((size_t)(B * D), DT_DATA), *yd = dt_alloc_f32((size_t)(B * D), DT_DATA);
  int64_t *samples = malloc((size_t)B * sizeof *samples);
  CHECK_ALLOC(x);
  CHECK_ALLOC(y);
  CHECK_ALLOC(samples);
  for (int64_t s = 0; s < S; s++) { /* the global batches, in the reference's row order */
    dt_step_samples(c, 1, 0, s, samples);
    dt_make_batch(c, samples, B, xd, yd);
    dt_copy_to_host(x + s * B * D, xd, (size_t)(B * D) * 4);
    dt_copy_to_host(y + s * B * D, yd, (size_t)(B * D) * 4);
  }
  tensor t[2] = {{"x", 3, {S, B, D}, x}, {"y", 3, {S, B, D}, y}};
  char meta[512];
  meta_of(c, S, meta, sizeof meta);
  write_atomically(path, "--dump-data", t, 2, meta);
  dt_free(xd), dt_free(yd);
  free(x), free(y), free(samples);
}
