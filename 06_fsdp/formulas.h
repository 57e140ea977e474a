/* formulas.h: 06_fsdp's bytes and memory per rank as formulas of the sizes
 * alone (formulas.c): what fsdp.c prints beside its counters (and 08 beside
 * its own), and what 13_plan predicts 06 with. The counters are the other
 * side of the check. */
#ifndef FSDP_FORMULAS_H
#define FSDP_FORMULAS_H

#include <stdint.h>

enum {
  FSDP_GATHER,
  FSDP_SCATTER,
  FSDP_REDUCE,
  FSDP_KINDS
}; /* all-gather, reduce-scatter, all-reduce */
/* One rank's calls and bytes per step at ZeRO stage `zero`: L layers, each
 * a shard of S elements (es bytes) over N ranks. The ring moves (N-1) S
 * elements per gather or scatter of a layer; stages 1 and 2 gather the
 * stepped shards once per step taken (took of `steps`: fp16 skips some). */
void fsdp_traffic(int64_t L, int64_t N, int64_t S, int64_t es, int zero, int64_t took,
                  int64_t steps, int64_t calls[FSDP_KINDS], int64_t bytes[FSDP_KINDS]);
/* Memory per rank by kind, indexed by dt.h's tags (DT_PARAMS .. DT_COMMBUF):
 * the shards, and what is whole at the worst moment (NS = N S floats a
 * layer, 0 on one rank; stage 3 with --prefetch holds two gathered layers),
 * AdamW's m and v of the shards, the activations of b rows as 05's, and the
 * 16-bit copies that travel (comm, in 16 bits only). */
void fsdp_memory(int64_t L, int64_t N, int64_t S, int64_t D, int64_t H, int64_t b, int zero,
                 int prefetch, int adamw, int half, int64_t *mem);

#endif
