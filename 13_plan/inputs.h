/* inputs.h: what the cost model (cost.c) is asked about: a model, a mesh
 * and a machine (a measured one or a cluster's datasheet); and whether the
 * model can run on the mesh at all (a refusal, and its sentence). */
#ifndef PLAN_INPUTS_H
#define PLAN_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "12_mesh/topology.h" /* 12's axes (DP ... TP, DC = dp x cp) and their names */

enum { AR, AG, RS, P2P, NCOLL }; /* all-reduce, all-gather, reduce-scatter, sendrecv */
extern const char *const coll_name[NCOLL];

/* Which code the formulas are: a lesson's, exactly as it prints them (14's
 * GPT among them), or the planner's GPT block, or model states alone
 * (--params). */
typedef enum { MESH12, CP11, DP05, FSDP06, PP09, GPT14, GPT, STATES, NKINDS } model_kind;
extern const char *const kind_name[NKINDS]; /* "mesh12", ... */

typedef struct {
  model_kind kind;
  char name[32];
  int64_t L, D, A, H, V, S; /* layers, width, heads, MLP width, vocabulary, tokens a sequence */
  int64_t B;                /* sequences (05-09: samples) per step */
  double params;            /* STATES: the parameter count given */
  int64_t KV;               /* key-value heads (grouped-query attention); 0: A */
  int swiglu;               /* the MLP: three matrices (gate, up, down) in place of two and GELU */
  int llama;                /* no biases, no learned positions, the output layer its own */
  int64_t pad; /* the vocabulary padded to a multiple of pad x tp (Megatron's); 0: none */
} model;

enum { RECOMPUTE_NONE, RECOMPUTE_FULL, RECOMPUTE_SELECTIVE }; /* selective: attention's S^2 part */
extern const char *const recompute_name[3];                   /* "none", "full", "selective" */

typedef struct {
  int64_t n[AXES], M; /* dp pp cp tp; microbatches per step */
  int zero, recompute, bf16, gpipe, flash, zigzag, adamw, overlap;
  int zb;              /* --schedule zb1: ZB-H1 (09_pp/zb.h) */
  int64_t V;           /* virtual stages a rank (interleaved 1F1B); 0 or 1: one */
  int64_t first, last; /* the first and the last stage's layers (0: an even split) */
  int sp, tp_overlap;  /* Megatron's sequence parallelism; tp's collectives behind the GEMMs */
  int dropout;         /* the run drops out: masks written and read (Megatron's 0.1 defaults) */
} mesh;

int64_t mesh_size(const mesh *x);
int64_t stage_layers(const model *m, const mesh *x, int64_t stage);
int64_t rows_per_micro(const model *m, const mesh *x); /* R, a microbatch's rows on a rank */

/* One collective kind on one axis: calls and bytes per rank per step. */
typedef struct {
  int64_t calls, bytes;
} traffic;

typedef struct {
  double alpha, beta; /* seconds per message, seconds per byte */
} channel;

enum { MAXOPS = 4096 };
typedef struct { /* an operation's time, measured at its shape */
  int k;         /* compute.h's kernel */
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
  double sms, att_eff;  /* a datasheet's: SMs (the GEMM's waves), the fused attention's fraction */
  double hbm, hbm_bw;   /* bytes of one device's memory, and its bandwidth */
  channel intra, inter; /* inside a node (a GPU's NVLink), across nodes (one NIC) */
  double nics;          /* a datasheet's: NICs a node */
  double swap[2];       /* measured: sendrecv both ways between computations, inside, across (s) */
  channel ar, rs, ag;   /* measured: the library's collectives, each fitted by its ring formula */
  double fit_residual;  /* measured: the ping-pong fit's worst relative residual */
  int64_t ranks, cores; /* measured: ranks of the run that measured, cores of the machine */
  timed_op *ops;        /* measured */
  int nops;
} machine;

/* What stops a model on a mesh: what each lesson refuses, and for the
 * planner what does not divide or does not fit a node. Each has one
 * sentence, in inputs.c's table. */
typedef enum {
  RUNS,         /* nothing stops it */
  ONE_AXIS,     /* a one-axis lesson (11, 05, 06, 09) given other axes */
  TP_HEADS,     /* tp does not divide the heads or the MLP */
  PP_LAYERS,    /* pp does not divide the layers (09 splits them unevenly) */
  SEQ_CHUNKS,   /* the sequence does not split into cp's chunks */
  BATCH_MICRO,  /* the batch does not split into dp x M */
  SP_ROWS,      /* 14's sequence parallelism: a microbatch's rows do not split over tp */
  BATCH_DP,     /* the batch does not divide over dp (--search's own test) */
  TP_NODE,      /* the planner's rule: tp inside a node */
  LESSONS_FP32, /* the lessons train fp32, no recomputation, attention by blocks */
  ZERO_12,      /* 12 shards the optimizer alone */
  ZERO_06,      /* ZeRO stages are 06's (and 12's --zero 1) */
  RING_FLASH,   /* ring attention needs attention by blocks */
  KV_HEADS,     /* the key-value heads do not divide the heads, or tp does not divide them */
  STAGES,       /* uneven stages or virtual stages that do not split the layers */
  SCHEDULE,     /* a schedule the lesson does not run (09's interleaved 1F1B, ZB-H1) */
  GPT_ONLY,     /* a feature of the planner's GPT block asked of a lesson's model */
  ZB_RECOMPUTE, /* 14's zb1 with --recompute: B's kept gradients need the layer's activations */
  NREFUSALS
} mesh_refusal;
mesh_refusal mesh_problem(const model *m, const mesh *x, int64_t gpus_per_node);
/* r's sentence with this model's and mesh's numbers, into out */
void refusal_text(mesh_refusal r, const model *m, const mesh *x, int64_t gpus_per_node, char *out,
                  size_t size);

#endif
