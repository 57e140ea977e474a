# Lesson 12_mesh: data x pipeline x context x tensor on one mesh, checked
# against one process. Sourced by tests/run_tests.sh (check() comes from
# tests/lib.sh).
#
# The default model: L=4 D=32 H=128, 4 heads, B=8 sequences of S=32 tokens.
# On a mesh (dp, pp, cp, tp) with M microbatches (2 pp with a pipeline, else
# 1): L/pp layers a stage, W = D/tp, Hs = H/tp, R = B/(dp M) x S/cp rows per
# microbatch, n = 4DW + 2DHs floats of a layer per rank. Per rank per step:
#   tp  4 (L/pp) M x 2(tp-1)/tp x R D x 4     (1,1,1,2): 524288  (2,2,2,2): 65536
#   cp  (L/pp) M (3cp-2) x 2 R W x 4          (1,1,2,1): 524288  (2,2,2,2): 65536
#   pp  stage 0: M x R D x 4                  (1,2,1,1): 32768   (2,2,2,2): 8192
#   dc  2(G-1)/G x (L/pp) n x 4, G = dp cp    (2,1,1,1): 196608  (2,2,2,2): 73728
#   x 4 is fp32's bytes an element: with --precision bf16|fp16 every message is
#   in 16 bits, x 2, each figure halved (the bf16 tests below)
D12=./12_mesh/mesh
T12=$LOGS/12_mesh_files
mkdir -p "$T12"
PASS12='CHECK PASSED: each step.s loss, gradient and update match one process.s fp32 step'
BYTES12="every rank's calls and bytes equal their formulas: yes"
MEM12="every rank's memory equals its formulas: yes"
REPL12='replicas: every dp x cp group.s [0-9]+ copies of its weights are bit-identical'
# a row of the bytes table: axis, kind, calls per step and bytes per step (both beside equal formulas)
row12() { echo "^    $1 +$2 +$3 +$3 +$4 +$4 "; }
mesh12() { local n=$(($1 * $2 * $3 * $4)); echo "^the mesh: dp $1 x pp $2 x cp $3 x tp $4 = $n rank$([ $n = 1 ] || echo s) "; }

# Every figure printed beside a formula equals it, in the log of test $1:
# the bytes table (calls, bytes) and every row of the memory table.
sides12() {
  local log pairs
  log=$(check_log "$1")
  pairs=$(
    sed -En 's/^    (tp|cp|pp|dp x cp) +[a-z_]+ \([^)]*\) +([0-9]+) +([0-9]+) +([0-9]+) +([0-9]+) .*/\2 \3\n\4 \5/p' "$log"
    sed -En 's/^    (params|grads|optim|activ|comm|data) +([0-9]+) +([0-9]+)   .*/\2 \3/p' "$log"
  )
  pairs_equal "$1" "every call count, byte count and memory row equals its formula" 14 "$log" "$pairs"
}

# Each axis alone, then the combinations (the issue's list), NP 1 to 16
check "12 np=1" 1 0 "$PASS12" "$BYTES12" "$MEM12" "$(mesh12 1 1 1 1)" \
  "$(row12 tp 'all_reduce \(activ\)' 0 0)" "$(row12 'dp x cp' 'all_reduce \(grads\)' 0 0)" \
  -- $D12 --steps 5
sides12 "12 np=1"
check "12 np=2 dp" 2 0 "$PASS12" "$BYTES12" "$MEM12" "$REPL12" "$(mesh12 2 1 1 1)" \
  "$(row12 'dp x cp' 'all_reduce \(grads\)' 1 196608)" -- $D12 --steps 5 --dp 2
check "12 np=2 pp" 2 0 "$PASS12" "$BYTES12" "$MEM12" "$(mesh12 1 2 1 1)" \
  "$(row12 pp 'sendrecv \(activ\)' 5 32768)" \
  'bubble over all steps: .* formula \(N-1\)/\(M\+N-1\) = 1/5 = 20\.0%' -- $D12 --steps 5 --pp 2
