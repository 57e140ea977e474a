/* 13_plan: the cost model. A training step is compute + communication +
 * bubble, and each part is predictable from what lessons 01-12 measured:
 *   compute        every operation of the step (the lessons' products,
 *                  attention blocks, elementwise passes, the optimizer) at
 *                  the rate this machine measured for it, or by the roofline
 *                  of a datasheet: FLOPs at the large-GEMM rate, bytes at the
 *                  memory bandwidth (compute.c);
 *   communication  every collective of every axis at alpha + bytes x beta per
 *                  message, with the algorithm the lessons use: the ring
 *                  all-reduce 2(n-1) messages carrying 2(n-1)/n of the buffer
 *                  (03), all-gather and reduce-scatter (n-1) and (n-1)/n (06),
 *                  the pipeline's sendrecv (09), the ring attention's hops
 *                  (11), overlapped where the lessons overlap them;
 *   bubble         (pp-1) microbatch slots of the slowest stage: 09's
 *                  (N-1)/(M+N-1) of the step.
 * Bytes and memory per rank are the formulas the lessons print
 * (formulas.c). --measure finds alpha, beta and the rates here; --predict
 * puts them together for any mesh; --verify runs the lessons and sets their
 * measured figures beside the prediction; --cluster and --search plan a real
 * cluster from its datasheet. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

const char *const axis_name[NCOMM] = {"dp", "pp", "cp", "tp", "dp x cp"};
const char *const coll_name[NCOLL] = {"all_reduce", "all_gather", "reduce_scatter", "sendrecv"};

/* The alpha-beta cost of one collective over n ranks on channel k, with
 * `bytes` the buffer each rank holds (the whole vector; for a sendrecv, the
 * message): every step of the algorithm is a message (alpha), and the
 * bytes each rank sends cross its channel (beta). */
double collective_seconds(int coll, int64_t n, double bytes, const channel *k) {
  if (n <= 1 && coll != P2P) return 0;
  double N = (double)n;
  switch (coll) {
  case AR:
    /* exercise: the alpha-beta cost of the ring all-reduce */
    return 2 * (N - 1) * k->alpha + 2 * (N - 1) / N * bytes * k->beta;
    /* end of exercise */
  case AG:
  case RS: return (N - 1) * k->alpha + (N - 1) / N * bytes * k->beta;
  default: return k->alpha + bytes * k->beta;
  }
}

/* One axis's traffic of a step in seconds: each call's buffer from the
 * bytes it sent (the ring model's inverse), then its alpha-beta cost. */
static double axis_seconds(const traffic t[NCOLL], int64_t n, const machine *m, const mesh *x,
                           int a) {
  double s = 0;
  int intra;
  for (int c = 0; c < NCOLL; c++) {
    if (!t[c].calls) continue;
    channel k = axis_link(m, x, a, c, &intra);
    double per = (double)t[c].bytes / (double)t[c].calls, N = (double)n;
    double buf = c == AR ? per * N / (2 * (N - 1)) : c == P2P ? per : per * N / (N - 1);
    s += (double)t[c].calls * collective_seconds(c, n, n > 1 ? buf : 0, &k);
  }
  return s;
}

/* What one microbatch costs stage s on cp rank r: its compute, and the
 * blocking communication inside it: tp's all-reduces; cp's hops, forward
 * hidden behind the attention blocks as 11's ring does, backward's dK|dV
 * blocking. */
typedef struct {
  double fwd, bwd, once, tp, cp, pp, dc, last_bwd;
} stage_cost;

