/* run.c: the training run every training lesson shares (train.h, "the run").
 *
 * A lesson owns its layout and its communication; this file owns the rest of
 * a step, the same way for all: the optimizer update with fp16's verdict and
 * the clip norm, checkpoints, the loss line, the time, and the run's start
 * and end. The state a rank steps is described once, as segments and places
 * (state.c), so the initial weights, --load, --resume, checkpoints, --save
 * and the check need no code of the lesson's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

dt_comm *dt_run_init(dt_run *r, int *argc, char ***argv, const dt_lesson *lesson,
                     dt_option *options) {
  dt_run_start(r, argc, argv, lesson, options);
  dt_run_resolve(r);
  return r->world;
}

dt_comm *dt_run_start(dt_run *r, int *argc, char ***argv, const dt_lesson *lesson,
                      dt_option *options) {
  return r->world = dt_init(argc, argv, lesson, options);
}

void dt_run_resolve(dt_run *r) {
  dt_train_resolve(&r->c);
  dt_trace_enable(r->c.trace != NULL);
  r->losses = dt_host_alloc((size_t)r->c.steps, sizeof(double));
  r->step_ms = dt_host_alloc((size_t)r->c.steps, sizeof(double));
  r->skipped = dt_host_alloc((size_t)r->c.steps, 1);
  /* ReLU's decisions near 0 are replayed where the check holds the runs to
   * fp32's rounding; 16 bits round each value by far more (CHECKING.md) */
  if (!r->c.no_check && dt_precision_type(&r->c) == DT_F32 && r->c.model != DT_GPT)
    r->kinks = dt_kinks_new(&r->c, 0); /* the GPT has no ReLU: GELU decides nothing */
}

