/* safetensors.c: checkpoints and data dumps in the safetensors format.
 *
 * The format: 8 bytes (little-endian length n), n bytes of JSON naming each
 * tensor's dtype, shape and byte range, then the raw data. Files are written
 * atomically: to a temporary name, fsync'd, then renamed, so an interrupted
 * save never leaves a truncated file under the final name. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"

typedef struct {
  char name[160];
  int ndim;
  int64_t shape[4];
  const void *data;  /* host, 4 bytes an element */
  const char *dtype; /* NULL: "F32" */
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
                            ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name,
                            t[i].dtype ? t[i].dtype : "F32");
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

/* FNV-1a over the data's 32-bit words: a flipped bit or a changed float
 * anywhere in the data changes it. (Not a defence against tampering.) */
#define CHECKSUM_SEED 0xcbf29ce484222325ull
static uint64_t checksum(uint64_t h, const void *data, size_t bytes) {
  const unsigned char *p = data;
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    uint32_t w;
    memcpy(&w, p + i, 4);
    h = (h ^ w) * 0x100000001b3ull;
  }
  return h;
}

/* flag: what the user asked for it with ("--save"), named in any error. */
static void write_atomically(const char *path, const char *flag, const tensor *t, int n,
                             const char *meta) {
  size_t cap = 256 + (size_t)n * 160 + strlen(meta);
  char *header = malloc(cap), *full_meta = malloc(strlen(meta) + 64);
  CHECK_ALLOC(header);
  CHECK_ALLOC(full_meta);
  uint64_t sum = CHECKSUM_SEED;
  for (int i = 0; i < n; i++) sum = checksum(sum, t[i].data, 4 * (size_t)elements(&t[i]));
  sprintf(full_meta, "%s,\"checksum\":\"%016llx\"", meta, (unsigned long long)sum);
  uint64_t len = header_json(header, cap, t, n, full_meta);
  free(full_meta);
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

/* The run's configuration: a resumed run must be the same training, and
 * compare_config holds it to that. A GPT's adds nanoGPT's GPTConfig (so a
 * file samples with no text and loads into nanoGPT's module) and its
 * vocabulary, the characters as one JSON string. Malloc'ed. */
static char *meta_of(const dt_train_config *c, int64_t step) {
  char *vocab = c->model == DT_GPT ? dt_vocab_json(&c->corpus->vocab) : NULL;
  char *merges = c->model == DT_GPT ? dt_bpe_text(&c->corpus->vocab) : NULL;
  size_t cap = 2048 + (vocab ? strlen(vocab) + strlen(merges) : 0);
  char *out = dt_host_alloc(cap, 1);
  snprintf(out, cap,
           "\"format\":\"pt\",\"step\":\"%lld\",\"steps\":\"%lld\",\"layers\":\"%lld\","
           "\"dim\":\"%lld\",\"hidden\":\"%lld\",\"batch\":\"%lld\",\"samples\":\"%lld\","
           "\"seed\":\"%lld\",\"data_seed\":\"%lld\",\"optimizer\":\"%s\",\"lr\":\"%.17g\","
           "\"weight_decay\":\"%.17g\",\"clip\":\"%.17g\",\"precision\":\"%s\"",
           (long long)step, (long long)c->steps, (long long)c->layers, (long long)c->dim,
           (long long)c->hidden, (long long)c->batch, (long long)c->samples, (long long)c->seed,
           (long long)c->data_seed, c->optimizer, c->lr, c->weight_decay, c->clip, c->precision);
  size_t len = strlen(out);
  if (c->model == DT_MOE) /* what a loader needs to rebuild the mixture; its groups: the ranks */
    snprintf(out + len, cap - len,
             ",\"experts\":\"%lld\",\"topk\":\"%lld\",\"capacity_factor\":\"%.17g\","
             "\"aux_coef\":\"%.17g\",\"groups\":\"%d\"",
             (long long)c->experts, (long long)c->topk, c->capacity_factor, c->aux_coef, dt_size());
  len = strlen(out);
  if (c->model == DT_TRANSFORMER || c->model == DT_GPT) /* and the transformer's */
    snprintf(out + len, cap - len, ",\"seq\":\"%lld\",\"heads\":\"%lld\"", (long long)c->seq,
             (long long)c->heads);
  len = strlen(out);
  if (vocab)
    snprintf(
        out + len, cap - len,
        ",\"model\":\"gpt\",\"beta2\":\"%.17g\",\"warmup\":\"%lld\",\"lr_decay_steps\":\"%lld\","
        "\"tokens\":\"%s\","
        "\"vocab_used\":\"%lld\",\"text_tokens\":\"%lld\",\"n_layer\":\"%lld\","
        "\"n_head\":\"%lld\",\"n_embd\":\"%lld\",\"block_size\":\"%lld\","
        "\"vocab_size\":\"%lld\",\"bias\":\"False\",\"vocab\":\"%s\"%s%s%s",
        c->beta2, (long long)c->warmup, (long long)c->decay_steps, dt_vocab_kind(&c->corpus->vocab),
        (long long)c->corpus->vocab.used, (long long)c->corpus->n, (long long)c->layers,
        (long long)c->heads, (long long)c->dim, (long long)c->seq, (long long)c->vocab, vocab,
        merges[0] ? ",\"merges\":\"" : "", merges, merges[0] ? "\"" : "");
  free(vocab);
  free(merges);
  return out;
}

/* The metadata's string value of key, or NULL (out holds at most n-1). */
static const char *meta_value(const char *header, const char *key, char *out, size_t n) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":\"", key);
  const char *at = strstr(header, pat);
  if (!at) return NULL;
  at += strlen(pat);
  size_t len = strcspn(at, "\"");
  if (len >= n) return NULL;
  memcpy(out, at, len);
  out[len] = '\0';
  return out;
}

