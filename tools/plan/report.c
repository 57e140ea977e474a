/* report.c: the prediction as a table a person reads (the step's parts as
 * bars, bytes per axis and memory by kind beside their formulas, the
 * device's memory), or as one JSON object for scripts (--json). */
#include <stdio.h>
#include <string.h>

#include "dt.h"
#include "report.h"

/* The formulas behind each figure, as the lesson that measures it prints
 * them (formulas.c computes them; these are their words). */
static const char *bytes_how(model_kind k, int a, int coll) {
  static const char *mesh12[NCOMM] = {
      "", "M x (fwd + bwd) x RD x 4; calls: the plan's (09)", "LM(3cp-2) x 2RW x 4 (11's ring)",
      "4LM x 2(tp-1)/tp x RD x 4 (07's f and g)",
      "2(G-1)/G x L(4DW + 2DHs) x 4, G = dp x cp (05); zero 1: 06's"};
  static const char *gpt[NCOMM] = {
      "", "M x (fwd + bwd) x V x b s D x 2, /tp with sp (Megatron's p2p)",
      "LM(3cp-2) x 2 b s kv dh/tp x 2 (ring attention, K and V)",
      "(4 + 2 full) LM x 2(tp-1)/tp x b s D x 2 (Megatron; sp: AG + RS, the same bytes)",
      "ZeRO 0: 2(G-1)/G P x 2; 1: (G-1)/G P x 2 twice; 2: M RS + AG; 3: 2M AG + M RS"};
  static const char *gpt14[NCOMM][NCOLL] = {
      [PP] = {"first and last stage: 2(2-1)/2 x Vs D x 4, the tied wte (14's emb)", "", "",
              "M x (fwd + bwd) x Rs D x 4; calls: the plan's (09)"},
      [CP] = {[P2P] = "LM(3cp-2 + recompute (cp-1)) x 2RW x 4 (11's ring)"},
      [TP] = {"M((4 + 2 recompute)L + first + last) x 2(tp-1)/tp x RD x 4 (sp: the gains), "
              "+ the loss's max and sums: M x 2(tp-1)/tp x 3R x 4 (last stage)",
              "M((4 + 2 recompute)L + first + last) x (tp-1) x Rs D x 4 (sp)", "the same (sp)"},
      [DC] = {"2(G-1)/G x n x 4, n the rank's floats; zero 1: 2(G-1) S x 4",
              "zero 1: (G-1) S x 4, the stepped shards"}};
  if (k == GPT14) return gpt14[a][coll] ? gpt14[a][coll] : "";
  if (k == GPT) return gpt[a];
  if (k == MESH12) return mesh12[a];
  return k == CP11     ? "11_cp/report.c"
         : k == DP05   ? "05_dp/dp.c"
         : k == FSDP06 ? "06_fsdp/fsdp.c"
                       : "09_pp/pp.c";
}

static const char *memory_how(model_kind k, int row) {
  static const char *how[NKINDS][6] = {
      [MESH12] = {"4L(4DW + 2DHs): the stage's layers, tp shards", "the same",
                  "AdamW m, v: 8L(4DW + 2DHs); zero 1: /(dp x cp)",
                  "(live(RD + L(4RW + RA + 2RD + 2RHs)) + scratch) x 4",
                  "8RW x 4: the ring's buffers", "ends of the pipeline: 2MRD x 4"},
      [CP11] = {"L(4D^2 + 2DH) x 4", "the same", "AdamW: 2 x P x 4",
                "((6L+8)RD + (L+1)RA + (2L+1)RH + C(D+A)) x 4", "8RD x 4", "RD x 4: the targets"},
      [DP05] = {"P x 4", "P x 4", "AdamW: 2 x P x 4", "((L+1)bD + 2LbH + 2bD + bH) x 4", "", ""},
      [FSDP06] = {"ZeRO: shards, 1 gathered layer (3)", "shards + 1 layer (2, 3)", "K x LS: shards",
                  "as 05", "", ""},
      [PP09] = {"stage layers x 2DH x 4", "the same", "AdamW: 8 x the stage's",
                "live x slot + scratch", "", "ends: 2 x B x D x 4"},
      [GPT14] = {"4 x n: the layers' tp shards, the vocabulary's rows (first, last), gains, wpe",
                 "the same (zero 1: 4 x G S, padded)", "AdamW m, v: 8 x what the rank steps",
                 "(live x slot + scratch) x 4 (14_gpt/formulas.c)", "8RW x 4: the ring's buffers",
                 "M x R x 4 tokens (first stage), targets (last)"},
      [GPT] = {"2P/tp pp (bf16; ZeRO 3: /G)", "2P (ZeRO 2-3: /G)",
               "12P: fp32 master, m, v (ZeRO 1-3: /G)",
               "Korthikanti et al.: live L s b (10h/sp + ((4 + 4kv/a)h + 4F|6F)/t) + scores", "",
               ""},
      [STATES] = {"2P (ZeRO 3: /Nd)", "2P (ZeRO 2-3: /Nd)", "KP, K = 12 (ZeRO 1-3: /Nd)", "", "",
                  ""}};
  return how[k][row];
}

