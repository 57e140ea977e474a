/* plan.h: what the files of 13_plan share: a model, a mesh, a machine (a
 * measured one or a cluster's datasheet), and a prediction.
 *
 * plan.c     the cost model: a collective's alpha-beta cost, a step's
 *            compute + communication + bubble, main
 * formulas.c bytes, memory and FLOPs per rank: the lessons' printed formulas
 *            (05, 06, 09, 11, 12) and the planner's own for a GPT block
 * compute.c  the operations a step computes, and what each costs on a
 *            machine: measured here, or by the roofline of a datasheet
 * cluster.c  the presets, a user's cluster file, the machine file, models
 * measure.c  --measure: alpha and beta, the ring's terms, the collectives
 * ops.c      every op of the step timed at its shape
 * report.c   the table, the bars, --json
 * search.c   --search: every mesh that fits, ranked
 * verify.c   --verify: the lessons run here, predicted beside measured */
#ifndef PLAN_H
#define PLAN_H

#include "train.h"

enum { DP, PP, CP, TP, AXES };             /* 12's axes, slowest first: tp fastest */
enum { DC = AXES, NCOMM };                 /* DC: dp x cp, where the gradients meet */
enum { AR, AG, RS, P2P, NCOLL };           /* all-reduce, all-gather, reduce-scatter, sendrecv */
extern const char *const axis_name[NCOMM]; /* "dp", "pp", "cp", "tp", "dp x cp" */
extern const char *const coll_name[NCOLL];

/* Which code the formulas are: a lesson's, exactly as it prints them, or
 * the planner's GPT block, or model states alone (--params). */
typedef enum { MESH12, CP11, DP05, FSDP06, PP09, GPT, STATES, NKINDS } model_kind;
extern const char *const kind_name[NKINDS]; /* "mesh12", ... */

typedef struct {
  model_kind kind;
  char name[32];
  int64_t L, D, A, H, V, S; /* layers, width, heads, MLP width, vocabulary, tokens a sequence */
  int64_t B;                /* sequences (05-09: samples) per step */
  double params;            /* STATES: the parameter count given */
} model;

typedef struct {
  int64_t n[AXES], M; /* dp pp cp tp; microbatches per step */
  int zero, recompute, bf16, gpipe, flash, zigzag, adamw, overlap;
} mesh;

typedef struct {
  double alpha, beta; /* seconds per message, seconds per byte */
} channel;

enum { MAXOPS = 4096 };
typedef struct { /* an operation's time, measured at its shape */
  int k;
  int64_t s[5];
  double seconds;
} timed_op;

/* A machine: a cluster's datasheet (peak x the large-GEMM fraction, HBM,
 * NVLink inside a node, InfiniBand across), or this one as --measure found
 * it (the rates of its own ops at their shapes). */
typedef struct {
  char name[64], source[128];
  int measured;
  int64_t gpus_per_node;
  double flops, eff;    /* peak FLOP/s of one device (16-bit; fp32 on a CPU), large-GEMM fraction */
  double hbm, hbm_bw;   /* bytes of one device's memory, and its bandwidth */
  channel intra, inter; /* inside a node, across nodes (per device) */
  double swap[2];       /* measured: sendrecv both ways between computations, inside, across (s) */
  channel ar, rs, ag;   /* measured: the library's collectives, each fitted by its ring formula */
  double fit_residual;  /* measured: the ping-pong fit's worst relative residual */
  int64_t ranks, cores; /* measured: ranks of the run that measured, cores of the machine */
  timed_op *ops;        /* measured */
  int nops;
} machine;

/* One collective kind on one axis: calls and bytes per rank per step. */
typedef struct {
  int64_t calls, bytes;
} traffic;

typedef struct {
  int64_t params, grads, optim, activ, comm, data, total;
} memory;

/* What a step costs on one rank: every figure of the table and of --json. */
typedef struct {
  int64_t stage;           /* whose figures: 12 prints rank 0's, the planner the worst */
  traffic t[NCOMM][NCOLL]; /* per rank per step */
  memory mem;
  double parameters;                                         /* of the whole model */
  double compute_s, comm_s[NCOMM], bubble_s, once_s, step_s; /* once: data, optimizer */
  double model_flops, hardware_flops, tokens;
  int intra[NCOMM]; /* each axis's group inside one node */
  char why[160];    /* when it cannot run: what stops it */
} prediction;

/* The command line (cluster.c's plan_setup makes a model, a mesh and a
 * machine of it). Model sizes left at 0 are the model's (--model). */
