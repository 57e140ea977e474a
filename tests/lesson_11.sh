# Lesson 11_cp: context parallelism, checked against one process.
# Sourced by tests/run_tests.sh (check() comes from tests/lib.sh).
#
# The default model: L=2 D=32 H=128, A=4 heads, B=4 sequences of S=64
# tokens, P = L(4D^2 + 2DH) = 24576 parameters. R = B S/N rows per rank.
#   ring forward   L (N-1) 2RD x 4:              N=2: 65536    N=4: 98304
#   ring backward  L (2N-1) 2RD x 4:             N=2: 196608   N=4: 229376
#   Ulysses        L 4 (N-1)/N RD x 4 each way:  N=2: 65536    N=4: 49152
#   all-reduce     2(N-1)/N P x 4:               N=2: 98304    N=4: 147456
# In bf16 every one of these is half (E = 2 bytes an element).
# Work per rank (scores x heads per layer per sequence): contiguous rank r
# A(r C^2 + C(C+1)/2), C = S/N; zigzag A((2N-1)C^2 + C(C+1)), C = S/2N;
# Ulysses A/N S(S+1)/2. At N=4: 544 .. 3616, 2080, 2080; at N=2: 2112 and
# 6208, 4160, 4160.
D11=./11_cp/cp
T11=$LOGS/11_cp_files
mkdir -p "$T11"
PASS11='CHECK PASSED: each step.s loss, gradient and update match one process.s fp32 step'
WORK11="every rank's work equals its formula: yes"
BYTES11="every rank's bytes equal its formulas: yes"
fwd11() { echo "^    forward +$1\.0 +formula .* = $1\.0\$"; }
bwd11() { echo "^    backward +$1\.0 +formula .* = $1\.0\$"; }
ar11() { echo "bytes sent per rank per step $1\.0, formula 2\(N-1\)/N x P x E = $1\.0"; }
rank11() { echo "^    rank $1 +$2 +formula .* = $2 +backward $2 "; }

# Every figure printed beside a formula equals it, in the log of test $1:
# each rank's work (forward and backward), the bytes, the all-reduce, the
# attention memory, the tiles' scratch and every row of the memory table.
sides11() {
  local log pairs
  log=$(check_log "$1")
  pairs=$(
    sed -En 's/^    rank [0-9]+ +([0-9]+) +formula .* = ([0-9]+) +backward ([0-9]+) .*/\1 \2/p' "$log"
    sed -En 's/^    rank [0-9]+ +([0-9]+) +formula .* = ([0-9]+) +backward ([0-9]+) .*/\3 \2/p' "$log"
    sed -En 's/^    (forward|backward) +([0-9.]+) +formula .* = ([0-9.]+)$/\2 \3/p' "$log"
    sed -En 's/.*bytes sent per rank per step ([0-9.]+), formula 2\(N-1\)\/N x P x E = ([0-9.]+) .*/\1 \2/p' "$log"
    sed -En 's/^  attention memory +([0-9]+) .* = ([0-9]+): no score.*/\1 \2/p' "$log"
    sed -En "s/^    and the tiles' scratch: ([0-9]+) bytes, formula .* = ([0-9]+), T = .*/\1 \2/p" "$log"
    sed -En 's/^    (params|grads|optim|activ|comm|data) +([0-9]+) +([0-9]+)   .*/\2 \3/p' "$log"
  )
  pairs_equal "$1" "every rank's work, the bytes and every memory row equal their formulas" \
    $((2 * $2 + 11)) "$log" "$pairs"
}

# The ring, contiguous (the default): NP 1, 2, 4, the exact figures
check "11 np=1" 1 0 "$PASS11" "$WORK11" "$BYTES11" "$(fwd11 0)" "$(bwd11 0)" "$(ar11 0)" \
  "$(rank11 0 8320)" 'attention by ring' -- $D11 --steps 5
sides11 "11 np=1" 1
check "11 np=2" 2 0 "$PASS11" "$WORK11" "$BYTES11" "$(fwd11 65536)" "$(bwd11 196608)" \
  "$(ar11 98304)" "$(rank11 0 2112)" "$(rank11 1 6208)" 'replicas: all 2 ranks hold bit-identical' \
  -- $D11 --steps 5