/* Whether the metadata's string of key is want (a key it lacks: "") */
static int same_value(const char *header, const char *key, const char *want) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":\"", key);
  const char *at = strstr(header, pat);
  size_t n = strlen(want);
  return at ? strncmp(at + strlen(pat), want, n) == 0 && at[strlen(pat) + n] == '"' : n == 0;
}

/* The shortest text that reads back as x: 0.003, not 0.0030000000000000001. */
static void shortest(double x, char *out, size_t n) {
  for (int digits = 1; digits <= 17; digits++) {
    snprintf(out, n, "%.*g", digits, x);
    if (strtod(out, NULL) == x) return;
  }
}

static int64_t meta_int(const char *header, const char *key);

/* Whether a mixture at this many ranks can drop a token: its capacity C of
 * each rank's R tokens is below R, what one expert could be sent. */
static int drops(const dt_train_config *c, int64_t ranks) {
  int64_t R = c->batch / ranks;
  return dt_moe_capacity(c, R) < R;
}

/* A GPT's own settings: the schedule, the second beta and the text's
 * tokens (its vocabulary and length stand for the text itself). */
static void gpt_config(const char *header, const char *path, const dt_train_config *c, char *err,
                       size_t errlen) {
  enum { KEYS = 5 };
  char mine[KEYS][64], theirs[64];
  const char *keys[KEYS] = {"warmup", "lr_decay_steps", "beta2", "tokens", "text_tokens"};
  const char *flags[KEYS] = {"--warmup", "--lr-decay-steps", "AdamW's beta2", "--tokens",
                             "a --text of"};
  const char *unit[KEYS] = {"", "", "", "", " tokens"};
  snprintf(mine[0], 64, "%lld", (long long)c->warmup);
  snprintf(mine[1], 64, "%lld", (long long)c->decay_steps);
  shortest(c->beta2, mine[2], 64);
  snprintf(mine[3], 64, "%s", dt_vocab_kind(&c->corpus->vocab));
  snprintf(mine[4], 64, "%lld", (long long)c->corpus->n);
  for (int i = 0; i < KEYS && !err[0]; i++) {
    if (!meta_value(header, keys[i], theirs, sizeof theirs)) snprintf(theirs, 64, "(none)");
    if (i == 2) shortest(strtod(theirs, NULL), theirs, sizeof theirs);
    if (strcmp(theirs, mine[i]) != 0)
      snprintf(err, errlen,
               "--resume: the checkpoint was trained with %s %s%s, this run has %s %s%s: a "
               "resumed run must continue the same training; start afresh with another --ckpt "
               "folder",
               flags[i], theirs, unit[i], flags[i], mine[i], unit[i]);
  }
  char *vocab = dt_vocab_json(&c->corpus->vocab), *merges = dt_bpe_text(&c->corpus->vocab);
  if (!err[0] && (!same_value(header, "vocab", vocab) || !same_value(header, "merges", merges)))
    snprintf(err, errlen,
             "--resume: %s was trained on another vocabulary than this text's: start afresh with "
             "another --ckpt folder",
             path);
  free(vocab);
  free(merges);
}

