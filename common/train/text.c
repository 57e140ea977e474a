/* text.c: the GPT's data, a real text as tokens (train.h, "text").
 *
 * By default each character is a token and the vocabulary is the sorted set
 * of the text's Unicode code points, as nanoGPT's shakespeare_char prepares
 * it; --tokens byte makes each byte one (V = 256, any file). The first 90%
 * of the tokens train, the last 10% validate. A step's window b starts at a
 * place keyed by (data seed, step, b), so any rank draws the windows it
 * trains on without talking, and every world size trains on the same ones. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train_internal.h"

/* the counter RNG's streams of the windows (data.c's samples use 0 and 1) */
enum { TRAIN_STREAM = 2, EVAL_STREAM = 3 };

/* The code point at s[i] and its length in bytes, or 0 where the bytes are
 * not UTF-8: a stray continuation byte, a sequence cut short, an overlong
 * form, a surrogate, or past U+10FFFF. */
static int utf8_at(const unsigned char *s, size_t n, size_t i, uint32_t *cp) {
  unsigned char b = s[i];
  int len = b < 0x80             ? 1
            : (b & 0xe0) == 0xc0 ? 2
            : (b & 0xf0) == 0xe0 ? 3
            : (b & 0xf8) == 0xf0 ? 4
                                 : 0;
  if (len == 0 || i + (size_t)len > n) return 0;
  uint32_t c = len == 1 ? b : len == 2 ? b & 0x1fu : len == 3 ? b & 0x0fu : b & 0x07u;
  for (int k = 1; k < len; k++) {
    if ((s[i + k] & 0xc0) != 0x80) return 0;
    c = c << 6 | (s[i + k] & 0x3fu);
  }
  static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < least[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
  *cp = c;
  return len;
}

/* Where byte i sits, for the message: its line and column (characters), 1-based. */
static void place_of(const unsigned char *s, size_t i, long long *line, long long *col) {
  *line = 1;
  *col = 1;
  for (size_t k = 0; k < i; k++) {
    if (s[k] == '\n') {
      ++*line;
      *col = 1;
    } else if ((s[k] & 0xc0) != 0x80) {
      ++*col;
    }
  }
}

static unsigned char *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (!f) dt_fail("--text %s: %s", path, strerror(errno));
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(f);
    dt_fail("--text %s: not a regular file", path);
  }
  unsigned char *s = dt_host_alloc((size_t)st.st_size + 1, 1);
  *n = fread(s, 1, (size_t)st.st_size, f);
  fclose(f);
  if (*n == 0) free(s); /* before the exit: no leak for a sanitizer to report */
  if (*n == 0) dt_fail("--text %s is empty: a GPT needs a text to train on", path);
  return s;
}