check "12 np=2 cp" 2 0 "$PASS12" "$BYTES12" "$MEM12" "$REPL12" "$(mesh12 1 1 2 1)" \
  "$(row12 cp 'sendrecv \(K\|V, dK\|dV\)' 16 524288)" \
  "$(row12 'dp x cp' 'all_reduce \(grads\)' 1 196608)" -- $D12 --steps 5 --cp 2
check "12 np=2 tp" 2 0 "$PASS12" "$BYTES12" "$MEM12" "$(mesh12 1 1 1 2)" \
  "$(row12 tp 'all_reduce \(activ\)' 16 524288)" -- $D12 --steps 5 --tp 2
sides12 "12 np=2 tp"
check "12 np=4 dp pp" 4 0 "$PASS12" "$BYTES12" "$MEM12" "$REPL12" "$(mesh12 2 2 1 1)" \
  -- $D12 --steps 5 --dp 2 --pp 2
check "12 np=4 cp tp" 4 0 "$PASS12" "$BYTES12" "$MEM12" "$(mesh12 1 1 2 2)" -- $D12 --steps 5 \
  --cp 2 --tp 2
check "12 np=8 pp cp tp" 8 0 "$PASS12" "$BYTES12" "$MEM12" "$(mesh12 1 2 2 2)" -- $D12 --steps 5 \
  --pp 2 --cp 2 --tp 2
check "12 np=8 dp pp cp" 8 0 "$PASS12" "$BYTES12" "$MEM12" "$REPL12" "$(mesh12 2 2 2 1)" \
  -- $D12 --steps 5 --dp 2 --pp 2 --cp 2
check "12 np=16" 16 0 "$PASS12" "$BYTES12" "$MEM12" "$REPL12" "$(mesh12 2 2 2 2)" \
  "$(row12 tp 'all_reduce \(activ\)' 32 65536)" "$(row12 cp 'sendrecv \(K\|V, dK\|dV\)' 32 65536)" \
  "$(row12 pp 'sendrecv \(activ\)' 5 8192)" "$(row12 'dp x cp' 'all_reduce \(grads\)' 1 73728)" \
  -- $D12 --steps 5
sides12 "12 np=16"
# 09's interleaved 1F1B on the pipeline axis (--virtual-stages V): chunk c
# of stage s is virtual stage c pp + s; stage 0 sends (2V - 1) M messages of
# R D x 4 (1F1B's M), its calls the plan's (09's pp_events)
check "12 np=2 pp virtual stages" 2 0 "$PASS12" "$BYTES12" "$MEM12" "$(mesh12 1 2 1 1)" \
  "$(row12 pp 'sendrecv \(activ\)' 21 98304)" 'formula \(N-1\)/\(VM\+N-1\) = 1/9 = ' \
  -- $D12 --steps 3 --pp 2 --virtual-stages 2
sides12 "12 np=2 pp virtual stages"
check "12 np=4 pp 4 virtual stages" 4 0 "$PASS12" "$BYTES12" "$MEM12" "$(mesh12 1 4 1 1)" \
  "$(row12 pp 'sendrecv \(activ\)' 43 98304)" -- $D12 --steps 3 --pp 4 --layers 8 --virtual-stages 2
check "12 np=4 pp tp virtual stages" 4 0 "$PASS12" "$BYTES12" "$MEM12" "$(mesh12 1 2 1 2)" \
  -- $D12 --steps 3 --pp 2 --tp 2 --virtual-stages 2
check "12 virtual stages without a pipeline" 2 2 'error: --virtual-stages 2 needs 2 stages or more' \
  -- $D12 --cp 2 --virtual-stages 2
check "12 virtual stages that do not split the layers" 2 2 \
  'error: --layers 6 does not split into 2 stages x 2 virtual stages of equal depth' \
  -- $D12 --pp 2 --layers 6 --virtual-stages 2
