#!/usr/bin/env bash
# `make bench`: the benchmark suite. It runs the lessons' own binaries and
# reads what they print; it measures nothing itself.
#   1. collectives: every variant of lessons 01-03 (ping-pong; linear, tree and
#      library broadcast; naive, ring and library all-reduce) over a size sweep:
#      latency, algbw = S/t, busbw = algbw x the collective's factor;
#   2. training: every training lesson at NP = 1, 2, 4 with a fixed global batch
#      (strong scaling) and a batch proportional to NP (weak scaling): step
#      time, compute, communication, bytes sent per rank, peak memory per rank;
#   3. memory per rank by strategy at NP=4 with AdamW (optimizer state shows);
#   4. the GEMM floor, and 05/06 beside PyTorch (bench/step.sh);
#   5. lesson 10_ep (bench/ep.sh): its hand all-to-all beside the library's
#      at NP=2 and 4, its step at NP=1 beside PyTorch, a --save read by PyTorch.
#   6. context parallelism (bench/cp.sh): lesson 11's ring (both splits) and
#      Ulysses at S 1k-16k, NP 2 and 4; at NP=1 attention beside PyTorch's.
#   7. the mesh (bench/mesh.sh): lesson 12 on every mesh of 8 ranks, and tp
#      inside a node against across the link of emulated nodes.
#   8. the self-check at these sizes on every OpenBLAS kernel (bench/check.sh):
#      lessons 05-12, NP 2 and 4, several seeds, both optimizers.
#   9. a GPT on a text (bench/gpt.sh): lesson 14 at nanoGPT's CPU configuration,
#      NP 1, 2 and 16, beside the same run in PyTorch.
# Writes bench/results.md, bench/*.csv and, when gnuplot is installed,
# bench/*.png (without it, the committed plots are kept, and results.md says
# they are from an earlier run); raw logs and plot data stay in bench/out/
# (not tracked).
# Every mpirun runs under a timeout; any missing line or failed run stops the
# suite with the log's name, and leaves the previous results in place.
#
# Environment: BIN_DIR (where the lesson binaries are, default .), MPIRUN,
# CORES, BENCH_TIMEOUT (seconds per mpirun), BENCH_LAYERS, BENCH_DIM,
# BENCH_STEPS, BENCH_BATCH (strong scaling's global batch), BENCH_RANK_BATCH
# (weak scaling's batch per rank), BENCH_REPEAT (runs of each training
# config; the fastest is kept), BENCH_MAX_BYTES (largest collective), A2A_BIN
# (tests/bench_all_to_all.c's binary, for bench/ep.sh), GNUPLOT (the plotter,
# default gnuplot; GNUPLOT=none runs as where it is not installed), BENCH_QUICK=1
# (`make bench-quick`: every part briefly, below), BENCH_OUT (raw output, default
# bench/out; each part's script reads it too).
set -euo pipefail
shopt -s inherit_errexit # a failed $(grab ...) inside a function stops the suite too
cd "$(dirname "$0")/.."

# BENCH_QUICK=1 (make bench-quick): every part, each briefly (the sizes and
# counts below, any of them still set by hand), to see that all nine run and
# what they print; its results go to bench/out/quick/results/, never over
# bench/'s figures (a quick run measures too little to stand for them)
DEST=bench
if [ "${BENCH_QUICK:-0}" = 1 ]; then
  DEST=bench/out/quick/results
  : "${BENCH_DIM:=64}" "${BENCH_STEPS:=3}" "${BENCH_REPEAT:=1}" "${BENCH_MAX_BYTES:=64K}" "${BENCH_STEP_RUNS:=1}"
  : "${STEP_DIM:=64}" "${STEP_HIDDEN:=256}" "${STEP_STEPS:=5}"
  : "${EP_MAX_BYTES:=64K}" "${EP_RUNS:=1}" "${EP_STEPS:=5}" "${EP_STEPS_LARGE:=2}" "${EP_LARGE:=--dim 64 --hidden 256 --batch 64}"
  : "${BENCH_CP_SEQS:=1024}" "${BENCH_CP_TORCH_SEQS:=1024}" "${BENCH_CP_REPEAT:=1}"
  : "${BENCH_MESH_STEPS:=2}" "${BENCH_MESH_REPEAT:=1}" "${BENCH_MESH_RATES:=unshaped}"
  : "${CHECK_KERNELS:=native}" "${CHECK_SEEDS:=1}" "${CHECK_NPS:=2}"
  : "${BENCH_GPT_ITERS:=20}" "${BENCH_GPT_EVAL:=10}" "${BENCH_GPT_NPS:=1 2}"
  export BENCH_OUT=bench/out/quick BENCH_MESH_DEST=$DEST STEP_DIM STEP_HIDDEN STEP_STEPS EP_MAX_BYTES EP_RUNS \
    EP_STEPS EP_STEPS_LARGE EP_LARGE BENCH_CP_SEQS BENCH_CP_TORCH_SEQS BENCH_CP_REPEAT BENCH_MESH_STEPS \
    BENCH_MESH_REPEAT BENCH_MESH_RATES CHECK_KERNELS CHECK_SEEDS CHECK_NPS BENCH_GPT_ITERS BENCH_GPT_EVAL BENCH_GPT_NPS
fi
BIN_DIR=${BIN_DIR:-.}
MPIRUN=${MPIRUN:-mpirun}
CORES=${CORES:-$(nproc 2>/dev/null || echo 1)}
TIMEOUT=${BENCH_TIMEOUT:-120}
LAYERS=${BENCH_LAYERS:-4}
DIM=${BENCH_DIM:-256}
HIDDEN=$((4 * DIM))
STEPS=${BENCH_STEPS:-10}
BATCH=${BENCH_BATCH:-64}
RANK_BATCH=${BENCH_RANK_BATCH:-16}
REPEAT=${BENCH_REPEAT:-2}
MAX_BYTES=${BENCH_MAX_BYTES:-16M}
NPS=(1 2 4)
MEM_NP=4