sides11 "11 np=2" 2
check "11 np=4" 4 0 "$PASS11" "$WORK11" "$BYTES11" "$(fwd11 98304)" "$(bwd11 229376)" \
  "$(ar11 147456)" "$(rank11 0 544)" "$(rank11 3 3616)" \
  'contiguous from 544 \(rank 0\) to 3616 \(rank N-1\), 6\.65 times' \
  'keeps L x B x A x S\^2 x 4 = 524288 for the scores alone' -- $D11 --steps 5
sides11 "11 np=4" 4
# zigzag: every rank the same work, the same bytes as contiguous
check "11 np=1 zigzag" 1 0 "$PASS11" "$WORK11" "$(rank11 0 8320)" \
  'S=64 \(zigzag split, 2 chunks of 32\)' -- $D11 --steps 5 --split zigzag
check "11 np=2 zigzag" 2 0 "$PASS11" "$WORK11" "$BYTES11" "$(rank11 0 4160)" "$(rank11 1 4160)" \
  "$(fwd11 65536)" "$(bwd11 196608)" -- $D11 --steps 5 --split zigzag
check "11 np=4 zigzag" 4 0 "$PASS11" "$WORK11" "$BYTES11" "$(rank11 0 2080)" "$(rank11 3 2080)" \
  "$(fwd11 98304)" "$(bwd11 229376)" -- $D11 --steps 5 --split zigzag
sides11 "11 np=4 zigzag" 4
# Ulysses: four all-to-alls each way
for np in 1 2 4; do
  case $np in 1) b=0 w=8320 ;; 2) b=65536 w=4160 ;; 4) b=49152 w=2080 ;; esac
  check "11 np=$np ulysses" $np 0 "$PASS11" "$WORK11" "$BYTES11" "$(fwd11 $b)" "$(bwd11 $b)" \
    "$(rank11 0 $w)" 'attention by all-to-all \(Ulysses\)' -- $D11 --steps 5 --ulysses
done
sides11 "11 np=4 ulysses" 4
check "11 np=4 ulysses zigzag" 4 0 "$PASS11" "$WORK11" "$BYTES11" -- $D11 --steps 5 --ulysses \
  --split zigzag
# SGD for each mode; AdamW (the default) over 30 steps; 3 ranks; longer sequences
check "11 np=4 sgd" 4 0 "$PASS11" "fp32, sgd" -- $D11 --optimizer sgd --steps 10
check "11 np=2 sgd zigzag" 2 0 "$PASS11" "fp32, sgd" -- $D11 --optimizer sgd --steps 10 --split zigzag
check "11 np=4 sgd ulysses" 4 0 "$PASS11" "fp32, sgd" -- $D11 --optimizer sgd --steps 10 --ulysses
check "11 np=2 adamw 30 steps" 2 0 "$PASS11" "fp32, adamw" -- $D11
check "11 np=3 seq 48" 3 0 "$PASS11" "$WORK11" "$BYTES11" -- $D11 --steps 5 --seq 48 --heads 2 --dim 24
check "11 np=4 seq 256 zigzag" 4 0 "$PASS11" "$WORK11" "$BYTES11" -- $D11 --steps 3 --seq 256 \
  --split zigzag --layers 1
# blocks of several tiles (C = 160: one of 128 and one of 32), merged inside a block
check "11 np=2 seq 640 zigzag: partial tiles" 2 0 "$PASS11" "$WORK11" "$BYTES11" -- $D11 --steps 3 \
  --seq 640 --split zigzag --layers 1 --optimizer sgd
# The loss falls visibly in the default run: the last below a quarter of the first
loss_falls 11 "11 np=2 adamw 30 steps" 30

# --save: every tensor under its name, the shapes of the model
check "11 np=2 save" 2 0 "$PASS11" "saved $T11/cp.safetensors" \
  -- $D11 --steps 3 --save "$T11/cp.safetensors"
transformer_saved 11 "$T11/cp.safetensors" 64 4 1 1

check "11 np=1 the MLP's file" 1 0 "saved $T11/mlp.safetensors" -- ./05_dp/dp --steps 1 --no-check \
  --save "$T11/mlp.safetensors"

