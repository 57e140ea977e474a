#!/usr/bin/env bash
# Checkpoint and resume (sourced by run_tests.sh), for every training lesson
# that supports --ckpt:
#   - a run interrupted after step k and resumed ends bit-identical to an
#     uninterrupted run at the same NP (cmp of the saved models);
#   - a checkpoint written at NP=4 resumes at NP=2 and NP=1 and passes the
#     reference check (resharding);
#   - a truncated or corrupt checkpoint is refused with a clear message;
#   - a run killed (SIGKILL) while checkpointing every step leaves a manifest
#     that names a complete checkpoint, and resuming from it ends bit-identical
#     to a run never interrupted;
#   - 05's --compress: every rank's error-feedback residual is in the
#     checkpoint, so the same holds with it at the same NP; another NP, or
#     another or no --compress, is refused with one line.
CK=build/test-ckpt
ckpt_suite() {
  local name=$1 bin=$2 np=$3; shift 3
  local args=("$@" --optimizer adamw --no-check)
  local dir="$CK/$name" full="$CK/$name-full.safetensors" resumed="$CK/$name-resumed.safetensors"
  rm -rf "$dir" "$full" "$resumed"; mkdir -p "$CK"
  check "$name ckpt: uninterrupted 8 steps np=$np" "$np" 0 "saved $full" -- "$bin" "${args[@]}" --steps 8 --save "$full"
  check "$name ckpt: 5 steps, checkpoint every 5 np=$np" "$np" 0 "checkpoint: step 5 saved" -- "$bin" "${args[@]}" --steps 5 --ckpt "$dir" --save-every 5
  check "$name ckpt: resume to 8 np=$np" "$np" 0 "resume: step 5" -- "$bin" "${args[@]}" --steps 8 --ckpt "$dir" --resume --save "$resumed"
  if cmp -s "$full" "$resumed"; then pass "$name ckpt: resumed run is bit-identical to the uninterrupted one"
  else fail "$name ckpt: resumed run is bit-identical to the uninterrupted one" "" "cmp $full $resumed differ"; fi
  # resharding: written at 4 ranks, resumed at 2 and 1, checked against one process
  rm -rf "$dir"
  check "$name ckpt: write at np=4" 4 0 "checkpoint: step 4 saved" -- "$bin" "$@" --optimizer adamw --no-check --steps 4 --ckpt "$dir" --save-every 4
  for n in 2 1; do
    check "$name ckpt: np=4 checkpoint resumes at np=$n" "$n" 0 'resume: step 4' 'CHECK PASSED' -- "$bin" "$@" --optimizer adamw --steps 6 --ckpt "$dir" --resume
  done
  # a truncated checkpoint is refused, clearly
  local f="$dir/step-00000004.safetensors"
  head -c 5000 "$f" >"$f.cut" && mv "$f.cut" "$f"
  check "$name ckpt: truncated checkpoint refused" 2 2 'error: .*step-00000004.safetensors.*(truncated|past the end|not a safetensors)' -- "$bin" "${args[@]}" --steps 6 --ckpt "$dir" --resume
  printf 'garbage' >"$dir/latest"
  check "$name ckpt: corrupt manifest refused" 2 2 'error: --resume: no readable manifest' -- "$bin" "${args[@]}" --steps 6 --ckpt "$dir" --resume
}

ckpt_killed() { # kill -9 while it checkpoints every step; the manifest must stay good
  local name=$1 bin=$2 np=$3; shift 3
  local dir="$CK/$name-killed" tag=$((RANDOM * 32768 + RANDOM)) log="$LOGS/$name-ckpt-killed.log"
  rm -rf "$dir"; : >"$log"
  $(mpirun_cmd "$np") "$bin" "$@" --optimizer adamw --no-check --steps 100000 --ckpt "$dir" --save-every 1 --seed "$tag" >"$log" 2>&1 &
  local launcher=$!
  for _ in $(seq 150); do [ "$(grep -c '^checkpoint:' "$log")" -ge 3 ] && break; sleep 0.1; done
  pkill -9 -f -- "--seed $tag\$"; kill -9 $launcher 2>/dev/null; { wait $launcher; } 2>/dev/null
  local at; at=$(sed -n 's/^step-0*\([0-9]*\)\.safetensors$/\1/p' "$dir/latest" 2>/dev/null)
  if [ -z "$at" ]; then fail "$name ckpt: killed mid-run, manifest intact" "$log" "no manifest"; return; fi
  check "$name ckpt: killed mid-run at step >= $at, resumes from the manifest" "$np" 0 "resume: step $at" -- \
    "$bin" "$@" --optimizer adamw --no-check --steps $((at + 2)) --ckpt "$dir" --resume --seed "$tag" \
    --save "$dir/resumed.safetensors"
  check "$name ckpt: the same $((at + 2)) steps never interrupted" "$np" 0 "saved" -- \
    "$bin" "$@" --optimizer adamw --no-check --steps $((at + 2)) --seed "$tag" --save "$dir/full.safetensors"
  if cmp -s "$dir/full.safetensors" "$dir/resumed.safetensors"; then
    pass "$name ckpt: killed and resumed is bit-identical to never interrupted"
  else fail "$name ckpt: killed and resumed is bit-identical to never interrupted" "" "cmp $dir/full.safetensors $dir/resumed.safetensors differ"; fi
}

