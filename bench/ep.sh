#!/usr/bin/env bash
# `make bench-ep`, and part 5 of `make bench`: lesson 10_ep's benchmarks.
#   1. all-to-all: the hand one (10_ep/exchange.c, N-1 rounds of sendrecv)
#      beside the library's dt_all_to_all and dt_all_to_allv
#      (tests/bench_all_to_all.c), S = 1 KiB to 64 MiB per rank, NP = 2 and 4:
#      median time, algbw, busbw, every element checked, hand = library byte
#      for byte;
#   2. the step: 10_ep at NP=1 beside the same model in PyTorch in one
#      process (bench/torch_moe.py, timed by bench/step.sh: interleaved runs,
#      min and median, the GEMM floor), on 10_ep's default model and a larger
#      one. Both sides start from the same weights (torch_moe.py redoes our
#      initialisation) and train on the same batches (our --dump-data), so
#      they route and drop the same tokens: the same work. The last losses of
#      both are printed side by side;
#   3. a saved model: 10_ep --save at NP=2, read by PyTorch, whose forward
#      loss on the next batch must equal the one our run printed for it.
# Writes EP_DEST (default bench/) ep.md, all_to_all.csv, ep_step.csv; raw
# logs in bench/out/ep/. Standalone (EP_DEST unset) it also puts ep.md into
# bench/results.md, in place of its previous copy. Any failed run or missing
# line stops it with the log's name.
#
# Environment: BIN_DIR, MPIRUN, CORES, PYTHON, A2A_BIN (the benchmark binary,
# default build/cpu/bench_all_to_all), EP_TIMEOUT (seconds per run),
# EP_MAX_BYTES, EP_RUNS (timed runs per side and model), EP_STEPS (default
# model) and EP_STEPS_LARGE, EP_LARGE (the larger model's flags).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

BIN_DIR=${BIN_DIR:-.}
MPIRUN=${MPIRUN:-mpirun}
CORES=${CORES:-$(nproc 2>/dev/null || echo 1)}
PYTHON=${PYTHON:-/usr/bin/python3}
A2A_BIN=${A2A_BIN:-build/cpu/bench_all_to_all}
TIMEOUT=${EP_TIMEOUT:-300}
MAX_BYTES=${EP_MAX_BYTES:-64M}
RUNS=${EP_RUNS:-5}
STEPS=${EP_STEPS:-100}
STEPS_LARGE=${EP_STEPS_LARGE:-30}
LARGE=${EP_LARGE:-"--dim 256 --hidden 1024 --batch 256"}
EP=$BIN_DIR/10_ep/ep
DEST=${EP_DEST:-bench}
OUT=${BENCH_OUT:-bench/out}/ep # BENCH_OUT: make bench-quick puts its own apart
NEW=$OUT/new
rm -rf "$OUT"
mkdir -p "$NEW"
: >"$OUT/commands.txt"
T_START=$(date +%s.%N)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)

die() {
  echo "bench-ep: FAILED: $*" >&2
  exit 1
}
say() { echo "bench-ep: $*"; }
[ -x "$EP" ] || die "$EP is missing: run 'make all' first"
[ -x "$A2A_BIN" ] || die "$A2A_BIN is missing: run 'make $A2A_BIN' first"

# mpi LOG NP BIN ARGS...: one mpirun under a timeout; must exit 0.
mpi() {
  local log=$1 np=$2 flags=()
  shift 2
  if [ "$(id -u)" = 0 ]; then flags+=(--allow-run-as-root); fi
  if [ "$np" -gt "$CORES" ]; then flags+=(--oversubscribe); fi
  echo "$MPIRUN ${flags[*]} -np $np $*" >>"$OUT/commands.txt"
  timeout -k 5 "$TIMEOUT" "$MPIRUN" "${flags[@]}" -np "$np" "$@" >"$log" 2>&1 </dev/null ||
    die "exit code $? from $* at NP=$np; see $log"
}
# py LOG ARGS...: bench/torch_moe.py under a timeout; must exit 0.
py() {
  local log=$1
  shift
  echo "$PYTHON bench/torch_moe.py $*" >>"$OUT/commands.txt"
  timeout -k 5 "$TIMEOUT" "$PYTHON" bench/torch_moe.py "$@" >"$log" 2>&1 </dev/null ||
    die "exit code $? from bench/torch_moe.py $*; see $log"
}