typedef struct {
  const char *model, *cluster, *machine, *recompute, *precision, *schedule, *attention, *split,
      *opt, *shapes;
  int64_t layers, dim, heads, ffn, vocab, seq, batch, micro, gpus, top, zero, axis[AXES];
  double params, eff;
  int measure, predict, search, verify, json, quick, overlap;
} flags;
#define PLAN_DEFAULTS                                                                              \
  {                                                                                                \
    .model = "mesh12", .machine = "build/plan/machine.json", .recompute = "none",                  \
    .precision = "fp32", .schedule = "1f1b", .attention = "flash", .opt = "adamw", .top = 10       \
  }
#define PLAN_OPTIONS(f)                                                                            \
  DT_FLAG("--measure", &(f)->measure, "measure alpha, beta and every op's time here (mpirun)"),    \
      DT_FLAG("--predict", &(f)->predict, "predict the mesh's step time, bytes and memory"),       \
      DT_FLAG("--search", &(f)->search, "every mesh that fits --gpus, ranked by throughput"),      \
      DT_FLAG("--verify", &(f)->verify,                                                            \
              "run lessons 12 (05, 06, 09, 11) here, predicted vs measured; not under mpirun"),    \
      DT_FLAG("--quick", &(f)->quick, "with --verify: the shapes of at most 2 ranks only"),        \
      DT_STRING("--shapes", &(f)->shapes, NULL,                                                    \
                "--verify only the shapes whose lesson and flags hold TEXT (e.g. 09_pp)"),         \
      DT_FLAG("--json", &(f)->json, "one JSON object in place of the table"),                      \
      DT_STRING(                                                                                   \
          "--model", &(f)->model, NULL,                                                            \
          "mesh12 cp11 dp05 fsdp06 pp09 (the lessons' models), gpt, gpt3-small ... gpt3-175b"),    \
      DT_INT("--layers", &(f)->layers, 0, 1 << 20, "layers L (0: the model's)"),                   \
      DT_INT("--dim", &(f)->dim, 0, 1 << 20, "width D"),                                           \
      DT_INT("--heads", &(f)->heads, 0, 1 << 20, "attention heads"),                               \
      DT_INT("--ffn", &(f)->ffn, 0, 1 << 22, "the MLP's width (0: 4 x D)"),                        \
      DT_INT("--vocab", &(f)->vocab, 0, 1 << 24, "vocabulary (gpt)"),                              \
      DT_INT("--seq", &(f)->seq, 0, 1 << 24, "tokens a sequence"),                                 \
      DT_INT("--batch", &(f)->batch, 0, 1 << 24, "sequences per step, all ranks"),                 \
      DT_INT("--micro", &(f)->micro, 0, 1 << 24, "sequences per microbatch (0: the lesson's M)"),  \
      DT_DOUBLE("--params", &(f)->params, 0, 1e16, "a model by its parameter count: states only"), \
      DT_INT("--dp", &(f)->axis[DP], 0, 1 << 24, "data-parallel ranks (0: from the ranks left)"),  \
      DT_INT("--pp", &(f)->axis[PP], 0, 1 << 24, "pipeline stages (0: from the ranks left)"),      \
      DT_INT("--cp", &(f)->axis[CP], 0, 1 << 24,                                                   \
             "context-parallel ranks (0: from the ranks left)"),                                   \
      DT_INT("--tp", &(f)->axis[TP], 0, 1 << 24,                                                   \
             "tensor-parallel ranks (0: from the ranks left)"),                                    \
      DT_INT("--zero", &(f)->zero, 0, 3, "ZeRO stage over dp x cp"),                               \
      DT_STRING("--recompute", &(f)->recompute, "none|full",                                       \
                "activation recomputation (e.g. with --model gpt3-xl --cluster dgx-a100-80g)"),    \
      DT_STRING("--precision", &(f)->precision, "fp32|bf16",                                       \
                "bf16: ZeRO's mixed precision (e.g. with --params 7.5e9 --dp 64 --gpus 64 "        \
                "--cluster dgx-a100-80g)"),                                                        \
      DT_STRING("--schedule", &(f)->schedule, "gpipe|1f1b", "the pipeline's schedule (09)"),       \
      DT_STRING(                                                                                   \
          "--attention", &(f)->attention, "flash|materialised",                                    \
          "scores fused, or S x S in memory (e.g. with --model gpt3-xl --cluster dgx-a100-80g)"),  \
      DT_STRING("--split", &(f)->split, "contiguous|zigzag",                                       \
                "cp's split (default: contiguous; gpt: zigzag)"),                                  \
      DT_STRING("--opt", &(f)->opt, "adamw|sgd", "the optimizer whose state is counted"),          \
      DT_FLAG("--overlap", &(f)->overlap, "the gradients' sync behind the last backward (05)"),    \
      DT_STRING("--cluster", &(f)->cluster, NULL,                                                  \
                "dgx-a100-80g, dgx-h100-80g or a cluster file (e.g. dgx-a100-80g)"),               \
      DT_INT("--gpus", &(f)->gpus, 0, 1 << 24, "devices to plan for (0: the mesh's)"),             \
      DT_DOUBLE("--eff", &(f)->eff, 0, 1, "large-GEMM fraction of peak (0: the cluster's)"),       \
      DT_STRING("--machine", &(f)->machine, NULL, "the machine file --measure writes"),            \
      DT_INT("--top", &(f)->top, 1, 1000, "with --search: shapes shown")

