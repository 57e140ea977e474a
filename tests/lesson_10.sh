# Lesson 10_ep: expert parallelism, checked against one process.
# Sourced by tests/run_tests.sh (check() comes from tests/lib.sh).
#
# The default model: L=4 D=64 H=256, E=8 experts, k=2, cf 1.25. The bytes of
# the token exchanges depend on where the router sends the tokens, so each
# is printed beside its formula computed from the tokens the rank counted;
# the counts' all-to-all and the all-reduce are fixed:
#   counts      L (N-1) E/N x 8:                 N=2: 128    N=4: 192
#   all-reduce  2(N-1)/N (L D E + L E) x 4:       N=2: 8320   N=4: 12480
D10=./10_ep/ep
T10=$LOGS/10_ep_files
mkdir -p "$T10"
PASS10='CHECK PASSED: each step.s loss, gradient and update match one process.s fp32 step'
ROUTE10='routing: [0-9]+ tokens routed in the steps compared; [0-9]+ alike, [0-9]+ near ties'
bytes10() { echo "all-reduce calls/step +$1 +bytes sent per rank per step $2, formula 2\(N-1\)/N x \(L D E router gradients \+ L E counts\) x 4 = $2\$"; }
counts10() { echo "^    counts +$1\.0 +formula L x \(N-1\) x E/N x 8 = $1\.0\$"; }

# Every figure printed beside a formula equals it, in the log of test $1:
# the five exchanges (measured, then "= formula") and the memory table.
sides10() {
  local log pairs
  log=$(check_log "$1")
  pairs=$(
    sed -n 's/^    [a-z, ]* \{1,\}\([0-9.]\{1,\}\) \{1,\}formula .* = \([0-9.]\{1,\}\)$/\1 \2/p' "$log"
    sed -n 's/^    \([a-z]\{1,\}\) \{1,\}\([0-9]\{1,\}\) \{1,\}\([0-9]\{1,\}\)   .*/\2 \3/p' "$log"
  )
  pairs_equal "$1" "every exchange's bytes and every memory row equal their formulas" 10 "$log" "$pairs"
}

# The step line prints the loss apart: loss = task + balance (the load-balancing
# loss), and the check compares each of the two with one process.
SPLIT10='^step +5/5 +loss [0-9.]+ = task [0-9.]+ \+ balance [0-9.]+  \(mean over ranks\)'
ROWS10=('^  ok   task loss, rel diff +[0-9]' '^  ok   balance loss, rel diff +[0-9]')
check "10 np=1" 1 0 "$PASS10" "$ROUTE10" "$(counts10 0)" "$(bytes10 0 0)" "$SPLIT10" "${ROWS10[@]}" \
  'expert parallel: 8 experts of 8 per rank, each token to 2; capacity 10 tokens per expert of a rank.s 32' \
  -- $D10 --steps 5