# 09's ZB-H1 on the pipeline axis (--schedule zb1): each backward split into
# B (the input's gradient, sent on) and W (the weights', deferred where the
# stage would wait); 1F1B's bytes, the calls ZB-H1's plan's; a slot keeps
# L(2RD + 3RW) more floats for W, at most min(pp, M) slots held; the plan's
# bubble in the slot model exactly (N-1)/(3M+N-1) (1/13 at N 2, M 4; 3/27
# at N 4, M 8). At pp 2 x tp 2 (R 64, D 32, W 16, A 2, Hs 64, C 32, L 2):
# 4 x (live 2 x slot + scratch), the slot RD + L(4RW + RA + 2RD + 2RHs + 2RD + 3RW)
ZB12SLOT=$((64 * 32 + 2 * (4 * 64 * 16 + 64 * 2 + 2 * 64 * 32 + 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 16)))
ZB12=$((4 * (2 * ZB12SLOT + 2 * 64 * 32 + 64 * 64 + 4 * 64 * 16 + 32 * (16 + 2) + 64 * 2)))
check "12 np=4 pp tp zb1" 4 0 "$PASS12" "$BYTES12" "$MEM12" "$(mesh12 1 2 1 2)" \
  "$(row12 pp 'sendrecv \(activ\)' 8 32768)" \
  'bubble \(T - 3M\)/T = 1/13 = 7\.7%; formula \(N-1\)/\(3M\+N-1\) = 7\.7%$' \
  "^    activ +$ZB12 +$ZB12 +.*2RHs \\+ zb1's 2RD \\+ 3RW\\)\\).*, live 2$" \
  -- $D12 --steps 3 --pp 2 --tp 2 --schedule zb1
sides12 "12 np=4 pp tp zb1"
check "12 np=4 pp 4 zb1" 4 0 "$PASS12" "$BYTES12" "$MEM12" "$(mesh12 1 4 1 1)" \
  "$(row12 pp 'sendrecv \(activ\)' 16 32768)" \
  'bubble \(T - 3M\)/T = 3/27 = 11\.1%; formula \(N-1\)/\(3M\+N-1\) = 11\.1%$' \
  -- $D12 --steps 3 --pp 4 --schedule zb1
check "12 zb1 with virtual stages" 2 2 \
  'error: --virtual-stages 2 runs interleaved 1F1B: not with --schedule zb1' \
  -- $D12 --pp 2 --schedule zb1 --virtual-stages 2
# zigzag, GPipe, ZeRO-1, SGD, an odd mesh; the defaults fill tp, cp, pp, dp
check "12 np=2 cp zigzag" 2 0 "$PASS12" "$BYTES12" "$MEM12" -- $D12 --steps 5 --cp 2 --split zigzag
check "12 np=16 zigzag gpipe" 16 0 "$PASS12" "$BYTES12" "$MEM12" "$REPL12" \
  'bubble over all steps: .* = 1/5 = 20\.0%' -- $D12 --steps 5 --split zigzag --schedule gpipe
check "12 np=4 zero 1" 4 0 "$PASS12" "$BYTES12" "$MEM12" "$REPL12" "$(mesh12 2 1 2 1)" \
  "$(row12 'dp x cp' 'all_reduce \(grads\)' 4 294912)" \
  "$(row12 'dp x cp' 'all_gather \(params\)' 4 147456)" -- $D12 --steps 5 --zero 1 --dp 2 --cp 2
sides12 "12 np=4 zero 1"
check "12 np=16 zero 1 sgd" 16 0 "$PASS12" "$BYTES12" "$MEM12" "fp32, sgd" -- $D12 --steps 10 \
  --zero 1 --optimizer sgd
check "12 np=8 sgd" 8 0 "$PASS12" "fp32, sgd" -- $D12 --steps 10 --optimizer sgd
check "12 np=3 dp 3" 3 0 "$PASS12" "$BYTES12" "$MEM12" "$(mesh12 3 1 1 1)" -- $D12 --steps 5 \
  --dp 3 --batch 6
