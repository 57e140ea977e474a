# Lesson 05_dp: data-parallel training, checked against one process.
# Sourced by tests/run_tests.sh (check() comes from tests/lib.sh).
#
# The default model (L=4 D=64 H=256) has P = 4 x 2 x 64 x 256 = 131072
# parameters in 8 tensors of 65536 B. An all-reduce of S bytes sends
# 2(N-1)/N x S per rank (the ring), so per step:
#   N=2: 524288 B   N=4: 786432 B   N=3: 699050.67 B, which the counters,
#   counting whole bytes per call, round down in each call: 8 calls of 65536 B
#   send 8 x 87381 = 699048, one bucket of 524288 B sends 699050. The lesson
#   prints the formula's value in the same whole bytes and says so.
# --steps 5 keeps every run to a second or two.
D05=./05_dp/dp
T05=$LOGS/05_dp_files
mkdir -p "$T05"
PASS05='CHECK PASSED: each step.s loss, gradient and update match one process.s fp32 step'
bytes05() { echo "bytes sent per rank per step $1, formula 2\(N-1\)/N x P x 4${3:+, rounded down per call} = $2\$"; }

# Every NP passes the reference check; NP=3 needs a batch divisible by 3.
# One rank: the all-reduce is a no-op, so no call is counted.
check "05 np=1" 1 0 "$PASS05" 'all-reduce calls/step +0 ' "$(bytes05 0 0)" -- $D05 --steps 5
check "05 np=2" 2 0 "$PASS05" "$(bytes05 524288 524288)" -- $D05 --steps 5
check "05 np=3 batch 24" 3 0 "$PASS05" 'each rank runs 8 of the 24 samples per step' \
  "$(bytes05 699048 699048 rounded)" -- $D05 --steps 5 --batch 24
check "05 np=3 batch 48, one bucket" 3 0 "$PASS05" 'each rank runs 16 of the 48 samples' \
  'all-reduce calls/step +1 ' "$(bytes05 699050 699050 rounded)" -- $D05 --steps 5 --batch 48 --bucket-mb 1

# NP=4 in every mode: the bytes never change, only how they are cut and when.
check "05 np=4 default" 4 0 "$PASS05" '8 all-reduces per step \(one per tensor, after backward\)' \
  'all-reduce calls/step +8 ' "$(bytes05 786432 786432)" -- $D05 --steps 5
# 0.25 MiB buckets take 4 tensors of 64 KiB each: 2 buckets.
check "05 np=4 buckets" 4 0 "$PASS05" '2 all-reduces per step \(buckets, after backward\)' \
  'all-reduce calls/step +2 ' "$(bytes05 786432 786432)" -- $D05 --steps 5 --bucket-mb 0.25
check "05 np=4 buckets overlap" 4 0 "$PASS05" \
  '2 all-reduces per step \(buckets, overlapped with backward\)' 'hidden by overlap +-?[0-9.]+ ms' \
  'all-reduce calls/step +2 ' "$(bytes05 786432 786432)" -- $D05 --steps 5 --bucket-mb 0.25 --overlap
check "05 np=4 overlap per tensor" 4 0 "$PASS05" \
  '8 all-reduces per step \(one per tensor, overlapped with backward\)' \
  "$(bytes05 786432 786432)" -- $D05 --steps 5 --overlap
# Accumulation: 2 micro-steps of 4 rows, still one all-reduce per tensor per
# step; the activations halve: ((L+1)bD + 2LbH + 2bD + bH) x 4 at b = 4.
check "05 np=4 accum 2" 4 0 "$PASS05" '\(2 micro-steps of 4\)' 'all-reduce calls/step +8 ' \
  "$(bytes05 786432 786432)" '^    activ +44032 +44032 ' -- $D05 --steps 5 --accum 2
check "05 np=4 accum 2 overlap" 4 0 "$PASS05" -- $D05 --steps 5 --accum 2 --overlap --bucket-mb 0.25
check "05 np=4 clip" 4 0 "$PASS05" 'sgd, lr 0.2, clipped' \
  '^gradient clipping: the run clipped 5 of the 5 steps compared; min\(1, clip / \|g\|\) is continuous' \
  '^  ok   gradient.s factor, rel diff ' \
  -- $D05 --steps 5 --clip 0.01