static stage_cost cost_stage(const model *m, const mesh *x, const machine *c, int64_t s,
                             int64_t r) {
  static op o[MAXOPS];
  traffic t[NCOMM][NCOLL];
  stage_cost k = {0};
  int n = ops_of(m, x, s, r, o, MAXOPS);
  for (int i = 0; i < n; i++) {
    double sec = o[i].count * op_seconds(&o[i], c);
    *(o[i].per_micro ? (o[i].backward ? &k.bwd : &k.fwd) : &k.once) += sec;
  }
  traffic_of(m, x, s, t);
  double M = (double)x->M, L = (double)stage_layers(m, x, s), C = (double)x->n[CP];
  k.tp = axis_seconds(t[TP], x->n[TP], c, x, TP);
  if (t[CP][P2P].calls) {
    int intra;
    channel k2 = axis_link(c, x, CP, P2P, &intra);
    double hop =
        collective_seconds(P2P, x->n[CP], (double)t[CP][P2P].bytes / (double)t[CP][P2P].calls, &k2);
    double f = attention_seconds(m, x, s, r, c, 0), b = attention_seconds(m, x, s, r, c, 1);
    double hidden_f = (C - 1) * hop - f, hidden_b = (C - 1) * hop - b;
    k.cp = M * L * ((hidden_f > 0 ? hidden_f : 0) + C * hop + (hidden_b > 0 ? hidden_b : 0));
  }
  k.pp = axis_seconds(t[PP], x->n[PP], c, x, PP);
  k.dc = axis_seconds(t[DC], x->n[DP] * x->n[CP], c, x, DC);
  k.last_bwd = k.bwd / M;
  return k;
}

void predict(const model *m, const mesh *x, const machine *c, prediction *p) {
  memset(p, 0, sizeof *p);
  p->parameters = parameters_of(m);
  p->tokens = (double)m->B * (double)(m->S ? m->S : 1);
  p->model_flops = model_flops(m);
  p->hardware_flops = hardware_flops(m, x);
  int64_t P = x->n[PP], C = x->zigzag ? 1 : x->n[CP]; /* zigzag: every cp rank alike */
  /* the lessons' stages each; the planner's first, one middle and the last (the middle ones are
   * alike: the embeddings live on the first, the output layer on the last) */
  int planner = m->kind == GPT || m->kind == STATES;
  int64_t few[3] = {0, P > 2 ? 1 : P - 1, P - 1}, nstages = planner ? 3 : P;
  for (int64_t i = 1; planner && i < 3; i++) /* the fullest stage */
    if (memory_of(m, x, few[i]).total > memory_of(m, x, p->stage).total) p->stage = few[i];
  p->mem = memory_of(m, x, p->stage); /* the lessons print rank 0's */
  traffic_of(m, x, p->stage, p->t);
  if (m->kind == STATES) return;
  for (int a = 0; a < NCOMM; a++) axis_link(c, x, a, P2P, &p->intra[a]);
  stage_cost w = {0}, k;
  double worst = -1, pp = 0, once = 0, dc = 0;
  for (int64_t i = 0; i < nstages; i++)
    for (int64_t r = 0; r < C; r++) {
      k = cost_stage(m, x, c, planner ? few[i] : i, r);
      double mb = (k.fwd + k.bwd + k.tp + k.cp) / (double)x->M;
      if (mb > worst) {
        worst = mb;
        w = k;
      }
      pp = k.pp > pp ? k.pp : pp;
      once = k.once > once ? k.once : once;
      dc = k.dc > dc ? k.dc : dc;
    }
  double exposed = x->overlap ? dc - w.last_bwd : dc; /* 05's --overlap: behind the last backward */
  p->compute_s = w.fwd + w.bwd + once;
  p->once_s = once;
  p->comm_s[TP] = w.tp;
  p->comm_s[CP] = w.cp;
  p->comm_s[PP] = pp;
  p->comm_s[DC] = exposed > 0 ? exposed : 0;
  p->bubble_s = (double)(P - 1) * worst; /* 09: (pp-1) slots of the slowest stage */
  p->step_s = p->compute_s + w.tp + w.cp + pp + p->comm_s[DC] + p->bubble_s;
}

/* The axes left at 0 take the ranks left over, a prime factor at a time,
 * round-robin from tp, cp, pp, dp: 12_mesh/shape.c's rule, so that a mesh
 * planned for N ranks is the one 12 builds. */
