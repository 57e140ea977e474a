# Lesson 09_pp: pipeline parallelism, GPipe and 1F1B. Sourced by
# tests/run_tests.sh (check() comes from tests/lib.sh).
#
# Every run trains 3 steps of the default model (L=4 D=64 B=32) and must match
# single-process training. Exact numbers asserted: the peak number of
# microbatches each stage holds (GPipe M, 1F1B min(M, N-s)), the bytes of
# that peak from the memory accounting, and the bytes sent per step (B*D*4 =
# 8192 forward from every stage but the last, as many backward from every
# stage but the first). The timed bubble is printed, never asserted.
L09=./09_pp/pp

for np in 1 2 4; do
  for m in $(printf '%s\n' 1 $np $((2 * np)) | sort -un); do
    r=$((32 / m)) L=4 # rows per microbatch, layers
    for sched in gpipe 1f1b; do
      pats=('CHECK PASSED: each step.s loss, gradient and update match')
      for ((s = 0; s < np; s++)); do
        # a microbatch's stash: x_0..x_nl [R,D], a and h [R,H] per layer; scratch:
        # two activation-gradient buffers [R,D] and dh [R,H]
        nl=$((L / np + (s < L % np)))
        slot=$((((nl + 1) * r * 64 + 2 * nl * r * 256) * 4)) scratch=$(((2 * r * 64 + r * 256) * 4))
        if [ "$sched" = gpipe ]; then k=$m; else k=$((np - s < m ? np - s : m)); fi
        fwd=$((s < np - 1)) bwd=$((s > 0))
        pats+=("\[rank $s\] stage $s peak in-flight microbatches $k \(formula $k\) \| activ peak $((k * slot + scratch)) B \(formula $k x $slot \+ scratch $scratch")
        pats+=("\[rank $s\] stage $s \| sendrecv bytes per step $(((fwd + bwd) * 8192)) \(formula $fwd fwd \+ $bwd bwd x B\*D\*4 = $(((fwd + bwd) * 8192))\)")
      done
      check "09 np=$np M=$m $sched" "$np" 0 "${pats[@]}" -- $L09 --steps 3 --schedule $sched --microbatches $m
    done
  done
done

# Uneven stages (4 layers on 3 ranks: 2, 1, 1) and a plan printed as a list.
check "09 np=3 uneven stages 1f1b" 3 0 'CHECK PASSED' \
  '\[rank 0\] stage 0: layers 0-1, plan F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5$' \
  '\[rank 2\] stage 2: layers 3-3, plan F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5$' \
  'stage 0 peak in-flight microbatches 3 \(formula 3\)' \
  -- $L09 --steps 3 --microbatches 6 --batch 24
check "09 np=3 uneven stages gpipe" 3 0 'CHECK PASSED' \
  '\[rank 1\] stage 1: layers 2-2, plan F0 F1 F2 F3 F4 F5 B0 B1 B2 B3 B4 B5$' \
  'stage 2 peak in-flight microbatches 6 \(formula 6\)' \
  -- $L09 --steps 3 --microbatches 6 --batch 24 --schedule gpipe