OUT=${BENCH_OUT:-bench/out} # raw logs and plot data (ignored by git)
NEW=$OUT/new  # results land here first and replace bench/ only at the end
rm -rf "$NEW" "$OUT"/logs
mkdir -p "$NEW" "$OUT"/logs
: >"$OUT/commands.txt"
T_START=$(date +%s.%N)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)

die() {
  echo "bench: FAILED: $*" >&2
  exit 1
}
say() { echo "bench: $*"; }
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# ---- running one lesson ---------------------------------------------------------
# run NAME NP BIN ARGS...: one mpirun under a timeout, its output in
# bench/out/logs/NAME.log; it must exit 0 and print CHECK PASSED (or, for runs
# with --no-check, exit 0 and print no CHECK FAILED).
run() {
  local name=$1 np=$2 bin=$3
  shift 3
  local log=$OUT/logs/$name.log flags=()
  [ -x "$BIN_DIR/$bin" ] || die "$BIN_DIR/$bin is missing: run 'make all' first"
  if [ "$(id -u)" = 0 ]; then flags+=(--allow-run-as-root); fi
  if [ "$np" -gt "$CORES" ]; then flags+=(--oversubscribe); fi
  local cmd=("$MPIRUN" "${flags[@]}" -np "$np" "$BIN_DIR/$bin" "$@")
  echo "${cmd[*]}" >>"$OUT/commands.txt"
  local t0 rc=0
  t0=$(date +%s.%N)
  timeout -k 5 "$TIMEOUT" "${cmd[@]}" >"$log" 2>&1 || rc=$?
  if [ "$rc" -eq 124 ]; then die "$name: timed out after ${TIMEOUT}s (${cmd[*]}); see $log"; fi
  [ "$rc" -eq 0 ] || die "$name: exit code $rc (${cmd[*]}); see $log"
  if [[ " $* " == *" --no-check "* ]]; then
    ! grep -q '^CHECK FAILED' "$log" || die "$name: CHECK FAILED; see $log"
  else
    grep -q '^CHECK PASSED' "$log" || die "$name: no 'CHECK PASSED' line; see $log"
  fi
  say "$(printf '%-28s NP=%d  %5.1f s' "$name" "$np" "$(elapsed "$t0")")"
}