sides10 "10 np=1"
# every step line's loss is its task + balance (to the printed digits), and
# the summary's balance loss is the last step's
split10() {
  local log bad last sum
  log=$(check_log "$1")
  bad=$(awk '/^step .* = task / { n++; if ($4 - $7 - $10 > 1.5e-6 || $7 + $10 - $4 > 1.5e-6) print }
    END { if (!n) print "no step line with task and balance" }' "$log")
  last=$(sed -nE 's/^step .* balance ([0-9.]+) .*/\1/p' "$log" | tail -n 1)
  sum=$(sed -nE 's/^  load-balancing loss +([0-9.]+) .*/\1/p' "$log")
  if [ -z "$bad" ] && [ -n "$last" ] && [ "$last" = "$sum" ]; then
    pass "$1: every step's loss = task + balance, the summary's balance loss the last step's ($sum)"
  else
    fail "$1: every step's loss = task + balance, the summary's balance loss the last step's" "$log" \
      "${bad:-last step's balance '$last', the summary's '$sum'}"
  fi
}
split10 "10 np=1"
check "10 np=2" 2 0 "$PASS10" "$ROUTE10" "$(counts10 128)" "$(bytes10 2 8320)" \
  'every rank.s bytes equal its formulas: yes \(2 ranks\)' -- $D10 --steps 5
sides10 "10 np=2"
check "10 np=4" 4 0 "$PASS10" "$ROUTE10" "$(counts10 192)" "$(bytes10 2 12480)" "$SPLIT10" "${ROWS10[@]}" \
  'capacity 3 tokens per expert of a rank.s 8 \(ceil\(cf k R / E\), cf 1.25\)' \
  'every rank.s bytes equal its formulas: yes \(4 ranks\)' \
  '^    params +1056768 +1056768 ' -- $D10 --steps 5
sides10 "10 np=4"
split10 "10 np=4"
# E 4, k 1; E 4 at NP 4 (one expert a rank); SGD; AdamW (the default) over 30 steps
check "10 np=2 experts 4 topk 1" 2 0 "$PASS10" "$ROUTE10" "$(counts10 64)" \
  'expert parallel: 2 experts of 4 per rank, each token to 1;' -- $D10 --steps 5 --experts 4 --topk 1
check "10 np=4 experts 4" 4 0 "$PASS10" "$ROUTE10" "$(counts10 96)" -- $D10 --steps 5 --experts 4
check "10 np=4 sgd" 4 0 "$PASS10" "$ROUTE10" "fp32, sgd" -- $D10 --optimizer sgd --steps 10
check "10 np=2 adamw clip, 30 steps" 2 0 "$PASS10" "$ROUTE10" "fp32, adamw" "clipped" -- $D10 --clip 0.5
# With and without drops: a large cf drops nothing, a small one drops many.
check "10 np=4 no drops" 4 0 "$PASS10" '^  dropped +0 +of 1280 choices \(0\.00%\)' \
  -- $D10 --steps 5 --capacity-factor 100
check "10 np=4 many drops" 4 0 "$PASS10" '^  dropped +[1-9][0-9]* +of 1280 choices' \
  'capacity 1 tokens per expert' -- $D10 --steps 5 --capacity-factor 0.25
sides10 "10 np=4 many drops"
# bf16: the token rows travel in 16 bits (bytes halve: D x 2 a row), and one
# process rounds the same rows; the routing's tolerance is bf16's (1e-2).
PASS10_16='CHECK PASSED: each step.s loss, gradient and update match one process.s bf16 step'
check "10 np=4 bf16" 4 0 "$PASS10_16" "$ROUTE10" 'logits within 1e-02 of the k-th best' \
  '^  ok   task loss, rel diff ' '^  ok   balance loss, rel diff ' \
  '^    dispatch +[0-9.]+ +formula tokens sent to other ranks x D x 2 = ' \
  '16-bit copies$' -- $D10 --steps 10 --precision bf16
sides10 "10 np=4 bf16"
check "10 np=2 bf16 hand, drops" 2 0 "$PASS10_16" -- $D10 --steps 10 --precision bf16 \
  --all-to-all hand --capacity-factor 0.5
check "10 np=4 no balance loss" 4 0 "$PASS10" '^step +5/5 +loss [0-9.]+ = task [0-9.]+ \+ balance 0\.000000 ' \
  "${ROWS10[@]}" -- $D10 --steps 5 --aux-coef 0
split10 "10 np=4 no balance loss"
# fp16: the loss scale multiplies the balance loss's gradient as it does the
# task's (moe.c), so the router's gradient unscales as one; token rows and
# their gradients travel in 16 bits
check "10 np=2 fp16" 2 0 "${PASS10_16/bf16/fp16}" "$ROUTE10" 'fp16 loss scaling +0 steps skipped on overflow' \
  '^    dispatch +[0-9.]+ +formula tokens sent to other ranks x D x 2 = ' -- $D10 --steps 10 --precision fp16
sides10 "10 np=2 fp16"

# The hand all-to-all (N-1 rounds of sendrecv) gives the library's result bit
# for bit: every printed loss and every figure of the check is the same.
for a2a in library hand; do
  check "10 np=4 all-to-all $a2a" 4 0 "$PASS10" -- $D10 --steps 10 --all-to-all "$a2a"
done
same10() { sed -n -e 's/  [0-9.]* ms$//p' -e '/ loss, rel diff /p' -e '/ gradient, worst tensor /p' "$(check_log "10 np=4 all-to-all $1")"; }
if [ -n "$(same10 library)" ] && [ "$(same10 library)" = "$(same10 hand)" ]; then
  pass "10 np=4: the hand all-to-all trains bit for bit as the library's"
else
  fail "10 np=4: the hand all-to-all trains bit for bit as the library's" "" \
    "$(diff <(same10 library) <(same10 hand) | head -5)"
fi

# --save: the router and each expert under their own names, loadable by name
check "10 np=2 save" 2 0 "$PASS10" "saved $T10/ep.safetensors" \
  -- $D10 --steps 5 --experts 4 --save "$T10/ep.safetensors"
if [ -f "$T10/ep.safetensors" ] && head -c 4000 "$T10/ep.safetensors" | tr -d '\0' |
  grep -q '"layers.3.router":{"dtype":"F32","shape":\[64,4\]' &&
  head -c 4000 "$T10/ep.safetensors" | grep -q '"layers.3.experts.3.w2":{"dtype":"F32","shape":\[256,64\]'; then
  pass "10 save: layers.{l}.router [D,E] and layers.{l}.experts.{e}.w1/w2 in the file"
else
  fail "10 save: layers.{l}.router [D,E] and layers.{l}.experts.{e}.w1/w2 in the file" "" \
    "$(head -c 600 "$T10/ep.safetensors" 2>&1 | tr -d '\0')"
fi

# --load: the saved mixture at any NP dividing E (saved at 2, loaded at 4
# and 1); one process starts from the same file. Loaded at NP 4, stepped once
# at lr 1e-30 and saved again, the data is the file's, bit for bit.
check "10 np=4 load" 4 0 "$PASS10" "$ROUTE10" -- $D10 --steps 5 --experts 4 --load "$T10/ep.safetensors"
check "10 np=1 load" 1 0 "$PASS10" -- $D10 --steps 5 --experts 4 --load "$T10/ep.safetensors"
check "10 np=4 load, save" 4 0 "saved $T10/again.safetensors" -- $D10 --steps 1 --experts 4 --lr 1e-30 \
  --no-check --load "$T10/ep.safetensors" --save "$T10/again.safetensors"
n10=$((4 * (64 * 4 + 2 * 4 * 64 * 256) * 4)) # L (DE + 2EDH) x 4 bytes: the data, at the end of each file
if [ -f "$T10/again.safetensors" ] && cmp -s <(tail -c $n10 "$T10/ep.safetensors") <(tail -c $n10 "$T10/again.safetensors"); then
  pass "10 load: saved at NP 2, loaded at NP 4 and saved again, the same $n10 bytes of weights"
else
  fail "10 load: saved at NP 2, loaded at NP 4 and saved again, the same $n10 bytes of weights" "" \
    "$(cmp <(tail -c $n10 "$T10/ep.safetensors") <(tail -c $n10 "$T10/again.safetensors") 2>&1)"
fi

# --ckpt: rank 0 gathers the router and every rank's experts, with AdamW's m
# and v, and writes them whole (common/train/checkpoint.c: temp file, fsync,
# rename, then the manifest). Resumed at the same NP, the run ends bit for bit
# where an uninterrupted one does; the check trains one process over all the
# steps and replays the routing from the resumed step on.
rm -rf "$T10/ck" "$T10/ck4"
check "10 np=2 uninterrupted, 8 steps" 2 0 "saved $T10/full.safetensors" \
  -- $D10 --steps 8 --no-check --save "$T10/full.safetensors"
check "10 np=2 checkpoint every 2" 2 0 "^checkpoint: step 4 saved to $T10/ck/step-00000004.safetensors" \
  -- $D10 --steps 4 --no-check --ckpt "$T10/ck" --save-every 2
check "10 np=2 resume" 2 0 "$PASS10" "$ROUTE10" "${ROWS10[@]}" \
  "^resume: step 4 from $T10/ck/step-00000004.safetensors \(weights, AdamW m and v; configuration and checksum verified\)" \
  -- $D10 --steps 8 --ckpt "$T10/ck" --resume --save "$T10/resumed.safetensors"
if [ -f "$T10/full.safetensors" ] && cmp -s "$T10/full.safetensors" "$T10/resumed.safetensors"; then
  pass "10 np=2 resume: the saved model is bit-identical to the uninterrupted run's (cmp)"
else
  fail "10 np=2 resume: the saved model is bit-identical to the uninterrupted run's (cmp)" "" \
    "$(cmp "$T10/full.safetensors" "$T10/resumed.safetensors" 2>&1)"
fi
# The capacity groups are the ranks: another NP drops other tokens, another
# training, refused; with cf >= E/k no token can be dropped, and a checkpoint
# of NP 2 resumes at NP 4, each rank taking its experts from the whole tensors.
check "10 np=4 resume refused" 4 2 \
  'error: --resume: the checkpoint was trained at 2 ranks, this run has 4: a mixture.s capacity groups are the ranks' \
  -- $D10 --steps 8 --ckpt "$T10/ck" --resume
check "10 resume, another topk" 2 2 'error: --resume: the checkpoint was trained with --topk 2, this run has --topk 1' \
  -- $D10 --steps 8 --ckpt "$T10/ck" --resume --topk 1
check "10 np=2 checkpoint, cf 4" 2 0 "^checkpoint: step 4 saved to $T10/ck4/" \
  -- $D10 --steps 4 --no-check --capacity-factor 4 --ckpt "$T10/ck4" --save-every 4
check "10 np=4 resume resharded, cf 4" 4 0 "$PASS10" "$ROUTE10" '^resume: step 4 ' '^  dropped +0 +of' \
  -- $D10 --steps 8 --capacity-factor 4 --ckpt "$T10/ck4" --resume

# Bad input: one clear message from rank 0, exit 2, never a hang.
check "10 experts not divisible" 4 2 'error: --experts 6: 6 experts do not split over 4 ranks' \
  -- $D10 --experts 6
check "10 topk above experts" 2 2 'error: --topk 2 is more than --experts 1' -- $D10 --experts 1
check "10 topk out of range" 2 2 'error: --topk: 3 is out of range' -- $D10 --topk 3
check "10 topk zero" 2 2 'error: --topk: 0 is out of range' -- $D10 --topk 0
check "10 capacity factor zero" 2 2 'error: --capacity-factor: 0 is out of range' \
  -- $D10 --capacity-factor 0
check "10 capacity factor negative" 2 2 'error: --capacity-factor: -1 is out of range' \
  -- $D10 --capacity-factor -1
check "10 batch not divisible" 4 2 'error: global batch 30 does not split over 4 ranks' \
  -- $D10 --batch 30 --samples 240
check "10 unknown all-to-all" 2 2 "error: --all-to-all: 'ring' is not one of library\|hand" \
  -- $D10 --all-to-all ring
check "10 load, another E" 2 2 'error: --load .*: "layers.0.router" has shape \[64, 4\], the config needs \[64, 8\]' \
  -- $D10 --load "$T10/ep.safetensors"
check "10 load, no file" 2 2 "error: --load $T10/none.safetensors: No such file" -- $D10 --load "$T10/none.safetensors"
