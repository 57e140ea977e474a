# Lesson 07_tp: tensor parallel (Megatron) MLP, sourced by tests/run_tests.sh
# (check() comes from tests/lib.sh).
#
# Every run trains 5 steps of the default model (L=4 D=64 H=256 B=32) and must
# match single-process training. Bytes per rank per step are exact: 2L = 8
# all-reduces of B x D x 4 = 8192 bytes, 2(N-1)/N x 8192 each, so
# 0, 65536, 87376 (87381.33 exactly: whole bytes per call) and 98304 at
# NP = 1, 2, 3, 4. Memory per rank: params 2LDH/N x 4.
L07=./07_tp/tp
L07_FAST=(--steps 5)
L07_AR='all_reduce f/g \(activ\) +8 +'
# memory rows: measured, formula, then the formula's text and DP's figure
L07_P='4 x 2LDH/N: W1_s and W2_s; DP \(05\): '
# the run's row for the all-reduces of one float (clip norm, fp16 verdict)
L07_SC='scalars +'
L07_SCB='all-reduces/step of one float \(clip norm, fp16 verdict\); bytes sent per rank per step '
L07_SCF='formula calls x 2\(N-1\)/N x 4 = '

# One rank: the all-reduces are no-ops, not counted (0 calls).
check "07 np=1" 1 0 'CHECK PASSED' 'all_reduce f/g \(activ\) +0 +0 +0 ' 'any other collective +0 +0 +0 ' \
  "params +524288 +524288 +${L07_P}524288" 'activ +352256 +352256 .*DP \(05\): 352256' -- $L07 "${L07_FAST[@]}"
check "07 np=2" 2 0 'CHECK PASSED' "${L07_AR}65536 +65536 " 'any other collective +0 +0 +0 ' \
  "params +262144 +262144 +${L07_P}524288" 'activ +204800 +204800 .*DP \(05\): 176128' \
  'TP/DP = B/H = 0\.1250' '192\.0 per byte of f/g, formula 3H/\(4\(N-1\)\) = 192\.0' \
  -- $L07 "${L07_FAST[@]}"
check "07 np=3 hidden=192" 3 0 'CHECK PASSED' "${L07_AR}87376 +87381\.33 " \
  '\[rank 2\] W1\[:, 128:192\] \[64 x 64\] and W2\[128:192, :\] \[64 x 64\]' \
  "params +131072 +131072 +${L07_P}393216" 'activ +131072 +131072 .*DP \(05\): n/a' -- $L07 "${L07_FAST[@]}" --hidden 192
check "07 np=4" 4 0 'CHECK PASSED' "${L07_AR}98304 +98304 " 'any other collective +0 +0 +0 ' \
  'total +98304 +98304 +DP \(05\): 2\(N-1\)/N x 2LDH x 4 = 786432' \
  '\[rank 3\] W1\[:, 192:256\] \[64 x 64\] and W2\[192:256, :\] \[64 x 64\] .*32768 of 131072' \
  "params +131072 +131072 +${L07_P}524288" 'grads +131072 +131072 .*DP \(05\): 524288' \
  'activ +131072 +131072 .*DP \(05\): 88064' -- $L07 "${L07_FAST[@]}"
# 384 hidden units at NP=3: 128 each; B x D = 48 x 64 makes 2(N-1)/N x B x D x 4 whole.
check "07 np=3 hidden=384 batch=48" 3 0 'CHECK PASSED' "${L07_AR}131072 +131072 " \
  -- $L07 "${L07_FAST[@]}" --hidden 384 --batch 48

# AdamW keeps m and v for the local shards only; --clip adds one all-reduce of
# one float per step (6 bytes at NP=4, 5 at NP=3: whole bytes per call), on
# the run's scalars row, apart from f/g: the total stays f/g's.
check "07 np=4 adamw" 4 0 'CHECK PASSED' 'optim +262144 +262144 .*DP \(05\): 1048576' \
  -- $L07 "${L07_FAST[@]}" --optimizer adamw
check "07 np=4 clip" 4 0 'CHECK PASSED' "${L07_AR}98304 +98304 " \
  "${L07_SC}1\.00 ${L07_SCB}6\.00, ${L07_SCF}6\.00" 'total +98304 +98304 ' -- $L07 "${L07_FAST[@]}" --clip 0.05
check "07 np=3 adamw clip" 3 0 'CHECK PASSED' "${L07_SC}1\.00 ${L07_SCB}5\.00, ${L07_SCF}5\.33" \
  -- $L07 "${L07_FAST[@]}" --hidden 192 --optimizer adamw --clip 0.05

# A model saved at NP=2 resumes at NP=4: each rank slices its shards from it.
L07_CKPT="$LOGS/07_tp_np2.safetensors"
rm -f "$L07_CKPT"
check "07 np=2 save" 2 0 'CHECK PASSED' "saved $L07_CKPT" -- $L07 "${L07_FAST[@]}" --save "$L07_CKPT"
check "07 np=4 load" 4 0 'CHECK PASSED' -- $L07 "${L07_FAST[@]}" --load "$L07_CKPT"

# Checkpoints: rank 0 gathers the shards (and AdamW's m and v) and writes them
# whole; a later run at another NP slices its own. The gathers are not counted
# as training traffic, and the resumed run still matches the reference.
L07_DIR="$LOGS/07_tp_ckpt"
rm -rf "$L07_DIR"
check "07 np=2 checkpoint" 2 0 'CHECK PASSED' 'checkpoint: step 4 saved' \
  "${L07_AR}65536 +65536 " 'any other collective +0 +0 +0 ' \
  -- $L07 --steps 4 --optimizer adamw --ckpt "$L07_DIR" --save-every 2