ckpt_suite 05_dp ./05_dp/dp 2
# A resumed run's first step is compared from the checkpoint's own state
# (CHECKING.md), its ReLU decisions of that step replayed and judged
rm -rf "$CK/05-kinks"
check "05 ckpt: 2 steps of sgd, checkpoint every step" 2 0 "checkpoint: step 2 saved" -- \
  ./05_dp/dp --steps 2 --ckpt "$CK/05-kinks" --save-every 1
check "05 ckpt: resumed to 3 steps, its ReLU decisions replayed from step 3" 2 0 'resume: step 2' \
  '^ReLU decisions: 32768 made in the steps compared; .* near 0 in one only: 0$' \
  '^lockstep: one process took 1 of the run.s 1 steps from the run.s own state' 'CHECK PASSED' -- \
  ./05_dp/dp --steps 3 --ckpt "$CK/05-kinks" --resume
ckpt_killed 05_dp ./05_dp/dp 2
ckpt_killed 05_dp-compress ./05_dp/dp 2 --compress topk:0.01
# 09_pp: stages own contiguous runs of layers (2, 2 at NP=2; 1 each at NP=4)
ckpt_suite 09_pp ./09_pp/pp 2 --microbatches 2
ckpt_killed 09_pp ./09_pp/pp 2 --microbatches 2
# 06_fsdp: w (stage 3), m and v sharded in padded per-layer buffers; stage 1
# with --prefetch also checkpoints while the weights' all-gathers are in flight
ckpt_suite 06_fsdp ./06_fsdp/fsdp 2
ckpt_suite 06_fsdp-zero1 ./06_fsdp/fsdp 2 --zero 1 --prefetch
ckpt_killed 06_fsdp ./06_fsdp/fsdp 2
# 08_fsdp_tp: the default --tp 0 is 2 (1 at odd NP), valid at NP 4, 2 and 1
ckpt_suite 08_fsdp_tp ./08_fsdp_tp/fsdp_tp 2
ckpt_killed 08_fsdp_tp ./08_fsdp_tp/fsdp_tp 2