# Bad input: one clear message from rank 0, exit 2, never a hang.
bad11() { check_one_error "$@"; }
bad11 "11 seq not divisible by N" 2 2 \
  'error: --seq 63 does not split into 2 contiguous \(N\) chunks of equal length: choose a multiple of 2' \
  -- $D11 --seq 63
bad11 "11 seq not divisible by 2N" 4 2 \
  'error: --seq 12 does not split into 8 zigzag \(2N\) chunks of equal length: choose a multiple of 8' \
  -- $D11 --seq 12 --split zigzag
bad11 "11 heads not divisible by N" 4 2 \
  'error: --ulysses: 2 heads do not split over 4 ranks; choose --heads a multiple of 4' \
  -- $D11 --heads 2 --ulysses
bad11 "11 dim not divisible by heads" 2 2 \
  'error: --heads 5: the width D = 32 does not split into 5 heads' -- $D11 --heads 5
bad11 "11 unknown split" 2 2 "error: --split: 'diagonal' is not one of contiguous\|zigzag" \
  -- $D11 --split diagonal
bad11 "11 seq zero" 2 2 'error: --seq: 0 is out of range' -- $D11 --seq 0
bad11 "11 heads zero" 2 2 'error: --heads: 0 is out of range' -- $D11 --heads 0
bad11 "11 load another width" 2 2 \
  'error: --load .*cp.safetensors: "layers.0.wq" has shape \[32, 32\], the config needs \[16, 16\]' \
  -- $D11 --load "$T11/cp.safetensors" --dim 16
bad11 "11 load the MLP's file" 2 2 'error: --load .*: tensor "layers.0.wq" is missing' \
  -- $D11 --load "$T11/mlp.safetensors"

# --load: a file of --save, at another NP and split; one process starts from
# it too, so the check holds, and the first loss is the trained model's
check "11 np=4 zigzag load" 4 0 "$PASS11" '^step    1/3  loss 0\.4' \
  -- $D11 --steps 3 --split zigzag --load "$T11/cp.safetensors"
check "11 np=2 ulysses load" 2 0 "$PASS11" -- $D11 --steps 3 --ulysses --load "$T11/cp.safetensors"

# --ckpt, --save-every, --resume: interrupted after 5 steps and resumed to 8,
# bit-identical to 8 steps never interrupted at the same NP and split (cmp of
# --save); the same checkpoint at another NP and split (every rank takes the
# whole model) passes the check; another --seq is refused.
rm -rf "$T11/ck" "$T11/full.safetensors" "$T11/resumed.safetensors"
ck11=(--split zigzag --no-check)
check "11 ckpt: 8 steps" 2 0 "saved $T11/full.safetensors" -- $D11 "${ck11[@]}" --steps 8 \
  --save "$T11/full.safetensors"
check "11 ckpt: 5 steps, a checkpoint at 5" 2 0 'checkpoint: step 5 saved' -- $D11 "${ck11[@]}" \
  --steps 5 --ckpt "$T11/ck" --save-every 5
check "11 ckpt: resumed to 8" 2 0 'resume: step 5 .*AdamW m and v' -- $D11 "${ck11[@]}" --steps 8 \
  --ckpt "$T11/ck" --resume --save "$T11/resumed.safetensors"
if cmp -s "$T11/full.safetensors" "$T11/resumed.safetensors"; then
  pass "11 ckpt: the resumed run is bit-identical to the uninterrupted one"
else
  fail "11 ckpt: the resumed run is bit-identical to the uninterrupted one" "" "cmp differs"
fi
check "11 ckpt: resumed at np=4 contiguous" 4 0 'resume: step 5' "$PASS11" -- $D11 --steps 8 \
  --ckpt "$T11/ck" --resume
check "11 ckpt: resumed at np=1 ulysses" 1 0 'resume: step 5' "$PASS11" -- $D11 --steps 8 \
  --ckpt "$T11/ck" --resume --ulysses
bad11 "11 ckpt: another --seq refused" 2 2 \
  'error: --resume: the checkpoint was trained with --seq 64, this run has --seq 128' \
  -- $D11 --steps 8 --ckpt "$T11/ck" --resume --seq 128

