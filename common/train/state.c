/* state.c: the state a rank steps, described once (train.h, "the run"):
 * segments, the buffers the optimizer steps, and places, where their
 * elements sit in the whole model. Between the two, every rank's elements
 * go out to their segments (the initial weights, --load, --resume) and come
 * back as the whole model (checkpoints, --save, the check), so none of those
 * needs code of the lesson's. */
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

int dt_run_segment(dt_run *r, float *w, float *g, size_t n) {
  if (r->nseg == DT_RUN_SEGMENTS) dt_fatal(__FILE__, __LINE__, "dt_run_segment", "too many");
  dt_segment *s = &r->seg[r->nseg];
  *s = (dt_segment){.w = w, .g = g, .n = n};
  if (r->c.optimizer[0] == 'a') {
    s->m = dt_alloc_f32(n, DT_OPTIM);
    s->v = dt_alloc_f32(n, DT_OPTIM);
  }
  return r->nseg++;
}

void dt_run_place(dt_run *r, int seg, int64_t off, int64_t at, int64_t rows, int64_t cols,
                  int64_t ld) {
  if (rows <= 0 || cols <= 0) return;
  if (r->nplace == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 64;
    r->place = realloc(r->place, (size_t)r->cap * sizeof *r->place);
    if (!r->place) dt_fatal(__FILE__, __LINE__, "dt_run_place", "out of memory");
  }
  r->place[r->nplace++] = (dt_place){seg, off, at, rows, cols, ld};
}

void dt_run_place_range(dt_run *r, int seg, int64_t off, int64_t at, int64_t cols, int64_t ld,
                        int64_t lo, int64_t hi) {
  while (lo < hi) { /* a partial first row, whole rows, a partial last row */
    int64_t row = lo / cols, col = lo % cols, n = hi - lo < cols - col ? hi - lo : cols - col;
    if (col == 0 && n == cols && (hi - lo) / cols > 1) n = (hi - lo) / cols * cols;
    if (col == 0 && n >= cols)
      dt_run_place(r, seg, off, at + row * ld, n / cols, cols, ld);
    else
      dt_run_place(r, seg, off, at + row * ld + col, 1, n, n);
    off += n;
    lo += n;
  }
}

void dt_run_rank_state(dt_run *r, int seg, float *buf, const char *what) {
  if (seg < 0 || seg >= r->nseg || r->c.rank_state)
    dt_fatal(__FILE__, __LINE__, "dt_run_rank_state", "no such segment, or a second state");
  r->seg[seg].e = buf;
  r->c.rank_state = what;
}

/* Between the segments (backend memory) and the whole model (host): each
 * segment through a host copy, each place row by row. A segment without
 * the buffer (per-rank state on some segments only) is skipped. */
static float *seg_buf(dt_segment *s, int which) {
  float *b[] = {s->w, s->m, s->v, s->e, s->g};
  return b[which];
}

void dt_run_scatter(dt_run *r, int which, const float *model) {
  for (int k = 0; k < r->nseg; k++) {
    if (!seg_buf(&r->seg[k], which)) continue;
    float *h = dt_host_alloc(r->seg[k].n, 4); /* padding stays 0 */
    for (const dt_place *p = r->place; p < r->place + r->nplace; p++)
      for (int64_t i = 0; p->seg == k && i < p->rows; i++)
        memcpy(h + p->off + i * p->cols, model + p->at + i * p->ld, (size_t)p->cols * 4);
    dt_copy_from_host(seg_buf(&r->seg[k], which), h, r->seg[k].n * 4);
    free(h);
  }
}

/* This rank's elements in their places, 0 elsewhere. */
void dt_run_gather_own(dt_run *r, int which, float *model) {
  memset(model, 0, (size_t)dt_model_size(&r->c) * 4);
  for (int k = 0; k < r->nseg; k++) {
    if (!seg_buf(&r->seg[k], which)) continue;
    if (r->seg[k].copy && !r->replicated) continue; /* another rank's counts */
    float *h = dt_host_alloc(r->seg[k].n, 4);
    dt_copy_to_host(h, seg_buf(&r->seg[k], which), r->seg[k].n * 4);
    for (const dt_place *p = r->place; p < r->place + r->nplace; p++)
      for (int64_t i = 0; p->seg == k && i < p->rows; i++)
        memcpy(model + p->at + i * p->ld, h + p->off + i * p->cols, (size_t)p->cols * 4);
    free(h);
  }
}

void dt_run_gather(dt_run *r, int which, float *model) { dt_run_gather_all(r, &which, 1, model); }

void dt_run_gather_all(dt_run *r, const int *which, int n, float *model) {
  size_t P = (size_t)dt_model_size(&r->c);
  for (int i = 0; i < n; i++) dt_run_gather_own(r, which[i], model + (size_t)i * P);
  /* Every element has one owner and 0 elsewhere: the sum is the model. */
  if (!r->replicated) dt_host_reduce(r->world, model, (size_t)n * P, DT_F32, DT_SUM, 0);
}
