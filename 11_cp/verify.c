/* verify.c: --verify-merge. The merge is run on a few rows whose answer is
 * computed directly, the softmax over both blocks' keys at once, and what is
 * wrong is named: the rows where the new block's max is the larger (the old
 * part must be rescaled), the log-sum-exp, the normalisation, a row that
 * starts empty. Same rows on every rank, so every rank agrees. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cp.h"

enum { ROWS = 4, HEADS = 2, DH = 3, D = HEADS * DH, KA = 3, KB = 2 };

/* The block of keys [lo, hi) of one row and head: o and lse, directly. */
static void block(const float *s, const float *v, int lo, int hi, float *o, float *lse) {
  float mx = -INFINITY, sum = 0;
  for (int j = lo; j < hi; j++) mx = fmaxf(mx, s[j]);
  for (int d = 0; d < DH; d++) o[d] = 0;
  for (int j = lo; j < hi; j++) {
    sum += expf(s[j] - mx);
    for (int d = 0; d < DH; d++) o[d] += expf(s[j] - mx) * v[j * DH + d];
  }
  for (int d = 0; d < DH; d++) o[d] /= sum;
  *lse = mx + logf(sum);
}

/* The usual wrong merges, each a formula in the inputs of one row and head:
 * the weighted sum not divided by wa + wb, the plain sum, the newer block
 * alone, the older one alone. Returns the one every off row matches, or -1;
 * factor gets the range of got / want over the rows (its own wa + wb each,
 * for the first), the size of the mistake as measured. */
static int which_mistake(const float *got, const float *want, const float *o, const float *lse,
                         const float *ob, const float *lseb, float factor[2]) {
  int fits[4] = {1, 1, 1, 1};
  factor[0] = INFINITY;
  factor[1] = -INFINITY;
  for (int i = 0; i < ROWS * HEADS; i++) {
    int at = i / HEADS * D + i % HEADS * DH;
    float mx = fmaxf(lse[i], lseb[i]), wa = expf(lse[i] - mx), wb = expf(lseb[i] - mx);
    float gw = 0, ww = 0;
    for (int d = 0; d < DH; d++) {
      float g = got[at + d], a = o[at + d], b = ob[at + d],
            guess[4] = {wa * a + wb * b, a + b, b, a};
      for (int k = 0; k < 4; k++) fits[k] &= fabsf(g - guess[k]) <= 1e-4f * (1 + fabsf(guess[k]));
      gw += g * want[at + d];
      ww += want[at + d] * want[at + d];
    }
    factor[0] = fminf(factor[0], gw / ww);
    factor[1] = fmaxf(factor[1], gw / ww);
  }
  for (int k = 0; k < 4; k++)
    if (fits[k]) return k;
  return -1;
}

void verify_merge(merge_fn *merge) {
  float o[ROWS * D], lse[ROWS * HEADS], ob[ROWS * D], lseb[ROWS * HEADS], want[ROWS * D],
      wlse[ROWS * HEADS], s[KA + KB], v[(KA + KB) * DH], o0[ROWS * D], lse0[ROWS * HEADS];
  for (int i = 0; i < ROWS * HEADS; i++) { /* rows 0, 1: the old block has the larger max */
    for (int j = 0; j < KA + KB; j++) {
      s[j] = (float)((j * 7 + i * 3) % 5) * 0.7f + (j < KA) * (i < 2 * HEADS ? 3.0f : -3.0f);
      for (int d = 0; d < DH; d++) v[j * DH + d] = (float)((j * 5 + d * 3 + i) % 7) - 3.0f;
    }
    int at = i / HEADS * D + i % HEADS * DH;
    block(s, v, 0, KA, o + at, lse + i);
    block(s, v, KA, KA + KB, ob + at, lseb + i);
    block(s, v, 0, KA + KB, want + at, wlse + i);
  }
  memcpy(o0, o, sizeof o);
  memcpy(lse0, lse, sizeof lse);
  merge(o, lse, ob, lseb, ROWS, D, HEADS);
  int off[ROWS] = {0}, lse_off = 0, nan = 0;
  for (int i = 0; i < ROWS * D; i++) {
    nan |= isnan(o[i]);
    off[i / D] |= !(fabsf(o[i] - want[i]) <= 1e-4f * (1 + fabsf(want[i])));
  }
  for (int i = 0; i < ROWS * HEADS; i++) lse_off |= !(fabsf(lse[i] - wlse[i]) <= 1e-4f);
  /* a row that starts empty (lse -inf, o 0) must become the block itself */
  float eo[D] = {0}, elog[HEADS] = {-INFINITY, -INFINITY};
  int empty_off = 0;
  merge(eo, elog, ob, lseb, 1, D, HEADS);
  for (int i = 0; i < D; i++) empty_off += !(fabsf(eo[i] - ob[i]) <= 1e-4f * (1 + fabsf(ob[i])));
  for (int i = 0; i < HEADS; i++) empty_off += !(fabsf(elog[i] - lseb[i]) <= 1e-4f);
  const char *why = NULL,
             *mistakes[4] = {
                 ("each row is exactly its own wa + wb times the right one: the "
                  "weighted sum wa o + wb ob is not divided by wa + wb"),
                 ("they are the plain sum o + ob: each block's output needs its "
                  "weight, wa = exp(lse - mx) and wb = exp(lseb - mx), and the sum "
                  "divided by wa + wb"),
                 ("they are the newer block's alone (ob): the running result o is "
                  "dropped, not merged"),
                 "they are the older result's alone (o): the new block was not merged in"};
  float factor[2];
  int mistake = which_mistake(o, want, o0, lse0, ob, lseb, factor);
  char said[400];
  snprintf(said, sizeof said,
           "the merged rows are %.2f to %.2f times the right ones (measured on %d rows x %d "
           "heads): %s",
           factor[0], factor[1], ROWS, HEADS, mistake >= 0 ? mistakes[mistake] : "");
  if (nan)
    why = "the merged output holds NaN: subtract the larger of the two lse before exp";
  else if (!off[0] && !off[1] && (off[2] || off[3]))
    why = "rows whose max moved are off (the new block's lse is the larger): did you rescale the "
          "old sum, exp(lse - max)?";
  else if (mistake >= 0)
    why = said;
  else if (off[0] || off[1] || off[2] || off[3])
    why = "the merged output is off: it is the mean of both blocks' outputs weighted "
          "by exp(lse - max) and exp(lseb - max), divided by their sum";
  else if (lse_off)
    why = "the output is right but the log-sum-exp is not: the merged lse is max + log(exp(lse - "
          "max) + exp(lseb - max))";
  else if (empty_off)
    why = "a row that starts empty (lse = -INFINITY, o = 0) must become the block itself";
  if (why) dt_fail("--verify-merge: %s", why);
  dt_print0("--verify-merge: the merge of two blocks is right on %d rows x %d heads, and on a row "
            "that starts empty\n",
            ROWS, HEADS);
}