# Interleaved 1F1B (--virtual-stages V): chunk c of stage s is virtual stage
# cN + s, Lc = L/(NV) layers. Exact figures asserted per stage: the bytes
# (V boundaries each way, less the first stage's input and the last's loss),
# the messages against 1F1B's, the peak of chunk-microbatch stashes
# (Megatron's warm-up min(2(N-1-s) + (V-1)N, VM), one more, and on every
# stage but the first one more again: an input that arrives while a backward
# holds its last), and the plan's bubble in the slot model, which equals
# (N-1)/(VM+N-1): 2(VM+N-1) slots of which 2VM busy.
l09_v() { # NP V LC [FLAGS...]: the default batch (32 rows, M 8)
  local np=$1 V=$2 lc=$3 s fwd bwd k slot scratch m=8 r=4
  shift 3
  local pats=('CHECK PASSED: each step.s loss, gradient and update match')
  for ((s = 0; s < np; s++)); do
    fwd=$((V - (s == np - 1))) bwd=$((V - (s == 0)))
    k=$((2 * (np - 1 - s) + (V - 1) * np + 1 + (s > 0)))
    ((k > V * m)) && k=$((V * m))
    slot=$((((lc + 1) * r * 64 + 2 * lc * r * 256) * 4)) scratch=$(((2 * r * 64 + r * 256) * 4))
    pats+=("\[rank $s\] stage $s \| sendrecv bytes per step $(((fwd + bwd) * 8192)) \(formula $fwd fwd \+ $bwd bwd x B\*D\*4 = $(((fwd + bwd) * 8192))\)")
    pats+=("\[rank $s\] stage $s \| messages sent per step $(((fwd + bwd) * m)) \(formula .* = $(((fwd + bwd) * m)), 1f1b.s $(((2 - (s == 0) - (s == np - 1)) * m))\) in ([0-9]+) sendrecvs \(the plan.s \1\)")
    pats+=("\[rank $s\] stage $s peak in-flight chunk-microbatches $k \(formula $k\) \| activ peak $((k * slot + scratch)) B \(formula $k x $slot \+ scratch $scratch")
  done
  local T=$((2 * (V * m + np - 1)))
  pats+=("slot model .*: $T slots, bubble .* = $((2 * (np - 1)))/$T = [0-9.]+%; formula \(N-1\)/\(VM\+N-1\)")
  pats+=("formula \(N-1\)/\(VM\+N-1\) = $((np - 1))/$((V * m + np - 1)) = ")
  check "09 np=$np interleaved V=$V Lc=$lc" "$np" 0 "${pats[@]}" -- $L09 --steps 3 --virtual-stages "$V" --layers $((np * V * lc)) "$@"
}
l09_v 2 2 1
l09_v 2 4 1
l09_v 4 2 1
l09_v 4 4 1
l09_v 4 2 2 --optimizer adamw
# Megatron's order: forwards in groups of N microbatches through chunk a,
# then b; backwards chunk b first; warm-up 2(N-1-s) + (V-1)N = 4 on stage 0
check "09 np=2 interleaved plan" 2 0 'CHECK PASSED' \
  '\[rank 0\] stage 0: layers 0-0 2-2, plan F0a F1a F0b F1b F2a B0b F3a B1b F2b B0a F3b B1a F4a B2b ' \
  '\[rank 1\] stage 1: layers 1-1 3-3, plan F0a F1a F0b B0b F1b B1b F2a B0a F3a B1a F2b B2b ' \
  -- $L09 --steps 2 --virtual-stages 2
# the ring's messages above the eager limit (8 KiB), in 16 bits too
check "09 np=4 interleaved rendezvous-size messages" 4 0 'CHECK PASSED' \
  -- $L09 --steps 2 --dim 16 --hidden 16 --batch 512 --microbatches 4 --virtual-stages 2 --layers 8
l09_prec_v() { check "09 np=4 interleaved bf16" 4 0 "CHECK PASSED: .*one process.s bf16 step" \
  '\[rank 0\] stage 0 \| sendrecv bytes per step 12288 \(formula 2 fwd \+ 1 bwd x B\*D\*2 = 12288\)' \
  -- $L09 --steps 3 --precision bf16 --virtual-stages 2 --layers 8 --microbatches 4; }
l09_prec_v
check "09 interleaved with gpipe" 2 2 'error: --virtual-stages 2 runs interleaved 1F1B: not with --schedule gpipe' \
  -- $L09 --virtual-stages 2 --schedule gpipe
check "09 interleaved layers do not divide" 4 2 \
  'error: --layers 4 does not split into 4 stages x 2 virtual stages of equal depth: --layers must be a multiple of 8' \
  -- $L09 --virtual-stages 2
check "09 interleaved microbatches not a multiple of N" 4 2 \
  'error: --microbatches 6 is not a multiple of the 4 stages: interleaved 1F1B runs the microbatches in groups of N' \
  -- $L09 --virtual-stages 2 --layers 8 --microbatches 6 --batch 24
check "09 interleaved on one stage" 0 2 'error: --virtual-stages 2 needs 2 stages or more' \
  -- $L09 --virtual-stages 2

