/* formulas.h: 09_pp's bytes and memory per stage as formulas of the sizes
 * alone (formulas.c): what pp.c prints beside its counters, and what
 * 13_plan predicts 09 and 12's pipeline with. The counters are the other
 * side of the check. */
#ifndef PP_FORMULAS_H
#define PP_FORMULAS_H

#include <stdint.h>

/* Bytes stage s sends per step: each of the B rows' activations forward
 * (s < N-1) and their gradients back (s > 0), D elements of es bytes. */
int64_t pp_bytes(int N, int s, int64_t B, int64_t D, int64_t es);
/* The same with V chunks a stage (interleave.h): V boundaries of the stage
 * each way, but for the first stage's first input and the last's loss */
int64_t pp_bytes_v(int N, int s, int64_t B, int64_t D, int64_t es, int64_t V);
/* The microbatches stage s holds at once: GPipe all M, 1F1B min(N - s, M). */
int64_t pp_live(int N, int s, int64_t M, int gpipe);
/* Interleaved 1F1B (interleave.h), Megatron's warm-up: min(2(N-1-s) + (V-1)N, MV) forwards */
int64_t pp_warmup_v(int N, int s, int64_t M, int V);
/* The chunk-microbatches stage s holds at once: the warm-up's and one more
 * on the first stage; on the others one more again, an input that arrives
 * (and takes its slot) while a backward still holds the last. */
int64_t pp_live_v(int N, int s, int64_t M, int V);

/* ZB-H1 (zb.h): the microbatches a stage holds until their W, min(N, M),
 * every stage: 1F1B's first stage's */
int64_t pp_live_zb(int N, int64_t M);
/* A microbatch's stash, x_0 .. x_L [R,D] and a, h [R,H] of L layers, and
 * backward's scratch (dx, dnext [R,D], dh [R,H]), in bytes */
int64_t pp_slot_bytes(int64_t L, int64_t R, int64_t D, int64_t H);
int64_t pp_scratch_bytes(int64_t R, int64_t D, int64_t H);
/* The microbatches (V > 1: chunk-microbatches) stage s holds at once
 * under its schedule: V chunks, or GPipe, 1F1B, ZB-H1 (zb) */
int64_t pp_live_any(int N, int s, int64_t M, int V, int gpipe, int zb);
/* Memory of stage s by kind, indexed by dt.h's tags (DT_PARAMS .. DT_DATA),
 * under the schedule sched = {V, gpipe, zb}: its L layers' weights (2DH
 * floats a layer), gradients, AdamW's m and v, the live microbatches'
 * stashes of R rows ((L/V+1) x RD + 2L/V x RH floats a chunk's; ZB-H1's
 * with the L x RD output gradients B keeps for W) and backward's scratch
 * (2RD + RH), the whole batch's x (first stage) and y (last: B rows). */
void pp_memory(int N, int s, int64_t L, int64_t M, int64_t R, int64_t B, int64_t D, int64_t H,
               const int sched[3], int adamw, int64_t *mem);

#endif
