/* options.h: 13_plan's command line: its flags, and the model, mesh and
 * machine they make (options.c). */
#ifndef PLAN_OPTIONS_H
#define PLAN_OPTIONS_H

#include "13_plan/inputs.h"

/* The command line (plan_setup makes a model, a mesh and a machine of
 * it). Model sizes left at 0 are the model's (--model). */
typedef struct {
  const char *model, *cluster, *machine, *recompute, *precision, *schedule, *attention, *split,
      *opt, *shapes, *mlp, *arch, *published, *text, *tokens;
  int64_t layers, dim, heads, ffn, vocab, seq, batch, micro, gpus, top, zero, axis[AXES];
  int64_t kv_heads, pad, virtual_stages, first, last;
  double params, eff;
  int measure, predict, search, verify, json, quick, overlap, sp, tp_overlap, verify_published;
  int dropout;
} flags;
#define PLAN_DEFAULTS                                                                              \
  {                                                                                                \
    .model = "mesh12", .machine = "build/plan/machine.json", .recompute = "none",                  \
    .precision = "fp32", .schedule = "1f1b", .attention = "flash", .opt = "adamw", .top = 10,      \
    .published = "tools/plan/published.tsv", .tokens = "char"                                      \
  }
#define PLAN_OPTIONS(f)                                                                            \
  DT_FLAG("--measure", &(f)->measure, "measure alpha, beta and every op's time here (mpirun)"),    \
      DT_FLAG("--predict", &(f)->predict, "predict the mesh's step time, bytes and memory"),       \
      DT_FLAG("--search", &(f)->search, "every mesh that fits --gpus, ranked by throughput"),      \
      DT_FLAG("--verify", &(f)->verify,                                                            \
              "run lessons 12 (05, 06, 09, 11) here, predicted vs measured; not under mpirun"),    \
      DT_FLAG("--quick", &(f)->quick, "with --verify: the shapes of at most 2 ranks only"),        \
      DT_FLAG("--verify-published", &(f)->verify_published,                                        \
              "every published run of --published planned as it ran, beside its figure; not "      \
              "under mpirun"),                                                                     \
      DT_STRING("--published", &(f)->published, NULL,                                              \
                "the published runs' file (tools/plan/published.tsv: the runs, their sources)"),   \
      DT_STRING("--shapes", &(f)->shapes, NULL,                                                    \
                "--verify only the shapes whose lesson and flags hold TEXT (09_pp; or 05,09_pp)"), \
      DT_FLAG("--json", &(f)->json, "one JSON object in place of the table"),                      \
      DT_STRING("--model", &(f)->model, NULL,                                                      \
                "mesh12 cp11 dp05 fsdp06 pp09 gpt14 (the lessons' models), gpt, gpt3-small ... "   \
                "gpt3-175b, "                                                                      \
                "llama3-8b llama3-70b llama3-405b"),                                               \
      DT_INT("--layers", &(f)->layers, 0, 1 << 20, "layers L (0: the model's)"),                   \
      DT_INT("--dim", &(f)->dim, 0, 1 << 20, "width D"),                                           \
      DT_INT("--heads", &(f)->heads, 0, 1 << 20, "attention heads"),                               \
      DT_INT("--ffn", &(f)->ffn, 0, 1 << 22, "the MLP's width (0: 4 x D)"),                        \
      DT_INT("--kv-heads", &(f)->kv_heads, 0, 1 << 20,                                             \
             "key-value heads, grouped-query attention (0: the model's; gpt: every head)"),        \
      DT_STRING("--mlp", &(f)->mlp, "gelu|swiglu",                                                 \
                "the MLP: two matrices and GELU, or SwiGLU's three (e.g. with --model gpt3-xl "    \
                "--tp 2 --cluster dgx-a100-80g)"),                                                 \
      DT_STRING("--arch", &(f)->arch, "gpt|llama",                                                 \
                "gpt: biases, learned positions, output layer tied; llama: none of them (e.g. "    \
                "with --model gpt3-xl --tp 2 --cluster dgx-a100-80g)"),                            \
      DT_INT("--vocab-pad", &(f)->pad, 0, 1 << 20,                                                 \
             "the vocabulary padded to a multiple of this x tp (Megatron's; 0: none)"),            \
      DT_INT("--vocab", &(f)->vocab, 0, 1 << 24,                                                   \
             "vocabulary (gpt; gpt14: 0, the text's, padded to a multiple of tp as 14 pads it)"),  \
      DT_STRING("--text", &(f)->text, NULL,                                                        \
                "gpt14: the text whose vocabulary is V (none: 14's default) (e.g. README.md)"),    \
      DT_STRING("--tokens", &(f)->tokens, "char|byte",                                             \
                "gpt14: the text's tokens, as 14's (e.g. with --model gpt14 --cluster "            \
                "dgx-a100-80g)"),                                                                  \
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
      DT_STRING("--recompute", &(f)->recompute, "none|selective|full",                             \
                "activation recomputation; selective: attention's S^2 part (e.g. with --model "    \
                "gpt3-xl --cluster dgx-a100-80g)"),                                                \
      DT_STRING("--precision", &(f)->precision, "fp32|bf16|fp16",                                  \
                "bf16: ZeRO's mixed precision (e.g. with --params 7.5e9 --dp 64 --gpus 64 "        \
                "--cluster dgx-a100-80g)"),                                                        \
      DT_STRING("--schedule", &(f)->schedule, "gpipe|1f1b|zb1",                                    \
                "the pipeline's schedule, 09's plans (zb1: ZB-H1)"),                               \
      DT_INT("--virtual-stages", &(f)->virtual_stages, 0, 1 << 10,                                 \
             "interleaved 1F1B: stages a rank (the bubble / V; 0: one)"),                          \
      DT_INT("--first-stage-layers", &(f)->first, 0, 1 << 20,                                      \
             "the first stage's layers (the embedding is its work too; 0: an even split)"),        \
      DT_INT("--last-stage-layers", &(f)->last, 0, 1 << 20,                                        \
             "the last stage's layers (the output layer is its work too; 0: an even split)"),      \
      DT_FLAG("--sequence-parallel", &(f)->sp,                                                     \
              "Megatron's: norms and dropout over tp (e.g. with --model gpt3-xl --tp 2 --cluster " \
              "dgx-a100-80g)"),                                                                    \
      DT_FLAG("--tp-overlap", &(f)->tp_overlap,                                                    \
              "tp's collectives behind the GEMMs (userbuffers) (e.g. with --model gpt3-xl --tp 2 " \
              "--cluster dgx-a100-80g)"),                                                          \
      DT_FLAG("--dropout", &(f)->dropout,                                                          \
              "the run drops out: its masks' bytes (Megatron's 0.1) (e.g. with --model gpt3-xl "   \
              "--tp 2 --cluster dgx-a100-80g)"),                                                   \
      DT_STRING(                                                                                   \
          "--attention", &(f)->attention, "flash|materialised",                                    \
          "scores fused, or S x S in memory (e.g. with --model gpt3-xl --cluster dgx-a100-80g)"),  \
      DT_STRING("--split", &(f)->split, "contiguous|zigzag",                                       \
                "cp's split (default: contiguous; gpt: zigzag)"),                                  \
      DT_STRING("--opt", &(f)->opt, "adamw|sgd", "the optimizer whose state is counted"),          \
      DT_FLAG("--overlap", &(f)->overlap,                                                          \
              "the sync over dp x cp behind the compute (05: behind the last backward)"),          \
      DT_STRING("--cluster", &(f)->cluster, NULL,                                                  \
                "dgx-a100-40g, dgx-a100-80g, dgx-h100-80g, dgx-h200 or a cluster file (e.g. "      \
                "dgx-a100-80g)"),                                                                  \
      DT_INT("--gpus", &(f)->gpus, 0, 1 << 24, "devices to plan for (0: the mesh's)"),             \
      DT_DOUBLE("--eff", &(f)->eff, 0, 1, "large-GEMM fraction of peak (0: the cluster's)"),       \
      DT_STRING("--machine", &(f)->machine, NULL, "the machine file --measure writes"),            \
      DT_INT("--top", &(f)->top, 1, 1000, "with --search: shapes shown")

/* The model and mesh the flags name, and the machine: --cluster's, the
 * one about to be measured, or --machine's file. Returns the ranks to plan
 * for: --gpus, the ranks measuring, or the axes' product. */
int64_t plan_setup(const flags *f, int measuring, int64_t ranks, model *m, mesh *x, machine *c);
/* The axes left at 0 from the N ranks, and M from --micro (0: the lesson's) */
void plan_mesh(const model *m, mesh *x, int64_t N, int64_t micro);
/* gpt14's vocabulary on mesh x: --vocab, or --text's, padded to a multiple
 * of tp as 14 pads it */
void plan_vocab(const flags *f, model *m, const mesh *x);

#endif
