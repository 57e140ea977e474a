/* test_bpe.c: the byte-level BPE of --tokens bpe:N (common/train/bpe.c,
 * bpe_text.c) held to what is known by hand and to a plain learner:
 *   - Wikipedia's example, "aaabdaaabac": (a,a), then (a,b) (a tie with
 *     (Z,a), the lower pair wins), then (Z,Y), and no pair occurs twice;
 *   - overlaps ("aaaaa": left to right, "Z Z a") and ties to the lower pair;
 *   - the incremental learner against a full recount per merge (the plain
 *     algorithm) on README.md's bytes, merge for merge, and the encoder
 *     (minbpe's: the lowest-ranked pair first) against the learner's own
 *     merged sequence;
 *   - the merges' text and back, and each malformed form refused;
 *   - decoding: a token's bytes, non-printable bytes as \xNN. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

static int64_t learn(const char *s, int64_t merges, int32_t *pairs, int32_t *out, int64_t *m) {
  int64_t n = (int64_t)strlen(s);
  int32_t *b = malloc((size_t)(n + 1) * sizeof *b);
  for (int64_t i = 0; i < n; i++) b[i] = (unsigned char)s[i];
  int64_t k = dt_bpe_learn(b, n, merges, pairs, out, m);
  free(b);
  return k;
}

static void test_by_hand(void) {
  int32_t p[20], out[16];
  int64_t m = 0, k = learn("aaabdaaabac", 10, p, out, &m);
  const int32_t want[6] = {'a', 'a', 'a', 'b', 256, 257}, seq[5] = {258, 'd', 258, 'a', 'c'};
  EXPECT(k == 3 && memcmp(p, want, sizeof want) == 0 && m == 5 && memcmp(out, seq, sizeof seq) == 0,
         "aaabdaaabac: 3 merges (a,a) (a,b) (256,257), XdXac; got %lld merges, (%d,%d) (%d,%d) "
         "(%d,%d), %lld tokens",
         (long long)k, p[0], p[1], p[2], p[3], p[4], p[5], (long long)m);
  k = learn("aaaaa", 10, p, out, &m);
  EXPECT(k == 1 && m == 3 && out[0] == 256 && out[1] == 256 && out[2] == 'a',
         "aaaaa: one merge, left to right: Z Z a (got %lld merges, %lld tokens)", (long long)k,
         (long long)m);
  k = learn("xyxyabab", 10, p, out, &m);
  EXPECT(k == 2 && p[0] == 'a' && p[1] == 'b' && p[2] == 'x' && p[3] == 'y',
         "a tie (xy and ab, twice each): the lower pair (a,b) first; got (%d,%d) (%d,%d)", p[0],
         p[1], p[2], p[3]);
  EXPECT(learn("a", 3, p, out, &m) == 0 && m == 1 && learn("", 3, p, out, &m) == 0 && m == 0,
         "one byte or none: no merge");
}

/* The plain algorithm: every pair counted again before each merge. */
static int64_t plain_learn(const int32_t *bytes, int64_t n, int64_t merges, int32_t *pairs) {
  int64_t V = 256 + merges, k = 0;
  int32_t *s = malloc((size_t)n * sizeof *s);
  int64_t *count = malloc((size_t)(V * V) * sizeof *count);
  memcpy(s, bytes, (size_t)n * sizeof *s);
  for (; k < merges; k++) {
    memset(count, 0, (size_t)(V * V) * sizeof *count);
    int64_t best = -1;
    for (int64_t i = 0; i + 1 < n; i++) count[s[i] * V + s[i + 1]]++;
    for (int64_t c = 0; c < V * V; c++) best = best < 0 || count[c] > count[best] ? c : best;
    if (best < 0 || count[best] < 2) break;
    pairs[2 * k] = (int32_t)(best / V), pairs[2 * k + 1] = (int32_t)(best % V);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
      if (i + 1 < n && s[i] * V + s[i + 1] == best)
        s[m++] = (int32_t)(256 + k), i++;
      else
        s[m++] = s[i];
    n = m;
  }
  free(s), free(count);
  return k;
}