static void bar(const char *name, double s, double step, const char *what) {
  char b[41];
  int n = step > 0 ? (int)(40 * s / step + 0.5) : 0;
  for (int i = 0; i < 40; i++) b[i] = i < n ? '#' : ' ';
  b[40] = 0;
  dt_print0("  %-10s %12.4g s |%s| %5.1f%%  %s\n", name, s, b, step > 0 ? 100 * s / step : 0, what);
}

static double peak_all(const mesh *x, const machine *c) { return (double)mesh_size(x) * c->flops; }

/* The planner's own features, where asked: the block's variants (after
 * the heads, the MLP, the parameters) and the mesh's schedule and overlaps;
 * the lessons' lines print as they always did. */
typedef struct {
  char heads[48], mlp[16], block[64], mesh[160];
} extras;

static extras extras_of(const model *m, const mesh *x) {
  extras e = {"", "", "", ""};
  if (m->KV) snprintf(e.heads, sizeof e.heads, " (%lld key-value heads)", (long long)m->KV);
  if (m->swiglu) snprintf(e.mlp, sizeof e.mlp, " (SwiGLU)");
  if (m->llama || m->pad)
    snprintf(e.block, sizeof e.block, "; %s%s", m->llama ? "llama block" : "gpt block",
             m->pad ? ", vocabulary padded" : "");
  size_t n = 0;
  if (x->V > 1)
    n += (size_t)snprintf(e.mesh, sizeof e.mesh, ", %lld virtual stages a rank", (long long)x->V);
  if (x->first || x->last)
    n += (size_t)snprintf(e.mesh + n, sizeof e.mesh - n,
                          ", layers of the first stage %lld, the last %lld", (long long)x->first,
                          (long long)x->last);
  snprintf(e.mesh + n, sizeof e.mesh - n, "%s%s", x->sp ? ", sequence parallel" : "",
           x->tp_overlap ? ", tp overlap" : "");
  return e;
}

/* What was planned: the model, the mesh, the machine, each a line. */
static void planned(const model *m, const mesh *x, const machine *c, const prediction *p) {
  int64_t N = mesh_size(x);
  extras e = extras_of(m, x);
  dt_print0("\nmodel %s: L %lld, D %lld, heads %lld%s, MLP %lld%s, vocab %lld, S %lld; B %lld "
            "sequences a step; "
            "%.4g parameters%s\n",
            m->kind == STATES ? "given by its parameters" : m->name, (long long)m->L,
            (long long)m->D, (long long)m->A, e.heads, (long long)m->H, e.mlp, (long long)m->V,
            (long long)m->S, (long long)m->B, p->parameters, e.block);
  dt_print0(
      "mesh: dp %lld x pp %lld x cp %lld x tp %lld = %lld, M = %lld microbatches, ZeRO %d, %s, %s, "
      "recompute %s, attention %s, cp split %s%s%s\n",
      (long long)x->n[DP], (long long)x->n[PP], (long long)x->n[CP], (long long)x->n[TP],
      (long long)N, (long long)x->M, x->zero, x->bf16 ? "bf16" : "fp32",
      x->gpipe ? "gpipe"
      : x->zb  ? "zb1"
               : "1f1b",
      recompute_name[x->recompute], x->flash ? "flash" : "materialised",
      x->zigzag ? "zigzag" : "contiguous", x->overlap ? ", overlap" : "", e.mesh);
  dt_print0("machine %s (%s): %lld a node, %.4g FLOP/s peak x %.3g, %.4g B of memory at %.4g B/s; "
            "inside a node alpha %.3g s beta %.3g s/B, across alpha %.3g s beta %.3g s/B",
            c->name, c->source, (long long)c->gpus_per_node, c->flops, c->eff, c->hbm, c->hbm_bw,
            c->intra.alpha, c->intra.beta, c->inter.alpha, c->inter.beta);
  if (c->sms > 0)
    dt_print0(" a NIC, %g NICs a node; %g SMs, fused attention at %.3g of peak", c->nics, c->sms,
              c->att_eff);
  dt_print0("\n");
}