/* One line on the first setting that differs, and how to go on. */
static void compare_config(const char *header, const char *path, const dt_train_config *c,
                           char *err, size_t errlen) {
  enum { KEYS = 18 };
  char mine[KEYS][64], theirs[64];
  const char *flags[KEYS] = {"--layers",
                             "--dim",
                             "--hidden",
                             "--batch",
                             "--samples",
                             "--seed",
                             "--data-seed",
                             "--optimizer",
                             "--lr",
                             "--weight-decay",
                             "--clip",
                             "--precision",
                             "--seq",
                             "--heads",
                             "--experts",
                             "--topk",
                             "--capacity-factor",
                             "--aux-coef"};
  const char *keys[KEYS] = {
      "layers",    "dim",  "hidden",          "batch",   "samples",   "seed", "data_seed",
      "optimizer", "lr",   "weight_decay",    "clip",    "precision", "seq",  "heads",
      "experts",   "topk", "capacity_factor", "aux_coef"};
  int64_t ints[11] = {c->layers,    c->dim, c->hidden, c->batch,   c->samples, c->seed,
                      c->data_seed, c->seq, c->heads,  c->experts, c->topk};
  for (int i = 0; i < 7; i++) snprintf(mine[i], 64, "%lld", (long long)ints[i]);
  snprintf(mine[7], 64, "%s", c->optimizer);
  double reals[5] = {c->lr, c->weight_decay, c->clip, c->capacity_factor, c->aux_coef};
  for (int i = 0; i < 3; i++) shortest(reals[i], mine[8 + i], 64); /* stored exactly, shown short */
  snprintf(mine[11], 64, "%s", c->precision);
  for (int i = 0; i < 4; i++) snprintf(mine[12 + i], 64, "%lld", (long long)ints[7 + i]);
  for (int i = 0; i < 2; i++) shortest(reals[3 + i], mine[16 + i], 64);
  for (int i = 0; i < KEYS && !err[0]; i++) {
    /* the transformer's sequences and heads with a transformer, the mixture's settings with one */
    if ((i == 12 || i == 13) && c->model != DT_TRANSFORMER && c->model != DT_GPT) continue;
    if (i >= 14 && c->model != DT_MOE) continue;
    int found = meta_value(header, keys[i], theirs, sizeof theirs) != NULL;
    int real = (i >= 8 && i <= 10) || i >= 16;
    if (found && real) shortest(strtod(theirs, NULL), theirs, sizeof theirs);
    if (!found)
      snprintf(
          err, errlen,
          "--resume: %s has no record of %s (written by an older version): it cannot be resumed "
          "exactly; start afresh with another --ckpt folder",
          path, flags[i]);
    else if (strcmp(theirs, mine[i]) != 0)
      snprintf(
          err, errlen,
          "--resume: the checkpoint was trained with %s %s, this run has %s %s: a resumed run must "
          "continue the same training; run with %s %s, or start afresh with another --ckpt "
          "folder",
          flags[i], theirs, flags[i], mine[i], flags[i], theirs);
  }
  /* A mixture's capacity groups are the ranks: at another number of them
   * other tokens are dropped, another training, unless none can be (C >= R) */
  int moe = c->model == DT_MOE;
  int64_t groups = moe ? meta_int(header, "groups") : 0, N = dt_size();
  if (!err[0] && moe && groups <= 0)
    snprintf(err, errlen,
             "--resume: %s has no record of its capacity groups (written by an older version): "
             "start afresh with another --ckpt folder",
             path);
  else if (!err[0] && moe && groups != N && (drops(c, groups) || drops(c, N)))
    snprintf(err, errlen,
             "--resume: the checkpoint was trained at %lld ranks, this run has %lld: a mixture's "
             "capacity groups are the ranks, so %lld ranks would drop other tokens, another "
             "training; resume with %lld ranks, or --load its weights to start a new training "
             "(only a --capacity-factor of at least E/k = %g, which drops no token, trains alike "
             "at any number of ranks)",
             (long long)groups, (long long)N, (long long)N, (long long)groups,
             (double)c->experts / (double)c->topk);
  if (!err[0] && c->model == DT_GPT) gpt_config(header, path, c, err, errlen);
  /* per-rank state (top-k's residual): the same kind, and the same ranks */
  char state[256] = "", ranks[32] = "";
  meta_value(header, "rank_state", state, sizeof state);
  meta_value(header, "ranks", ranks, sizeof ranks);
  const char *want = c->rank_state ? c->rank_state : "";
  if (!err[0] && strcmp(state, want) != 0)
    snprintf(err, errlen,
             "--resume: the checkpoint was trained %s%s, this run %s%s: a resumed run must "
             "continue the same training; run as the checkpoint's run did, or start afresh with "
             "another --ckpt folder",
             state[0] ? "with " : "without per-rank state", state, want[0] ? "with " : "without it",
             want);
  else if (!err[0] && state[0] && atoll(ranks) != dt_size())
    snprintf(err, errlen,
             "--resume: the checkpoint holds each rank's state of %s for %s ranks, this run has "
             "%d: a rank's state is its own, with no counterpart at another number of ranks; "
             "resume with %s ranks, or start afresh with another --ckpt folder",
             state, ranks, dt_size(), ranks);
}

/* A file is untrusted: its numbers are read digit by digit, each one refused
 * past max before the multiply or add that would overflow (sscanf's %lld
 * is undefined behaviour out of range). *p moves past the number. */