static void test_against_plain(void) {
  FILE *f = fopen("README.md", "rb");
  static unsigned char text[12000];
  int64_t n = f ? (int64_t)fread(text, 1, sizeof text, f) : 0, M = 150, m = 0;
  if (f) fclose(f);
  int32_t *b = malloc((size_t)n * sizeof *b), *out = malloc((size_t)n * sizeof *out);
  int32_t *enc = malloc((size_t)n * sizeof *enc), p[300], q[300];
  for (int64_t i = 0; i < n; i++) b[i] = text[i];
  int64_t k = dt_bpe_learn(b, n, M, p, out, &m), kp = plain_learn(b, n, M, q);
  EXPECT(n > 10000 && k == M && kp == M && memcmp(p, q, sizeof p) == 0,
         "README.md's first %lld bytes: %lld merges, a full recount's %lld: the same pairs",
         (long long)n, (long long)k, (long long)kp);
  dt_vocab v = {.size = 256 + M, .used = 256 + M, .bytes = 1, .merges = M, .pair = p};
  int64_t e = dt_bpe_encode(&v, b, n, enc);
  EXPECT(e == m && memcmp(enc, out, (size_t)m * sizeof *out) == 0,
         "the encoder gives the learner's own sequence: %lld tokens, %lld", (long long)e,
         (long long)m);
  char *dec = dt_tokens_decode(&v, enc, e);
  EXPECT(strncmp(dec, (const char *)text, 200) == 0, "decoded: the text again");
  free(dec), free(b), free(out), free(enc);
}

static void test_text_and_decode(void) {
  int32_t p[6] = {'a', 'a', 'a', 'b', 256, 257};
  dt_vocab v = {.size = 260, .used = 259, .bytes = 1, .merges = 3, .pair = p}, back = {0};
  char *s = dt_bpe_text(&v), err[200] = "", quoted[64];
  snprintf(quoted, sizeof quoted, "%s\"", s);
  EXPECT(strcmp(s, "97 97 97 98 256 257") == 0, "the merges' text: '%s'", s);
  EXPECT(dt_bpe_parse(&back, quoted, 259, err, sizeof err) == 0 && back.merges == 3 &&
             memcmp(back.pair, p, sizeof p) == 0,
         "and back: %s", err);
  free(back.pair), free(s);
  const char *bad[5][2] = {{"97 97 9x 98\"", "not a list of ids at their character 8"},
                           {"97 97 257 98\"", "merge 1 (token 257) joins token 257"},
                           {"97 97 97\"", "3 ids, not 2 a merge"},
                           {"97 97 97 98 256 257\"", "3 merges, but vocab_used 258 says 2"},
                           {"97 97", "no end"}};
  for (int i = 0; i < 5; i++) {
    err[0] = '\0';
    EXPECT(dt_bpe_parse(&back, bad[i][0], i == 3 ? 258 : 256 + 2, err, sizeof err) == -1 &&
               strstr(err, bad[i][1]) && strstr(err, "its BPE merges are malformed: "),
           "'%s' refused: %s", bad[i][0], err);
  }
  int32_t ids[8];
  char e2[64];
  int64_t k = dt_tokens_encode(&v, "aaabdaaabac", ids, 8, e2, sizeof e2);
  char *t = dt_tokens_decode(&v, ids, k);
  EXPECT(k == 5 && ids[0] == 258 && strcmp(t, "aaabdaaabac") == 0, "encode, decode: %s", t);
  free(t);
  int32_t odd[5] = {0, 'a', '\n', 0xe2, 259};
  t = dt_tokens_decode(&v, odd, 5);
  EXPECT(strcmp(t, "\\x00a\n\\xe2\xef\xbf\xbd") == 0,
         "NUL and a cut UTF-8 byte as \\xNN, the padding as U+FFFD: '%s'", t);
  free(t);
}

int main(int argc, char **argv) {
  dt_lesson lesson = {"test_bpe", "unit tests of the byte-level BPE", 1};
  dt_init(&argc, &argv, &lesson, NULL);
  test_by_hand();
  test_against_plain();
  test_text_and_decode();
  return unit_verdict();
}