# grab LOG LINE_RE WORD_RE [NTH]: the NTH number (default 1) after WORD_RE on
# the first line matching LINE_RE (extended regexes). Dies when there is none:
# a lesson whose output changed must stop the suite, not feed it a blank.
grab() {
  local v
  v=$(LINE="$2" WORD="$3" NTH="${4:-1}" awk '
    $0 ~ ENVIRON["LINE"] && match($0, ENVIRON["WORD"]) {
      s = substr($0, RSTART + RLENGTH)
      nth = ENVIRON["NTH"] + 0
      for (k = 1; k <= nth; k++) {
        if (!match(s, /[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/)) exit
        v = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH)
      }
      print v; found = 1; exit
    }
    END { if (!found) exit 1 }' "$1") || die "$1: no number after /$3/ on a line matching /$2/"
  echo "$v"
}
# grab_all LOG LINE_RE WORD_RE: the first number after WORD_RE on every line
# matching LINE_RE, space-separated (per-rank lines); dies when none matches.
grab_all() {
  local v
  v=$(LINE="$2" WORD="$3" awk '
    $0 ~ ENVIRON["LINE"] && match($0, ENVIRON["WORD"]) {
      s = substr($0, RSTART + RLENGTH)
      if (match(s, /[0-9]+(\.[0-9]+)?/)) { printf "%s%s", n++ ? " " : "", substr(s, RSTART, RLENGTH) }
    }
    END { if (!n) exit 1 }' "$1") || die "$1: no line matching /$2/ with a number after /$3/"
  echo "$v"
}
agg() { # agg max|mean|sum NUMBERS...
  local how=$1
  shift
  echo "$@" | awk -v how="$how" '{ for (i = 1; i <= NF; i++) { s += $i; if (i == 1 || $i > m) m = $i }
    printf "%.10g\n", how == "max" ? m : how == "sum" ? s : s / NF }'
}

# ---- 1. collectives ---------------------------------------------------------------
say "collectives: ping-pong at NP=2, broadcast and all-reduce at NP=4, 64 B to $MAX_BYTES"
COLL=$NEW/collectives.csv
echo "collective,variant,np,bytes,latency_us,algbw_GBps,busbw_GBps,time_stat" >"$COLL"

# Ping-pong at NP=2: at NP=4 the two idle ranks would spin in a barrier on the
# cores the pair needs.
run 01_send_recv 2 01_send_recv/send_recv --min-bytes 64 --max-bytes "$MAX_BYTES"
log=$OUT/logs/01_send_recv.log
grep -Eq '^ +bytes +iters +latency \(us\) +GB/s +wrong *$' "$log" ||
  die "$log: the ping-pong table's header 'bytes iters latency (us) GB/s wrong' is missing"
awk '/^ +bytes +iters +latency/ { t = 1; next }
     t && NF == 5 && $1 ~ /^[0-9]+$/ { printf "send_recv,ping-pong,2,%s,%s,%s,%s,mean_one_way\n", $1, $3, $4, $4; n++; next }
     t { t = 0 }
     END { if (!n) exit 1 }' "$log" >>"$COLL" || die "$log: no ping-pong rows"

run 02_broadcast 4 02_broadcast/broadcast --min-bytes 64 --max-bytes "$MAX_BYTES"
log=$OUT/logs/02_broadcast.log
grep -Eq '^ +bytes +iters +linear us +tree us +library us' "$log" ||
  die "$log: the header 'bytes iters linear us tree us library us' is missing"
# busbw of a broadcast = algbw (factor 1, as nccl-tests): every rank but the
# root receives S once, however the bytes travel.
awk '/^ +bytes +iters +linear us/ { t = 1; next }
     t && NF >= 5 && $1 ~ /^[0-9]+$/ {
       split("linear tree library", v, " ")
       for (i = 1; i <= 3; i++) { us = $(2 + i); bw = $1 / us / 1e3
         printf "broadcast,%s,4,%s,%s,%.6f,%.6f,median_slowest_rank\n", v[i], $1, us, bw, bw }
       n++; next }
     t { t = 0 }
     END { if (!n) exit 1 }' "$log" >>"$COLL" || die "$log: no broadcast rows"

run 03_all_reduce 4 03_all_reduce/all_reduce --min-bytes 64 --max-bytes "$MAX_BYTES" --factor 4 --iters 20
log=$OUT/logs/03_all_reduce.log
hdr='^ +bytes +elements +time\(us\) +median\(us\) +algbw\(GB/s\) +busbw\(GB/s\)'
[ "$(grep -Ec "$hdr" "$log")" = 3 ] ||
  die "$log: expected 3 tables headed 'bytes elements time(us) median(us) algbw(GB/s) busbw(GB/s)'"
# The median, like the broadcast's: other processes on the machine make a few
# calls slow, and the mean (the lesson's own algbw column) follows them.
HDR=$hdr awk '/^(naive|ring|library) all-reduce/ { v = $1; next }
     $0 ~ ENVIRON["HDR"] { t = 1; next }
     t && NF >= 6 && $1 ~ /^[0-9]+$/ { bw = $1 / $4 / 1e3
       printf "all_reduce,%s,4,%s,%s,%.6f,%.6f,median\n", v, $1, $4, bw, bw * 2 * (4 - 1) / 4; n++; next }
     t { t = 0 }
     END { if (!n) exit 1 }' "$log" >>"$COLL" || die "$log: no all-reduce rows"
for v in ring naive library; do
  grep -q "^all_reduce,$v," "$COLL" || die "$log: no rows for the $v all-reduce"
done
BANNER=$(head -1 "$OUT/logs/03_all_reduce.log")

# ---- 2. training ------------------------------------------------------------------
# name, binary, flags: every strategy the training lessons offer.
STRATS=(
  "dp|05_dp/dp|"
  "zero1|06_fsdp/fsdp|--zero 1"
  "zero2|06_fsdp/fsdp|--zero 2"
  "zero3|06_fsdp/fsdp|--zero 3"
  "tp|07_tp/tp|"
  "fsdp_tp|08_fsdp_tp/fsdp_tp|"
  "pp_gpipe|09_pp/pp|--schedule gpipe"
  "pp_1f1b|09_pp/pp|--schedule 1f1b"
)
# HOOK 08_fsdp_tp: benchmarked whenever its binary was built (lesson 08 is new).
if [ ! -x "$BIN_DIR/08_fsdp_tp/fsdp_tp" ]; then
  say "08_fsdp_tp is not built: skipped"
  kept=()
  for s in "${STRATS[@]}"; do [[ $s == fsdp_tp\|* ]] || kept+=("$s"); done
  STRATS=("${kept[@]}")
fi
MODEL=(--layers "$LAYERS" --dim "$DIM" --hidden "$HIDDEN" --steps "$STEPS")

# parse_training LOG NAME: one CSV tail "step,compute,comm,bytes,params,grads,optim,activ"
parse_training() {
  local log=$1 name=$2 step compute comm bytes p g o a
  case $name in
  pp_*)
    # Per stage: busy (compute) and idle (waiting for a neighbour's sendrecv,
    # the bubble included); busy + idle is the step's span on every stage.
    local busy idle
    busy=$(grab_all "$log" '^\[rank [0-9]+\] stage [0-9]+ \| busy' 'busy')
    idle=$(grab_all "$log" '^\[rank [0-9]+\] stage [0-9]+ \| busy' 'idle')
    compute=$(agg mean $busy)
    comm=$(agg mean $idle)
    step=$(agg sum "$compute" "$comm")
    local re='^\[rank [0-9]+\] stage [0-9]+ params'
    bytes=$(grab_all "$log" 'sendrecv bytes per step' 'sendrecv bytes per step')
    p=$(grab_all "$log" "$re" ' params')
    g=$(grab_all "$log" "$re" ' grads')
    o=$(grab_all "$log" "$re" ' optim')
    a=$(grab_all "$log" 'activ peak' 'activ peak')
    bytes=$(agg max $bytes) p=$(agg max $p) g=$(agg max $g) o=$(agg max $o) a=$(agg max $a)
    ;;
  *)
    step=$(grab "$log" 'time per step' 'time per step')
    compute=$(grab "$log" 'time per step' 'compute')
    comm=$(grab "$log" 'time per step' 'communication') # the run's line, every lesson alike
    case $name in
    dp) bytes=$(grab "$log" 'bytes sent per rank per step' 'per rank per step') ;;
    fsdp_tp) bytes=$(grab "$log" '^ +total \(every communicator\)' 'communicator\)' 2) ;;
    *) bytes=$(grab "$log" '^ +total ' 'total') ;;
    esac
    # the "measured" column of the memory table (rank 0; every rank alike)
    p=$(grab "$log" '^ +params +[0-9]' 'params')
    g=$(grab "$log" '^ +grads +[0-9]' 'grads')
    o=$(grab "$log" '^ +optim +[0-9]' 'optim')
    a=$(grab "$log" '^ +activ +[0-9]' 'activ')
    ;;
  esac
  echo "$step,$compute,$comm,$bytes,$p,$g,$o,$a"
}

