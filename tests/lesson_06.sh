# Lesson 06_fsdp: ZeRO stages 1-3 (FSDP), with and without prefetch.
# Sourced by tests/run_tests.sh (check() comes from tests/lib.sh).
# A small model keeps every run short: L=4, D=16, H=64, so a layer's [W1 | W2]
# holds 2DH = 2048 elements and the model P = 8192. S = ceil(2048/N): 2048,
# 1024, 683 (one element of padding) and 512 at N = 1, 2, 3, 4. The byte and
# memory figures below are worked out by hand from the formulas in the README,
# not copied from the program, so they check the program's accounting.
B=./06_fsdp/fsdp
SMALL="--layers 4 --dim 16 --hidden 64 --steps 5 --optimizer adamw"

# Every stage, with and without prefetch, trains to the single-process result.
for np in 1 2 3 4; do
  batch=$((np == 3 ? 24 : 32))
  for zero in 1 2 3; do
    for pf in "" --prefetch; do
      [ "$np" = 1 ] && [ "$zero" = 2 ] && continue # NP=1: stages 1 and 3 suffice
      check "06 np=$np zero=$zero${pf:+ prefetch}" "$np" 0 'CHECK PASSED' \
        "ZeRO-$zero" -- $B $SMALL --batch $batch --zero $zero $pf
    done
  done
done

# Exact bytes per rank per step (ring model), columns: calls, measured, formula.
# Stage 3, N=4: all-gather 2 x L x (N-1) x S x 4 = 2*4*3*512*4 = 49152 in 2L = 8
# calls, reduce-scatter L(N-1)S x 4 = 24576 in 4 calls; total 3(N-1)/N x P x 4
# = 73728 against DP's 2(N-1)/N x P x 4 = 49152.
check "06 np=4 zero=3 bytes" 4 0 'CHECK PASSED' \
  'all_gather +8 +49152 +49152 ' 'reduce_scatter +4 +24576 +24576 ' 'all_reduce +0 +0 +0 ' \
  'total +73728 +73728 +3\(N-1\)/N .*DP \(05\): 2\(N-1\)/N x P x 4 = 49152' \
  -- $B $SMALL --zero 3
# Stage 1, N=4: all-reduce 2 x L x (N-1) x S x 4 = 49152 (4 calls), all-gather
# L(N-1)S x 4 = 24576 (4 calls), no reduce-scatter.
check "06 np=4 zero=1 bytes" 4 0 'CHECK PASSED' \
  'all_gather +4 +24576 +24576 ' 'reduce_scatter +0 +0 +0 ' 'all_reduce +4 +49152 +49152 ' \
  'total +73728 +73728 ' -- $B $SMALL --zero 1 --prefetch
# Stage 2, N=4: reduce-scatter plus all-gather, 2(N-1)/N x P x 4: DP's volume.
check "06 np=4 zero=2 bytes" 4 0 'CHECK PASSED' \
  'all_gather +4 +24576 +24576 ' 'reduce_scatter +4 +24576 +24576 ' 'total +49152 +49152 ' \
  -- $B $SMALL --zero 2
# N=2, S=1024: stage 3 all-gather 2*4*1*1024*4 = 32768, reduce-scatter 16384.
check "06 np=2 zero=3 bytes" 2 0 'CHECK PASSED' \
  'all_gather +8 +32768 +32768 ' 'reduce_scatter +4 +16384 +16384 ' 'total +49152 +49152 ' \
  -- $B $SMALL --zero 3 --prefetch
# N=2 stage 1: all-reduce 2*4*1*1024*4 = 32768, all-gather 16384.
check "06 np=2 zero=1 bytes" 2 0 'CHECK PASSED' \
  'all_gather +4 +16384 +16384 ' 'all_reduce +4 +32768 +32768 ' 'total +49152 +49152 ' \
  -- $B $SMALL --zero 1