void report_table(const model *m, const mesh *x, const machine *c, const prediction *p) {
  int64_t N = mesh_size(x);
  planned(m, x, c, p);
  if (m->kind != STATES) {
    dt_print0("\nthe step, predicted (the slowest stage and cp rank; compute + communication + "
              "bubble):\n");
    bar("compute", p->compute_s, p->step_s,
        "forward, backward, data and optimizer at the rates of compute.c");
    for (int a = NCOMM - 1; a >= PP; a--) {
      char what[96];
      snprintf(what, sizeof what, "%s, %s",
               a == CP ? "forward hops hidden behind attention (11)"
               : a == DC && x->overlap && m->kind == GPT
                   ? (x->zero == 3 ? "behind the compute, a layer ahead (FSDP's prefetch)"
                                   : "behind the backward and the next forward")
               : a == DC && x->overlap ? "behind the last backward (05 --overlap)"
                                       : "blocking, as the lessons",
               p->intra[a] ? "inside a node" : "across nodes");
      bar(axis_name[a], p->comm_s[a], p->step_s, what);
    }
    char b[160];
    /* a slot: an F or B (GPipe, 1F1B), a chunk's (V > 1; 1/V as long), an F, B or W (zb1) */
    double V = x->V > 1 ? (double)x->V : 1, units = x->zb ? 3.0 * (double)x->M : V * (double)x->M;
    long long idle = (long long)(p->slots - p->busy_slots);
    snprintf(
        b, sizeof b,
        "09's plan: %lld of %lld slots idle, %.1f%% (formula (pp-1)/(%s+pp-1) = %.1f%%), slots of "
        "the other stages' compute + tp + cp",
        idle, (long long)p->slots, 100.0 * (double)idle / (double)p->slots,
        x->zb   ? "3M"
        : V > 1 ? "VM"
                : "M",
        100.0 * (double)(x->n[PP] - 1) / (units + (double)(x->n[PP] - 1)));
    bar("bubble", p->bubble_s, p->step_s, b);
    bar("step", p->step_s, p->step_s, "");
    dt_print0("  %.4g tokens/s; model FLOPs %.4g a step (6 P T + 12 L D S T), hardware %.4g; %.4g "
              "TFLOP/s a "
              "device; MFU %.1f%%, HFU %.1f%% of %.4g FLOP/s peak each\n",
              p->tokens / p->step_s, p->model_flops, p->hardware_flops,
              p->hardware_flops / p->step_s / (double)N / 1e12,
              100 * p->model_flops / (p->step_s * peak_all(x, c)),
              100 * p->hardware_flops / (p->step_s * peak_all(x, c)), c->flops);
  }
  dt_print0("\nbytes per rank per step (stage %lld), the formulas of formulas.c:\n    %-8s %-15s "
            "%8s %14s   %s\n",
            (long long)p->stage, "axis", "collective", "calls", "bytes", "formula");
  for (int a = PP; a < NCOMM; a++)
    for (int k = 0; k < NCOLL; k++)
      if (p->t[a][k].calls)
        dt_print0("    %-8s %-15s %8lld %14lld   %s\n", axis_name[a], coll_name[k],
                  (long long)p->t[a][k].calls, (long long)p->t[a][k].bytes,
                  bytes_how(m->kind, a, k));
  const int64_t *v = &p->mem.params;
  static const char *kinds[6] = {"params", "grads", "optim", "activ", "comm", "data"};
  dt_print0("memory per rank (stage %lld), bytes:\n", (long long)p->stage);
  for (int i = 0; i < 6; i++)
    if (v[i] || memory_how(m->kind, i)[0])
      dt_print0("    %-8s %16lld  %9.3f GB   %s\n", kinds[i], (long long)v[i], (double)v[i] / 1e9,
                memory_how(m->kind, i));
  dt_print0("    %-8s %16lld  %9.3f GB   of the device's %.3f GB: %s\n", "total",
            (long long)p->mem.total, (double)p->mem.total / 1e9, c->hbm / 1e9,
            (double)p->mem.total <= c->hbm ? "fits" : "DOES NOT FIT");
}