# Zero-bubble ZB-H1 (--schedule zb1): each backward split into B (the
# input's gradient, sent on) and W (the weights'), W deferred into what would
# be idle. Asserted per stage: the bytes (1F1B's), the peak of microbatches
# held until their W (min(N, M) on every stage: 1F1B's first stage's), its
# bytes (each slot keeps the blocks' output gradients for W, L x RD x 4
# more); and the plan's bubble in the slot model, (N-1)/(3M+N-1) for M >= N.
l09_zb() { # NP M: the default batch (32 rows)
  local np=$1 m=$2 s fwd bwd k nl slot scratch r=$((32 / $2))
  local pats=('CHECK PASSED: each step.s loss, gradient and update match')
  k=$((np < m ? np : m))
  for ((s = 0; s < np; s++)); do
    nl=$((4 / np + (s < 4 % np))) fwd=$((s < np - 1)) bwd=$((s > 0))
    slot=$((((nl + 1) * r * 64 + 2 * nl * r * 256 + nl * r * 64) * 4)) scratch=$(((2 * r * 64 + r * 256) * 4))
    pats+=("\[rank $s\] stage $s \| sendrecv bytes per step $(((fwd + bwd) * 8192)) \(formula $fwd fwd \+ $bwd bwd x B\*D\*4 = $(((fwd + bwd) * 8192))\)")
    pats+=("\[rank $s\] stage $s peak in-flight microbatches $k \(formula $k\) \| activ peak $((k * slot + scratch)) B \(formula $k x $slot \+ scratch $scratch")
  done
  local T=$((3 * m + np - 1))
  pats+=("slot model .*: $T slots, bubble \(T - 3M\)/T = $((np - 1))/$T = [0-9.]+%; formula \(N-1\)/\(3M\+N-1\)")
  pats+=("formula \(N-1\)/\(3M\+N-1\) = $((np - 1))/$T = ")
  check "09 np=$np zb1 M=$m" "$np" 0 "${pats[@]}" -- $L09 --steps 3 --schedule zb1 --microbatches "$m"
}
l09_zb 2 2
l09_zb 2 8
l09_zb 3 4
l09_zb 4 4
l09_zb 4 8
check "09 np=4 zb1 plan" 4 0 'CHECK PASSED' \
  '\[rank 0\] stage 0: layers 0-0, plan F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7$' \
  '\[rank 3\] stage 3: layers 3-3, plan F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7$' \
  -- $L09 --steps 2 --schedule zb1
check "09 np=4 zb1 rendezvous-size messages, bf16 adamw" 4 0 "CHECK PASSED: .*one process.s bf16 step" \
  -- $L09 --steps 2 --dim 16 --hidden 16 --batch 512 --microbatches 4 --schedule zb1 --precision bf16 --optimizer adamw
# the whole model's layout whatever the schedule: saved interleaved, loaded by zb1
check "09 np=4 interleaved save" 4 0 'CHECK PASSED' "saved $LOGS/pp09v.safetensors" \
  -- $L09 --steps 2 --virtual-stages 2 --layers 8 --optimizer adamw --save "$LOGS/pp09v.safetensors"
check "09 np=2 zb1 load" 2 0 'CHECK PASSED' \
  -- $L09 --steps 2 --layers 8 --schedule zb1 --optimizer adamw --load "$LOGS/pp09v.safetensors"
check "09 zb1 with virtual stages" 2 2 'error: --virtual-stages 2 runs interleaved 1F1B: not with --schedule zb1' \
  -- $L09 --virtual-stages 2 --schedule zb1

# Messages above Open MPI's eager limit (128 rows x 16 x 4 B = 8 KiB): a send
# now waits for its receiver, so a badly paired exchange would hang here.
for sched in gpipe 1f1b; do
  check "09 np=4 rendezvous-size messages $sched" 4 0 'CHECK PASSED' \
    -- $L09 --steps 2 --dim 16 --hidden 16 --batch 512 --microbatches 4 --schedule $sched
done

# AdamW with clipping (the global norm spans every stage: one float
# all-reduced per step, counted on the run's scalars row, 2(N-1)/N x 4 = 6
# bytes at N=4), --save then --load, and the Chrome trace.
check "09 np=4 adamw clip save" 4 0 'CHECK PASSED' "saved $LOGS/pp09.safetensors" \
  'scalars +1\.00 all-reduces/step of one float .*bytes sent per rank per step 6\.00, formula calls x 2\(N-1\)/N x 4 = 6\.00' \
  -- $L09 --steps 3 --optimizer adamw --clip 0.05 --save "$LOGS/pp09.safetensors"