# N=3 pads: S = 683, N x S = 2049; all-gather 2*4*2*683*4 = 43712, and rank 2
# owns 1 element of padding.
check "06 np=3 zero=3 padded bytes" 3 0 'CHECK PASSED' 'padded to N x S = 3 x 683' \
  '\[rank 2\] owns \[1366, 2049\) of every layer: 0 of W1, 682 of W2, 1 padding' \
  'all_gather +8 +43712 +43712 ' 'reduce_scatter +4 +21856 +21856 ' \
  -- $B $SMALL --zero 3 --batch 24
# --clip adds one float all-reduced per step: 2(N-1)/N x 4 = 6 bytes at N=4,
# on the run's scalars row, out of the lesson's table.
check "06 np=4 zero=3 clip" 4 0 'CHECK PASSED' 'all_reduce +0 +0 +0 ' 'total +73728 +73728 ' \
  'scalars +1\.00 all-reduces/step .*bytes sent per rank per step 6\.00, formula calls x 2\(N-1\)/N x 4 = 6\.00' \
  -- $B $SMALL --zero 3 --clip 0.5

# Peak memory per rank by tag, columns: measured, formula, DP. Stage 3 with
# prefetch at N=4, LS = 2048, NS = 2048: params 4(LS + 2NS) = 24576, grads
# 4(LS + NS) = 16384, AdamW 8 LS = 16384, activations ((L+1)bD + 2LbH + 2bD +
# bH) x 4 = 22016 with b = 8; DP holds 4P, 4P, 8P = 32768, 32768, 65536.
check "06 np=4 zero=3 prefetch memory" 4 0 'CHECK PASSED' \
  'params +24576 +24576 +32768 ' 'grads +16384 +16384 +32768 ' 'optim +16384 +16384 +65536 ' \
  'activ +22016 +22016 +22016 ' 'model states +57344 +57344 +131072 .* = 32768' \
  '\[rank 3\] peak params 24576, grads 16384, optim 16384, activ 22016 bytes' \
  -- $B $SMALL --zero 3 --prefetch
# Without prefetch one gathered layer: params 4(LS + NS) = 16384. Stage 2 keeps
# all params, sharded grads plus one layer's; stage 1 keeps params and grads.
check "06 np=4 zero=3 memory" 4 0 'params +16384 +16384 +32768 ' -- $B $SMALL --zero 3 --no-check
check "06 np=4 zero=2 memory" 4 0 'params +32768 +32768 +32768 ' 'grads +16384 +16384 +32768 ' \
  'optim +16384 +16384 +65536 ' -- $B $SMALL --zero 2 --no-check
check "06 np=4 zero=1 memory" 4 0 'params +32768 +32768 +32768 ' 'grads +32768 +32768 +32768 ' \
  'optim +16384 +16384 +65536 ' -- $B $SMALL --zero 1 --no-check

# A checkpoint written at N=4 resumes at N=3: every rank slices its shard.
CKPT="$LOGS/06_fsdp_ckpt.safetensors"
check "06 np=4 save" 4 0 'CHECK PASSED' "saved $CKPT" -- $B $SMALL --save "$CKPT"
check "06 np=3 load" 3 0 'CHECK PASSED' -- $B $SMALL --load "$CKPT" --batch 24 --prefetch

# Bad input: a clear message and exit code 2, never a hang.
check "06 batch not divisible" 4 2 'error: global batch 30 does not split over 4 ranks' \
  -- $B $SMALL --batch 30
check "06 default batch at np=3" 3 2 'error: global batch 32 does not split over 3 ranks' -- $B
check "06 zero out of range" 2 2 'error: --zero: 4 is out of range' -- $B --zero 4
check "06 unknown flag" 2 2 "unknown flag '--bogus'" -- $B --bogus
check "06 missing checkpoint" 2 2 'error: --load /nonexistent.safetensors' \
  -- $B --load /nonexistent.safetensors
check "06 help" 1 0 '--zero' '--prefetch' -- $B --help