/* plan.c */
double collective_seconds(int coll, int64_t n, double bytes, const channel *k);
void predict(const model *m, const mesh *x, const machine *c, prediction *p);
int64_t mesh_size(const mesh *x);

/* formulas.c: per rank per step, each cited to the lesson that prints it */
void traffic_of(const model *m, const mesh *x, int64_t stage, traffic t[NCOMM][NCOLL]);
memory memory_of(const model *m, const mesh *x, int64_t stage);
double parameters_of(const model *m);
double model_flops(const model *m);                   /* per step: 6 x P x tokens + attention */
double hardware_flops(const model *m, const mesh *x); /* with recomputation */
int64_t stage_layers(const model *m, const mesh *x, int64_t stage);
int64_t rows_per_micro(const model *m, const mesh *x); /* R, a microbatch's rows on a rank */
const char *mesh_problem(const model *m, const mesh *x, int64_t gpus_per_node); /* NULL: ok */

/* compute.c: one stage's operations of a step, and their cost */
typedef struct {
  int k;               /* the kernel: GEMM, MLP_F, ..., below */
  int64_t s[5];        /* its shape */
  double count;        /* per step */
  double flops, bytes; /* of one call */
  int per_micro;       /* in every microbatch's forward or backward (else once a step) */
  int backward;
} op;
enum {
  GEMM,
  MLP_F,
  MLP_B,
  ATT_F,
  ATT_B,
  EW,
  LOSS,
  DATA05,
  DATA11,
  ADAMW,
  SGD,
  FLASH,
  ALLOC,
  NKERNELS
};
extern const char *const kernel_name[NKERNELS];
int ops_of(const model *m, const mesh *x, int64_t stage, int64_t cprank, op *out, int max);
double op_seconds(const op *o, const machine *c); /* one call */
double attention_seconds(const model *m, const mesh *x, int64_t stage, int64_t cprank,
                         const machine *c, int backward); /* one microbatch, one layer */

/* cluster.c */
int64_t plan_setup(const flags *f, int measuring, int64_t ranks, model *m, mesh *x, machine *c);
int cluster_preset(const char *name, machine *c); /* 0: no such preset */
void cluster_file(const char *path, machine *c);  /* key = value; dt_fail on error */
void machine_write(const char *path, const machine *c);
int machine_read(const char *path, machine *c); /* 0: no file */
channel axis_link(const machine *c, const mesh *x, int axis, int coll, int *intra);

/* ops.c: one op's time here (the fastest of `trials`); every op of the
 * mesh's step into c->ops (collective over world) */
double op_time(const op *o, const model *m, int trials);
void time_ops(dt_comm *world, const model *m, const mesh *x, machine *c);

/* measure.c: collective over world; fills c (every rank), ends with the
 * check of the ring's alpha-beta terms: returns the problems found */
int measure(dt_comm *world, const model *m, const mesh *x, machine *c);
double quartile(double *t, int n); /* the lower quartile of n times (sorts them) */

/* report.c */
void report_table(const model *m, const mesh *x, const machine *c, const prediction *p);
void report_json(const model *m, const mesh *x, const machine *c, const prediction *p);

/* search.c */
int search(const model *m, const mesh *base, const machine *c, int64_t gpus, int top, int json);

/* verify.c */
void verify_keep_env(void); /* before MPI_Init: the launcher's variables are not a child's */
int verify(const char *self, int quick, const char *only);

#endif
