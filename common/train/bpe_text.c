/* bpe_text.c: a text as BPE tokens (--tokens bpe:N, train.h "text"): the
 * merges learned on rank 0 from the training split and broadcast, or a
 * saved file's; the merges as the file's metadata writes them and back,
 * each checked; tokens to text with non-printable bytes escaped; and the
 * encode and decode of any vocabulary (text.c's characters and bytes, or
 * bpe.c's merges). */
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

const char *dt_vocab_kind(const dt_vocab *v) {
  return v->merges ? "bpe" : v->bytes ? "byte" : "char";
}

const char *dt_vocab_noun(const dt_vocab *v) {
  return v->merges ? "BPE tokens" : v->bytes ? "bytes" : "characters";
}

int dt_vocab_same(const dt_vocab *a, const dt_vocab *b) {
  return a->bytes == b->bytes && a->merges == b->merges && a->used == b->used &&
         (a->bytes || memcmp(a->chars, b->chars, (size_t)a->used * sizeof *a->chars) == 0) &&
         (!a->merges || memcmp(a->pair, b->pair, (size_t)(2 * a->merges) * sizeof *a->pair) == 0);
}

static void fail_short(const dt_text *t, const char *path, int64_t window) {
  dt_fail("--text %s holds %lld BPE tokens, %lld to train on and %lld to validate: each must hold "
          "a window of --seq + 1 = %lld tokens; use a longer text, a smaller --seq or fewer merges",
          path, (long long)t->n, (long long)t->train, (long long)(t->n - t->train),
          (long long)window);
}