# --precision (issue 7): parameters are all-gathered and gradients reduced in
# 16 bits, so every byte figure halves (x 2 instead of x 4), and each run
# matches the reference trained at the same precision within its tolerance.
# Stage 3, N=4: all-gather 2*4*3*512*2 = 24576, reduce-scatter 12288, total
# 36864 against DP's 2(N-1)/N x P x 2 = 24576. The 16-bit copies (comm):
# one gathered layer, a layer's gradient and its shard, 2(2NS + S) = 9216.
# Under the table, matmul's rounded copies of its largest A and B, b = B/N = 8:
# (b x H + D x H) x 4 = (512 + 1024) x 4 = 6144.
for prec in bf16 fp16; do
  check "06 np=4 zero=3 $prec bytes halve" 4 0 "CHECK PASSED: .*one process.s $prec step" \
    'all_gather +8 +24576 +24576 +2 x L x \(N-1\) x S x 2' 'reduce_scatter +4 +12288 +12288 ' \
    'total +36864 +36864 .*DP \(05\): 2\(N-1\)/N x P x 2 = 24576' 'comm +9216 +9216 ' \
    "not in the table: matmul's 16-bit rounding copies of its inputs, 6144 bytes" \
    -- $B $SMALL --zero 3 --precision $prec
  # Stage 1, N=4: all-reduce 2*4*3*512*2 = 24576, all-gather 12288; with
  # prefetch all L layers' 16-bit gathers are in flight: 2(L NS + NS) = 20480.
  check "06 np=4 zero=1 $prec bytes halve" 4 0 "CHECK PASSED: .*one process.s $prec step" \
    'all_gather +4 +12288 +12288 ' 'all_reduce +4 +24576 +24576 ' 'total +36864 +36864 ' \
    'comm +20480 +20480 ' -- $B $SMALL --zero 1 --prefetch --precision $prec
  for opt in sgd adamw; do
    check "06 np=2 zero=2 $prec $opt" 2 0 "CHECK PASSED: .*one process.s $prec step" \
      'all_gather +4 +8192 +8192 ' 'reduce_scatter +4 +8192 +8192 ' \
      -- $B $SMALL --zero 2 --precision $prec --optimizer $opt
    check "06 np=4 zero=3 prefetch $prec $opt" 4 0 "CHECK PASSED: .*one process.s $prec step" \
      -- $B $SMALL --zero 3 --prefetch --precision $prec --optimizer $opt
  done
done
check "06 np=3 zero=3 bf16 padded" 3 0 'CHECK PASSED: .*one process.s bf16 step' \
  'all_gather +8 +21856 +21856 ' -- $B $SMALL --zero 3 --batch 24 --precision bf16
# fp16: the overflow verdict is one flag all-reduced with MAX (the run's
# scalars row, out of the total: 2(N-1)/N x 4 = 6 bytes at N=4). A loss scale of 1e12
# overflows: every rank skips the same steps and halves the scale until the
# gradients fit, as the reference does. Stage 1 gathers only after steps taken.
check "06 np=4 fp16 overflow verdict" 4 0 \
  'scalars +1\.00 all-reduces/step .*bytes sent per rank per step 6\.00, formula calls x 2\(N-1\)/N x 4 = 6\.00' \
  'fp16 loss scaling +0 steps skipped' -- $B $SMALL --precision fp16 --no-check
check "06 np=4 fp16 loss scale backs off" 4 0 'step +1: fp16 gradients overflowed at loss scale 1e\+12' \
  '19 steps skipped on overflow' 'all_gather +[0-9]+ +([0-9]+) +\1 +L x \(N-1\) x S x 2 x 11/30 steps taken' \
  'CHECK PASSED: .*one process.s fp16 step' -- $B $SMALL --zero 1 --precision fp16 --loss-scale 1e12 --steps 30
check "06 np=2 fp16 loss scale backs off, zero 3" 2 0 '[1-9][0-9]* steps skipped on overflow' \
  'CHECK PASSED: .*one process.s fp16 step' -- $B $SMALL --precision fp16 --loss-scale 1e12 --steps 30 --prefetch
