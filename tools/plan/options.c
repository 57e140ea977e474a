/* options.c: what the command line makes: a model (the lessons' and
 * GPT-3's presets, resized by the flags), a mesh, and the machine to plan
 * for (cluster.c reads the presets and files). */
#include <string.h>

#include "12_mesh/topology.h"
#include "cluster.h"
#include "dt.h"
#include "lessons.h"
#include "options.h"

/* The models: the lessons' defaults (their own flags' defaults), GPT-3's
 * sizes (Brown et al. 2020, table 2.1: 2048 tokens, a 50257-token
 * vocabulary; batch in sequences, 0.5M to 3.2M tokens; 13B's width as 40
 * heads of 128, 5120, and XL as 16 of 128: the table's 5140 and 24 heads of
 * 128 do not make its widths); Llama 3's (Llama Team 2024, "The Llama 3 Herd
 * of Models", table 3: layers, width, FFN, heads, 8 key-value heads,
 * SwiGLU, a 128K vocabulary; 8192 tokens; 405B's 16M-token batch as 2048
 * sequences, section 3.4.1). */
static int model_preset(const char *name, model *m) {
  static const model presets[] = {
      {MESH12, "mesh12", 4, 32, 4, 128, 0, 32, 8, 0, 0, 0, 0, 0},
      {CP11, "cp11", 2, 32, 4, 128, 0, 64, 4, 0, 0, 0, 0, 0},
      {DP05, "dp05", 4, 64, 0, 256, 0, 0, 32, 0, 0, 0, 0, 0},
      {FSDP06, "fsdp06", 4, 64, 0, 256, 0, 0, 32, 0, 0, 0, 0, 0},
      {PP09, "pp09", 4, 64, 0, 256, 0, 0, 32, 0, 0, 0, 0, 0},
      {GPT, "gpt", 12, 768, 12, 3072, 50257, 2048, 256, 0, 0, 0, 0, 0},
      {GPT, "gpt3-small", 12, 768, 12, 3072, 50257, 2048, 256, 0, 0, 0, 0, 0},
      {GPT, "gpt3-medium", 24, 1024, 16, 4096, 50257, 2048, 256, 0, 0, 0, 0, 0},
      {GPT, "gpt3-xl", 24, 2048, 16, 8192, 50257, 2048, 512, 0, 0, 0, 0, 0},
      {GPT, "gpt3-2.7b", 32, 2560, 32, 10240, 50257, 2048, 512, 0, 0, 0, 0, 0},
      {GPT, "gpt3-6.7b", 32, 4096, 32, 16384, 50257, 2048, 1024, 0, 0, 0, 0, 0},
      {GPT, "gpt3-13b", 40, 5120, 40, 20560, 50257, 2048, 1024, 0, 0, 0, 0, 0},
      {GPT, "gpt3-175b", 96, 12288, 96, 49152, 50257, 2048, 1536, 0, 0, 0, 0, 0},
      {GPT, "llama3-8b", 32, 4096, 32, 14336, 128256, 8192, 2048, 0, 8, 1, 1, 0},
      {GPT, "llama3-70b", 80, 8192, 64, 28672, 128256, 8192, 2048, 0, 8, 1, 1, 0},
      {GPT, "llama3-405b", 126, 16384, 128, 53248, 128256, 8192, 2048, 0, 8, 1, 1, 0}};
  for (size_t i = 0; i < sizeof presets / sizeof *presets; i++)
    if (!strcmp(name, presets[i].name)) {
      *m = presets[i];
      return 1;
    }
  if (strcmp(name, "gpt14")) return 0;
  gpt14_model(m); /* lesson14.c: 14's defaults */
  return 1;
}

/* gpt14's V: the text's, or --vocab, padded to a multiple of tp (lesson14.c) */
void plan_vocab(const flags *f, model *m, const mesh *x) {
  if (m->kind == GPT14)
    gpt14_vocab(m, f->text, !strcmp(f->tokens, "byte"), x->n[TP] > 0 ? x->n[TP] : 1);
}

