# Lesson 11_cp: context parallelism, checked against one process.
# Sourced by tests/run_tests.sh (check() comes from tests/lib.sh).
#
# The default model: L=2 D=32 H=128, A=4 heads, B=4 sequences of S=64
# tokens, P = L(4D^2 + 2DH) = 24576 parameters. R = B S/N rows per rank.
#   ring forward   L (N-1) 2RD x 4:              N=2: 65536    N=4: 98304
#   ring backward  L (2N-1) 2RD x 4:             N=2: 196608   N=4: 229376
#   Ulysses        L 4 (N-1)/N RD x 4 each way:  N=2: 65536    N=4: 49152
#   all-reduce     2(N-1)/N P x 4:               N=2: 98304    N=4: 147456
# Work per rank (scores x heads per layer per sequence): contiguous rank r
# A(r C^2 + C(C+1)/2), C = S/N; zigzag A((2N-1)C^2 + C(C+1)), C = S/2N;
# Ulysses A/N S(S+1)/2. At N=4: 544 .. 3616, 2080, 2080; at N=2: 2112 and
# 6208, 4160, 4160.
D11=./11_cp/cp
T11=$LOGS/11_cp_files
mkdir -p "$T11"
PASS11='CHECK PASSED: per-step loss and final weights match single-process training'
WORK11="every rank's work equals its formula: yes"
BYTES11="every rank's bytes equal its formulas: yes"
fwd11() { echo "^    forward +$1\.0 +formula .* = $1\.0\$"; }
bwd11() { echo "^    backward +$1\.0 +formula .* = $1\.0\$"; }
ar11() { echo "bytes sent per rank per step $1\.0, formula 2\(N-1\)/N x P x 4 = $1\.0"; }
rank11() { echo "^    rank $1 +$2 +formula .* = $2 +backward $2 "; }

# Every figure printed beside a formula equals it, in the log of test $1:
# each rank's work (forward and backward), the bytes, the all-reduce, the
# attention memory and every row of the memory table.
sides11() {
  local log pairs
  log=$(check_log "$1")
  pairs=$(
    sed -En 's/^    rank [0-9]+ +([0-9]+) +formula .* = ([0-9]+) +backward ([0-9]+) .*/\1 \2/p' "$log"
    sed -En 's/^    rank [0-9]+ +([0-9]+) +formula .* = ([0-9]+) +backward ([0-9]+) .*/\3 \2/p' "$log"
    sed -En 's/^    (forward|backward) +([0-9.]+) +formula .* = ([0-9.]+)$/\2 \3/p' "$log"
    sed -En 's/.*bytes sent per rank per step ([0-9.]+), formula 2\(N-1\)\/N x P x 4 = ([0-9.]+) .*/\1 \2/p' "$log"
    sed -En 's/^  attention memory +([0-9]+) .* = ([0-9]+): no score.*/\1 \2/p' "$log"
    sed -En 's/^    (params|grads|optim|activ|comm|data) +([0-9]+) +([0-9]+)   .*/\2 \3/p' "$log"
  )
  pairs_equal "$1" "every rank's work, the bytes and every memory row equal their formulas" \
    $((2 * $2 + 10)) "$log" "$pairs"
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
# The loss falls visibly in the default run: the last below a quarter of the first
loss_falls 11 "11 np=2 adamw 30 steps" 30

# --save: every tensor under its name, the shapes of the model
check "11 np=2 save" 2 0 "$PASS11" "saved $T11/cp.safetensors" \
  -- $D11 --steps 3 --save "$T11/cp.safetensors"
transformer_saved 11 "$T11/cp.safetensors" 64 4 1 1

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
bad11 "11 load refused" 2 2 "error: --load: 11_cp does not take it: the transformer's sequences are not read back" \
  -- $D11 --load "$T11/cp.safetensors"
bad11 "11 bf16 refused" 2 2 'error: --precision bf16: 11_cp does not take it: the transformer trains in fp32 only' \
  -- $D11 --precision bf16