# ---- 1. all-to-all ------------------------------------------------------------------
A2A=$NEW/all_to_all.csv
echo "collective,variant,np,bytes,latency_us,algbw_GBps,busbw_GBps,time_stat" >"$A2A"
for np in 2 4; do
  log=$OUT/all_to_all_np$np.log
  say "all-to-all at NP=$np, 1 KiB to $MAX_BYTES per rank"
  mpi "$log" "$np" "$A2A_BIN" --min-bytes 1K --max-bytes "$MAX_BYTES"
  grep -q '^CHECK PASSED' "$log" || die "$log: no CHECK PASSED"
  grep -Eq '^ +bytes +iters +hand_us +lib_us +libv_us' "$log" || die "$log: no table header"
  awk -v np="$np" '/^ +bytes +iters +hand_us/ { t = 1; next }
    t && NF == 12 && $1 ~ /^[0-9]+$/ { split("hand library library_v", v, " ")
      for (i = 1; i <= 3; i++) { us = $(2 + i); a = $1 / us / 1e3
        printf "all_to_all,%s,%d,%s,%s,%.6f,%.6f,median_slowest_rank\n", v[i], np, $1, us, a, a * (np - 1) / np }
      n++; next }
    t { t = 0 }
    END { if (!n) exit 1 }' "$log" >>"$A2A" || die "$log: no rows"
done

# 10_ep runs on the cpu backend only (its router and shuffles are host loops)
BACKEND=$(head -1 "$OUT/all_to_all_np2.log" | awk -F' [|] ' '{ sub(/^backend /, "", $2); print $2 }')
[ -n "$BACKEND" ] || die "$OUT/all_to_all_np2.log: no backend in its banner"
if [ "$BACKEND" != cpu ]; then
  say "backend $BACKEND: 10_ep runs on the cpu backend only, its step and saved model are skipped (make BACKEND=cpu bench-ep)"
fi