TRAIN=$NEW/training.csv
echo "strategy,lesson,np,scaling,layers,dim,hidden,batch,optimizer,steps,step_ms,compute_ms,comm_ms,bytes_sent_per_rank_step,params_B,grads_B,optim_B,activ_B,peak_sum_B,samples_per_s" >"$TRAIN"
say "training: L=$LAYERS D=$DIM H=$HIDDEN, $STEPS steps of sgd; strong B=$BATCH, weak B=$RANK_BATCH x NP"
for s in "${STRATS[@]}"; do
  IFS='|' read -r name bin extra <<<"$s"
  for np in "${NPS[@]}"; do
    weak=$((RANK_BATCH * np))
    batches=("$BATCH")
    [ "$weak" = "$BATCH" ] || batches+=("$weak")
    for b in "${batches[@]}"; do
      if [ "$b" = "$BATCH" ] && [ "$b" = "$weak" ]; then scaling=strong+weak
      elif [ "$b" = "$BATCH" ]; then scaling=strong
      else scaling=weak; fi
      # Best of REPEAT runs: other processes on the machine only ever add time.
      # The first run checks itself against single-process training; the
      # repeats of the same deterministic run skip that (--no-check) to save time.
      best="" check=()
      for r in $(seq "$REPEAT"); do
        run "${name}_np${np}_b${b}_r$r" "$np" "$bin" $extra "${MODEL[@]}" --batch "$b" "${check[@]}"
        check=(--no-check)
        row=$(parse_training "$OUT/logs/${name}_np${np}_b${b}_r$r.log" "$name")
        if [ -z "$best" ] || awk -v a="${row%%,*}" -v b="${best%%,*}" 'BEGIN { exit !(a < b) }'; then best=$row; fi
      done
      row=$best
      echo "$name,${bin%%/*},$np,$scaling,$LAYERS,$DIM,$HIDDEN,$b,sgd,$STEPS,$row" |
        awk -F, -v OFS=, '{ $19 = $15 + $16 + $17 + $18; $20 = sprintf("%.1f", $8 / $11 * 1e3); print }' >>"$TRAIN"
    done
  done
done

# ---- 3. memory by strategy ---------------------------------------------------------
# AdamW so that the optimizer state shows. Peaks do not depend on timing, so a
# few steps suffice; --no-check because AdamW can turn a rounding difference
# at a ReLU kink into a weight difference of up to lr (docs/failures.md, "AdamW
# runs are further from one process"), which says nothing about memory.
MEM=$NEW/memory.csv
echo "strategy,lesson,np,layers,dim,hidden,batch,optimizer,params_B,grads_B,optim_B,activ_B,peak_sum_B" >"$MEM"
say "memory: NP=$MEM_NP, AdamW, B=$BATCH"
for s in "${STRATS[@]}"; do
  IFS='|' read -r name bin extra <<<"$s"
  log=$OUT/logs/mem_$name.log
  run "mem_$name" "$MEM_NP" "$bin" $extra --layers "$LAYERS" --dim "$DIM" --hidden "$HIDDEN" \
    --batch "$BATCH" --steps 3 --optimizer adamw --no-check
  row=$(parse_training "$log" "$name")
  echo "$name,${bin%%/*},$MEM_NP,$LAYERS,$DIM,$HIDDEN,$BATCH,adamw,$(echo "$row" | cut -d, -f5-)" |
    awk -F, -v OFS=, '{ $13 = $9 + $10 + $11 + $12; print }' >>"$MEM"
done

# ---- 4. the GEMM floor, and PyTorch side by side (bench/step.sh) --------------------
# GEMM: every strategy once more per NP, --no-check, with DT_GEMM_TIME=1 (each
# rank prints the time it spent in dt_matmul): the share of the step the GEMMs
# take is the floor a cpu step can reach; comm is the lesson's own figure
# (for pp: idle, the bubble included); other = step - GEMM - comm.
GEMM=$NEW/gemm.csv
echo "strategy,lesson,np,batch,step_ms,gemm_ms,comm_ms" >"$GEMM"
say "GEMM floor: every strategy at NP=${NPS[*]}, B=$BATCH, DT_GEMM_TIME=1"
export DT_GEMM_TIME=1
for s in "${STRATS[@]}"; do
  IFS='|' read -r name bin extra <<<"$s"
  for np in "${NPS[@]}"; do
    run "gemm_${name}_np$np" "$np" "$bin" $extra "${MODEL[@]}" --batch "$BATCH" --no-check
    log=$OUT/logs/gemm_${name}_np$np.log
    row=$(parse_training "$log" "$name")
    g=$(agg mean $(grab_all "$log" '^gemm time \(DT_GEMM_TIME\)' 'calls, '))
    echo "$name,${bin%%/*},$np,$BATCH,$(echo "$row" | cut -d, -f1),$(awk -v g="$g" -v n="$STEPS" 'BEGIN { printf "%.3f", g * 1e3 / n }'),$(echo "$row" | cut -d, -f3)" >>"$GEMM"
  done
done
unset DT_GEMM_TIME
# PyTorch: 05 against one process and DDP; 06 --zero 1 against DDP with
# ZeroRedundancyOptimizer (ZeRO-1); 06 --zero 3 against FSDP when this torch
# can import it (bench/step.sh says when not). Without torch, step.sh says so.
SIDE=$OUT/side_by_side.md
STEP_LOG=$OUT/step.log
say "PyTorch side by side (bench/step.sh; log $STEP_LOG)"
STEP_CONFIGS="05_dp|05_dp/dp||single|1
05_dp|05_dp/dp||ddp|2
05_dp|05_dp/dp||ddp|2|OMPI_MCA_mpi_yield_when_idle=1
05_dp|05_dp/dp||ddp|4
06_fsdp|06_fsdp/fsdp|--zero 1|zero1|2
06_fsdp|06_fsdp/fsdp|--zero 1|zero1|4
06_fsdp|06_fsdp/fsdp|--zero 3|fsdp|2" STEP_MD=$OUT/step.md STEP_RUNS=${BENCH_STEP_RUNS:-3} \
  BIN_DIR=$BIN_DIR MPIRUN=$MPIRUN CORES=$CORES bash bench/step.sh >"$STEP_LOG" 2>&1 || die "bench/step.sh failed; see $STEP_LOG"