static void fill(mesh *x, int64_t N) {
  static const int order[AXES] = {TP, CP, PP, DP};
  int64_t given = 1, left, turn = 0;
  int free_axes[AXES], nfree = 0;
  for (int a = 0; a < AXES; a++) given *= x->n[a] ? x->n[a] : 1;
  for (int k = 0; k < AXES; k++)
    if (!x->n[order[k]]) free_axes[nfree++] = order[k];
  for (int a = 0; a < AXES; a++) x->n[a] = x->n[a] ? x->n[a] : 1;
  if (N % given)
    dt_fail("the axes given (%lld ranks) do not divide %lld ranks", (long long)given, (long long)N);
  left = N / given;
  for (int64_t p = 2; nfree && left > 1; p++)
    for (; left % p == 0; left /= p) x->n[free_axes[turn++ % nfree]] *= p;
  if (mesh_size(x) != N)
    dt_fail("a mesh of %lld ranks for %lld: the axes' product must be the ranks (or --gpus)",
            (long long)mesh_size(x), (long long)N);
}

/* M microbatches of --micro sequences on each data rank; 0: as the lesson
 * runs by default (12: 2 pp with a pipeline, else 1; 09: 8), one sequence
 * a microbatch for the planner */
static void microbatches(const model *m, mesh *x, int64_t micro) {
  int64_t per = m->B / x->n[DP];
  if (micro)
    x->M = per % micro ? 0 : per / micro;
  else if (m->kind == PP09)
    x->M = 8;
  else if (m->kind == GPT || m->kind == STATES)
    x->M = per;
  else
    x->M = x->n[PP] > 1 ? 2 * x->n[PP] : 1;
}

int main(int argc, char **argv) {
  verify_keep_env(); /* --verify starts mpirun itself: MPI_Init's variables must not reach it */
  flags f = PLAN_DEFAULTS;
  dt_option options[] = {PLAN_OPTIONS(&f), DT_END};
  dt_lesson lesson = {
      "13_plan", "the cost model: predict a mesh's step time and memory, check it, plan a cluster",
      1};
  dt_comm *world = dt_init(&argc, &argv, &lesson, options);
  if (f.verify && world->size > 1)
    dt_fail("--verify starts mpirun itself: run it alone, ./13_plan/plan --verify");
  if (f.verify) {
    int bad = verify(argv[0], f.quick, f.shapes);
    dt_finalize();
    return bad ? 1 : 0;
  }
  model m;
  mesh x;
  machine c;
  if (f.measure && f.cluster)
    dt_fail("--measure measures this machine, --cluster plans for another: give one of them");
  int measuring = f.measure || !(f.predict || f.search || f.cluster); /* --cluster: predict */
  int64_t N = plan_setup(&f, measuring, world->size, &m, &x, &c);     /* ranks, or --gpus */
  if (f.search && m.kind == STATES)
    dt_fail("--search needs a model with a shape (--model or --layers ...), not --params alone");
  if (f.search) {
    search(&m, &x, &c, N, (int)f.top, f.json);
    free(c.ops);
    dt_finalize();
    return 0;
  }
  fill(&x, N);
  microbatches(&m, &x, f.micro);
  const char *why = mesh_problem(&m, &x, c.gpus_per_node);
  if (why) dt_fail("%s", why);
  int problems = measuring ? measure(world, &m, &x, &c) : 0;
  if (measuring && world->rank == 0) machine_write(f.machine, &c);
  prediction p;
  predict(&m, &x, &c, &p);
  if (f.json)
    report_json(&m, &x, &c, &p);
  else if (!f.measure || f.predict)
    report_table(&m, &x, &c, &p);
  if (measuring)
    dt_print0("%s: the ring all-reduce's alpha-beta terms: its messages and bytes per rank equal "
              "the measured ring's at every n and size (%d problem(s))\n",
              problems ? "CHECK FAILED" : "CHECK PASSED", problems);
  free(c.ops);
  dt_finalize();
  return problems ? 1 : 0;
}