# --check-every: the check takes every K-th step (steps 1, 4, 7, 10 of 10)
check "05 np=2 check every 3rd step" 2 0 "$PASS05" \
  '^lockstep: one process took 4 of the run.s 10 steps \(--check-every\) from the run.s own state' \
  -- $D05 --steps 10 --optimizer adamw --check-every 3
# The memory table, every row exact (b = B/N = 8; AdamW keeps m and v).
check "05 np=4 adamw memory table" 4 0 "$PASS05" '30 steps of adamw, lr 0.003' \
  '^    params +524288 +524288   P x 4$' '^    grads +524288 +524288   P x 4$' \
  '^    optim +1048576 +1048576   AdamW m and v: 2 x P x 4 \(sgd: 0\)$' \
  '^    activ +88064 +88064   \(\(L\+1\)bD \+ 2LbH \+ 2bD \+ bH\) x 4, b = B/\(N x accum\)$' \
  -- $D05 --optimizer adamw
check "05 np=2 adamw clip accum" 2 0 "$PASS05" -- $D05 --steps 5 --optimizer adamw --clip 0.5 --accum 4

# Checkpoints. NP=2 and NP=4 each match the same single-process run within
# the check's tolerance, so they match each other within twice that: the
# final weights do not depend on N (the files are not bit-equal: the sums of
# the all-reduce run in a different order).
rm -f "$T05"/*.safetensors
check "05 np=2 save" 2 0 "$PASS05" "saved $T05/x2.safetensors" -- $D05 --steps 5 --save "$T05/x2.safetensors"
check "05 np=4 save" 4 0 "$PASS05" "saved $T05/x4.safetensors" -- $D05 --steps 5 --save "$T05/x4.safetensors"
# Saved at NP=2, resumed at NP=4 and NP=3: the reference loads the same file.
check "05 np=4 load from np=2" 4 0 "$PASS05" -- $D05 --steps 5 --load "$T05/x2.safetensors"
check "05 np=3 load from np=4" 3 0 "$PASS05" -- $D05 --steps 5 --batch 24 --load "$T05/x4.safetensors"
check "05 load missing file" 2 2 "error: --load $T05/missing.safetensors: No such file or directory" \
  -- $D05 --steps 2 --load "$T05/missing.safetensors"
head -c 100 "$T05/x4.safetensors" >"$T05/cut100.safetensors"
check "05 load truncated header" 2 2 "error: --load $T05/cut100.safetensors: not a safetensors file" \
  -- $D05 --steps 2 --load "$T05/cut100.safetensors"
head -c 4000 "$T05/x4.safetensors" >"$T05/cut4000.safetensors"
check "05 load truncated data" 2 2 'past the end \(truncated file\?\)' \
  -- $D05 --steps 2 --load "$T05/cut4000.safetensors"
check "05 np=2 save dim 32" 2 0 "$PASS05" -- $D05 --steps 2 --dim 32 --save "$T05/d32.safetensors"
check "05 load wrong shape" 2 2 \
  'error: --load .*d32.safetensors: "layers.0.w1" has shape \[32, 128\], the config needs \[64, 256\]' \
  -- $D05 --steps 2 --dim 64 --load "$T05/d32.safetensors"

# --dump-data: safetensors with x and y of [S, B, D] floats after an 8-byte
# header length and the header: 8 + header + 2 x 5 x 32 x 64 x 4 bytes.
rm -f "$T05/data.safetensors"
check "05 np=2 dump-data" 2 0 "$PASS05" -- $D05 --steps 5 --dump-data "$T05/data.safetensors"
check "05 dump-data size" 0 0 'dump size ok: [0-9]+ = 8 \+ [0-9]+ \+ 81920' -- bash -c '
  f=$1; h=$(od -An -tu8 -N8 "$f" | tr -d " "); s=$(($(wc -c <"$f")))
  [ -n "$h" ] && [ "$s" -eq $((8 + h + 81920)) ] && grep -aq "\"x\":{\"dtype\":\"F32\",\"shape\":\[5,32,64\]" "$f" \
    && echo "dump size ok: $s = 8 + $h + 81920"' _ "$T05/data.safetensors"
# --trace: Chrome trace JSON with compute and comm spans.
rm -f "$T05/trace.json"
check "05 np=2 trace" 2 0 "$PASS05" -- $D05 --steps 2 --trace "$T05/trace.json"
check "05 trace content" 0 0 '"cat":"compute"' '"traceEvents"' -- cat "$T05/trace.json"

# Bad input: a clear message and exit code 2.
check "05 batch not divisible" 4 2 \
  'error: global batch 30 does not split over 4 ranks x 1 micro-steps: choose --batch divisible by 4' \
  -- $D05 --batch 30
check "05 batch not divisible by accum" 2 2 \
  'error: global batch 32 does not split over 2 ranks x 3 micro-steps: choose --batch divisible by 6' \
  -- $D05 --accum 3
check "05 unknown optimizer" 2 2 'error: --optimizer' 'sgd\|adamw' -- $D05 --optimizer foo
check "05 dim too large" 2 2 'error: --dim: 99999999999 is out of range' -- $D05 --dim 99999999999
check "05 samples not a multiple of batch" 2 2 'error: --samples 40 is not a multiple of --batch 32' \
  -- $D05 --samples 40
check "05 unknown flag" 2 2 "unknown flag '--bogus'" -- $D05 --bogus
check "05 help" 1 0 'usage: mpirun -np N' '--bucket-mb' '--overlap' '--accum' -- $D05 --help

# --compress topk:R (issue 7): bytes exact against (N-1) x k x 8, the
# convergence criterion (final loss within 1.25x of the exact run's), and a
# compression too aggressive for 30 steps, which the check must catch.
check "05 topk:0.1 np=4 converges, bytes exact" 4 0 \
  'bytes sent per rank per step 314592, formula \(N-1\) x k x \(4 \+ 4\) = 314592' 'CHECK PASSED: top-k training converges' \
  -- ./05_dp/dp --compress topk:0.1
check "05 topk:0.01 np=2 converges, bytes exact" 2 0 \
  'k = 1311 of 131072' 'bytes sent per rank per step 10488, formula \(N-1\) x k x \(4 \+ 4\) = 10488' 'CHECK PASSED: top-k' \
  -- ./05_dp/dp --compress topk:0.01
check "05 topk:0.001 np=4 is too lossy for 30 steps: the check says so" 4 1 'CHECK FAILED: top-k training converges' \
  -- ./05_dp/dp --compress topk:0.001
check "05 --compress bad ratio" 2 2 'error: --compress topk:2: expected topk:R with 0 < R <= 1' -- ./05_dp/dp --compress topk:2
check "05 --compress with --overlap" 2 2 'error: --compress replaces the all-reduce' -- ./05_dp/dp --compress topk:0.1 --overlap

# --precision (issue 7): 16-bit gradients on the wire halve the bytes
# (2(N-1)/N x P x 2), and each run matches the reference trained at the
# same precision within the stated relative tolerance. Under the memory
# table, matmul's rounded copies of its largest A and B, b = B/N = 8:
# (b x H + D x H) x 4 = (2048 + 16384) x 4 = 73728.
for prec in bf16 fp16; do
  check "05 --precision $prec np=4 sgd: bytes halve, matches the $prec reference" 4 0 \
    'bytes sent per rank per step 393216, formula 2\(N-1\)/N x P x 2 = 393216' \
    "not in the table: matmul's 16-bit rounding copies of its inputs, 73728 bytes" \
    "CHECK PASSED: each step.s loss, gradient and update match one process.s $prec step" \
    -- ./05_dp/dp --precision $prec --steps 10
  check "05 --precision $prec np=2 adamw overlap" 2 0 "CHECK PASSED: .*one process.s $prec step" \
    -- ./05_dp/dp --precision $prec --optimizer adamw --overlap --bucket-mb 0.1 --steps 10
done
# fp16 dynamic loss scaling: a scale far too large overflows, steps are
# skipped and the scale halves until the gradients fit; the reference
# skips the same steps.
check "05 fp16 loss scale backs off on overflow" 2 0 'step +1: fp16 gradients overflowed at loss scale 1e\+12' \
  '[1-9][0-9]* steps skipped on overflow' 'CHECK PASSED: .*one process.s fp16 step' \
  -- ./05_dp/dp --precision fp16 --loss-scale 1e12 --steps 30
check "05 fp16 loss scale grows after good steps" 2 0 'fp16 loss scaling +0 steps skipped on overflow; final loss scale 262144' \
  -- ./05_dp/dp --precision fp16 --growth-interval 5 --steps 10 --no-check
check "05 --compress needs fp32" 2 2 'error: --compress works in fp32 only' -- ./05_dp/dp --precision bf16 --compress topk:0.1
check "05 --resume refused in fp16" 2 2 'error: --resume with --precision fp16 is not supported' \
  -- ./05_dp/dp --precision fp16 --ckpt build/none --resume