check "12 np=8 tp 4 micro 2" 8 0 "$PASS12" "$BYTES12" "$MEM12" "$(mesh12 1 2 1 4)" -- $D12 \
  --steps 5 --tp 4 --pp 2 --micro 2 --schedule gpipe
check "12 np=4 default" 4 0 "$PASS12" "$(mesh12 1 1 2 2)" \
  '^  tensor   groups \(tp = 2\): \{0, 1\} \{2, 3\}$' '^  context  groups \(cp = 2\): \{0, 2\} \{1, 3\}$' \
  '^  dp x cp  groups \(dp x cp = 2\): \{0, 2\} \{1, 3\}$' -- $D12 --steps 3
check "12 np=8 default" 8 0 "$PASS12" "$(mesh12 1 2 2 2)" '^       5    0    1    0    1   ' \
  -- $D12 --steps 3
check "12 np=2 adamw 30 steps" 2 0 "$PASS12" "fp32, adamw" -- $D12 --cp 2
loss_falls 12 "12 np=2 adamw 30 steps" 30

# --precision bf16: every message in 16 bits (E = 2), so each axis's bytes
# are half the fp32 runs' above, exactly; one process takes the same bf16
# step (its matmul inputs rounded, its gradient through 16 bits once), and
# the check holds each step to 16 bits' bounds (CHECKING.md)
PASS12B='CHECK PASSED: each step.s loss, gradient and update match one process.s bf16 step'
E12B='^  messages in bf16: E = 2 bytes an element, half of fp32.s'
check "12 bf16 np=1" 1 0 "$PASS12B" "$BYTES12" "$MEM12" "$E12B" "$(mesh12 1 1 1 1)" \
  "$(row12 'dp x cp' 'all_reduce \(grads\)' 0 0)" -- $D12 --steps 5 --precision bf16
check "12 bf16 np=2 dp" 2 0 "$PASS12B" "$BYTES12" "$MEM12" "$REPL12" "$(mesh12 2 1 1 1)" \
  "$(row12 'dp x cp' 'all_reduce \(grads\)' 1 98304)" -- $D12 --steps 5 --dp 2 --precision bf16
sides12 "12 bf16 np=2 dp"
check "12 bf16 np=2 pp" 2 0 "$PASS12B" "$BYTES12" "$MEM12" "$(mesh12 1 2 1 1)" \
  "$(row12 pp 'sendrecv \(activ\)' 5 16384)" -- $D12 --steps 5 --pp 2 --precision bf16
check "12 bf16 np=2 cp" 2 0 "$PASS12B" "$BYTES12" "$MEM12" "$REPL12" "$(mesh12 1 1 2 1)" \
  "$(row12 cp 'sendrecv \(K\|V, dK\|dV\)' 16 262144)" \
  "$(row12 'dp x cp' 'all_reduce \(grads\)' 1 98304)" -- $D12 --steps 5 --cp 2 --precision bf16
check "12 bf16 np=2 tp" 2 0 "$PASS12B" "$BYTES12" "$MEM12" "$(mesh12 1 1 1 2)" \
  "$(row12 tp 'all_reduce \(activ\)' 16 262144)" -- $D12 --steps 5 --tp 2 --precision bf16
sides12 "12 bf16 np=2 tp"
check "12 bf16 np=4 dp pp" 4 0 "$PASS12B" "$BYTES12" "$MEM12" "$REPL12" "$(mesh12 2 2 1 1)" \
  -- $D12 --steps 5 --dp 2 --pp 2 --precision bf16
sides12 "12 bf16 np=4 dp pp"
check "12 bf16 np=4 cp tp" 4 0 "$PASS12B" "$BYTES12" "$MEM12" "$(mesh12 1 1 2 2)" -- $D12 \
  --steps 5 --cp 2 --tp 2 --precision bf16