static int read_u64(const char **p, uint64_t max, uint64_t *out) {
  const char *q = *p;
  uint64_t v = 0;
  if (*q < '0' || *q > '9') return 0;
  for (; *q >= '0' && *q <= '9'; q++) {
    unsigned d = (unsigned)(*q - '0');
    if (v > (max - d) / 10) return 0;
    v = v * 10 + d;
  }
  *p = q;
  *out = v;
  return 1;
}

/* The metadata's non-negative integer of key (a string of digits), or -1. */
static int64_t meta_int(const char *header, const char *key) {
  char value[64];
  uint64_t v;
  const char *at = meta_value(header, key, value, sizeof value);
  return at && read_u64(&at, INT64_MAX, &v) && *at == '\0' ? (int64_t)v : -1;
}

/* Where a header may be: 8 bytes of length n, then n bytes. len is checked
 * against the file's size and the limit before anything is allocated. */
#define HEADER_MAX (64u << 20)
static char *read_header(FILE *f, uint64_t size, uint64_t *len) {
  unsigned char le[8];
  *len = 0;
  if (size < 8 || fread(le, 1, 8, f) != 8) return NULL;
  for (int i = 0; i < 8; i++) *len |= (uint64_t)le[i] << (8 * i);
  if (*len > size - 8 || *len > HEADER_MAX) return NULL;
  char *header = malloc(*len + 1);
  CHECK_ALLOC(header);
  if (fread(header, 1, *len, f) != *len) {
    free(header);
    return NULL;
  }
  header[*len] = '\0'; /* a NUL inside ends the text early: keys past it are missing */
  return header;
}

/* A number of a file's metadata, or -1 (none, or no file) */
int64_t dt_meta_int(const char *path, const char *key) {
  int64_t steps = -1;
  struct stat st;
  uint64_t len;
  FILE *f = fopen(path, "rb");
  char *header =
      f && fstat(fileno(f), &st) == 0 ? read_header(f, (uint64_t)st.st_size, &len) : NULL;
  if (header) steps = meta_int(header, key);
  free(header);
  if (f) fclose(f);
  return steps;
}

int64_t dt_meta_steps(const char *path) { return dt_meta_int(path, "steps"); }

/* A GPT header's vocabulary (its tokens, characters or merges) into v: 0;
 * -1 where it names none (not a GPT's); -2 and why where it is malformed. */
static int header_vocab(const char *header, dt_vocab *v, char *why, size_t n) {
  char tokens[16] = "";
  const char *at = strstr(header, "\"vocab\":\""), *merges = strstr(header, "\"merges\":\"");
  if (!meta_value(header, "tokens", tokens, sizeof tokens)) return -1;
  if (strcmp(tokens, "byte") == 0) *v = (dt_vocab){.size = 256, .used = 256, .bytes = 1};
  if (strcmp(tokens, "byte") == 0) return 0;
  if (strcmp(tokens, "char") == 0 && at)
    return dt_vocab_parse(v, at + 9, strlen(at + 9), why, n) == 0 ? 0 : -2;
  if (strcmp(tokens, "bpe") == 0 && merges)
    return dt_bpe_parse(v, merges + 10, meta_int(header, "vocab_used"), why, n) == 0 ? 0 : -2;
  snprintf(why, n,
           "its tokens, '%s', come without their vocabulary (or are none of char, byte, bpe)",
           tokens);
  return -2;
}

/* The vocabulary of a GPT file's metadata into v: 0; -1 where there is none
 * (no "tokens", no file, unreadable); -2 and err where it is malformed */
int dt_meta_vocab(const char *path, dt_vocab *v, char *err, size_t errlen) {
  struct stat st;
  uint64_t len;
  FILE *f = fopen(path, "rb");
  char *header =
      f && fstat(fileno(f), &st) == 0 ? read_header(f, (uint64_t)st.st_size, &len) : NULL;
  int has = header ? header_vocab(header, v, err, errlen) : -1;
  free(header);
  if (f) fclose(f);
  return has;
}

/* The tensors of a flat layer-major array (dt_model_tensor's order and
 * names: W1_0, W2_0, W1_1, ...; a mixture's router, then each expert's W1
 * and W2; a transformer's Wq, Wk, Wv, Wo, W1, W2), each named prefix + its
 * name. */
static void model_tensors(tensor *t, const dt_train_config *c, const char *prefix,
                          const float *flat) {
  for (int64_t i = 0; i < dt_model_tensors(c); i++) {
    dt_tensor x = dt_model_tensor(c, i);
    t[i] = (tensor){.ndim = 2, .shape = {x.rows, x.cols}, .data = flat + x.at};
    if (x.vector) /* a gain: 1-D, as nn.LayerNorm's weight */
      t[i] = (tensor){.ndim = 1, .shape = {x.cols}, .data = flat + x.at};
    snprintf(t[i].name, sizeof t->name, "%s%s", prefix, x.name);
  }
}