# ---- 2. the step beside PyTorch -------------------------------------------------------
HAVE_TORCH=1
"$PYTHON" -c 'import torch' 2>/dev/null || HAVE_TORCH=0
STEP_CSV=$NEW/ep_step.csv
echo "model,np,layers,dim,hidden,batch,experts,topk,optimizer,steps,ours_ms_min,ours_ms_median,torch_ms_min,torch_ms_median,ratio_min,ratio_median,gemm_ms_min,gemm_ms_median,ours_last_loss,torch_last_loss,ours_dropped,torch_dropped" >"$STEP_CSV"
for model in default large; do
  [ "$BACKEND" = cpu ] || break
  if [ $model = default ]; then flags=() steps=$STEPS; else read -ra flags <<<"$LARGE" && steps=$STEPS_LARGE; fi
  # the model's sizes as 10_ep resolves them (hidden 0 = 4D), from its own line
  mpi "$OUT/${model}_data.log" 1 "$EP" ${flags[@]+"${flags[@]}"} --steps "$steps" --no-check \
    --dump-data "$OUT/${model}_data.safetensors"
  log=$OUT/${model}_data.log
  read -r L D H B < <(sed -nE 's/^model: L=([0-9]+) D=([0-9]+) H=([0-9]+) .* batch B=([0-9]+),.*/\1 \2 \3 \4/p' "$log") || true
  E=$(sed -nE 's/^expert parallel: [0-9]+ experts of ([0-9]+) per rank, each token to ([0-9]+);.*/\1/p' "$log")
  K=$(sed -nE 's/^expert parallel: [0-9]+ experts of [0-9]+ per rank, each token to ([0-9]+);.*/\1/p' "$log")
  [ -n "$L" ] && [ -n "$E" ] && [ -n "$K" ] || die "$log: no model or expert-parallel line"
  ours_loss=$(sed -nE "s|^step +$steps/$steps +loss ([0-9.]+).*|\1|p" "$log")
  ours_drop=$(sed -nE 's/^ +dropped +([0-9]+) +of.*/\1/p' "$log")
  [ -n "$ours_loss" ] && [ -n "$ours_drop" ] || die "$log: no last loss or dropped line"
  say "the step at NP=1, $model model: L=$L D=$D H=$H B=$B E=$E k=$K, $steps steps of adamw, $RUNS runs per side"
  STEP_CONFIGS="10_ep|10_ep/ep||single|1" STEP_TORCH=bench/torch_moe.py STEP_OPTIMIZER=AdamW \
    STEP_TORCH_ARGS="--data $OUT/${model}_data.safetensors" STEP_OUT=$OUT/step_$model \
    STEP_LAYERS=$L STEP_DIM=$D STEP_HIDDEN=$H STEP_BATCH=$B STEP_STEPS=$steps STEP_RUNS=$RUNS \
    STEP_TIMEOUT=$TIMEOUT STEP_MD=$OUT/step_$model.md BIN_DIR=$BIN_DIR MPIRUN=$MPIRUN CORES=$CORES \
    bash bench/step.sh >"$OUT/step_$model.log" 2>&1 || die "bench/step.sh failed; see $OUT/step_$model.log"
  cat "$OUT/step_$model/commands.txt" >>"$OUT/commands.txt"
  # step.sh's summary rows: "min" and "median", then ours, torch, ratio, gemm
  read -r omin tmin rmin gmin < <(awk '$1 == "min" { print $2, $3, $4, $5; exit }' "$OUT/step_$model.log") || true
  read -r omed tmed rmed gmed < <(awk '$1 == "median" { print $2, $3, $4, $5; exit }' "$OUT/step_$model.log") || true
  [ -n "${gmin:-}" ] && [ -n "${gmed:-}" ] || die "$OUT/step_$model.log: no min/median rows"
  torch_loss=- torch_drop=-
  if [ "$HAVE_TORCH" = 1 ]; then
    tl=$(ls "$OUT/step_$model"/*_torch_r1.log)
    torch_loss=$(sed -nE 's/.* loss=([0-9.]+) .*/\1/p' "$tl")
    torch_drop=$(sed -nE 's/.* dropped=([0-9]+) of.*/\1/p' "$tl")
  fi
  echo "$model,1,$L,$D,$H,$B,$E,$K,adamw,$steps,$omin,$omed,$tmin,$tmed,$rmin,$rmed,$gmin,$gmed,$ours_loss,$torch_loss,$ours_drop,$torch_drop" >>"$STEP_CSV"
done

# ---- 3. a saved model in PyTorch -------------------------------------------------------
# --load reads it back: the first step's loss of a run from the file (before
# any update) is the saved weights' loss on step 0's batch, which PyTorch
# computes from the same file.
SAVE_NP=2 SAVE_STEPS=30
# what the file holds, as PyTorch reads it (torch_moe.py's reader: no safetensors package needed)
LIST_PY='import sys; sys.path.insert(0, "bench"); from torch_moe import read_safetensors
t, meta = read_safetensors(sys.argv[1]); names = list(t)
print(len(names), "tensors:", ", ".join(f"{n} {list(t[n].shape)} {t[n].dtype}" for n in names[:3]), "...",
      "%s %s; metadata experts=%s topk=%s" % (names[-1], list(t[names[-1]].shape), meta["experts"], meta["topk"]))'
if [ "$BACKEND" = cpu ]; then
  mpi "$OUT/save.log" $SAVE_NP "$EP" --steps $SAVE_STEPS --save "$OUT/m.safetensors"
  grep -q '^CHECK PASSED' "$OUT/save.log" || die "$OUT/save.log: no CHECK PASSED"
  mpi "$OUT/next.log" $SAVE_NP "$EP" --steps 1 --no-check --load "$OUT/m.safetensors" --dump-data "$OUT/next.safetensors"
  next_line=$(grep -E "^step +1/1 " "$OUT/next.log") || die "$OUT/next.log: no step line"
  SAVE_CMD=(--load "$OUT/m.safetensors" --data "$OUT/next.safetensors" --data-step 0 --groups "$SAVE_NP" --forward-only)
  if [ "$HAVE_TORCH" = 1 ]; then
    echo "$PYTHON -c <LIST_PY> $OUT/m.safetensors" >>"$OUT/commands.txt"
    timeout -k 5 "$TIMEOUT" "$PYTHON" -c "$LIST_PY" "$OUT/m.safetensors" >"$OUT/list.log" 2>&1 ||
      die "listing $OUT/m.safetensors failed; see $OUT/list.log"
    py "$OUT/load.log" "${SAVE_CMD[@]}"
    ours_next=$(echo "$next_line" | sed -nE 's/.* loss ([0-9.]+) .*/\1/p')
    torch_next=$(sed -nE 's/.*: loss ([0-9.]+) .*/\1/p' "$OUT/load.log")
    [ "$ours_next" = "$torch_next" ] || die "PyTorch's forward loss $torch_next on the saved model differs from ours, $ours_next; see $OUT/load.log"
  fi
fi

# ---- ep.md ------------------------------------------------------------------------------
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- 2>/dev/null || commit="$commit (with uncommitted changes)"
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
{
  echo "## Expert parallelism (10_ep): all-to-all, and the step beside PyTorch"
  echo
  echo "Written by \`make bench-ep\` (bench/ep.sh; also part of \`make bench\`) on $(date -u '+%Y-%m-%d %H:%M UTC'),"
  echo "commit $commit; ${cpu:-$(uname -m)}, $CORES cores. Load average (1, 5, 15 min) at the start: $LOAD_START;"
  echo "at the end: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown). It took $(awk -v a="$T_START" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }') s. A load above the"
  echo "core count means other processes shared the cores (on a shared machine, they only ever add time)."
  echo
  echo "### All-to-all: the hand one beside the library's"
  echo
  echo "tests/bench_all_to_all.c. S = the bytes each rank sends in all, S/N to every rank (its own"
  echo "block included). *hand*: 10_ep/exchange.c's \`hand_all_to_allv\`, the function \`--all-to-all hand\`"
  echo "runs (N-1 rounds of sendrecv: to rank+i, from rank-i). *library*: \`dt_all_to_all\` (MPI_Alltoall),"
  echo "what 10_ep sends the counts with; *library_v*: \`dt_all_to_allv\` (MPI_Alltoallv, every count"
  echo "alike), what it sends the tokens with. Time: the median of $(sed -nE 's/.*up to ([0-9]+) timed calls.*/\1/p' "$OUT/all_to_all_np2.log") calls (fewer from 64 MiB), the slowest"
  echo "rank's; the three take turns call by call. algbw = S / t, busbw = algbw x (N-1)/N. Every size's"
  echo "last call of each was checked element by element, and the hand one against the library's byte"
  echo "for byte: CHECK PASSED at both NP. NP=4 on $CORES cores runs $((4 / CORES)) ranks per core (\`--oversubscribe\`)."
  echo
  for np in 2 4; do
    echo "NP=$np:"
    echo
    echo "| S | hand us | busbw GB/s | library us | busbw GB/s | library_v us | busbw GB/s |"
    echo "|--:|--:|--:|--:|--:|--:|--:|"
    awk -F, -v np="$np" 'function hb(b) { return b >= 1048576 ? sprintf("%g MiB", b / 1048576) : b >= 1024 ? sprintf("%g KiB", b / 1024) : sprintf("%d B", b) }
      NR > 1 && $3 == np { k = $4; us[k, $2] = $5; bus[k, $2] = $7; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
      END { for (i = 1; i <= n; i++) { k = order[i]
        printf "| %s | %.1f | %.3f | %.1f | %.3f | %.1f | %.3f |\n", hb(k), us[k, "hand"], bus[k, "hand"],
          us[k, "library"], bus[k, "library"], us[k, "library_v"], bus[k, "library_v"] } }' "$A2A"
    echo
  done
  echo "Every row: bench/all_to_all.csv."
  echo
  if [ "$BACKEND" != cpu ]; then
    echo "The step beside PyTorch and the saved model: skipped, 10_ep runs on the cpu backend only"
    echo "and this is the $BACKEND backend (\`make BACKEND=cpu bench-ep\`)."
    echo
  else
    echo "### The step at NP=1 beside the same model in PyTorch"
    echo
    echo "bench/torch_moe.py: the mixture of experts of common/train/moe.c in PyTorch, one process, one"
    echo "thread (ours: one rank, one thread), AdamW. It starts from our initial weights (our hash,"
    echo "redone in numpy) and trains on our batches (\`10_ep --dump-data\`), so both route and drop the"
    echo "same tokens. Timed by bench/step.sh: one run of ours with its check (CHECK PASSED), then"
    echo "$RUNS runs of each side interleaved; ours with DT_GEMM_TIME=1 (the GEMM floor: time in dt_matmul)."
    echo "PyTorch's side runs its experts as the simple implementations do (index, matmul, index_add"
    echo "per expert); PyTorch: $("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo 'not importable: its side skipped')."
    echo
    echo "| model | L | D | H | B | E | k | steps | ours ms/step min / median | PyTorch ms/step min / median | ours/PyTorch min / median | GEMM ms/step min / median | last loss ours / PyTorch | dropped ours / PyTorch |"
    echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
    awk -F, 'NR > 1 { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s / %s | %s / %s | %s / %s | %s / %s | %s / %s |\n",
      $1, $3, $4, $5, $6, $7, $8, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22 }' "$STEP_CSV"
    echo
    echo "Target: ours <= 1.0x PyTorch's step time at NP=1. Every run: bench/out/ep/step_*.log. The losses"
    echo "are each side's last step (ours: our run with --dump-data; PyTorch: its first timed run); dropped:"
    echo "choices over capacity summed over steps and layers."
    echo
    echo "### A saved model in PyTorch"
    echo
    echo "10_ep \`--save\` writes safetensors: per layer \`layers.{l}.router\` [D, E] and"
    echo "\`layers.{l}.experts.{e}.w1\` [D, H], \`.w2\` [H, D], float32, every expert of every rank in one file."
    echo "\`--load\` reads it back: the first step of a run from the file prints, before any update, the"
    echo "loss of the saved weights on step 0's batch, which PyTorch computes from the same file (torch_moe.py"
    echo "reads it with json and numpy; \`--groups $SAVE_NP\`: the capacity groups of our $SAVE_NP ranks):"
    echo
    echo '```'
    echo "\$ mpirun -np $SAVE_NP ./10_ep/ep --steps $SAVE_STEPS --save m.safetensors"
    grep -E '^CHECK|^saved' "$OUT/save.log" | sed "s|$OUT/||g"
    echo "\$ python3 -c '$LIST_PY' m.safetensors"
  if [ "$HAVE_TORCH" = 1 ]; then sed "s|$OUT/||g" "$OUT/list.log"; fi
  echo "\$ mpirun -np $SAVE_NP ./10_ep/ep --steps 1 --no-check --load m.safetensors --dump-data next.safetensors"
    echo "$next_line"
    echo "\$ python3 bench/torch_moe.py ${SAVE_CMD[*]}" | sed "s|$OUT/||g"
    if [ "$HAVE_TORCH" = 1 ]; then sed "s|$OUT/||g" "$OUT/load.log"; else echo "(PyTorch is not importable here: skipped)"; fi
    echo '```'
    echo
  fi
  echo "### Commands"
  echo
  echo "Each under \`timeout -k 5 $TIMEOUT\`, in this order:"
  echo
  echo '```'
  awk '!seen[$0]++' "$OUT/commands.txt" | sed "s|$OUT/||g"
  echo '```'
  echo
} >"$NEW/ep.md"

mkdir -p "$DEST"
mv "$NEW"/* "$DEST"/
rmdir "$NEW"
if [ -z "${EP_DEST:-}" ] && [ -f bench/results.md ]; then
  # standalone: ep.md into results.md, between its markers, else before "## Commands"
  awk -v f="$DEST/ep.md" '
    function emit(  l) { print "<!-- bench/ep.sh -->"; while ((getline l < f) > 0) print l; close(f); print "<!-- /bench/ep.sh -->"; done = 1 }
    $0 == "<!-- bench/ep.sh -->" { emit(); skip = 1; next }
    $0 == "<!-- /bench/ep.sh -->" { skip = 0; next }
    skip { next }
    $0 == "## Commands" && !done { emit(); print "" }
    { print }
    END { if (!done) { print ""; emit() } }' bench/results.md >"$OUT/results.md"
  mv "$OUT/results.md" bench/results.md
  say "bench/results.md: its 10_ep section replaced"
fi
say "wrote $DEST/ep.md $DEST/all_to_all.csv $DEST/ep_step.csv"