# --dump-data: x (tokens with their positions added) and y (targets), each
# [steps, B, S, D]. One process trains on exactly these arrays
# (dt_sequence_batch), and with SGD the run's losses and weights match its
# within S K u, so the run trained on them; the values themselves are the
# task: y_t = the mean of the last 4 tokens, x_t = token + position t.
rm -f "$T11/data.safetensors"
check "11 np=4 zigzag dump-data" 4 0 "$PASS11" "fp32, sgd" -- $D11 --steps 3 --split zigzag \
  --optimizer sgd --dump-data "$T11/data.safetensors"
bad11 "11 dump-data too large" 2 2 \
  'error: --dump-data: 100000 steps of \[4, 64, 32\] exceed 2 GB' \
  -- $D11 --steps 100000 --dump-data "$T11/never.safetensors"
check "11 dump-data: [steps, B, S, D] x and y, the task's values" 0 0 \
  'dump ok: [0-9]+ = 8 \+ [0-9]+ \+ 196608; 2048 targets are the mean of 4 tokens' -- bash -c '
  f=$1; h=$(od -An -tu8 -N8 "$f" | tr -d " "); s=$(($(wc -c <"$f")))
  [ -n "$h" ] && [ "$s" -eq $((8 + h + 196608)) ] || exit 1
  grep -aq "\"x\":{\"dtype\":\"F32\",\"shape\":\[3,4,64,32\],\"data_offsets\":\[0,98304\]}" "$f" || exit 1
  grep -aq "\"y\":{\"dtype\":\"F32\",\"shape\":\[3,4,64,32\],\"data_offsets\":\[98304,196608\]}" "$f" || exit 1
  # step 0, sequence 0: x at float 0.., y at float 24576..
  od -An -v -tf4 -j $((8 + h)) -N 8192 "$f" | tr -s " " "\n" | grep . >"$2.x"
  od -An -v -tf4 -j $((8 + h + 98304)) -N 8192 "$f" | tr -s " " "\n" | grep . >"$2.y"
  awk -v D=32 "NR == FNR { x[NR - 1] = \$1; next } { y[FNR - 1] = \$1 }
    END { for (t = 0; t < 64; t++) for (d = 0; d < D; d++) {
        s = 0; for (j = 0; j < 4 && j <= t; j++) { u = t - j; a = u / 10000 ^ ((d - d % 2) / D)
          s += x[u * D + d] - (d % 2 ? cos(a) : sin(a)) }
        if ((s / 4 - y[t * D + d]) ^ 2 > 1e-10) { print \"off at\", t, d; exit 1 } ok++ }
      print \"dump ok: \" S \" = 8 + \" H \" + 196608; \" ok \" targets are the mean of 4 tokens\" }" \
    S="$s" H="$h" "$2.x" "$2.y"' _ "$T11/data.safetensors" "$T11/dump"

# bf16 and fp16: K and V, dK and dV, Ulysses' all-to-alls and the gradients
# travel in 16 bits, every byte count half of fp32's, beside its formula;
# one process trains at the same precision and the 16-bit criterion holds
PASS11H='CHECK PASSED: each step.s loss, gradient and update match one process.s'
check "11 np=4 bf16" 4 0 "$PASS11H bf16 step" "$BYTES11" "$(fwd11 49152)" \
  "$(bwd11 114688)" "$(ar11 73728)" 'E = 2 bytes an element, bf16: half of fp32' \
  -- $D11 --steps 5 --precision bf16
sides11 "11 np=4 bf16" 4
check "11 np=4 bf16 ulysses" 4 0 "$PASS11H bf16 step" "$BYTES11" "$(fwd11 24576)" \
  "$(bwd11 24576)" -- $D11 --steps 5 --precision bf16 --ulysses
sides11 "11 np=4 bf16 ulysses" 4
check "11 np=2 fp16 overflow: steps skipped, the scale halved" 2 0 "$PASS11H fp16 step" \
  'fp16 gradients overflowed at loss scale 1e\+09: step skipped, scale halved' \
  'fp16 loss scaling +[1-9][0-9]* steps skipped on overflow' -- $D11 --steps 20 --precision fp16 \
  --loss-scale 1e9 --split zigzag
check "11 np=2 fp16 zigzag" 2 0 "$PASS11H fp16 step" "$BYTES11" "$(fwd11 32768)" \
  "$(bwd11 98304)" 'fp16 loss scaling +0 steps skipped' -- $D11 --steps 5 --precision fp16 \
  --split zigzag