int64_t plan_setup(const flags *f, int measuring, int64_t ranks, model *m, mesh *x, machine *c) {
  if (!model_preset(f->model, m))
    dt_fail(
        "--model %s: not a model; the lessons' mesh12 cp11 dp05 fsdp06 pp09 gpt14, or gpt "
        "(--layers "
        "--dim --heads --ffn --vocab --seq), gpt3-small gpt3-medium gpt3-xl gpt3-2.7b gpt3-6.7b "
        "gpt3-13b gpt3-175b, llama3-8b llama3-70b llama3-405b",
        f->model);
  int64_t *size[] = {&m->L, &m->D, &m->A, &m->H, &m->V, &m->S, &m->B, &m->KV, &m->pad};
  const int64_t given[] = {f->layers, f->dim,   f->heads,    f->ffn, f->vocab,
                           f->seq,    f->batch, f->kv_heads, f->pad};
  for (int i = 0; i < 9; i++) {
    *size[i] = given[i] ? given[i] : *size[i];
    if (given[i] && !strchr(m->name, '+')) strcat(m->name, "+flags");
  }
  if (!f->ffn && f->dim) m->H = 4 * m->D;
  if (f->mlp) m->swiglu = !strcmp(f->mlp, "swiglu");
  if (f->arch) m->llama = !strcmp(f->arch, "llama");
  if ((f->mlp || f->arch) && !strchr(m->name, '+')) strcat(m->name, "+flags");
  if (f->params > 0)
    *m = (model){.kind = STATES, .name = "states", .params = f->params, .L = 1, .B = 1};
  if (m->A && m->D % m->A)
    dt_fail("--heads %lld does not divide --dim %lld", (long long)m->A, (long long)m->D);
  *x = (mesh){.zero = (int)f->zero,
              .recompute = !strcmp(f->recompute, "full")        ? RECOMPUTE_FULL
                           : !strcmp(f->recompute, "selective") ? RECOMPUTE_SELECTIVE
                                                                : RECOMPUTE_NONE,
              .bf16 = strcmp(f->precision, "fp32") != 0, /* fp16: the same 16-bit rate and bytes */
              .gpipe = !strcmp(f->schedule, "gpipe"),
              .zb = !strcmp(f->schedule, "zb1"),
              .flash = !strcmp(f->attention, "flash"),
              .zigzag = f->split ? !strcmp(f->split, "zigzag") : m->kind == GPT,
              .adamw = !strcmp(f->opt, "adamw"),
              .overlap = f->overlap,
              .V = f->virtual_stages,
              .first = f->first,
              .last = f->last,
              .sp = f->sp,
              .tp_overlap = f->tp_overlap,
              .dropout = f->dropout};
  int64_t product = 1;
  for (int a = 0; a < AXES; a++) {
    x->n[a] = f->axis[a];
    product *= f->axis[a] ? f->axis[a] : 1;
  }
  if (f->cluster) {
    if (!cluster_preset(f->cluster, c)) cluster_file(f->cluster, c);
  } else if (measuring) {
    *c = (machine){
        .measured = 1, .eff = 1, .gpus_per_node = ranks}; /* until --measure counts a node */
    c->ops = dt_host_alloc(MAXOPS, sizeof *c->ops);
  } else if (!machine_read(f->machine, c))
    dt_fail(
        "--machine %s: no machine file: measure this machine first (mpirun -np 2 ./13_plan/plan "
        "--measure), or plan for a cluster (--cluster dgx-h100-80g)",
        f->machine);
  if (f->eff > 0) c->eff = f->eff;
  return f->gpus ? f->gpus : measuring ? ranks : product;
}

/* The axes left at 0 take the ranks left over: 12's rule (12_mesh/topology.c),
 * so that a mesh planned for N ranks is the one 12 builds. */
static void fill(mesh *x, int64_t N) {
  int64_t given = topo_fill(x->n, N, x->n);
  if (N % given)
    dt_fail("the axes given (%lld ranks) do not divide %lld ranks", (long long)given, (long long)N);
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

void plan_mesh(const model *m, mesh *x, int64_t N, int64_t micro) {
  fill(x, N);
  microbatches(m, x, micro);
}