cat "$OUT/step/commands.txt" >>"$OUT/commands.txt"
{
  echo "## Against PyTorch, and the GEMM floor"
  echo
  echo "### PyTorch side by side (\`bench/step.sh\`, also \`make bench-step\`)"
  echo
  if grep -q 'PyTorch is not importable' "$STEP_LOG"; then
    echo "Skipped: PyTorch is not importable here (\`apt-get install python3-torch\`); ours alone:"
    echo
  fi
  echo "The same model in PyTorch (bench/torch_step.py): L=4 D=256 H=1024, global batch 64, 40 steps of"
  echo "SGD, the same init scale, each step's batch made as ours, one thread per rank, gloo on"
  echo "127.0.0.1. 05_dp (per-tensor all-reduce after backward, its default) against one process and"
  echo "DistributedDataParallel (25 MiB buckets overlapped with backward, its default); 06_fsdp"
  echo "\`--zero 1\` against DDP with ZeroRedundancyOptimizer (optimizer state sharded, ZeRO-1);"
  echo "06 \`--zero 3\` against FullyShardedDataParallel when this torch imports it:"
  grep 'did not run' "$STEP_LOG" | sed 's/^bench-step: /- /' || true
  echo
  cat "$OUT/step.md"
  echo
  echo "Load average (1, 5, 15 min) around these runs: $(grep 'load average at the start' "$STEP_LOG" | sed 's/.*start: //') before,"
  echo "$(grep 'load average at the end' "$STEP_LOG" | sed 's/.*end: //') after. Every run: bench/out/step.log."
  echo
  echo "### Where the step goes: GEMM, communication, the rest (global batch $BATCH)"
  echo
  echo "GEMM: the time inside dt_matmul (DT_GEMM_TIME=1; mean over ranks), the floor a cpu step can"
  echo "reach. comm: the lesson's own blocked-in-collectives figure (pp: idle, bubble included). other ="
  echo "step - GEMM - comm: elementwise passes, the optimizer, data, bookkeeping. One run each, --no-check."
  echo "pp's step is its stages' busy + idle span, which leaves out making the batch (a GEMM of its own)"
  echo "and the optimizer: there GEMM can exceed the step and other goes negative."
  echo
  echo "| strategy | NP | step ms | GEMM ms | GEMM share | comm ms | comm share | other ms | step / GEMM |"
  echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|"
  awk -F, 'NR > 1 { o = $5 - $6 - $7; if (o < 0 && o > -0.05) o = 0; printf "| %s | %d | %.1f | %.1f | %.0f%% | %.1f | %.0f%% | %.1f | %.2f |\n", $1, $3, $5, $6, 100 * $6 / $5, $7, 100 * $7 / $5, o, $5 / $6 }' "$GEMM"
  echo
} >"$SIDE"

# ---- 5. lesson 10_ep (bench/ep.sh) ------------------------------------------------------
say "10_ep: all-to-all at NP=2 and 4, the step beside PyTorch, a saved model (bench/ep.sh; log $OUT/ep.log)"
EP_DEST=$NEW BIN_DIR=$BIN_DIR MPIRUN=$MPIRUN CORES=$CORES A2A_BIN=${A2A_BIN:-build/cpu/bench_all_to_all} \
  bash bench/ep.sh >"$OUT/ep.log" 2>&1 || die "bench/ep.sh failed; see $OUT/ep.log"
# ---- 6. context parallelism (bench/cp.sh, lesson 11) -----------------------------------
say "context parallelism (bench/cp.sh; log $OUT/cp.log)"
BIN_DIR=$BIN_DIR MPIRUN=$MPIRUN CORES=$CORES bash bench/cp.sh >"$OUT/cp.log" 2>&1 ||
  die "bench/cp.sh failed; see $OUT/cp.log"
cp "$OUT/cp/cp.csv" "$NEW/cp.csv"
cat "$OUT/cp/commands.txt" >>"$OUT/commands.txt"
# ---- 7. the mesh (bench/mesh.sh, lesson 12) --------------------------------------------
say "4D parallelism on one mesh (bench/mesh.sh; log $OUT/mesh.log)"
BIN_DIR=$BIN_DIR MPIRUN=$MPIRUN CORES=$CORES bash bench/mesh.sh >"$OUT/mesh.log" 2>&1 ||
  die "bench/mesh.sh failed; see $OUT/mesh.log"

# ---- 8. the self-check at these sizes on every kernel (bench/check.sh) -----------------
say "the self-check at bench sizes on every OpenBLAS kernel (bench/check.sh; log $OUT/check.log)"
CHECK_MD=$NEW/check.md BIN_DIR=$BIN_DIR MPIRUN=$MPIRUN CORES=$CORES bash bench/check.sh >"$OUT/check.log" 2>&1 ||
  die "bench/check.sh failed; see $OUT/check.log"

# ---- 9. a GPT on a text (bench/gpt.sh, lesson 14) ---------------------------------------
say "a GPT on a text: nanoGPT's CPU configuration beside PyTorch (bench/gpt.sh; log $OUT/gpt.log)"
BIN_DIR=$BIN_DIR MPIRUN=$MPIRUN CORES=$CORES bash bench/gpt.sh >"$OUT/gpt.log" 2>&1 ||
  die "bench/gpt.sh failed; see $OUT/gpt.log"
cp "$OUT/gpt/gpt.md" "$OUT/gpt/gpt.csv" "$NEW/"
[ ! -f "$OUT/gpt/gpt.png" ] || cp "$OUT/gpt/gpt.png" "$NEW/"
cat "$OUT/gpt/commands.txt" >>"$OUT/commands.txt"