check "09 np=2 load" 2 0 'CHECK PASSED' \
  -- $L09 --steps 3 --layers 4 --load "$LOGS/pp09.safetensors"
check "09 np=4 trace" 4 0 'CHECK PASSED' 'trace: [0-9]+ spans from 4 ranks written' \
  'timeline of the fastest step' '^  stage 3 \|[^|]{100}\|$' \
  -- $L09 --steps 2 --trace "$LOGS/pp09-trace.json"

# Bad input: a clear message and exit code 2, never a hang.
check "09 more stages than layers" 4 2 \
  'error: --layers 2 cannot be split into 4 stages: every stage needs at least one layer' \
  -- $L09 --layers 2
check "09 microbatches do not divide batch" 2 2 \
  'error: --batch 32 does not split into 5 microbatches' -- $L09 --microbatches 5
check "09 unknown schedule" 2 2 "error: --schedule: 'foo' is not one of gpipe\|1f1b\|zb1" \
  -- $L09 --schedule foo
check "09 zero microbatches" 2 2 'error: --microbatches: 0 is out of range' \
  -- $L09 --microbatches 0
check "09 unknown flag" 2 2 "unknown flag '--stages'" -- $L09 --stages 2

# --precision (issue 7): activations forward and their gradients backward
# travel in 16 bits, so each boundary carries B*D*2 = 4096 bytes each way per
# step. The fp16 overflow verdict (one float maxed over the stages, like the
# clip norm) is on the run's scalars row, not in the sendrecv counters. Each
# run matches the reference trained at the same precision within the stated
# relative tolerance.
l09_prec() { # NAME NP PREC [PATTERN... --] FLAGS...: every stage's bytes asserted
  local name=$1 np=$2 prec=$3 s fwd bwd
  shift 3
  local pats=("CHECK PASSED: .*one process.s $prec step")
  if [[ " $* " == *" -- "* ]]; then
    while [ "$1" != -- ]; do pats+=("$1"); shift; done
    shift
  fi
  for ((s = 0; s < np; s++)); do
    fwd=$((s < np - 1)) bwd=$((s > 0))
    pats+=("\[rank $s\] stage $s \| sendrecv bytes per step $(((fwd + bwd) * 4096)) \(formula $fwd fwd \+ $bwd bwd x B\*D\*2 = $(((fwd + bwd) * 4096))\)")
  done
  check "$name" "$np" 0 "${pats[@]}" -- $L09 --steps 3 --precision "$prec" "$@"
}
l09_prec "09 np=2 bf16 1f1b sgd" 2 bf16
l09_prec "09 np=4 bf16 gpipe adamw" 4 bf16 --schedule gpipe --optimizer adamw
l09_prec "09 np=3 bf16 uneven stages" 3 bf16 --microbatches 4 --optimizer adamw
l09_prec "09 np=2 fp16 gpipe adamw" 2 fp16 --schedule gpipe --optimizer adamw
l09_prec "09 np=4 fp16 1f1b sgd" 4 fp16 \
  'scalars +1\.00 all-reduces/step of one float .*bytes sent per rank per step 6\.00, formula calls x 2\(N-1\)/N x 4 = 6\.00' --
# fp16 dynamic loss scaling: at 1e12 the scaled gradients overflow 16 bits,
# every stage skips the step (the verdict is maxed over the stages), the scale
# halves until they fit, and the reference skips the same steps.
check "09 np=4 fp16 loss scale backs off" 4 0 'step +1: fp16 gradients overflowed at loss scale 1e\+12' \
  '[1-9][0-9]* steps skipped on overflow' 'CHECK PASSED: .*one process.s fp16 step' \
  -- $L09 --steps 20 --precision fp16 --loss-scale 1e12 --clip 0.05
check "09 np=2 fp16 loss scale grows" 2 0 'fp16 loss scaling +0 steps skipped on overflow; final loss scale 262144' \
  -- $L09 --steps 10 --precision fp16 --growth-interval 5 --no-check
check "09 bad precision" 2 2 "error: --precision: 'fp8' is not one of fp32\|bf16\|fp16" \
  -- $L09 --precision fp8