static int by_start(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Segment k's elements that AdamW leaves undecayed (the plain tensors: a
 * GPT's gains), from its places, walked tensor by tensor. */
static void plain_spans(dt_run *r, int k) {
  dt_spans *s = &r->seg[k].plain;
  int cap = 0;
  for (const dt_place *p = r->place; p < r->place + r->nplace; p++)
    for (int64_t i = 0; p->seg == k && i < p->rows; i++)
      for (int64_t at = p->at + i * p->ld, off = p->off + i * p->cols, end = at + p->cols;
           at < end;) {
        dt_tensor x = dt_model_tensor(&r->c, dt_tensor_at(&r->c, at));
        int64_t stop = x.at + x.rows * x.cols < end ? x.at + x.rows * x.cols : end;
        if (x.plain && s->n == cap) {
          cap = cap ? 2 * cap : 8;
          s->at = realloc(s->at, (size_t)(2 * cap) * sizeof *s->at);
          CHECK_ALLOC(s->at);
        }
        if (x.plain) {
          s->at[2 * s->n] = off;
          s->at[2 * s->n + 1] = off + stop - at;
          s->n++;
        }
        off += stop - at;
        at = stop;
      }
  qsort(s->at, (size_t)s->n, 2 * sizeof *s->at, by_start);
}

void dt_run_begin(dt_run *r) {
  dt_train_config *c = &r->c;
  if (c->dump_data) dt_dump_data(c->dump_data, c); /* after the lesson's checks: no file on error */
  size_t P = (size_t)dt_model_size(c);
  int adamw = c->optimizer[0] == 'a';
  float *w = dt_host_alloc(P, 4), *m = adamw ? dt_host_alloc(P, 4) : NULL,
        *v = adamw ? dt_host_alloc(P, 4) : NULL, *e = c->rank_state ? dt_host_alloc(P, 4) : NULL;
  if (c->resume)
    dt_ckpt_resume(c, w, m, v, e);
  else if (c->load)
    dt_load_model(c->load, c, w);
  for (const dt_place *p = r->place; !c->resume && !c->load && p < r->place + r->nplace; p++)
    for (int64_t i = 0; i < p->rows; i++)
      dt_initial_weights(c, w + p->at + i * p->ld, p->at + i * p->ld, p->cols);
  dt_run_scatter(r, 0, w);
  dt_spans plain = dt_model_plain(c);
  for (int k = 0; plain.n && adamw && k < r->nseg; k++) plain_spans(r, k);
  free(plain.at);
  if (c->resume && adamw) {
    dt_run_scatter(r, 1, m);
    dt_run_scatter(r, 2, v);
  }
  if (c->resume && e) dt_run_scatter(r, 3, e);
  r->lockstep = dt_lockstep_new(r);
  /* the first step after a resume is checked from the checkpoint's state,
   * not from what the run made of it */
  if (c->resume) dt_lockstep_start_from(r->lockstep, w, m, v);
  free(w);
  free(m);
  free(v);
  free(e);
  r->host = dt_host_alloc(P, 4);
  r->scalar = dt_alloc_f32(1, DT_OTHER);
  if (!r->loss_ranks) r->loss_ranks = r->world->size;
  if (dt_loss_part(c)) r->parts = dt_host_alloc((size_t)c->steps, sizeof(double));
  dt_train_print(c);
  dt_scaler_init(&r->scaler, c);
  dt_run_reset(r);
}

void dt_run_reset(dt_run *r) {
  dt_comm_reset(r->world);
  for (int i = 0; i < DT_RUN_COMMS && r->comms[i]; i++) dt_comm_reset(r->comms[i]);
  dt_mem_reset_peaks();
  r->t_start = dt_now();
  r->first_step = r->later_steps = 0;
  r->steps_timed = 0;
}

static double comm_seconds(const dt_run *r) {
  double s = dt_comm_total(r->world).seconds + r->scalars.seconds;
  for (int i = 0; i < DT_RUN_COMMS && r->comms[i]; i++) s += dt_comm_total(r->comms[i]).seconds;
  return s;
}

void dt_step_begin(dt_run *r, int64_t step) {
  r->step = step;
  if (r->kinks) r->kinks->step = step;
  r->t_step = dt_now();
  r->comm_step = comm_seconds(r);
  r->held = 0;
  dt_ops_step_begin(); /* the kernels this step calls, counted (opcount.h) */
}

/* A fact about the whole model from one float per rank, over the world: the
 * training's traffic, but counted on its own row (scalars), not the lesson's. */
static double all_reduce_scalar(dt_run *r, double x, dt_op op) {
  if (r->replicated) return x; /* every rank holds the same gradients */
  float f = (float)x;
  dt_counter *ar = &r->world->count[DT_ALL_REDUCE], kept = *ar;
  dt_copy_from_host(r->scalar, &f, 4);
  dt_all_reduce(r->world, r->scalar, r->scalar, 1, DT_F32, op);
  dt_copy_to_host(&f, r->scalar, 4);
  r->scalars.calls += ar->calls - kept.calls;
  r->scalars.bytes_sent += ar->bytes_sent - kept.bytes_sent;
  r->scalars.seconds += ar->seconds - kept.seconds;
  *ar = kept;
  return f;
}

int dt_step_update(dt_run *r) {
  const dt_train_config *c = &r->c;
  double used = 1.0, sq = 0;
  int bad = 0;
  dt_ops_aside(1);       /* the check's copies are not the step's kernels */
  dt_lockstep_gather(r); /* the step's start and its gradient, where the check compares it */
  dt_ops_aside(0);
  for (int k = 0; dt_precision_type(c) == DT_F16 && k < r->nseg; k++)
    bad |= dt_count_nonfinite(r->seg[k].g, r->seg[k].n) > 0;
  if (dt_precision_type(c) == DT_F16) bad = all_reduce_scalar(r, bad, DT_MAX) > 0;
  if (!dt_scaler_update(&r->scaler, c, bad, &used)) {
    r->skipped[r->step] = 1;
    return 0;
  }
  if (c->clip > 0) {                  /* only when used: the norm costs a pass and an all-reduce */
    for (int k = 0; k < r->nseg; k++) /* a copy's norm counts once, where it is not a copy */
      if (!r->seg[k].copy) sq += dt_sum_squares(r->seg[k].g, r->seg[k].n);
    sq = all_reduce_scalar(r, sq, DT_SUM);
  }
  /* unscale and clip ride in the optimizer's pass */
  dt_step_scalars step = {r->scaler.taken, dt_grad_scale(c, used, sq), (float)dt_lr_at(c, r->step)};
  r->used = step;
  for (int k = 0; k < r->nseg; k++) {
    dt_segment *s = &r->seg[k];
    dt_optimizer_step(c, s->w, s->g, s->m, s->v, s->n, &s->plain, step);
  }
  return 1;
}

/* Rank 0 writes what it gathered; the m and v arrays exist only for this,
 * and the per-rank state, each rank's own array side by side on rank 0. */
static void checkpoint(dt_run *r, int64_t steps_done) {
  size_t P = (size_t)dt_model_size(&r->c);
  float *m = NULL, *v = NULL, *own = NULL, *e = NULL;
  dt_run_gather(r, 0, r->host);
  if (r->seg[0].m) {
    m = dt_host_alloc(P, 4);
    v = dt_host_alloc(P, 4);
    dt_run_gather(r, 1, m);
    dt_run_gather(r, 2, v);
  }
  if (r->c.rank_state) {
    own = dt_host_alloc(P, 4);
    dt_run_gather_own(r, 3, own);
    if (r->world->rank == 0) e = dt_host_alloc((size_t)r->world->size * P, 4);
    dt_host_gather(r->world, own, e, P, DT_F32, 0);
  }
  if (r->world->rank == 0) dt_ckpt_save(&r->c, steps_done, r->host, m, v, e);
  free(m);
  free(v);
  free(own);
  free(e);
}

double dt_run_loss(dt_run *r, const float *x, const float *y, float *dx, size_t n, double scale) {
  double loss = dt_mse_forward_backward(x, y, dx, n, scale);
  if (r->scaler.scale != 1.0) dt_scale(dx, n, (float)r->scaler.scale); /* fp16's loss scale */
  return loss;
}

/* The same fixed batches on every mesh, the whole model in one process */
static void evaluate(dt_run *r, int64_t step) {
  double t0 = dt_now(), loss[2];
  dt_run_gather(r, 0, r->host);
  if (r->world->rank == 0) {
    dt_gpt_evaluate(&r->c, r->host, loss);
    dt_print0("eval after step %lld: train loss %.4f, validation loss %.4f (%lld batches of %lld "
              "windows each)\n",
              (long long)step + 1, loss[0], loss[1], (long long)r->c.eval_batches,
              (long long)r->c.batch);
    /* nats a token to bits a byte: any two vocabularies of one text compare */
    const dt_text *t = r->c.corpus;
    int64_t tokens = t->n - t->train, bytes = t->bytes[1];
    dt_print0("  validation %.4f bits per byte = loss x tokens / bytes / ln 2 = %.6f x %lld / %lld "
              "/ ln 2 (the validation split's %s and bytes)\n",
              loss[1] * (double)tokens / (double)bytes / log(2.0), loss[1], (long long)tokens,
              (long long)bytes, dt_vocab_noun(&t->vocab));
  }
  dt_host_barrier(r->world);
  r->aside += dt_now() - t0;
}

void dt_step_end(dt_run *r, int64_t step, double loss) {
  dt_ops_step_end();
  dt_kinks_step_end(r->kinks); /* the keys of this step's rows are still there */
  if (dt_ckpt_due(&r->c, step)) checkpoint(r, step + 1);
  const char *part = dt_loss_part(&r->c);
  double sum[2] = {loss, r->part}; /* bookkeeping: the loss to print, and its part */
  dt_host_all_reduce(r->world, sum, part ? 2 : 1, DT_F64, DT_SUM);
  r->losses[step] = sum[0] / r->loss_ranks;
  if (part) r->parts[step] = sum[1] / r->loss_ranks;
  dt_sync();
  double dt = dt_now() - r->t_step - r->held; /* the check's gathers are not the step's */
  r->aside += r->held;
  r->step_ms[step] = dt * 1e3;
  r->compute += dt - (comm_seconds(r) - r->comm_step);
  if (r->steps_timed++ == 0)
    r->first_step = dt;
  else
    r->later_steps += dt;
  int blown = dt_print_step(&r->c, step, r->losses[step], part, part ? r->parts[step] : 0,
                            r->loss_how ? r->loss_how : "mean over ranks", dt);
  double t0 = dt_now();
  dt_lockstep_step(r, step); /* one process takes this step from the run's state, and compares */
  r->aside += dt_now() - t0;
  if (blown) dt_stop_diverged(r, step);
  if (r->c.model == DT_GPT && dt_gpt_eval_due(&r->c, step)) evaluate(r, step);
}

void dt_run_summary(dt_run *r) {
  double steps = (double)(r->c.steps - r->c.start_step), ms = 1e3 / steps;
  dt_print0("\nsummary (rank 0):\n");
  double step = (dt_now() - r->t_start - r->aside) * ms, compute = r->compute * ms,
         comm = comm_seconds(r) * ms;
  dt_print0(
      "  time per step          %8.2f ms   compute %.2f ms   communication %.2f ms (blocked)\n",
      step, compute, comm);
  dt_report(NULL, "time_per_step_ms", "%.6g", step);
  dt_report(NULL, "compute_ms", "%.6g", compute);
  dt_report(NULL, "comm_ms", "%.6g", comm);
#ifdef DT_CUDA
  /* The first step loads cuBLAS's and the lessons' kernels (~0.1 s on an
   * H200), which the mean above spreads over every step; PyTorch's timings
   * leave such warm-up steps out, so say what the steps after it take. */
  if (r->steps_timed > 1)
    dt_print0(
        "  after the first step   %8.2f ms a step (the first, loading cuBLAS and the kernels: "
        "%.2f ms)\n",
        r->later_steps / (double)(r->steps_timed - 1) * 1e3, r->first_step * 1e3);
#endif
  if (r->scalars.calls) { /* each: one float all-reduced over the world; the counters
                           * add whole bytes, the formula is exact (5 vs 5.33 at N=3) */
    double N = r->world->size, per = 2 * (N - 1) / N * 4,
           whole = (double)(8 * (r->world->size - 1) / r->world->size);
    dt_print0("  scalars                %8.2f all-reduces/step of one float (clip norm, fp16 "
              "verdict); bytes sent per rank per step %.2f, formula calls x 2(N-1)/N x 4 = %.2f\n",
              (double)r->scalars.calls / steps, (double)r->scalars.bytes_sent / steps,
              (double)r->scalars.calls * per / steps);
    if (whole != per) /* N = 3: 5.33 bytes a call by the formula, 5 counted */
      dt_print0("    (the counters add whole bytes a call: floor(2(N-1) x 4/N) = %.0f, so calls x "
                "%.0f = %.2f)\n",
                whole, whole, (double)r->scalars.calls * whole / steps);
  }
  if (r->scaler.skipped || dt_precision_type(&r->c) == DT_F16)
    dt_print0("  fp16 loss scaling      %lld step%s skipped on overflow; final loss scale %g\n",
              (long long)r->scaler.skipped, r->scaler.skipped == 1 ? "" : "s", r->scaler.scale);
}

void dt_print_memory(const dt_row *rows, int n, const char *other) {
  for (const dt_row *w = rows; w < rows + n; w++) /* rank 0's, as printed */
    dt_report_figure("memory", dt_tag_name(w->tag), (double)dt_mem_peak(w->tag),
                     (double)w->formula);
  if (!other) {
    dt_print0("  memory per rank (peak bytes)   measured      formula\n");
    for (const dt_row *w = rows; w < rows + n; w++)
      dt_print0("    %-8s %21zu %12lld   %s\n", dt_tag_name(w->tag), dt_mem_peak(w->tag),
                (long long)w->formula, w->how);
  } else {
    dt_print0("  memory per rank (peak bytes)   measured     formula %11s\n", other);
    for (const dt_row *w = rows; w < rows + n; w++)
      dt_print0("    %-24s %11zu %11lld %11lld   %s\n", dt_tag_name(w->tag), dt_mem_peak(w->tag),
                (long long)w->formula, (long long)w->other, w->how);
  }
}

int32_t *dt_run_record_routing(dt_run *r, int64_t tokens) {
  if (r->c.no_check) return NULL;
  r->routing_rows = tokens;
  r->routing = dt_host_alloc((size_t)(r->c.steps * r->c.layers * tokens * r->c.topk), 4);
  return r->routing;
}

int dt_run_finish(dt_run *r) {
  const dt_train_config *c = &r->c;
  dt_run_gather(r, 0, r->host);
  if (c->save && r->world->rank == 0) dt_save_model(c->save, c, c->steps, r->host);
  if (c->save) dt_print0("saved %s\n", c->save);
  if (c->trace) dt_trace_write(c->trace);
  if (c->model == DT_GPT && c->sample && r->world->rank == 0) {
    char *text = dt_gpt_sample(c, &c->corpus->vocab, r->host, c->prompt ? c->prompt : "", c->sample,
                               c->temperature, c->top_k, (uint64_t)c->seed);
    if (c->temperature == 0)
      dt_print0("sample (%lld tokens, greedy: temperature 0, the likeliest token each time):\n%s\n",
                (long long)c->sample, text);
    else
      dt_print0("sample (%lld tokens, temperature %g, top-k %lld):\n%s\n", (long long)c->sample,
                c->temperature, (long long)c->top_k, text);
    free(text);
  }
  int failed = c->no_check ? 0 : r->verdict ? r->verdict(r) : dt_check_run(r);
  int64_t from = c->start_step, n = c->steps - from;
  dt_report_array("loss", r->losses + from, n);
  dt_report_array("step_ms", r->step_ms + from, n);
  dt_ops_report();
  dt_report_string(NULL, "verdict", c->no_check ? "not checked" : failed ? "FAILED" : "PASSED");
  for (int k = 0; k < r->nseg; k++) {
    dt_free(r->seg[k].m);
    dt_free(r->seg[k].v);
    free(r->seg[k].plain.at);
  }
  dt_lockstep_free(r->lockstep);
  dt_free(r->scalar);
  free(r->host);
  free(r->losses);
  free(r->step_ms);
  free(r->parts);
  free(r->place);
  free(r->routing);
  free(r->skipped);
  dt_kinks_free(r->kinks);
  dt_finalize();
  return failed;
}