/* e: with c->rank_state, every rank's state (P floats each, rank 0 first),
 * as "rank_state.{r}.layers...", and the metadata says what it is and of
 * how many ranks. */
void dt_save_state(const char *path, const dt_train_config *c, int64_t step, const float *w,
                   const float *m, const float *v, const float *e) {
  int64_t n = dt_model_tensors(c), P = dt_model_size(c), N = e ? dt_size() : 0;
  tensor *t = calloc((size_t)((3 + N) * n), sizeof *t);
  CHECK_ALLOC(t);
  int used = 0;
  model_tensors(t, c, "", w);
  used += (int)n;
  if (m) {
    model_tensors(t + n, c, "optim.exp_avg.", m);
    model_tensors(t + 2 * n, c, "optim.exp_avg_sq.", v);
    used += (int)(2 * n);
  }
  for (int64_t r = 0; r < N; r++, used += (int)n) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, "rank_state.%lld.", (long long)r);
    model_tensors(t + used, c, prefix, e + r * P);
  }
  char *meta = meta_of(c, step);
  if (e) {
    size_t len = strlen(meta), cap = len + 256;
    meta = realloc(meta, cap);
    CHECK_ALLOC(meta);
    snprintf(meta + len, cap - len, ",\"rank_state\":\"%.200s\",\"ranks\":\"%lld\"", c->rank_state,
             (long long)N);
  }
  write_atomically(path, "--ckpt", t, used, meta);
  free(meta);
  free(t);
}

/* A GPT's file: nanoGPT's names and layouts (gpt_names.c), each tensor
 * copied into its layout. */
static int gpt_file(tensor *t, const dt_train_config *c, const float *weights, float *buf) {
  int64_t n = dt_gpt_file_tensors(c);
  for (int64_t i = 0; i < n; i++) {
    dt_file_tensor f = dt_gpt_file_tensor(c, i);
    t[i] = (tensor){.ndim = f.ndim, .shape = {f.shape[0], f.shape[1]}, .data = buf};
    snprintf(t[i].name, sizeof t->name, "%s", f.name);
    dt_gpt_file_pack(c, &f, weights, buf);
    buf += f.shape[0] * f.shape[1];
  }
  return (int)n;
}

void dt_save_model(const char *path, const dt_train_config *c, int64_t step, const float *weights) {
  int gpt = c->model == DT_GPT;
  int64_t n = gpt ? dt_gpt_file_tensors(c) : dt_model_tensors(c);
  tensor *t = calloc((size_t)n, sizeof *t);
  float *buf = gpt ? dt_host_alloc((size_t)dt_model_size(c), 4) : NULL;
  CHECK_ALLOC(t);
  if (gpt)
    gpt_file(t, c, weights, buf);
  else
    model_tensors(t, c, "", weights);
  char *meta = meta_of(c, step);
  write_atomically(path, "--save", t, (int)n, meta);
  free(meta);
  free(buf);
  free(t);
}

static const char *spaces(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  return p;
}

#define NOT_AN_ENTRY "is not F32 [rows, cols] with data_offsets [begin, end]"
static const char *number(const char **p, uint64_t *out) {
  if (**p < '0' || **p > '9') return NOT_AN_ENTRY;
  return read_u64(p, INT64_MAX, out) ? NULL : "holds a number past 2^63-1";
}

/* One tensor's entry after its quoted name, as the writer lays it out:
 * : {"dtype":"F32","shape":[r,k],"data_offsets":[begin,end]} (any spaces),
 * or a 1-D shape [n] (a gain). NULL when it parses (*ndim: 1 or 2), else
 * what is wrong with it. */
static const char *parse_entry(const char *p, uint64_t shape[2], int *ndim, uint64_t off[2]) {
  const char *parts[] = {":", "{", "\"dtype\"", ":", "\"F32\"", ",", "\"shape\"",
                         ":", "[", "#",         "~", "]",       ",", "\"data_offsets\"",
                         ":", "[", "#",         ",", "#",       "]", "}"};
  uint64_t *nums[4] = {&shape[0], &shape[1], &off[0], &off[1]};
  const char *why = NULL;
  int n = 0;
  for (size_t i = 0; i < sizeof parts / sizeof *parts && !why; i++) {
    p = spaces(p);
    if (parts[i][0] == '~') { /* a second dimension, if there is one; its slot either way */
      *ndim = *p == ',' ? 2 : 1;
      if (*ndim == 2) p = spaces(p + 1);
      why = *ndim == 2 ? number(&p, nums[n]) : NULL;
      n++;
    } else if (parts[i][0] == '#') {
      why = number(&p, nums[n++]);
    } else if (strncmp(p, parts[i], strlen(parts[i])) == 0) {
      p += strlen(parts[i]);
    } else {
      why = NOT_AN_ENTRY;
    }
  }
  return why;
}