# A checkpoint carries the run's configuration and a checksum of its data.
# Resuming with another setting would silently be another training (and the
# final check would retrain the wrong one): each is refused with one line
# naming the setting and how to go on. More --steps is the same training.
CFG=build/test-ckpt/config
rm -rf "$CFG"; mkdir -p "$(dirname "$CFG")"
ck_args=(--optimizer adamw --no-check --ckpt "$CFG")
check "ckpt config: write at step 4" 2 0 "checkpoint: step 4 saved" -- ./05_dp/dp "${ck_args[@]}" --steps 4 --save-every 4
for change in "--layers 2:--layers 4" "--dim 32:--dim 64" "--hidden 128:--hidden 256" "--batch 64:--batch 32" \
              "--samples 512:--samples 256" "--seed 5:--seed 1" "--data-seed 9:--data-seed 2" "--optimizer sgd:--optimizer adamw" \
              "--lr 0.01:--lr 0.003" "--weight-decay 0.1:--weight-decay 0.01" "--clip 1:--clip 0" "--precision bf16:--precision fp32"; do
  new=${change%%:*} old=${change#*:}
  check "ckpt config: resume with $new refused" 2 2 \
    "^error: --resume: the checkpoint was trained with $old, this run has $new: a resumed run must continue the same training; run with $old, or start afresh with another --ckpt folder" \
    -- ./05_dp/dp "${ck_args[@]}" --steps 6 --resume $new
done
check "ckpt config: more --steps is the same training" 2 0 'resume: step 4 .*configuration and checksum verified' \
  "resume: the checkpoint's run was set for --steps 4, this one trains to 6: fine" \
  -- ./05_dp/dp --optimizer adamw --ckpt "$CFG" --steps 6 --resume
# a flipped bit anywhere in the data, and a NaN written with a valid checksum
ck_file=$CFG/step-00000004.safetensors
cp "$ck_file" "$CFG/good"
python3 - "$ck_file" <<'PY'
import sys
d = bytearray(open(sys.argv[1], 'rb').read())
n = int.from_bytes(d[:8], 'little')
d[8 + n + len(d[8 + n:]) * 3 // 4] ^= 0x04  # in AdamW's v
open(sys.argv[1], 'wb').write(d)
PY
check "ckpt: a flipped bit is refused" 2 2 "^error: $ck_file: the data's checksum is [0-9a-f]{16}, the file says [0-9a-f]{16}: the file is damaged" \
  -- ./05_dp/dp "${ck_args[@]}" --steps 6 --resume
cp "$CFG/good" "$ck_file"
python3 - "$ck_file" <<'PY'
import sys, struct, re
d = bytearray(open(sys.argv[1], 'rb').read())
n = int.from_bytes(d[:8], 'little')
d[8 + n + 400:8 + n + 404] = struct.pack('<f', float('nan'))
h = 0xcbf29ce484222325  # FNV-1a over 32-bit words, as common/train/safetensors.c
for (w,) in struct.iter_unpack('<I', bytes(d[8 + n:])):
    h = ((h ^ w) * 0x100000001b3) & 0xffffffffffffffff
head = re.sub(rb'"checksum":"[0-9a-f]{16}"', b'"checksum":"%016x"' % h, bytes(d[8:8 + n]))
open(sys.argv[1], 'wb').write(d[:8] + head + d[8 + n:])
PY
check "ckpt: NaN weights (valid checksum) are refused" 2 2 "^error: $ck_file: layers.0 holds NaN: saved from a diverged run" \
  -- ./05_dp/dp "${ck_args[@]}" --steps 6 --resume
cp "$CFG/good" "$ck_file"
check "ckpt: the restored checkpoint resumes" 2 0 "resume: step 4" -- ./05_dp/dp "${ck_args[@]}" --steps 5 --resume
# a FIFO as the manifest neither blocks nor counts
mv "$CFG/latest" "$CFG/latest.saved" && mkfifo "$CFG/latest"
check "ckpt: a FIFO as the manifest is refused at once" 2 2 "^error: --ckpt $CFG: its manifest $CFG/latest is a FIFO, not a regular file" \
  -- ./05_dp/dp "${ck_args[@]}" --steps 6 --resume --timeout 5
rm -f "$CFG/latest"
mv "$CFG/latest.saved" "$CFG/latest"

# --compress: the residual rank r keeps (what its top-k left unsent) decides
# the next step as much as the weights: each rank's is in the checkpoint, in
# the same file. Interrupted after step 5 and resumed at the same NP (2 and
# 3), the run ends bit-identical to one never interrupted; resumed from the
# same file with the residuals zeroed (a checkpoint without them), it does
# not: the comparison can fail.
TK=build/test-ckpt/compress
tk_args=(--compress topk:0.01 --optimizer adamw --no-check)
for np in 2 3; do
  rm -rf "$TK"; mkdir -p "$TK"
  b=$((8 * np))
  check "ckpt --compress np=$np: uninterrupted 8 steps" "$np" 0 "saved" \
    -- ./05_dp/dp "${tk_args[@]}" --batch $b --steps 8 --save "$TK/full.safetensors"
  check "ckpt --compress np=$np: 5 steps, checkpoint every 5" "$np" 0 "checkpoint: step 5 saved" \
    -- ./05_dp/dp "${tk_args[@]}" --batch $b --steps 5 --ckpt "$TK/ck" --save-every 5
  check "ckpt --compress np=$np: resume to 8 with each rank's residual" "$np" 0 \
    "^resume: step 5 from $TK/ck/step-00000005.safetensors \(weights, AdamW m and v, each rank's state of --compress topk with k = 1311; configuration and checksum verified\)" \
    -- ./05_dp/dp "${tk_args[@]}" --batch $b --steps 8 --ckpt "$TK/ck" --resume --save "$TK/resumed.safetensors"
  if cmp -s "$TK/full.safetensors" "$TK/resumed.safetensors"; then
    pass "ckpt --compress np=$np: resumed run is bit-identical to the uninterrupted one"
  else fail "ckpt --compress np=$np: resumed run is bit-identical to the uninterrupted one" "" "cmp $TK/full.safetensors $TK/resumed.safetensors differ"; fi
done
# the file holds np=3's residuals: rank_state.0 .. rank_state.2, no more
if python3 - "$TK/ck/step-00000005.safetensors" <<'PY'
import json, sys
d = open(sys.argv[1], 'rb').read()
h = json.loads(d[8:8 + int.from_bytes(d[:8], 'little')])
ranks = sorted({k.split('.')[1] for k in h if k.startswith('rank_state.')})
meta = h['__metadata__']
sys.exit(not (ranks == ['0', '1', '2'] and meta['ranks'] == '3'
              and meta['rank_state'] == '--compress topk with k = 1311'))
PY
then pass "ckpt --compress: the checkpoint names the residual of each of its 3 ranks"
else fail "ckpt --compress: the checkpoint names the residual of each of its 3 ranks" "" "rank_state tensors or metadata wrong"; fi
mkdir -p "$TK/zeroed" && cp "$TK/ck/latest" "$TK/zeroed/"
python3 - "$TK/ck/step-00000005.safetensors" "$TK/zeroed/step-00000005.safetensors" <<'PY'
import json, re, struct, sys
d = bytearray(open(sys.argv[1], 'rb').read())
n = int.from_bytes(d[:8], 'little')
for k, t in json.loads(d[8:8 + n]).items():
    if k.startswith('rank_state.'):
        a, b = t['data_offsets']
        d[8 + n + a:8 + n + b] = bytes(b - a)
h = 0xcbf29ce484222325  # FNV-1a over 32-bit words, as common/train/safetensors.c
for (w,) in struct.iter_unpack('<I', bytes(d[8 + n:])):
    h = ((h ^ w) * 0x100000001b3) & 0xffffffffffffffff
head = re.sub(rb'"checksum":"[0-9a-f]{16}"', b'"checksum":"%016x"' % h, bytes(d[8:8 + n]))
open(sys.argv[2], 'wb').write(d[:8] + head + d[8 + n:])
PY
check "ckpt --compress np=3: resume with the residuals zeroed" 3 0 "resume: step 5" \
  -- ./05_dp/dp "${tk_args[@]}" --batch 24 --steps 8 --ckpt "$TK/zeroed" --resume --save "$TK/zeroed.safetensors"
if ! cmp -s "$TK/full.safetensors" "$TK/zeroed.safetensors"; then
  pass "ckpt --compress np=3: without the residuals the resumed run differs (the comparison can fail)"
else fail "ckpt --compress np=3: without the residuals the resumed run differs (the comparison can fail)" "" "cmp found no difference"; fi
# The same training only: another NP (the residual is one rank's own), no
# --compress, another k, or --compress on a checkpoint without residuals.
check "ckpt --compress: np=3 checkpoint at np=2 refused" 2 2 \
  "^error: --resume: the checkpoint holds each rank's state of --compress topk with k = 1311 for 3 ranks, this run has 2: a rank's state is its own, with no counterpart at another number of ranks; resume with 3 ranks, or start afresh with another --ckpt folder" \
  -- ./05_dp/dp "${tk_args[@]}" --batch 24 --steps 8 --ckpt "$TK/ck" --resume
check "ckpt --compress: np=3 checkpoint at np=1 refused" 1 2 "^error: --resume: the checkpoint holds each rank's state of --compress topk with k = 1311 for 3 ranks, this run has 1" \
  -- ./05_dp/dp "${tk_args[@]}" --batch 24 --steps 8 --ckpt "$TK/ck" --resume
check "ckpt --compress: resumed without --compress refused" 3 2 \
  "^error: --resume: the checkpoint was trained with --compress topk with k = 1311, this run without it: a resumed run must continue the same training; run as the checkpoint's run did, or start afresh with another --ckpt folder" \
  -- ./05_dp/dp --optimizer adamw --no-check --batch 24 --steps 8 --ckpt "$TK/ck" --resume
check "ckpt --compress: resumed with another k refused" 3 2 \
  "^error: --resume: the checkpoint was trained with --compress topk with k = 1311, this run with --compress topk with k = 13108: " \
  -- ./05_dp/dp --compress topk:0.1 --optimizer adamw --no-check --batch 24 --steps 8 --ckpt "$TK/ck" --resume
check "ckpt --compress: 06 resuming 05's compressed checkpoint refused" 3 2 \
  "^error: --resume: the checkpoint was trained with --compress topk with k = 1311, this run without it" \
  -- ./06_fsdp/fsdp --optimizer adamw --no-check --batch 24 --steps 8 --ckpt "$TK/ck" --resume
check "ckpt --compress: a checkpoint without residuals, resumed with --compress, refused" 2 2 \
  "^error: --resume: the checkpoint was trained without per-rank state, this run with --compress topk with k = 1311: " \
  -- ./05_dp/dp "${tk_args[@]}" --steps 8 --ckpt "$CFG" --resume
# a flipped bit in the residual (the file's last tensor) fails the checksum
f=$TK/ck/step-00000005.safetensors
cp "$f" "$TK/good"
python3 - "$f" <<'PY'
import sys
d = bytearray(open(sys.argv[1], 'rb').read())
d[-100] ^= 0x10  # rank_state.2's last tensor
open(sys.argv[1], 'wb').write(d)
PY
check "ckpt --compress: a flipped bit in a residual is refused" 3 2 "^error: $f: the data's checksum is [0-9a-f]{16}, the file says [0-9a-f]{16}: the file is damaged" \
  -- ./05_dp/dp "${tk_args[@]}" --batch 24 --steps 8 --ckpt "$TK/ck" --resume
rm -rf "$CFG" "$TK"