static int by_value(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* The id of code point c in the sorted vocabulary, or -1. */
static int64_t id_of(const dt_vocab *v, uint32_t c) {
  const uint32_t *at = bsearch(&c, v->chars, (size_t)v->used, sizeof c, by_value);
  return at ? at - v->chars : -1;
}

/* The text's characters as code points (dt_fail where it is not UTF-8,
 * the buffers freed first: a sanitizer reports no leak at the exit). */
static uint32_t *code_points(unsigned char *s, size_t n, const char *path, int64_t *count) {
  uint32_t *cp = dt_host_alloc(n, sizeof *cp);
  int64_t k = 0;
  for (size_t i = 0; i < n; k++) {
    int len = utf8_at(s, n, i, &cp[k]);
    if (len == 0) {
      long long line, col;
      unsigned byte = s[i];
      place_of(s, i, &line, &col);
      free(cp);
      free(s);
      dt_fail("--text %s is not UTF-8: byte %zu (line %lld, column %lld) is 0x%02x, which starts "
              "no character there; convert the file to UTF-8, or take its bytes as tokens with "
              "--tokens byte",
              path, i, line, col, byte);
    }
    i += (size_t)len;
  }
  *count = k;
  return cp;
}

/* The vocabulary of characters: the sorted set of the text's code points. */
static void characters(dt_text *t, const uint32_t *cp) {
  uint32_t *set = dt_host_alloc((size_t)t->n, sizeof *set);
  memcpy(set, cp, (size_t)t->n * sizeof *set);
  qsort(set, (size_t)t->n, sizeof *set, by_value);
  int64_t used = 0;
  for (int64_t i = 0; i < t->n; i++)
    if (used == 0 || set[i] != set[used - 1]) set[used++] = set[i];
  t->vocab.chars = set;
  t->vocab.used = used;
  for (int64_t i = 0; i < t->n; i++) t->ids[i] = (int32_t)id_of(&t->vocab, cp[i]);
}

void dt_text_load(dt_text *t, const char *path, int bytes, int64_t multiple, int64_t window) {
  size_t n;
  unsigned char *s = read_all(path, &n);
  *t = (dt_text){.vocab.bytes = bytes};
  uint32_t *cp = NULL; /* characters: their code points */
  if (bytes) {
    t->n = (int64_t)n;
    t->ids = dt_host_alloc(n, sizeof *t->ids);
    for (size_t i = 0; i < n; i++) t->ids[i] = s[i];
    t->vocab.used = 256;
  } else {
    cp = code_points(s, n, path, &t->n);
    t->ids = dt_host_alloc((size_t)t->n, sizeof *t->ids);
    characters(t, cp);
  }
  t->train = t->n * 9 / 10;              /* nanoGPT's split: int(n * 0.9) */
  for (int64_t i = 0; i < t->train; i++) /* the training split's UTF-8 bytes */
    t->bytes[0] += !cp ? 1 : cp[i] < 0x80 ? 1 : cp[i] < 0x800 ? 2 : cp[i] < 0x10000 ? 3 : 4;
  free(cp);
  free(s);
  if (multiple < 1) multiple = 1;
  t->vocab.size = (t->vocab.used + multiple - 1) / multiple * multiple;
  t->bytes[1] = (int64_t)n - t->bytes[0];
  if (t->train < window || t->n - t->train < window)
    dt_fail("--text %s holds %lld tokens, %lld to train on and %lld to validate: each must hold a "
            "window of --seq + 1 = %lld tokens; use a longer text or a smaller --seq",
            path, (long long)t->n, (long long)t->train, (long long)(t->n - t->train),
            (long long)window);
  if (t->vocab.size != t->vocab.used)
    dt_print0("vocabulary: %lld %s, padded to V = %lld (a multiple of %lld, so that its slices are "
              "equal); the padding is never a token\n",
              (long long)t->vocab.used, bytes ? "bytes" : "characters", (long long)t->vocab.size,
              (long long)multiple);
}

void dt_text_free(dt_text *t) {
  free(t->ids);
  free(t->vocab.chars);
  free(t->vocab.pair);
  *t = (dt_text){0};
}

/* Window k of a stream: S + 1 tokens from a start in [lo, lo + count),
 * drawn as nanoGPT's get_batch draws it (any start that leaves room). */
static void window(const dt_train_config *c, uint64_t stream, uint64_t key, int64_t lo,
                   int64_t count, int32_t *out) {
  uint64_t r = dt_rng_u64((uint64_t)c->data_seed, stream, key);
  int64_t start = lo + (int64_t)(r % (uint64_t)count);
  memcpy(out, c->corpus->ids + start, (size_t)(c->seq + 1) * sizeof *out);
}

void dt_text_batch(const dt_train_config *c, int64_t step, int64_t b0, int64_t count,
                   int32_t *out) {
  int64_t S = c->seq, train = c->corpus->train;
  for (int64_t k = 0; k < count; k++)
    window(c, TRAIN_STREAM, (uint64_t)(step * c->batch + b0 + k), 0, train - S, out + k * (S + 1));
}

void dt_text_eval_batch(const dt_train_config *c, int split, int64_t j, int32_t *out) {
  int64_t S = c->seq, n = c->corpus->n, train = c->corpus->train;
  for (int64_t b = 0; b < c->batch; b++)
    window(c, EVAL_STREAM + (uint64_t)split, (uint64_t)(j * c->batch + b), split ? train : 0,
           split ? n - train - S : train - S, out + b * (S + 1));
}

int64_t dt_vocab_encode(const dt_vocab *v, const char *text, int32_t *ids, int64_t cap, char *err,
                        size_t errlen) {
  const unsigned char *s = (const unsigned char *)text;
  size_t n = strlen(text);
  int64_t k = 0;
  for (size_t i = 0; i < n && k < cap; k++) {
    uint32_t c = s[i];
    int len = v->bytes ? 1 : utf8_at(s, n, i, &c);
    int64_t id = v->bytes ? c : len ? id_of(v, c) : -1;
    if (id < 0 && len)
      snprintf(err, errlen, "U+%04X is not in the vocabulary of %lld characters", (unsigned)c,
               (long long)v->used);
    else if (id < 0)
      snprintf(err, errlen, "byte %zu is not UTF-8", i);
    if (id < 0) return -1;
    ids[k] = (int32_t)id;
    i += (size_t)(len ? len : 1);
  }
  return k;
}

/* c as UTF-8 into out (4 bytes at most); its length */
static int utf8_put(uint32_t c, char *out) {
  if (c < 0x80) {
    out[0] = (char)c;
    return 1;
  }
  int len = c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  for (int k = len - 1; k > 0; k--, c >>= 6) out[k] = (char)(0x80 | (c & 0x3f));
  out[0] = (char)((len == 2 ? 0xc0 : len == 3 ? 0xe0 : 0xf0) | c);
  return len;
}

/* What a terminal shows as it is: printable ASCII, a newline, a tab, and
 * (characters) any code point past the C1 controls */
static int shown(uint32_t c) {
  return c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f) || c >= 0xa0;
}

/* The sample as text a terminal shows: each token's bytes (or character)
 * as they are where printable, else escaped as \xHH (a control character,
 * DEL, a byte that starts no UTF-8 character): a 0x00 byte neither ends the
 * string nor reaches the terminal raw. */