check "07 np=4 resume" 4 0 'CHECK PASSED' 'resume: step 4 from .*\(weights, AdamW m and v; configuration and checksum verified\)' \
  'largest spread across ranks .* over 4 steps' "${L07_AR}98304 +98304 " \
  -- $L07 --steps 8 --optimizer adamw --ckpt "$L07_DIR" --resume

# Bad input: a clear message and exit code 2, never a hang.
check "07 np=3 hidden 256" 3 2 \
  'error: --hidden 256 does not split over 3 tensor-parallel ranks: each holds H/3 hidden units .*; try --hidden 258 \(or another multiple of 3\)' \
  -- $L07
check "07 np=4 hidden 2" 4 2 'error: --hidden 2 does not split over 4 tensor-parallel ranks: .*try --hidden 4 \(or another multiple of 4\)' \
  -- $L07 --hidden 2
check "07 unknown flag" 2 2 "error: unknown flag '--bogus'" -- $L07 --bogus
check "07 bad optimizer" 2 2 "error: --optimizer: 'adam' is not one of sgd\|adamw" \
  -- $L07 --optimizer adam
check "07 load shape mismatch" 2 2 'error: --load .*"layers.0.w1" has shape \[64, 256\], the config needs \[32, 128\]' \
  -- $L07 --dim 32 --load "$L07_CKPT"
check "07 help" 1 0 'usage: mpirun -np N ./07_tp/tp' '--hidden N' -- $L07 --help
check "07 resume without ckpt" 2 2 'error: --save-every and --resume need --ckpt DIR' \
  -- $L07 --resume

# --precision (issue 7): the activations travel in 16 bits, so the f/g bytes
# halve (2L x 2(N-1)/N x B x D x 2: 32768 at NP=2, 43688 at NP=3, 49152 at
# NP=4); weight gradients never travel. fp16 adds one all-reduce of one float
# per step, the overflow flag maxed over the ranks (each holds other shards),
# on the run's scalars row. Each run matches the reference trained at the same
# precision within the stated relative tolerance.
L07_AR16='2L x 2\(N-1\)/N x B x D x 2: '
check "07 np=2 bf16 sgd" 2 0 "${L07_AR}32768 +32768 +${L07_AR16}" \
  'CHECK PASSED: .*one process.s bf16 step' -- $L07 "${L07_FAST[@]}" --precision bf16
check "07 np=3 bf16 adamw hidden=192" 3 0 "${L07_AR}43688 +43690\.67 " \
  'CHECK PASSED: .*one process.s bf16 step' \
  -- $L07 "${L07_FAST[@]}" --precision bf16 --optimizer adamw --hidden 192
check "07 np=4 bf16 adamw" 4 0 "${L07_AR}49152 +49152 +${L07_AR16}" \
  'total +49152 +49152 +DP \(05\): 2\(N-1\)/N x 2LDH x 2 = 393216' \
  'CHECK PASSED: .*one process.s bf16 step' -- $L07 "${L07_FAST[@]}" --precision bf16 --optimizer adamw
check "07 np=2 fp16 adamw" 2 0 "${L07_AR}32768 +32768 " "${L07_SC}1\.00 ${L07_SCB}4\.00, ${L07_SCF}4\.00" \
  'total +32768 +32768 ' 'CHECK PASSED: .*one process.s fp16 step' \
  -- $L07 "${L07_FAST[@]}" --precision fp16 --optimizer adamw
check "07 np=4 fp16 sgd" 4 0 "${L07_AR}49152 +49152 " "${L07_SC}1\.00 ${L07_SCB}6\.00, ${L07_SCF}6\.00" \
  'total +49152 +49152 ' '128\.0 per byte of f/g, formula 3H/\(2\(N-1\)\) = 128\.0' \
  'fp16 loss scaling +0 steps skipped on overflow; final loss scale 65536' \
  'CHECK PASSED: .*one process.s fp16 step' -- $L07 "${L07_FAST[@]}" --precision fp16
# fp16 dynamic loss scaling: at 1e12 the scaled gradients overflow 16 bits,
# every rank skips the step (the flag is maxed), the scale halves until they
# fit, and the reference skips the same steps. The verdict's all-reduce runs
# on all 20 steps, --clip's on the 3 taken: 23/20 = 1.15 a step, 6 bytes each.
check "07 np=4 fp16 loss scale backs off" 4 0 'step +1: fp16 gradients overflowed at loss scale 1e\+12' \
  '[1-9][0-9]* steps skipped on overflow' 'CHECK PASSED: .*one process.s fp16 step' \
  "${L07_SC}1\.15 ${L07_SCB}6\.90, ${L07_SCF}6\.90" \
  -- $L07 --steps 20 --precision fp16 --loss-scale 1e12 --clip 0.05
check "07 np=2 fp16 loss scale grows" 2 0 'fp16 loss scaling +0 steps skipped on overflow; final loss scale 262144' \
  -- $L07 --steps 10 --precision fp16 --growth-interval 5 --no-check
check "07 bad precision" 2 2 "error: --precision: 'fp8' is not one of fp32\|bf16\|fp16" \
  -- $L07 --precision fp8