/* "[a, b]", or "[a]" for a 1-D shape */
static void shape_text(int ndim, const uint64_t shape[2], char *out, size_t n) {
  if (ndim == 1)
    snprintf(out, n, "[%llu]", (unsigned long long)shape[0]);
  else
    snprintf(out, n, "[%llu, %llu]", (unsigned long long)shape[0], (unsigned long long)shape[1]);
}

/* The header and where the data starts, for reading tensors out of f */
typedef struct {
  FILE *f;
  const char *header, *path;
  uint64_t len, data_size;
} source;

/* Tensor `name` into dst: its entry checked against the shape the config
 * wants (ndim 1: want[0] alone), its byte range against the data's size. */
static void read_tensor(const source *in, const char *name, int ndim, const uint64_t want[2],
                        float *dst, char *err, size_t errlen) {
  char key[200], has[64], needs[64];
  uint64_t shape[2], off[2];
  int dims = 0;
  snprintf(key, sizeof key, "\"%s\"", name);
  const char *at = strstr(in->header, key), *why = NULL;
  uint64_t count = ndim == 1 ? want[0] : want[0] * want[1];
  uint64_t bytes = count * 4; /* the config's, bounded by the CLI's limits */
  uint64_t len = in->len, data_size = in->data_size;
  if (!at)
    snprintf(err, errlen, "%s: tensor %s is missing", in->path, key);
  else if ((why = parse_entry(at + strlen(key), shape, &dims, off)))
    snprintf(err, errlen, "%s: tensor %s %s", in->path, key, why);
  if (err[0]) return;
  shape_text(dims, shape, has, sizeof has);
  shape_text(ndim, want, needs, sizeof needs);
  if (dims != ndim || shape[0] != want[0] || (ndim == 2 && shape[1] != want[1]))
    snprintf(err, errlen, "%s: %s has shape %s, the config needs %s", in->path, key, has, needs);
  else if (off[0] > off[1] || off[1] > data_size || off[1] - off[0] != bytes)
    snprintf(err, errlen,
             "%s: %s's data range [%llu, %llu) is wrong or past the end (truncated file?): the "
             "file holds %llu bytes of data",
             in->path, key, (unsigned long long)off[0], (unsigned long long)off[1],
             (unsigned long long)data_size);
  else if (fseeko(in->f, (off_t)(8 + len + off[0]), SEEK_SET) != 0 ||
           fread(dst, 4, count, in->f) != count)
    snprintf(err, errlen, "%s: cannot read %s", in->path, key);
}

/* A GPT file's vocabulary, where it has one, must be the text's, or the
 * ids would stand for other characters. Judged before the tensors: another
 * text's vocabulary is usually another size too, and its embedding's shape
 * would be the message in place of the reason. */
static void check_vocab(const source *in, const dt_train_config *c, char *err, size_t errlen) {
  dt_vocab file = {0};
  const dt_vocab *own = c->corpus ? &c->corpus->vocab : NULL;
  char why[160];
  int has = own ? header_vocab(in->header, &file, why, sizeof why) : -1;
  if (has == -2)
    snprintf(err, errlen, "%s: %s", in->path, why);
  else if (has == 0 && !dt_vocab_same(&file, own))
    snprintf(err, errlen,
             "%s was trained on another vocabulary (%lld %s%s), this text's is %lld %s: its token "
             "ids would stand for other characters; train on its text, or start without --load",
             in->path, (long long)file.used, dt_vocab_noun(&file),
             file.used != own->used || file.merges != own->merges ? ""
             : file.merges                                        ? ", other merges"
                                                                  : ", other ones",
             (long long)own->used, dt_vocab_noun(own));
  free(file.chars);
  free(file.pair);
}

/* A GPT model file (--load): its vocabulary (check_vocab), then nanoGPT's
 * tensors (gpt_names.c) into the model's array; an lm_head.weight, where
 * there is one, must be wte (the head is tied). */
static void read_gpt(const source *in, const dt_train_config *c, float *dst, char *err,
                     size_t errlen) {
  check_vocab(in, c, err, errlen);
  if (err[0]) return;
  float *buf = dt_host_alloc((size_t)dt_model_size(c), 4);
  for (int64_t i = 0; i < dt_gpt_file_tensors(c) && !err[0]; i++) {
    dt_file_tensor f = dt_gpt_file_tensor(c, i);
    read_tensor(in, f.name, f.ndim, (uint64_t[2]){(uint64_t)f.shape[0], (uint64_t)f.shape[1]}, buf,
                err, errlen);
    if (!err[0]) dt_gpt_file_unpack(c, &f, buf, dst);
  }
  uint64_t head[2] = {(uint64_t)c->vocab, (uint64_t)c->dim};
  if (!err[0] && strstr(in->header, "\"lm_head.weight\"")) {
    read_tensor(in, "lm_head.weight", 2, head, buf, err, errlen);
    if (!err[0] && memcmp(buf, dst, (size_t)(head[0] * head[1]) * 4) != 0)
      snprintf(err, errlen,
               "%s: lm_head.weight is not transformer.wte.weight: this GPT's head is tied to its "
               "embedding, as nanoGPT's is",
               in->path);
  }
  free(buf);
}