void report_json(const model *m, const mesh *x, const machine *c, const prediction *p) {
  int64_t N = mesh_size(x);
  int t = m->kind != STATES;
  double peak = p->step_s * peak_all(x, c);
  dt_print0("{\"model\": \"%s\", \"kind\": \"%s\", \"parameters\": %.17g, \"gpus\": %lld, "
            "\"machine\": \"%s\", \"stage\": %lld,\n",
            m->name, kind_name[m->kind], p->parameters, (long long)N, c->name, (long long)p->stage);
  dt_print0(" \"mesh\": {\"dp\": %lld, \"pp\": %lld, \"cp\": %lld, \"tp\": %lld, \"microbatches\": "
            "%lld, \"zero\": %d, "
            "\"recompute\": %s, \"precision\": \"%s\", \"schedule\": \"%s\", \"attention\": "
            "\"%s\", \"split\": \"%s\"",
            (long long)x->n[DP], (long long)x->n[PP], (long long)x->n[CP], (long long)x->n[TP],
            (long long)x->M, x->zero, x->recompute == RECOMPUTE_FULL ? "true" : "false",
            x->bf16 ? "bf16" : "fp32",
            x->gpipe ? "gpipe"
            : x->zb  ? "zb1"
                     : "1f1b",
            x->flash ? "flash" : "materialised", x->zigzag ? "zigzag" : "contiguous");
  if (m->kind == GPT) /* the planner's own: the recomputation's kind, the schedule, the overlaps */
    dt_print0(", \"recomputed\": \"%s\", \"virtual_stages\": %lld, \"first_stage_layers\": %lld, "
              "\"last_stage_layers\": %lld, \"sequence_parallel\": %s, \"tp_overlap\": %s, "
              "\"overlap\": %s",
              recompute_name[x->recompute], (long long)(x->V > 1 ? x->V : 1), (long long)x->first,
              (long long)x->last, x->sp ? "true" : "false", x->tp_overlap ? "true" : "false",
              x->overlap ? "true" : "false");
  dt_print0("},\n");
  if (t) {
    dt_print0(" \"step_time_s\": %.6g, \"compute_s\": %.6g, \"once_s\": %.6g, \"bubble_s\": %.6g, "
              "\"bubble_slots\": %lld, \"slots\": %lld, \"other_stages_microbatch_s\": %.6g,\n",
              p->step_s, p->compute_s, p->once_s, p->bubble_s,
              (long long)(p->slots - p->busy_slots), (long long)p->slots, p->others_s);
    dt_print0(" \"comm_s\": {\"tp\": %.6g, \"cp\": %.6g, \"pp\": %.6g, \"dp_cp\": %.6g},\n",
              p->comm_s[TP], p->comm_s[CP], p->comm_s[PP], p->comm_s[DC]);
    dt_print0(" \"tokens_per_s\": %.6g, \"model_flops_per_step\": %.6g, "
              "\"hardware_flops_per_step\": %.6g, \"mfu\": %.4f, "
              "\"hfu\": %.4f, \"tflops_per_gpu\": %.6g,\n",
              p->tokens / p->step_s, p->model_flops, p->hardware_flops, p->model_flops / peak,
              p->hardware_flops / peak, p->hardware_flops / p->step_s / (double)N / 1e12);
  } else
    dt_print0(" \"model_flops_per_step\": null, \"step_time_s\": null,\n");
  dt_print0(" \"traffic\": {");
  for (int a = PP, first = 1; a < NCOMM; a++)
    for (int k = 0; k < NCOLL; k++)
      if (p->t[a][k].calls) {
        dt_print0("%s\"%s %s\": [%lld, %lld]", first ? "" : ", ", a == DC ? "dp_cp" : axis_name[a],
                  coll_name[k], (long long)p->t[a][k].calls, (long long)p->t[a][k].bytes);
        first = 0;
      }
  dt_print0("},\n \"memory_per_gpu_bytes\": {\"params\": %lld, \"grads\": %lld, \"optim\": %lld, "
            "\"activ\": %lld, "
            "\"comm\": %lld, \"data\": %lld, \"total\": %lld},\n \"fits\": %s",
            (long long)p->mem.params, (long long)p->mem.grads, (long long)p->mem.optim,
            (long long)p->mem.activ, (long long)p->mem.comm, (long long)p->mem.data,
            (long long)p->mem.total, (double)p->mem.total <= c->hbm ? "true" : "false");
  if (t && m->kind < GPT) report_kernels(m, x); /* a lesson's: the kernels its step calls */
  dt_print0("}\n");
}