# ---- the machine and the libraries --------------------------------------------------
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
[ -n "$cpu" ] || cpu=$(uname -m)
mem_gib=$(awk '/MemTotal/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo 2>/dev/null || echo "?")
os=$( (. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") || uname -s)
backend=$(echo "$BANNER" | awk -F' [|] ' '{ sub(/^backend /, "", $2); print $2 }')
comm=$(echo "$BANNER" | awk -F' [|] ' '{ sub(/^comm /, "", $3); print $3 }')
[ -n "$backend" ] && [ -n "$comm" ] || die "no backend/comm in the banner '$BANNER'"
ompi=$("$MPIRUN" --version 2>/dev/null | head -1)
cc=$(mpicc --version 2>/dev/null | head -1 || echo unknown)
blas=$(dpkg-query -W -f='${Package} ${Version}\n' 'libopenblas0*' 2>/dev/null | awk '$2 != ""' | paste -sd, - | sed 's/,/, /g')
gpu_lines=""
if [ "$backend" = cuda ]; then
  gpu_lines="- CUDA: $(nvcc --version 2>/dev/null | tail -1); NCCL: ${NCCL_VERSION:-see the comm library above}
- GPUs: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sort | uniq -c | sed 's/^ *//' | paste -sd';' -)"
fi
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- 2>/dev/null || commit="$commit (with uncommitted changes)"

# ---- plots --------------------------------------------------------------------------
PLOTS=()
OLD_PLOTS=""
GNUPLOT=${GNUPLOT:-gnuplot}
if command -v "$GNUPLOT" >/dev/null 2>&1; then
  mkdir -p "$OUT/plot"
  awk -F, -v d="$OUT/plot" 'NR > 1 { f = d "/bw_" $1 "_" $2 ".dat"; print $4, $7 > f }' "$COLL"
  awk -F, -v d="$OUT/plot" 'NR > 1 && $4 ~ /strong/ { print $3, $11 > (d "/strong_" $1 ".dat") }
                            NR > 1 && $4 ~ /weak/ { print $3, $11 > (d "/weak_" $1 ".dat") }' "$TRAIN"
  awk -F, 'NR > 1 { printf "%s %.4f %.4f %.4f %.4f\n", $1, $9 / 1048576, $10 / 1048576, $11 / 1048576, $12 / 1048576 }' "$MEM" >"$OUT/plot/memory.dat"
  strat_names=$(awk -F, 'NR > 1 { printf "%s ", $1 }' "$MEM")
  xtics=$(awk -F, '$1 == "all_reduce" && !seen[$4]++ { b = $4
    if (b >= 1048576) l = (b / 1048576) " MiB"; else if (b >= 1024) l = (b / 1024) " KiB"; else l = b " B"
    printf "%s\"%s\" %s", (n++ ? ", " : ""), l, b }' "$COLL")
  cat >"$OUT/plots.gp" <<EOF
# written by bench/run.sh; run it from the repository root: gnuplot $OUT/plots.gp
d = "$OUT/plot"
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) { set terminal pngcairo size 900,560 font ",10" } else { set terminal png size 900,560 }
set termoption noenhanced
set grid
set key top left
set output "$NEW/bandwidth.png"
set title "busbw against message size ($backend backend, $comm; ping-pong NP=2, others NP=4)"
set logscale x 2
set logscale y 10
set xtics ($xtics)
set xlabel "message size S"
set ylabel "busbw (GB/s)"
plot d."/bw_send_recv_ping-pong.dat" w lp t "send/recv ping-pong", \
     d."/bw_broadcast_linear.dat" w lp t "broadcast linear", \
     d."/bw_broadcast_tree.dat" w lp t "broadcast tree", \
     d."/bw_broadcast_library.dat" w lp t "broadcast library", \
     d."/bw_all_reduce_naive.dat" w lp t "all-reduce naive", \
     d."/bw_all_reduce_ring.dat" w lp t "all-reduce ring", \
     d."/bw_all_reduce_library.dat" w lp t "all-reduce library"
unset logscale
unset format
set output "$NEW/step_time.png"
set multiplot layout 1,2 title "time per step against NP (L=$LAYERS D=$DIM H=$HIDDEN, sgd; $CORES cores, NP=4 oversubscribed)"
set xtics (1, 2, 4)
set xrange [0.8:4.2]
set yrange [0:*]
set xlabel "NP (ranks)"
set ylabel "time per step (ms)"
set title "strong scaling: global batch $BATCH"
plot for [s in "$strat_names"] d."/strong_".s.".dat" w lp t s
set title "weak scaling: batch $RANK_BATCH x NP"
plot for [s in "$strat_names"] d."/weak_".s.".dat" w lp t s
unset multiplot
set output "$NEW/memory.png"
set title "peak memory per rank by kind, NP=$MEM_NP, AdamW (L=$LAYERS D=$DIM H=$HIDDEN, B=$BATCH)"
set style data histograms
set style histogram rowstacked
set style fill solid 0.8 border -1
set boxwidth 0.7
set key top right
set xtics ()
set autoscale x
set xlabel "strategy"
set ylabel "MiB per rank"
plot d."/memory.dat" u 2:xtic(1) t "params", "" u 3 t "grads", "" u 4 t "optim (AdamW m, v)", "" u 5 t "activations"
EOF
  if "$GNUPLOT" "$OUT/plots.gp" 2>"$OUT/gnuplot.log"; then
    PLOTS=(bandwidth.png step_time.png memory.png)
    say "plots: ${PLOTS[*]}"
  else
    die "gnuplot failed; see $OUT/gnuplot.log"
  fi
else
  OLD_PLOTS=$(cd "$DEST" 2>/dev/null && ls *.png 2>/dev/null | paste -sd " " - || true)
  say "gnuplot is not installed: plots not remade; ${OLD_PLOTS:-no earlier plots} kept as they are, from an earlier run (make setup or apt-get install gnuplot-nox, then make bench again)"
fi

# ---- results.md -----------------------------------------------------------------------
MD=$NEW/results.md
hb() { awk -v b="$1" 'BEGIN { if (b >= 1048576) printf "%g MiB", b / 1048576; else if (b >= 1024) printf "%g KiB", b / 1024; else printf "%d B", b }'; }
{
  echo "# Benchmarks"
  echo
  echo "Written by \`make bench\` (bench/run.sh) on $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit."
  [ "${BENCH_QUICK:-0}" != 1 ] || echo "QUICK MODE (\`make bench-quick\`): every part at reduced sizes and counts; not the figures of bench/."
  echo "Every number below was parsed from the lessons' own output (raw logs: $OUT/logs/)."
  echo
  echo "- Machine: $cpu, $CORES cores, $mem_gib GiB memory, $os, kernel $(uname -r)"
  echo "- Backend: $backend; communication: $comm"
  echo "- Open MPI: $ompi; compiler: $cc"
  echo "- OpenBLAS: ${blas:-unknown} (one thread per rank)"
  echo "- Load average (1, 5, 15 min) when the suite started: $LOAD_START; when it ended: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)."
  echo "  Anything above 0 means other processes shared the cores during the measurements."
  [ -z "$gpu_lines" ] || echo "$gpu_lines"
  if [ "$CORES" -lt 4 ]; then
    echo "- NP=4 runs $((4 / CORES)) ranks per core (\`--oversubscribe\`): ranks take turns on the cores, so"
    echo "  NP=4 times include waiting for a core, not only for the network."
  fi
  echo
  echo "## Collectives"
  echo
  echo "S = message size. algbw = S / t. busbw = algbw x the collective's factor, as nccl-tests: 1 for"
  echo "point to point and broadcast, 2(N-1)/N for all-reduce (so busbw is comparable to a link's"
  echo "bandwidth). Times: ping-pong: mean one-way time (round trip / 2) between ranks 0 and 1 at NP=2;"
  echo "broadcast: median over the iterations of the slowest rank's time, NP=4; all-reduce: median"
  echo "time of one call, NP=4 (the lesson's own algbw column uses the mean, which a few calls slowed"
  echo "by other processes on the machine pull up)."
  echo
  awk -F, -v want="$(awk -F, '$1 == "all_reduce" { print $4 }' "$COLL" | sort -un | paste -sd' ' -)" '
    function hb(b) { return b >= 1048576 ? sprintf("%g MiB", b / 1048576) : b >= 1024 ? sprintf("%g KiB", b / 1024) : sprintf("%d B", b) }
    BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) keep[w[i]] = 1 }
    NR > 1 { k = $1 "," $2 "," $4; us[k] = $5; alg[k] = $6; bus[k] = $7; seen[$1 "," $2] = 1 }
    function table(coll, title, vars,   nv, v, i, j, line) {
      nv = split(vars, v, " ")
      print "### " title; print ""
      line = "| S |"; for (j = 1; j <= nv; j++) line = line " " v[j] " us | algbw | busbw |"; print line
      line = "|--:|"; for (j = 1; j <= nv; j++) line = line "--:|--:|--:|"; print line
      for (i = 1; i <= n; i++) {
        line = "| " hb(w[i]) " |"
        for (j = 1; j <= nv; j++) { k = coll "," v[j] "," w[i]
          line = line (k in us ? sprintf(" %.1f | %.3f | %.3f |", us[k], alg[k], bus[k]) : " - | - | - |") }
        print line
      }
      print ""
    }
    END {
      table("send_recv", "Point to point (01_send_recv, NP=2): GB/s = 1e9 bytes/s", "ping-pong")
      table("broadcast", "Broadcast (02_broadcast, NP=4): linear vs binomial tree vs library", "linear tree library")
      table("all_reduce", "All-reduce (03_all_reduce, NP=4): naive vs ring vs library", "naive ring library")
    }' "$COLL"
  echo "Every size of the sweep (the ping-pong doubles, so it has more rows): bench/collectives.csv."
  echo
  echo "## Training"
  echo
  echo "Model: L=$LAYERS blocks, D=$DIM, H=$HIDDEN ($((2 * LAYERS * DIM * HIDDEN)) parameters,"
  echo "$(hb $((8 * LAYERS * DIM * HIDDEN))) fp32), $STEPS steps of sgd; every configuration passed its own check against"
  echo "single-process training (CHECK PASSED). Strong scaling: global batch $BATCH at every NP. Weak"
  echo "scaling: $RANK_BATCH samples per rank, global batch $RANK_BATCH x NP. Each configuration ran $REPEAT time(s)"
  echo "(the first with the check, the repeats with \`--no-check\`); the tables keep the run with the"
  echo "shortest time per step, since other processes on the machine only ever add time."
  echo
  echo "What the columns are, from each lesson's summary: *step* is the wall time per step averaged"
  echo "over the run; *compute* is the step minus the time blocked in collectives; *comm* is the time a"
  echo "rank was blocked in collectives (dp, tp: all-reduce; zero1-3: all-gather, reduce-scatter and"
  echo "all-reduce; fsdp_tp: the TP and the FSDP communicators together). For pp_* the lesson reports"
  echo "per stage the compute (busy) and the idle time, which is waiting for a neighbour's activations"
  echo "or gradients **including the pipeline bubble**: *compute* and *comm* are their means over"
  echo "stages, and *step* is their sum (from the common start to the last backward; the optimizer step"
  echo "is not in it). *sent/rank* is the bytes one rank hands to collectives per step (max over stages"
  echo "for pp). *peak/rank* is the sum of the per-kind peaks (params, grads, optim, activations; they"
  echo "need not peak at the same moment, so it is an upper bound), the largest rank for pp."
  echo
  echo "### Every run"
  echo
  echo "| strategy | lesson | NP | B | step ms | compute ms | comm ms | sent/rank/step | peak/rank | samples/s |"
  echo "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"
  awk -F, 'function hb(b) { return b >= 1048576 ? sprintf("%.2f MiB", b / 1048576) : b >= 1024 ? sprintf("%.1f KiB", b / 1024) : sprintf("%d B", b) }
    NR > 1 { printf "| %s | %s | %d | %d | %.1f | %.1f | %.1f | %s | %s | %.0f |\n", $1, $2, $3, $8, $11, $12, $13, hb($14), hb($19), $20 }' "$TRAIN"
  echo
  echo "### Strong scaling (global batch $BATCH)"
  echo
  echo "Speedup = T(1) / T(NP); efficiency = speedup / NP. At NP=1 every strategy does nearly the same"
  awk -F, 'NR > 1 && $3 == 1 && $4 ~ /strong/ { if (!n++ || $11 < lo) lo = $11; if ($11 > hi) hi = $11 }
    END { printf "computation with no communication; here those runs took %.1f to %.1f ms per step, so\n", lo, hi
          print "differences within that spread are noise, not strategy." }' "$TRAIN"
  echo
  echo "| strategy | NP=1 ms | NP=2 ms | NP=4 ms | speedup NP=2 | speedup NP=4 | efficiency NP=4 |"
  echo "|---|--:|--:|--:|--:|--:|--:|"
  awk -F, 'NR > 1 && $4 ~ /strong/ { t[$1, $3] = $11; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
    END { for (i = 1; i <= n; i++) { s = order[i]
      printf "| %s | %.1f | %.1f | %.1f | %.2f | %.2f | %.0f%% |\n", s, t[s, 1], t[s, 2], t[s, 4],
        t[s, 1] / t[s, 2], t[s, 1] / t[s, 4], 100 * t[s, 1] / t[s, 4] / 4 } }' "$TRAIN"
  echo
  echo "### Weak scaling ($RANK_BATCH samples per rank)"
  echo
  echo "Efficiency = T(1) / T(NP): 100% when the time per step stays flat as ranks and batch grow together."
  echo
  echo "| strategy | NP=1 (B=$RANK_BATCH) ms | NP=2 (B=$((2 * RANK_BATCH))) ms | NP=4 (B=$((4 * RANK_BATCH))) ms | efficiency NP=2 | efficiency NP=4 |"
  echo "|---|--:|--:|--:|--:|--:|"
  awk -F, 'NR > 1 && $4 ~ /weak/ { t[$1, $3] = $11; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
    END { for (i = 1; i <= n; i++) { s = order[i]
      printf "| %s | %.1f | %.1f | %.1f | %.0f%% | %.0f%% |\n", s, t[s, 1], t[s, 2], t[s, 4],
        100 * t[s, 1] / t[s, 2], 100 * t[s, 1] / t[s, 4] } }' "$TRAIN"
  echo
  echo "### Memory per rank by strategy (NP=$MEM_NP, AdamW, B=$BATCH)"
  echo
  echo "Peak bytes per rank by kind as each lesson's memory table measures them (dt_alloc's"
  echo "accounting), in MiB; for pp each kind's largest stage. These runs are 3 steps with"
  echo "\`--no-check\` and give no timings: with AdamW a rounding difference at a ReLU kink can fail"
  echo "the strict weight comparison (docs/failures.md, \"AdamW runs are further from one process\"); memory does not depend on it."
  echo
  echo "| strategy | params | grads | optim | activations | sum |"
  echo "|---|--:|--:|--:|--:|--:|"
  awk -F, 'NR > 1 { printf "| %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", $1, $9 / 1048576, $10 / 1048576, $11 / 1048576, $12 / 1048576, $13 / 1048576 }' "$MEM"
  echo
  if [ ${#PLOTS[@]} -gt 0 ]; then
    echo "## Plots"
    echo
    for p in "${PLOTS[@]}"; do echo "![${p%.png}]($p)"; echo; done
  else
    echo "Plots: not remade, gnuplot is not installed (\`make setup\` or \`apt-get install gnuplot-nox\`, then"
    echo "\`make bench\`).${OLD_PLOTS:+ These are from an earlier run, not from the numbers above:}"
    echo
    for p in ${OLD_PLOTS:-}; do echo "![${p%.png} (an earlier run)]($p)"; echo; done
  fi
  cat "$SIDE" # section 4: PyTorch side by side, the GEMM floor
  echo "<!-- bench/ep.sh -->" # section 5; make bench-ep replaces what lies between the markers
  cat "$NEW/ep.md"
  echo "<!-- /bench/ep.sh -->"
  echo
  cat "$OUT/cp/cp.md" # section 6: context parallelism
  echo "## 4D parallelism on one mesh (lesson 12)"
  echo
  echo "Every mesh of 8 ranks, and tp inside a node against across a link: [mesh.md](mesh.md) (bench/mesh.sh,"
  echo "also \`make bench-mesh\`)."
  echo
  echo "## A GPT on a text (lesson 14)"
  echo
  echo "nanoGPT's CPU configuration at NP 1, 2 and 16 beside PyTorch, the curves and a sample:"
  echo "[gpt.md](gpt.md) (bench/gpt.sh, also \`make bench-gpt\`)."
  echo
  if [ -f bench/cluster/results.md ]; then
    echo "Across emulated nodes, flat vs hierarchical all-reduce on a shaped link: [cluster/results.md](cluster/results.md)"
    echo "(written by \`make bench-cluster\`, not by this suite)."
    echo
  fi
  echo "## Commands"
  echo
  echo "Each under \`timeout -k 5 $TIMEOUT\`, in this order. The suite took $(elapsed "$T_START") s (without the build)."
  echo
  echo '```'
  awk '!seen[$0]++' "$OUT/commands.txt"
  echo '```'
} >"$MD"

# ---- publish ----------------------------------------------------------------------------
# new plots replace all the old ones; without gnuplot the old ones stay
mkdir -p "$DEST"
if [ ${#PLOTS[@]} -gt 0 ]; then rm -f "$DEST"/*.png; fi
mv "$NEW"/* "$DEST"/
rmdir "$NEW"
say "wrote $DEST/: results.md ep.md collectives.csv training.csv memory.csv all_to_all.csv ep_step.csv${PLOTS:+ and ${#PLOTS[@]} plots} in $(elapsed "$T_START") s"