sides12 "12 bf16 np=4 cp tp"
# row by row against the fp32 runs of the same mesh above: every axis halves
for m12 in "np=2 dp" "np=2 pp" "np=2 cp" "np=2 tp" "np=4 dp pp" "np=4 cp tp"; do
  halved "12 bf16 $m12 against fp32" "12 $m12" "12 bf16 $m12"
done
# ZeRO-1 in 16 bits: 06's wire (gradients and the gathered shards halve); a
# shard's owner keeps its fp32 master, the others its 16-bit copy
check "12 bf16 np=4 zero 1" 4 0 "$PASS12B" "$BYTES12" "$MEM12" \
  "${REPL12} in 16 bits .the owner.s fp32 master rounded." "$(mesh12 2 1 2 1)" \
  "$(row12 'dp x cp' 'all_reduce \(grads\)' 4 147456)" \
  "$(row12 'dp x cp' 'all_gather \(params\)' 4 73728)" -- $D12 --steps 5 --zero 1 --dp 2 --cp 2 \
  --precision bf16
sides12 "12 bf16 np=4 zero 1"
halved "12 bf16 np=4 zero 1 against fp32" "12 np=4 zero 1" "12 bf16 np=4 zero 1"
# fp16: the same wire, and the loss scale (common/train/run.c's verdict on
# every rank); the check holds the gradient's factor to the scale's
check "12 fp16 np=4 pp tp" 4 0 \
  'CHECK PASSED: each step.s loss, gradient and update match one process.s fp16 step' "$BYTES12" \
  "$MEM12" '^  ok   gradient.s factor' '^  fp16 loss scaling +0 steps skipped' "$(mesh12 1 2 1 2)" \
  -- $D12 --steps 5 --pp 2 --tp 2 --precision fp16

# --save: one file for the whole model, whatever the mesh, the names and metadata of 11
check "12 np=8 save" 8 0 "$PASS12" "saved $T12/mesh.safetensors" \
  -- $D12 --steps 3 --save "$T12/mesh.safetensors"
transformer_saved 12 "$T12/mesh.safetensors" 32 4 3 2
check "12 np=1 save" 1 0 "$PASS12" -- $D12 --steps 3 --save "$T12/mesh1.safetensors"
if cmp -s "$T12/mesh.safetensors" "$T12/mesh1.safetensors"; then
  fail "12 save: the mesh's file and one process's differ (summed in another order)" "" "identical"
else
  pass "12 save: the mesh's file and one process's differ (summed in another order)"
fi

# --load: a file of --save, on another mesh (ZeRO-1 too); one process starts
# from it as well, so the check holds and the first loss is the trained model's
check "12 np=4 load" 4 0 "$PASS12" '^step    1/3  loss 0\.[0-4]' -- $D12 --steps 3 --dp 2 --pp 2 \
  --load "$T12/mesh.safetensors"
check "12 np=2 load zero 1" 2 0 "$PASS12" -- $D12 --steps 3 --dp 2 --zero 1 \
  --load "$T12/mesh1.safetensors"
check_one_error "12 load another width" 2 2 \
  'error: --load .*mesh.safetensors: "layers.0.wq" has shape \[32, 32\], the config needs \[16, 16\]' \
  -- $D12 --load "$T12/mesh.safetensors" --dim 16 --heads 2

# --ckpt, --save-every, --resume: 5 steps and a checkpoint, resumed to 8,
# bit-identical to 8 steps never interrupted on the same mesh (cmp of
# --save); the same checkpoint on another mesh, ZeRO-1, passes the check
rm -rf "$T12/ck" "$T12/full.safetensors" "$T12/resumed.safetensors"
check "12 ckpt: 8 steps" 8 0 "saved $T12/full.safetensors" -- $D12 --no-check --steps 8 \
  --save "$T12/full.safetensors"
check "12 ckpt: 5 steps, a checkpoint at 5" 8 0 'checkpoint: step 5 saved' -- $D12 --no-check \
  --steps 5 --ckpt "$T12/ck" --save-every 5