char *dt_vocab_decode(const dt_vocab *v, const int32_t *ids, int64_t n) {
  char *out = dt_host_alloc((size_t)(4 * n + 1), 1);
  size_t len = 0;
  for (int64_t i = 0; i < n; i++) {
    int pad = ids[i] < 0 || ids[i] >= (v->bytes ? 256 : v->used); /* never drawn; U+FFFD */
    uint32_t c = pad ? 0xfffd : v->bytes ? (uint32_t)ids[i] : v->chars[ids[i]];
    int run = 1, raw = shown(c); /* bytes: a UTF-8 character of the next ids, where they make one */
    if (v->bytes && !pad && c >= 0x80) {
      unsigned char b[4];
      int64_t k = 0;
      for (; k < 4 && i + k < n && ids[i + k] >= 0 && ids[i + k] < 256; k++)
        b[k] = (unsigned char)ids[i + k];
      run = utf8_at(b, (size_t)k, 0, &c);
      raw = run > 1 && shown(c);
      if (!raw) { /* the byte alone, escaped */
        c = (uint32_t)ids[i];
        run = 1;
      }
    }
    if (!raw)
      len += (size_t)snprintf(out + len, 5, "\\x%02x", (unsigned)c);
    else
      len += (size_t)utf8_put(c, out + len);
    i += run - 1;
  }
  out[len] = '\0';
  return out;
}

char *dt_vocab_json(const dt_vocab *v) {
  int64_t n = v->bytes ? 0 : v->used;
  char *out = dt_host_alloc((size_t)(6 * n + 1), 1);
  size_t len = 0;
  for (int64_t i = 0; i < n; i++) {
    uint32_t c = v->chars[i];
    if (c == '"' || c == '\\') {
      out[len++] = '\\';
      out[len++] = (char)c;
    } else if (c < 0x20) { /* JSON's control characters, \u escaped */
      len += (size_t)snprintf(out + len, 7, "\\u%04x", (unsigned)c);
    } else {
      len += (size_t)utf8_put(c, out + len);
    }
  }
  out[len] = '\0';
  return out;
}

/* Four hex digits of a \u escape, or -1 */
static long hex4(const char *s, size_t left) {
  long v = 0;
  for (int k = 0; k < 4; k++) {
    char h = k < (int)left ? s[k] : 0;
    int d = h >= '0' && h <= '9'   ? h - '0'
            : h >= 'a' && h <= 'f' ? h - 'a' + 10
            : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                   : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* One character of a JSON string's body at s[*i] (escaped or not), or -1:
 * a malformed escape or byte. */
static int64_t json_char(const char *s, size_t len, size_t *i) {
  const unsigned char *u = (const unsigned char *)s;
  uint32_t c;
  if (s[*i] != '\\') {
    int n = u[*i] < 0x20 ? 0 : utf8_at(u, len, *i, &c);
    *i += (size_t)n;
    return n ? (int64_t)c : -1;
  }
  if (*i + 1 >= len) return -1;
  const char *plain = strchr("\"\\/bfnrt", s[*i + 1]);
  if (plain && s[*i + 1]) {
    *i += 2;
    return (int64_t) "\"\\/\b\f\n\r\t"[plain - "\"\\/bfnrt"];
  }
  long hi = s[*i + 1] == 'u' ? hex4(s + *i + 2, len - *i - 2) : -1;
  *i += 6;
  if (hi < 0xd800 || hi > 0xdbff) return hi >= 0xdc00 && hi <= 0xdfff ? -1 : hi;
  long lo = *i + 1 < len && s[*i] == '\\' && s[*i + 1] == 'u' ? hex4(s + *i + 2, len - *i - 2) : -1;
  *i += 6;
  return lo >= 0xdc00 && lo <= 0xdfff ? 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00) : -1;
}

int dt_vocab_parse(dt_vocab *v, const char *json, size_t len, char *err, size_t errlen) {
  uint32_t *chars = dt_host_alloc(len + 1, sizeof *chars);
  int64_t n = 0;
  size_t i = 0;
  while (i < len && json[i] != '"') {
    int64_t c = json_char(json, len, &i);
    if (c < 0 || (n && (uint32_t)c <= chars[n - 1])) {
      snprintf(err, errlen,
               c < 0 ? "the vocabulary holds a malformed character at its byte %zu"
                     : "the vocabulary is not in ascending order at its byte %zu",
               i);
      free(chars);
      return -1;
    }
    chars[n++] = (uint32_t)c;
  }
  if (i >= len) {
    snprintf(err, errlen, "the vocabulary's string does not end");
    free(chars);
    return -1;
  }
  free(v->chars);
  *v = (dt_vocab){.size = n, .used = n, .chars = chars};
  return 0;
}

int dt_utf8_at(const unsigned char *s, size_t n, size_t i, uint32_t *cp) {
  return utf8_at(s, n, i, cp);
}