/* Reads the model's tensors, each named prefix + its dt_model_tensor name
 * ("layers.{l}.w1", "layers.{l}.wq", ...; a GPT's model file, --load:
 * nanoGPT's names), from f (size bytes; path only names it in messages) and
 * checks each one's dtype, shape and byte range against the config; the
 * metadata's step goes to *step. On any mismatch, err says what and where.
 * Every number the file gives is checked before any arithmetic on it: the
 * header's length against the file and 64 MiB, each shape against the
 * config, each range as begin <= end <= the data's size with end - begin =
 * rows * cols * 4 (no sum can overflow). */
void dt_read_tensors(FILE *f, uint64_t size, const char *path, const dt_train_config *c,
                     const char *prefix, float *dst, int64_t *step, char *err, size_t errlen) {
  uint64_t len;
  char *header = read_header(f, size, &len);
  if (!header) {
    snprintf(err, errlen,
             "%s: not a safetensors file (header length %llu, file %llu bytes; at most %u MiB of "
             "header)",
             path, (unsigned long long)len, (unsigned long long)size, HEADER_MAX >> 20);
    return;
  }
  source in = {f, header, path, len, size - 8 - len}; /* read_header checked len <= size - 8 */
  int64_t meta_step = meta_int(header, "step");
  char text[64];
  if (step && meta_step < 0 && meta_value(header, "step", text, sizeof text))
    snprintf(err, errlen, "%s: the metadata's step is not a whole number from 0 to 2^63-1", path);
  else if (step && meta_step < 0)
    snprintf(err, errlen, "%s: the metadata has no step", path);
  if (step) *step = meta_step;
  if (step && !err[0]) compare_config(header, path, c, err, errlen);
  int named = c->model == DT_GPT && !step && !prefix[0]; /* a GPT's model file: nanoGPT's */
  if (named) read_gpt(&in, c, dst, err, errlen);
  for (int64_t i = 0; i < (named ? 0 : dt_model_tensors(c)) && !err[0]; i++) {
    dt_tensor x = dt_model_tensor(c, i);
    char name[160];
    uint64_t want[2] = {(uint64_t)(x.vector ? x.cols : x.rows), (uint64_t)x.cols};
    snprintf(name, sizeof name, "%s%s", prefix, x.name);
    read_tensor(&in, name, x.vector ? 1 : 2, want, dst + x.at, err, errlen);
  }
  /* The checksum covers the whole data section: checked once, with the
   * weights. Files from elsewhere (--load) may have none; checkpoints must. */
  char want[32];
  if (!err[0] && !prefix[0] && meta_value(header, "checksum", want, sizeof want)) {
    uint64_t sum = CHECKSUM_SEED;
    char *buf = malloc(1 << 20);
    CHECK_ALLOC(buf);
    fseeko(f, (off_t)(8 + len), SEEK_SET);
    for (size_t got; (got = fread(buf, 1, 1 << 20, f)) > 0;) sum = checksum(sum, buf, got);
    free(buf);
    char have[32];
    snprintf(have, sizeof have, "%016llx", (unsigned long long)sum);
    if (strcmp(have, want) != 0)
      snprintf(err, errlen,
               "%s: the data's checksum is %s, the file says %s: the file is damaged (a flipped "
               "byte, a partial copy); use another checkpoint or start afresh",
               path, have, want);
  } else if (!err[0] && !prefix[0] && step) {
    snprintf(err, errlen,
             "%s has no checksum (written by an older version): start afresh with "
             "another --ckpt folder",
             path);
  }
  int64_t PL = dt_params_per_layer(c);
  for (int64_t j = 0; !err[0] && j < dt_model_size(c); j++) {
    if (isfinite(dst[j])) continue;
    char where[120]; /* a layer (a GPT's: the tensor) */
    if (c->model == DT_GPT)
      snprintf(where, sizeof where, "%s", dt_model_tensor(c, dt_tensor_at(c, j)).name);
    else
      snprintf(where, sizeof where, "layers.%lld", (long long)(j / PL));
    snprintf(err, errlen,
             "%s: %s%s holds %s: saved from a diverged run; use another checkpoint or start afresh",
             path, prefix, where, isnan(dst[j]) ? "NaN" : "inf");
  }
  free(header);
}