void dt_text_load_bpe(dt_text *t, const char *path, int64_t merges, const dt_vocab *given,
                      int64_t multiple, int64_t window) {
  dt_text_load(t, path, 1, 1, window); /* its bytes, split 90/10 (fewer bytes: fewer tokens) */
  int64_t n = t->n, split = t->train, N = given ? given->merges : merges;
  int32_t *pair = dt_host_alloc((size_t)(2 * N), sizeof *pair);
  double took = 0;
  if (given) {
    memcpy(pair, given->pair, (size_t)(2 * N) * sizeof *pair);
  } else { /* rank 0 learns, the others wait in the broadcast: one learner's time */
    int64_t learned = 0;
    if (dt_rank() == 0) {
      took = dt_now();
      learned = dt_bpe_learn(t->ids, split, N, pair, NULL, NULL);
      took = dt_now() - took;
    }
    DT_MPI(MPI_Bcast(&learned, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
    if (learned < N) {
      char hint[64] = "use a longer text";
      if (learned)
        snprintf(hint, sizeof hint, "choose bpe:%lld or fewer, or a longer text",
                 (long long)learned);
      free(pair);
      dt_fail("--tokens bpe:%lld: after %lld merges no pair of tokens occurs twice in the training "
              "split of %s (its first %lld bytes): %s",
              (long long)N, (long long)learned, path, (long long)split, hint);
    }
    DT_MPI(MPI_Bcast(pair, (int)(2 * N), MPI_INT32_T, 0, MPI_COMM_WORLD));
  }
  t->vocab = (dt_vocab){.bytes = 1, .used = 256 + N, .merges = N, .pair = pair};
  /* each split on its own: no token spans the two, none learned from the second */
  int32_t *ids = dt_host_alloc((size_t)n, sizeof *ids);
  t->train = dt_bpe_encode(&t->vocab, t->ids, split, ids);
  t->n = t->train + dt_bpe_encode(&t->vocab, t->ids + split, n - split, ids + t->train);
  free(t->ids);
  t->ids = ids;
  if (t->train < window || t->n - t->train < window) fail_short(t, path, window);
  if (multiple < 1) multiple = 1;
  t->vocab.size = (t->vocab.used + multiple - 1) / multiple * multiple;
  char pad[160] = "";
  if (t->vocab.size != t->vocab.used)
    snprintf(pad, sizeof pad,
             ", padded to V = %lld (a multiple of %lld, so that its slices are equal); the "
             "padding is never a token",
             (long long)t->vocab.size, (long long)multiple);
  if (!given)
    dt_print0("vocabulary: 256 bytes + %lld merges learned from the first %lld bytes of %s in %.2f "
              "s (rank 0; broadcast to %d rank%s, %lld ints) = %lld BPE tokens%s\n",
              (long long)N, (long long)split, path, took, dt_size(), dt_size() > 1 ? "s" : "",
              (long long)(2 * N), (long long)t->vocab.used, pad);
  else if (pad[0])
    dt_print0("vocabulary: %lld BPE tokens%s\n", (long long)t->vocab.used, pad);
}

char *dt_bpe_text(const dt_vocab *v) {
  char *out = dt_host_alloc((size_t)(2 * v->merges) * 12 + 1, 1);
  size_t len = 0;
  for (int64_t i = 0; i < 2 * v->merges; i++)
    len += (size_t)snprintf(out + len, 13, "%s%d", i ? " " : "", (int)v->pair[i]);
  out[len] = '\0';
  return out;
}

int dt_bpe_parse(dt_vocab *v, const char *s, int64_t used, char *err, size_t errlen) {
  int64_t n = 0, cap = 64;
  int32_t *pair = dt_host_alloc((size_t)cap, sizeof *pair);
  const char *at = s;
  char why[160] = "";
  while (*at != '"' && !why[0]) {
    long long id = 0;
    if (*at == '\0' || (n && *at++ != ' ') || *at < '0' || *at > '9') {
      snprintf(why, sizeof why, *at ? "not a list of ids at their character %lld" : "no end",
               (long long)(at - s));
      break;
    }
    for (; *at >= '0' && *at <= '9'; at++) id = id > 1 << 30 ? id : 10 * id + (*at - '0');
    if (id >= 256 + n / 2)
      snprintf(why, sizeof why, "merge %lld (token %lld) joins token %lld, not defined before it",
               (long long)(n / 2), (long long)(256 + n / 2), id);
    if (n == cap) {
      pair = realloc(pair, (size_t)(cap *= 2) * sizeof *pair);
      CHECK_ALLOC(pair);
    }
    pair[n++] = (int32_t)id;
  }
  if (!why[0] && n % 2) snprintf(why, sizeof why, "%lld ids, not 2 a merge", (long long)n);
  if (!why[0] && 256 + n / 2 != used)
    snprintf(why, sizeof why, "%lld merges, but vocab_used %lld says %lld", (long long)(n / 2),
             (long long)used, (long long)(used - 256));
  if (why[0]) {
    snprintf(err, errlen, "its BPE merges are malformed: %s", why);
    free(pair);
    return -1;
  }
  *v = (dt_vocab){.size = used, .used = used, .bytes = 1, .merges = n / 2, .pair = pair};
  return 0;
}

/* token id's bytes into out (NULL: only its length) */
static int64_t expand(const dt_vocab *v, int32_t id, unsigned char *out) {
  if (id < 256) {
    if (out) out[0] = (unsigned char)id;
    return 1;
  }
  int64_t a = expand(v, v->pair[2 * (id - 256)], out);
  return a + expand(v, v->pair[2 * (id - 256) + 1], out ? out + a : NULL);
}

/* Bytes as text: UTF-8 characters as they are, a byte that starts none (or
 * a control character other than newline and tab) as \xNN: the result has
 * no NUL inside, whatever tokens were drawn. */
static char *escaped(const unsigned char *s, size_t n) {
  char *out = dt_host_alloc(4 * n + 1, 1);
  size_t len = 0;
  for (size_t i = 0; i < n;) {
    uint32_t c = 0;
    int k = dt_utf8_at(s, n, i, &c);
    if (k && (c == '\n' || c == '\t' || (c >= 0x20 && c != 0x7f && (c < 0x80 || c >= 0xa0)))) {
      memcpy(out + len, s + i, (size_t)k);
      len += (size_t)k;
      i += (size_t)k;
    } else {
      len += (size_t)snprintf(out + len, 5, "\\x%02x", s[i++]);
    }
  }
  out[len] = '\0';
  return out;
}

int64_t dt_tokens_encode(const dt_vocab *v, const char *text, int32_t *ids, int64_t cap, char *err,
                         size_t errlen) {
  if (!v->merges) return dt_vocab_encode(v, text, ids, cap, err, errlen);
  int64_t n = (int64_t)strlen(text);
  int32_t *bytes = dt_host_alloc((size_t)n + 1, sizeof *bytes);
  for (int64_t i = 0; i < n; i++) bytes[i] = (unsigned char)text[i];
  int64_t k = dt_bpe_encode(v, bytes, n, bytes); /* in place: never longer */
  if (k > cap) k = cap;
  memcpy(ids, bytes, (size_t)k * sizeof *ids);
  free(bytes);
  return k;
}

char *dt_tokens_decode(const dt_vocab *v, const int32_t *ids, int64_t n) {
  if (!v->merges) return dt_vocab_decode(v, ids, n);
  static const unsigned char fffd[3] = {0xef, 0xbf, 0xbd}; /* the padding, never drawn */
  int64_t len = 0;
  for (int64_t i = 0; i < n; i++)
    len += ids[i] < 0 || ids[i] >= v->used ? 3 : expand(v, ids[i], NULL);
  unsigned char *bytes = dt_host_alloc((size_t)len + 1, 1);
  int64_t at = 0;
  for (int64_t i = 0; i < n; i++) {
    int pad = ids[i] < 0 || ids[i] >= v->used;
    if (pad) memcpy(bytes + at, fffd, 3);
    at += pad ? 3 : expand(v, ids[i], bytes + at);
  }
  char *text = escaped(bytes, (size_t)len);
  free(bytes);
  return text;
}