check "12 ckpt: resumed to 8" 8 0 'resume: step 5 .*AdamW m and v' -- $D12 --no-check --steps 8 \
  --ckpt "$T12/ck" --resume --save "$T12/resumed.safetensors"
if cmp -s "$T12/full.safetensors" "$T12/resumed.safetensors"; then
  pass "12 ckpt: the resumed run is bit-identical to the uninterrupted one (pp 2 x cp 2 x tp 2)"
else
  fail "12 ckpt: the resumed run is bit-identical to the uninterrupted one (pp 2 x cp 2 x tp 2)" "" \
    "cmp differs"
fi
check "12 ckpt: resumed on dp 2 x cp 2, zero 1" 4 0 'resume: step 5' "$PASS12" -- $D12 --steps 8 \
  --ckpt "$T12/ck" --resume --dp 2 --cp 2 --zero 1

# --dump-data: every step's global batch as the model sees it, the same
# file whatever the mesh (one process's, byte for byte)
rm -f "$T12/data16.safetensors" "$T12/data1.safetensors"
check "12 np=16 dump-data" 16 0 "$PASS12" -- $D12 --steps 2 --dump-data "$T12/data16.safetensors"
check "12 np=1 dump-data" 1 0 "$PASS12" -- $D12 --steps 2 --dump-data "$T12/data1.safetensors"
if [ -s "$T12/data1.safetensors" ] && cmp -s "$T12/data16.safetensors" "$T12/data1.safetensors" &&
  grep -aq '"x":{"dtype":"F32","shape":\[2,8,32,32\]' "$T12/data1.safetensors"; then
  pass "12 dump-data: x and y [steps, B, S, D], the same bytes at NP 16 as at NP 1"
else
  fail "12 dump-data: x and y [steps, B, S, D], the same bytes at NP 16 as at NP 1" "" \
    "$(head -c 300 "$T12/data1.safetensors" | tr -d '\0')"
fi

# Bad input: one clear message from rank 0, exit 2, never a hang.
check_one_error "12 product not N" 4 2 \
  'error: --dp 2 --pp 1 --cp 1 --tp 1: a mesh of 2 ranks, but the job has 4: the axes. product must be N' \
  -- $D12 --dp 2 --pp 1 --cp 1 --tp 1
check_one_error "12 axis not dividing N" 4 2 \
  "error: --tp 3: 3 ranks along the axes given do not divide the job's 4 ranks" -- $D12 --tp 3
check_one_error "12 heads not divisible by tp" 2 2 \
  'error: --heads 3: the heads do not split over --tp 2: .* choose --heads a multiple of 2' \
  -- $D12 --tp 2 --heads 3 --dim 24
check_one_error "12 hidden not divisible by tp" 2 2 'error: --hidden 129 does not split over --tp 2' \
  -- $D12 --tp 2 --hidden 129
check_one_error "12 layers not divisible by pp" 3 2 \
  'error: --layers 4: the layers do not split into --pp 3 stages of equal length' -- $D12 --pp 3
check_one_error "12 seq not divisible by cp" 2 2 \
  'error: --seq 31 does not split into 2 contiguous \(cp\) chunks of equal length' -- $D12 --cp 2 --seq 31
check_one_error "12 seq not divisible by 2cp" 2 2 \
  'error: --seq 30 does not split into 4 zigzag \(2 cp\) chunks of equal length: choose a multiple of 4' \
  -- $D12 --cp 2 --seq 30 --split zigzag
check_one_error "12 batch not divisible by dp M" 2 2 \
  'error: --batch 8 does not split into dp x M = 1 x 3 microbatches of whole sequences' \
  -- $D12 --pp 2 --micro 3
check_one_error "12 zero 2" 2 2 'error: --zero: 2 is out of range' -- $D12 --zero 2
check_one_error "12 unknown schedule" 2 2 "error: --schedule: 'interleaved' is not one of gpipe\|1f1b" \
  -- $D12 --schedule interleaved
