# The mutation suite: is the self-check able to fail?
#
# Each mutant is a realistic bug planted in a copy of one source file (a
# lesson's, or common's) by a perl substitution; the tree itself never holds
# it. The copy is compiled, linked with the normal common library (a mutated
# common file takes precedence over its archive member), and the lesson runs
# with its default settings at NP 2 and 4. The bug is caught when every run
# ends in the lesson's "CHECK FAILED" with exit code 1: not a crash, not a
# hang. CHECKING.md explains the criterion and why some mutants run with SGD.
#
# A substitution that no longer matches the source fails loudly, so a
# refactoring cannot silently retire a mutant: update the pattern instead.
MUT_DIR=${MUT_DIR:-build/mutants}
MUT_CAUGHT=0
MUT_TOTAL=0
# build_copy (tests/lib.sh) builds each mutated copy

# mutant ID LESSON_DIR FILE PERL_SUBSTITUTION DESCRIPTION -- ARGS...
# At NP 2 and 4, or at the NPs of MUT_NPS (a bug that needs several axes).
# Caught: CHECK FAILED and exit 1, or what MUT_WANT and MUT_RC say instead
# (a bug that deadlocks: the watchdog's diagnosis, the job's exit code 3);
# MUT_ALSO: a line the output must hold besides, the hint the bug earns.
mutant() {
  local id=$1 lesson=$2 file=$3 subst=$4 desc=$5 name rc
  shift 5
  [ "${1:-}" = "--" ] && shift
  name=$(basename "$lesson"); name=${name#*_}
  MUT_TOTAL=$((MUT_TOTAL + 1))
  build_copy "$MUT_DIR/$id" "$lesson" "$file" "$subst"
  rc=$?
  if [ $rc = 2 ]; then
    fail "mutant $id ($desc): the substitution no longer matches $file" "" "update it in tests/suite_mutants.sh"
    return
  elif [ $rc != 0 ]; then
    fail "mutant $id ($desc): does not build" "$MUT_DIR/$id/build.log"
    return
  fi
  local before=$FAILED np
  for np in ${MUT_NPS:-2 4}; do
    check "mutant $id np=$np: $desc" "$np" "${MUT_RC:-1}" "${MUT_WANT:-CHECK FAILED}" \
      ${MUT_ALSO:+"$MUT_ALSO"} -- "./$MUT_DIR/$id/$name" "$@"
  done
  [ "$FAILED" = "$before" ] && MUT_CAUGHT=$((MUT_CAUGHT + 1))
}

# unit_mutant ID HEADER PERL_SUBSTITUTION DESCRIPTION TEST: a bug in a body
# a lesson and its one-process yardstick share (moe_core.h, attn_core.h:
# reference_moe.c and reference_attn.c run the lessons' arithmetic), which
# the lesson's check, comparing the two, cannot see. Every common file that
# includes HEADER, and tests/TEST.c, is compiled beside the mutated copy
# (its #include "..." finds the copy first) and linked before the common
# libraries; the unit test, whose plain loops and finite differences share
# nothing with the header, must end UNIT FAILED (exit 1) at NP 1, with
# MUT_ALSO's line: the check that saw it.
unit_mutant() {
  local id=$1 header=$2 subst=$3 desc=$4 test=$5 dir=$MUT_DIR/$1 src o objs=()
  MUT_TOTAL=$((MUT_TOTAL + 1))
  mkdir -p "$dir"
  cp "$header" "$dir/"
  perl -0pi -e "$subst" "$dir/$(basename "$header")"
  if cmp -s "$header" "$dir/$(basename "$header")"; then
    fail "mutant $id ($desc): the substitution no longer matches $header" "" "update it in tests/suite_mutants.sh"
    return
  fi
  : >"$dir/build.log"
  for src in $(grep -l "#include \"$(basename "$header")\"" common/*/*.c) "tests/$test.c"; do
    cp "$src" "$dir/"
    o=$dir/$(basename "${src%.c}").o
    mpicc -O2 -std=c11 ${BLAS_CFLAGS:-} -I. -Icommon/comm -Icommon/train -Itests -c "$dir/$(basename "$src")" \
      -o "$o" >>"$dir/build.log" 2>&1 || { fail "mutant $id ($desc): does not build" "$dir/build.log"; return; }
    objs+=("$o")
  done
  mpicc "${objs[@]}" "$BUILD_DIR/libdttrain.a" "$BUILD_DIR/libdtcomm.a" -Wl,--allow-multiple-definition \
    -o "$dir/$test" ${BLAS_LIBS:--lopenblas} -lm -pthread >>"$dir/build.log" 2>&1 ||
    { fail "mutant $id ($desc): does not build" "$dir/build.log"; return; }
  local before=$FAILED
  check "mutant $id np=1: $desc" 1 1 'UNIT FAILED' ${MUT_ALSO:+"$MUT_ALSO"} -- "./$dir/$test"
  [ "$FAILED" = "$before" ] && MUT_CAUGHT=$((MUT_CAUGHT + 1))
}

BUILD_DIR=build/${BACKEND:-cpu}
if [ "${BACKEND:-cpu}" != cpu ]; then
  echo "SKIP mutants: they are built for the cpu backend (this run: ${BACKEND})"
else
  # The harness itself must not change a result: unmutated copies pass.
  for file in 05_dp/dp.c common/train/data.c; do
    build_copy "$MUT_DIR/control-${file//\//-}" 05_dp "$file"
    check "mutants: an unmutated copy of $file built by the harness passes" 2 0 'CHECK PASSED' -- \
      "./$MUT_DIR/control-${file//\//-}/dp" --optimizer adamw
  done

  mutant 03-ring 03_all_reduce 03_all_reduce/all_reduce.c \
    's/ring_step\(c, buf, count, mod\(r - s, n\)/ring_step(c, buf, count, mod(r + 1 - s, n)/' \
    "ring reduce-scatter sends the wrong chunk"
  mutant 04-seed 04_sampler common/comm/sampler.c \
    's/dt_shuffle\(n, s->seed, epoch, order\)/dt_shuffle(n, s->seed + (uint64_t)s->rank, epoch, order)/' \
    "each rank shuffles with its own seed"
  mutant 05-sum 05_dp 05_dp/buckets.c \
    's/k->op = dt_wire_op\(&k->wire, DT_AVG\)/k->op = DT_SUM/' \
    "gradients summed, not averaged" -- --optimizer sgd
  mutant 05-bucket 05_dp 05_dp/dp.c \
    's/(exercise: averaging the gradients across ranks \*\/\n  for \(bucket \*k = m->bk\.b; k < m->bk\.b \+ m->bk\.n)/$1 - 1/' \
    "the last bucket is never all-reduced"
  mutant 05-zero 05_dp 05_dp/dp.c \
    's/  dt_zero\(m->g, \(size_t\)m->P \* 4\);\n//' \
    "gradients not zeroed between steps" -- --optimizer sgd
  mutant 05-sampler 05_dp 05_dp/dp.c \
    's/m->world->rank, step, m->samples\)/0, step, m->samples)/' \
    "every rank trains on rank 0's samples"
  mutant 05-replica 05_dp common/train/run.c \
    's/    dt_optimizer_step\(c, s->w/    if (r->world->rank == 0) dt_optimizer_step(c, s->w/' \
    "only rank 0 steps its replica (a broadcast forgotten)"
  mutant 05-unscale 05_dp common/train/run.c \
    's/dt_grad_scale\(c, used, sq\)/dt_grad_scale(c, 1.0, sq)/' \
    "fp16 loss scale never divided out" -- --precision fp16 --optimizer sgd
  mutant 05-topk 05_dp 05_dp/compress.c \
    's/dt_add\(t->residual, g, P\);/dt_copy(t->residual, g, P * 4);/' \
    "top-k residual not fed back" -- --compress topk:0.01
  mutant 06-offset 06_fsdp 06_fsdp/shard.c \
    's/\*lo = f->comm->rank \* f->S;/*lo = f->comm->rank * f->S + 1;/' \
    "a shard's offset off by one element"
  mutant 06-sum 06_fsdp 06_fsdp/shard.c \
    's/f->op = dt_wire_op\(&f->wire, DT_AVG\)/f->op = DT_SUM/' \
    "gradients reduce-scattered as sums, not averages" -- --optimizer sgd
  mutant 06-moments 06_fsdp common/train/run.c \
    's/dt_optimizer_step\(c, s->w, s->g, s->m, s->v,/dt_optimizer_step(c, s->w, s->g, r->seg[0].m, r->seg[0].v,/' \
    "every layer's shard uses layer 0's AdamW moments" -- --optimizer adamw --zero 1
  mutant 07-f 07_tp 07_tp/tensor.c \
    's/  tp_sum\(tp, wire, act->dx, n\);\n//' \
    "TP backward all-reduce (f) omitted"
  mutant 07-residual 07_tp 07_tp/tensor.c \
    's/(  tp_sum\(tp, wire, dt_acts_x\(act, l \+ 1\), n\);\n)(  dt_add\([^\n]*\n)/$2$1/' \
    "residual added to every rank's partial sum"
  mutant 07-shard 07_tp 07_tp/tensor.c \
    's/by_rows \? t \* rows \* x->cols : t \* cols/by_rows ? 0 : t * cols/' \
    "every shard's W2 rows placed at shard 0's"
  # ReLU's decisions near 0, replayed by the check (CHECKING.md): a replay
  # that meets the wrong rows, or replays the wrong side, must fail, not pass
  MUT_ALSO='FAIL ReLU: [0-9]+ pre-activations near 0 in one run only, more than rounding' mutant 07-kinks 07_tp 07_tp/tp.c \
    's/\{r->kinks, m->samples, 0, m->world->rank \* m->Hs\}/{r->kinks, m->samples, 0, 0}/' \
    "every tp rank records its hidden units as the first slice's: the check's keys wrong"
  MUT_ALSO='FAIL ReLU: [0-9]+ ReLU decisions near 0 fell apart, more than rounding flips' mutant 05-kinks 05_dp common/train/kinks.c \
    's/c->unit0 \+ h\[i\]\.j, h\[i\]\.a,/c->unit0 + h[i].j, -h[i].a,/' \
    "the run's pre-activations near 0 recorded with the wrong sign: every one replayed the wrong way"
  mutant 08-mesh 08_fsdp_tp 08_fsdp_tp/fsdp_tp.c \
    's/tp_forward\(&m->act, l, w, w \+ m->D \* m->Hs, m->tp,/tp_forward(&m->act, l, w, w + m->D * m->Hs, m->col,/' \
    "TP sum over the FSDP column instead of the TP row"
  mutant 08-avg 08_fsdp_tp 06_fsdp/shard.c \
    's/f->op = dt_wire_op\(&f->wire, DT_AVG\)/f->op = DT_SUM/' \
    "FSDP gradients summed over the rows, not averaged (06's piece, composed)" -- --optimizer sgd --tp 1
  mutant 09-scale 09_pp 09_pp/pp.c \
    's/1\.0 \/ \(\(double\)r->c\.batch \* D\)/1.0 \/ ((double)R * D)/' \
    "micro-batch losses not scaled by 1/M (last stage only)" -- --optimizer sgd
  mutant 09-order 09_pp 09_pp/pp.c \
    's/m->bx \+ a->mb \* R \* D/m->bx + (a->mb + 1) % m->M * R * D/' \
    "micro-batches fed out of order (first stage only)"
  # interleaved 1F1B (--virtual-stages): chunk c's layers run last to first
  # in its forward (its backward right), with 2 layers a chunk or more
  MUT_ALSO="^CHECK FAILED: .*\\(step 1: " mutant 09-chunk-order 09_pp 09_pp/pp.c \
    's/(float \*w = m->w \+ layer_offset\(m, c \* m->Lc \+ )l\);/$1m->Lc - 1 - l);/' \
    "a chunk's layers run in the wrong order in its forward (interleaved)" -- --virtual-stages 2 --layers 16
  # a virtual stage's activations sent two stages on, to a rank that waits
  # for another: the watchdog names the stuck exchange
  hang09='^watchdog: rank [0-9]+ stuck for 5 s in sendrecv #[0-9]+ on the world communicator .*called from 09_pp/schedule.c'
  MUT_NPS=4 MUT_WANT=$hang09 MUT_RC=3 mutant 09-ring 09_pp 09_pp/interleave.c \
    's/return v == N \* V - 1 \? DT_NOBODY : \(s \+ 1\) % N;/return v == N * V - 1 ? DT_NOBODY : (s + 2) % N;/' \
    "a virtual stage's activations sent to stage s + 2, not s + 1 (interleaved)" \
    -- --virtual-stages 2 --layers 8 --timeout 5
  # ZB-H1 (--schedule zb1): a W made ready by its microbatch's F, not its B:
  # the weights' gradients from a backward that has not run
  MUT_ALSO="^lockstep: step 1 is off .*: a gradient is off" mutant 09-zb-early 09_pp 09_pp/zb.c \
    "s/\\*nb \\+= a->type == 'B';/*nb += a->type == 'F';/" \
    "a W run before its B: the weights' gradients from a backward not yet run (zb1)" -- --schedule zb1
  mutant 10-rank 10_ep 10_ep/ep.c \
    's/return e \/ m->El;/return e % m->N;/; s/return e % m->El;/return e \/ m->N;/' \
    "tokens sent to rank e mod N, where the experts live in blocks of E/N"
  mutant 10-scale 10_ep 10_ep/ep.c \
    's/  if \(m->N > 1\) dt_scale\(m->eg[^\n]*\n//' \
    "expert gradients not scaled by 1/N (N times too large)" -- --optimizer sgd
  mutant 10-gate 10_ep 10_ep/ep.c \
    's/(  dt_moe_gate_backward\([^;]*;\n)/$1  dt_zero(q->dgate, (size_t)(R * k) * 4);\n/' \
    "the gates' gradient dropped: the router learns from the balance loss alone"
  mutant 10-combine 10_ep 10_ep/ep.c \
    's/reorder\(m, q, m->recv, m->xe, 0\);\n  exchange\(m, COMBINE, m->recv,/exchange(m, COMBINE, m->xe,/' \
    "results combined in expert-major order, the reorder not undone"
  mutant 10-drop 10_ep 10_ep/ep.c \
    's/(  dt_moe_combine\(x, q->gate, q->ret, q->dpos, R, k, D, x \+ R \* D\);\n)/$1  for (int64_t i = 0; i < R * k; i++)\n    if (q->pos[i] < 0) memset(x + R * D + i \/ k * D, 0, (size_t)D * 4);\n/' \
    "a dropped token given zeros instead of its residual"
  mutant 10-aux 10_ep 10_ep/ep.c \
    's/  dt_all_reduce\(m->world, m->dchosen[^\n]*\n//; s/r->c\.batch \* m->k/m->R * m->k/' \
    "the load-balancing loss from this rank's counts only"
  mutant 10-scale16 10_ep 10_ep/ep.c \
    's/m->chosen \+ l \* E, r->scaler\.scale,/m->chosen + l * E, 1.0,/' \
    "fp16: the balance loss's gradient not multiplied by the loss scale (the task's is)" -- --precision fp16
  mutant 11-rescale 11_cp 11_cp/ring.c \
    's/sa = expf\(lse\[i\] - mx\)/sa = lse[i] > -INFINITY/' \
    "a block merged without rescaling the running sum to the new max"
  mutant 11-mask 11_cp 11_cp/ring.c \
    's/ck == cq, a->ob, a->lseb/0, a->ob, a->lseb/' \
    "the diagonal block unmasked (forward): a token sees the ones after it"
  mutant 11-zigzag 11_cp 11_cp/ring.c \
    's/2 \* a->N - 1 - s : s/2 * a->N - 2 - s : s/' \
    "a zigzag chunk index off by one" -- --split zigzag
  mutant 11-home 11_cp 11_cp/ring.c \
    's/if \(backward && N > 1\)/if (backward \&\& hop < N - 1)/' \
    "dK and dV not returned to their owner (the last hop skipped)"
  mutant 11-allreduce 11_cp 11_cp/cp.c \
    's/  dt_all_reduce\(m->world, g, g,[^\n]*\n//' \
    "gradients not all-reduced over the context ranks"
  mutant 11-positions 11_cp 11_cp/ring.c \
    's/D, cp_chunk\(a, a->rank, i \/ C\) \* C \+ i % C\)/D, i)/' \
    "positions computed after the split (from the local index)"
  mutant 11-stale 11_cp 11_cp/ring.c \
    's/(  dt_copy\(kv, k,)/  if (!backward)\n$1/; s/(  dt_copy\(kv \+ RW, v,)/  if (!backward)\n$1/' \
    "backward's ring not refilled with this layer's K and V: stale keys from forward"
  mutant 11-ulysses 11_cp 11_cp/ulysses.c \
    's/cp_chunk\(&m->cr, s, j\) \* m->C\) \* \(m->D/j * m->C) * (m->D/' \
    "Ulysses: rows placed by their local chunk, not their position in the sequence" -- --ulysses
  # 12_mesh: bugs of composition, each on a mesh where its axis is real (the
  # free axes fill tp, then cp: NP 2 --cp 2 is cp 2, NP 4 --cp 2 is cp 2 x tp 2)
  MUT_ALSO='copies of its weights DIFFER' mutant 12-dponly 12_mesh 12_mesh/mesh.c \
    's/dt_all_reduce\(m->dc, g, g, n,/dt_all_reduce(m->axis[DP], g, g, n,/' \
    "gradients averaged over dp only, not dp x cp" -- --cp 2
  MUT_ALSO='the loss is off: 1\.00e\+00, bound' mutant 12-loss 12_mesh 12_mesh/mesh.c \
    's/r->loss_ranks = \(double\)\(m->n\[DP\] \* m->n\[CP\]\)/r->loss_ranks = (double)m->n[DP]/' \
    "the loss averaged over the data ranks, not dp x cp" -- --cp 2
  MUT_ALSO="every rank's calls and bytes equal their formulas: NO" mutant 12-tp-on-pp 12_mesh 12_mesh/mesh.c \
    's/tp_sum\(m->axis\[TP\], &m->wire, p\.u,/tp_sum(m->axis[PP], \&m->wire, p.u,/' \
    "the tp all-reduce after Wo on the pp communicator" -- --tp 2
  # one that deadlocks: the watchdog names the call and its communicator
  hang12='^watchdog: rank [0-9]+ stuck for 5 s in sendrecv #[0-9]+ on the world communicator'
  MUT_NPS="4 8" MUT_WANT=$hang12 MUT_RC=3 mutant 12-pp-world 12_mesh 12_mesh/mesh.c \
    's/pp_stage stage = \{m->axis\[PP\],/pp_stage stage = {m->world,/' \
    "a pipeline send to the next rank of the world, not the same (dp, cp, tp) on the next stage" \
    -- --pp 2 --timeout 5
  MUT_ALSO="every rank's calls and bytes equal their formulas: NO" mutant 12-wo 12_mesh 12_mesh/mesh.c \
    's/  tp_sum\(m->axis\[TP\], &m->wire, p\.u, \(size_t\)\(R \* D\)\);\n//' \
    "Wo's output not summed over tp" -- --tp 2
  MUT_NPS="4 8" MUT_ALSO="every rank's calls and bytes equal their formulas: NO" mutant 12-ring-world 12_mesh 12_mesh/buffers.c \
    's/cp_attn_init\(&m->cr, m->axis\[CP\],/cp_attn_init(\&m->cr, m->world,/' \
    "the ring over the world, not the cp ranks (tp and dp ranks given other chunks)" -- --cp 2 --pp 1
  mutant 12-overwrite 12_mesh 12_mesh/mesh.c \
    's/(  \} else \{ \/\* the last stage starts from the loss[^\n]*\n)/$1    dt_zero(m->g, (size_t)(m->L * m->ld) * 4);\n/' \
    "each microbatch's gradients overwrite the last's, not added to them" -- --micro 2
  # zb1 (ZB-H1, zb.c): W reads the output's gradient where B's scratch was,
  # which B's own input gradient has overwritten, not the copy B kept
  MUT_ALSO="a gradient is off: layers\\.[0-9]+\\.w2's rel L2 diff" mutant 12-zb-keep 12_mesh 12_mesh/zb.c \
    's/p\.h, k\.dy, g\.w2, 1\)/p.h, m->dx, g.w2, 1)/' \
    "zb1: W's dW2 from B's scratch gradient (overwritten), not the copy B kept" -- --pp 2 --schedule zb1
  mutant 11-tile 11_cp common/train/attention.c \
    's/ot\[i \* W \+ d\] = j0 \? ot\[i \* W \+ d\] \* old\[i\] : 0;/ot[i * W + d] = j0 ? ot[i * W + d] : 0;/' \
    "attention's tiles merged without rescaling the output so far to the new max (S 1024: blocks of several tiles)" \
    -- --seq 1024 --layers 1 --steps 3
  # Bugs in the bodies a lesson shares with its one-process yardstick: the
  # lesson's check cannot see them (both sides run them), the unit tests'
  # plain loops and finite differences do.
  MUT_ALSO='finite differences through the MoE .* of the router' unit_mutant 10-renorm common/train/moe_core.h \
    's/dl\[c\[j\]\] \+= \(float\)\(\(dg\[j\] - gdg\) \/ S\)/dl[c[j]] += (float)(dg[j] \/ S)/' \
    "the router's backward through the gates without the renormalisation's term (moe_core.h)" test_moe
  MUT_ALSO='finite differences through the MoE .* of the router' unit_mutant 10-dbalance common/train/moe_core.h \
    's/dl\[e\] = daux \? daux\[e\] : 0\.0f;/dl[e] = 0.0f;/' \
    "the balance loss's d/dp left out of the router's backward (moe_core.h)" test_moe
  MUT_ALSO='a tie to the lower index\) as the plain loop' unit_mutant 10-tie common/train/moe_core.h \
    's/\(best < 0 \|\| p\[e\] > p\[best\]\)/(best < 0 || p[e] >= p[best])/' \
    "the router's top k: a tie to the higher index (moe_core.h)" test_moe
  MUT_ALSO='the materialised causal softmax .* against plain loops' unit_mutant 11-scale common/train/attn_core.h \
    's/mx = fmaxf\(mx, row\[j\] = dt_rn_mul\(row\[j\], scale\)\)/mx = fmaxf(mx, row[j])/' \
    "the yardsticks' causal softmax without the 1/sqrt(dh) scale (attn_core.h)" test_attention
  # 13_plan: its check is --verify, run alone (NP 0: no mpirun); a cost model
  # that prices 09's blocks once a step, not once each of its 8 microbatches:
  # every byte and memory figure still equal; the kernels a step calls differ
  # (16 block forwards counted, 2 listed), caught on the first attempt by count,
  # whatever the machine's speed (until the lists were compared: by time alone,
  # which escaped once in CI)
  MUT_NPS=0 MUT_ALSO='kernels a step: 4 of 6 equal the prediction; first differing: dt_block_forward \[4, 64, 256, 1, 0\]: the lesson 16 a step, predicted 2' mutant 13-micro 13_plan tools/plan/lessons.c \
    's/(H = m->H, L = stage_layers\(m, x, s\), P = x->n\[PP\];\n  double per = \(double\))\(x->M \* L\)/$1L/' \
    "the MLP blocks costed once a step, not once a microbatch (09's 8)" -- --verify --shapes '09_pp/pp $'
  # 14_gpt: the vocabulary over tp, the tied weight over pp, sequence
  # parallelism, positions under cp; short runs of the default model
  MUT_ALSO='^    tp +all_reduce \(max\) +0 +1 ' mutant 14-max 14_gpt 14_gpt/gpt.c \
    's/  gpt_pieces\(m, h\.mx, R, DT_MAX, &m->step\.ce\[0\]\);[^\n]*\n//' \
    "the loss's max not all-reduced over tp (each slice's own max)" -- --steps 10 --sample 0
  MUT_ALSO="every rank's calls and bytes equal their formulas: yes" mutant 14-mask 14_gpt common/train/kernels_cpu.c \
    's/dt_embed_core\(wte, tokens\[r\], v0, Vs, D, d\)/dt_embed_core(wte, tokens[r] >= v0 \&\& tokens[r] < v0 + Vs ? tokens[r] : (int32_t)v0, v0, Vs, D, d)/' \
    "the embedding not masked to the rank's rows (another slice's token gets the slice's row 0)" -- --steps 10 --sample 0
  MUT_ALSO="wte's rows on the first and the last stage DIFFER" mutant 14-tied 14_gpt 14_gpt/gpt.c \
    's/  if \(m->mesh\.emb->size > 1\)\n? *tp_sum\(m->mesh\.emb,[^;]*;\n//' \
    "the tied weight's gradients not summed between the first and the last stage" -- --steps 10 --sample 0 --pp 2
  MUT_ALSO='^    tp +reduce_scatter \(activ\) +0 +10 ' mutant 14-sp 14_gpt 14_gpt/layer.c \
    's/if \(!m->step\.sp\) \{\n    tp_sum/if (1) {\n    tp_sum/' \
    "sequence parallelism's reduce-scatter replaced by the all-reduce (12's tp_sum)" -- --steps 10 --sample 0 --sequence-parallel
  MUT_ALSO="a gradient is off: wpe's rel L2 diff" mutant 14-positions 14_gpt 14_gpt/tokens.c \
    's/position\(m, i\), run/i, run/g' \
    "the position embedding indexed by the local, not the global position under cp" -- --steps 10 --sample 0 --cp 2
  # --virtual-stages: the head (and the loss) run on the last stage's first
  # chunk, not on chunk V-1, the last virtual stage
  MUT_ALSO="^CHECK FAILED: .*\\(step 1: " mutant 14-head-chunk 14_gpt 14_gpt/gpt.c \
    's/last = m->mesh\.last && c == m->weights\.chunks - 1/last = m->mesh.last \&\& c == 0/' \
    "--virtual-stages: the head on the last stage's first chunk, not the last virtual stage" \
    -- --steps 10 --sample 0 --pp 2 --layers 4 --virtual-stages 2
  # Bugs a comparison of two trajectories cannot see (CHECKING.md, "The check,
  # step by step"): a bug in one step only, and small ones. Each must be named
  # at the first step it acts, with its tensor where it has one.
  MUT_ALSO='^CHECK FAILED: .*\(step 1: the update is off: [0-9]+ elements not what the optimizer makes' \
    mutant lock-lr 14_gpt common/train/run.c \
    's/\(float\)dt_lr_at\(c, r->step\)\}/(float)dt_lr_at(c, r->step + (r->step == 0 \&\& r->world->rank == 1))}/' \
    "the learning rate of step 1 one step ahead on rank 1 (its warm-up's 2x)" -- --steps 10 --sample 0
  MUT_ALSO="^CHECK FAILED: .*\\(step 1: a gradient is off: layers\\.[0-9]\\.w[12]'s rel L2 diff" \
    mutant lock-scale 05_dp 05_dp/dp.c \
    's/(  if \(m->topk\)\n    topk_average)/  if (m->world->rank == 1) dt_scale(m->g, (size_t)m->P, 1.001f);\n$1/' \
    "rank 1's gradient contribution scaled by 1.001 before the all-reduce"
  MUT_ALSO="^CHECK FAILED: .*\\(step 1: a gradient is off: layers\\.[0-9]\\.w[12]'s rel L2 diff" \
    mutant lock-message 07_tp 07_tp/tensor.c \
    's/(  void \*p = dt_wire_pack\(wire, buf, n, 0, 1\);)/  if (tp->rank == 1) for (size_t i = 0; i < 3 \&\& i < n; i++) buf[i * 97 % n] *= 1.01f;\n$1/' \
    "three elements of rank 1's tensor-parallel messages off by a percent"
  # the moments restored swapped after --resume: the first step after it is
  # checked from the checkpoint's own state, so the run's step is off there
  lock_dir=$MUT_DIR/lock-resume
  MUT_TOTAL=$((MUT_TOTAL + 1))
  build_copy "$lock_dir" 06_fsdp common/train/run.c \
    's/    dt_run_scatter\(r, 1, m\);\n    dt_run_scatter\(r, 2, v\);/    dt_run_scatter(r, 1, v);\n    dt_run_scatter(r, 2, m);/'
  case $? in
  2) fail "mutant lock-resume: the substitution no longer matches common/train/run.c" "" "update it in tests/suite_mutants.sh" ;;
  1) fail "mutant lock-resume: does not build" "$lock_dir/build.log" ;;
  *)
    lock_before=$FAILED
    for np in 2 4; do
      rm -rf "$lock_dir/ckpt$np"
      check "mutant lock-resume np=$np: its first run, before the bug acts, passes" "$np" 0 'CHECK PASSED' -- \
        "./$lock_dir/fsdp" --optimizer adamw --zero 1 --steps 6 --ckpt "$lock_dir/ckpt$np" --save-every 3
      check "mutant lock-resume np=$np: AdamW's moments restored swapped after --resume" "$np" 1 \
        '^lockstep: step 7 is off .*: the update is off' '^CHECK FAILED' -- \
        "./$lock_dir/fsdp" --optimizer adamw --zero 1 --steps 9 --ckpt "$lock_dir/ckpt$np" --resume
    done
    [ "$FAILED" = "$lock_before" ] && MUT_CAUGHT=$((MUT_CAUGHT + 1))
    ;;
  esac
  echo "mutants: $MUT_CAUGHT caught of $MUT_TOTAL"
  if [ "$MUT_CAUGHT" = "$MUT_TOTAL" ]; then
    pass "mutants: every planted bug is caught: CHECK FAILED, or the watchdog naming a deadlock"
  else
    fail "mutants: every planted bug is caught: CHECK FAILED, or the watchdog naming a deadlock" "" "$MUT_CAUGHT caught of $MUT_TOTAL"
  fi
fi