void dt_load_tensors(const char *path, const dt_train_config *c, const char *prefix, float *dst,
                     int64_t *step, char *err, size_t errlen) {
  /* never block on a FIFO, nor read a device, in place of a file */
  int fd = open(path, O_RDONLY | O_NONBLOCK);
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    snprintf(err, errlen, "%s: not a regular file", path);
    close(fd);
    return;
  }
  FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return;
  }
  dt_read_tensors(f, (uint64_t)st.st_size, path, c, prefix, dst, step, err, errlen);
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

/* The global batches in the order one process trains on them: [steps, B, D]
 * of samples, or with sequences [steps, B, S, D], x with positions added. */
/* A GPT's: "tokens", int32 [steps, B, S + 1], every step's windows in the
 * global order (dt_text_batch's), and the metadata to retrain on them. */
static void dump_tokens(const char *path, const dt_train_config *c) {
  int64_t steps = c->steps, B = c->batch, W = c->seq + 1;
  if ((double)steps * B * W * 4 > 2e9)
    dt_fail("--dump-data: %lld steps of [%lld, %lld] tokens exceed 2 GB", (long long)steps,
            (long long)B, (long long)W);
  if (dt_rank() != 0) return; /* every rank would write the same file */
  int32_t *tokens = dt_host_alloc((size_t)(steps * B * W), sizeof *tokens);
  for (int64_t s = 0; s < steps; s++) dt_text_batch(c, s, 0, B, tokens + s * B * W);
  tensor t = {"tokens", 3, {steps, B, W}, tokens, "I32"};
  char *meta = meta_of(c, steps);
  write_atomically(path, "--dump-data", &t, 1, meta);
  free(meta);
  free(tokens);
}

void dt_dump_data(const char *path, const dt_train_config *c) {
  if (c->model == DT_GPT) {
    dump_tokens(path, c);
    return;
  }
  int seq = c->model == DT_TRANSFORMER;
  int64_t S = c->steps, B = c->batch, D = c->dim, T = seq ? c->seq : 1, BT = B * T;
  char dims[80]; /* a step's [B, D], or [B, S, D] */
  snprintf(dims, sizeof dims, "%lld, %lld", (long long)B, (long long)D);
  if (seq)
    snprintf(dims, sizeof dims, "%lld, %lld, %lld", (long long)B, (long long)T, (long long)D);
  if ((double)S * BT * D * 8 > 2e9)
    dt_fail("--dump-data: %lld steps of [%s] exceed 2 GB", (long long)S, dims);
  /* rank 0 holds all of it on the host: ask first, as dt_alloc does */
  double need = (double)S * BT * D * 8, left = dt_rank() == 0 ? dt_memory_available() : 0;
  DT_MPI(MPI_Bcast(&left, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  if (need > left)
    dt_fail("--dump-data: %lld steps of [%s] need %.2f GiB on rank 0; only %.2f GiB are "
            "available (%s)",
            (long long)S, dims, need / 1073741824.0, left / 1073741824.0, dt_memory_source());
  if (dt_rank() != 0) return; /* every rank would write the same file */
  float *x = malloc((size_t)(S * BT * D) * 4), *y = malloc((size_t)(S * BT * D) * 4);
  float *xd = seq ? NULL : dt_alloc_f32((size_t)(B * D), DT_DATA);
  float *yd = seq ? NULL : dt_alloc_f32((size_t)(B * D), DT_DATA);
  int64_t *samples = malloc((size_t)B * sizeof *samples);
  CHECK_ALLOC(x);
  CHECK_ALLOC(y);
  CHECK_ALLOC(samples);
  for (int64_t s = 0; s < S && seq; s++) /* host rows, made where they are written */
    dt_sequence_batch(c, s, samples, x + s * BT * D, y + s * BT * D);
  for (int64_t s = 0; s < S && !seq; s++) { /* the global batches, in the reference's order */
    dt_step_samples(c, 1, 0, s, samples);
    dt_make_batch(c, samples, B, xd, yd);
    dt_copy_to_host(x + s * B * D, xd, (size_t)(B * D) * 4);
    dt_copy_to_host(y + s * B * D, yd, (size_t)(B * D) * 4);
  }
  tensor t[2] = {{"x", 3, {S, B, D}, x, "F32"}, {"y", 3, {S, B, D}, y, "F32"}};
  for (int i = 0; i < 2 && seq; i++) {
    t[i].ndim = 4;
    t[i].shape[2] = T;
    t[i].shape[3] = D;
  }
  char *meta = meta_of(c, S);
  write_atomically(path, "--dump-data", t, 2, meta);
  free(meta);
  dt_free(xd);
  dt_free(yd);
  free(x);
  free(y);
  free(samples);
}
