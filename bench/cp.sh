#!/usr/bin/env bash
# Lesson 11's bench, a section of `make bench` (also alone: `make bench-cp`):
#   1. ring attention (contiguous and zigzag splits) and Ulysses at S from 1k
#      to 16k tokens, NP 2 and 4: time per step, each rank's time in its score
#      blocks (the split's balance), attention bytes per rank, attention memory
#      per rank beside the S^2 scores one process would keep;
#   2. at NP=1, the lesson's whole training step beside the same transformer's
#      step in PyTorch (bench/torch_attn.py: explicit softmax(QK^T)V, AdamW),
#      our attention's GFLOP/s beside one core's sgemm at its tiles' shapes,
#      and attention alone (our score blocks; PyTorch's forward + backward).
# It reads what the lesson prints and measures nothing itself. The model: one
# layer, D=32, 4 heads, one sequence a step, 3 steps (NP=1: the
# fastest of BENCH_CP_REPEAT runs). The first S of the list runs the lesson's
# check against one process; longer ones run --no-check (the reference would
# materialise the S x S scores).
# Environment: BIN_DIR, MPIRUN, CORES, BENCH_CP_SEQS (default 1024 .. 16384),
# BENCH_CP_TORCH_SEQS (default 1024 2048 4096), BENCH_CP_TIMEOUT (seconds per
# run), BENCH_CP_REPEAT (3), BENCH_CP_BEFORE (the BIN_DIR of a build of an
# earlier tree: its step time beside ours, at S up to BENCH_CP_BEFORE_MAX, 4096).
# Writes bench/out/cp/cp.md and cp.csv; `make bench` copies them into
# bench/results.md and bench/cp.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${BIN_DIR:-.}
MPIRUN=${MPIRUN:-mpirun}
CORES=${CORES:-$(nproc 2>/dev/null || echo 1)}
TIMEOUT=${BENCH_CP_TIMEOUT:-900}
SEQS=(${BENCH_CP_SEQS:-1024 2048 4096 8192 16384})
TORCH_SEQS=(${BENCH_CP_TORCH_SEQS:-1024 2048 4096})
REPEAT=${BENCH_CP_REPEAT:-3}
BEFORE=${BENCH_CP_BEFORE:-}
BEFORE_MAX=${BENCH_CP_BEFORE_MAX:-4096}
MODEL=(--layers 1 --dim 32 --heads 4 --batch 1 --samples 8 --steps 3)
OUT=${BENCH_OUT:-bench/out}/cp # BENCH_OUT: make bench-quick puts its own apart
rm -rf "$OUT" && mkdir -p "$OUT/logs"
CSV=$OUT/cp.csv MD=$OUT/cp.md
: >"$OUT/commands.txt"
die() { echo "bench-cp: FAILED: $*" >&2; exit 1; }
say() { echo "bench-cp: $*"; }
[ -x "$BIN_DIR/11_cp/cp" ] || die "$BIN_DIR/11_cp/cp is missing: run 'make all' first"
[ -z "$BEFORE" ] || [ -x "$BEFORE/11_cp/cp" ] || die "BENCH_CP_BEFORE: no $BEFORE/11_cp/cp"

# run NAME NP ARGS...: the lesson ($BIN, default ours) under a timeout; exit
# 0, and CHECK PASSED unless --no-check (then no CHECK FAILED)
run() {
  local name=$1 np=$2 flags=() rc=0
  shift 2
  [ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
  [ "$np" -gt "$CORES" ] && flags+=(--oversubscribe)
  local cmd=("$MPIRUN" "${flags[@]}" -np "$np" "${BIN:-$BIN_DIR}/11_cp/cp" "$@")
  echo "${cmd[*]}" >>"$OUT/commands.txt"
  timeout -k 5 "$TIMEOUT" "${cmd[@]}" >"$OUT/logs/$name.log" 2>&1 || rc=$?
  [ "$rc" = 0 ] || die "$name: exit code $rc (${cmd[*]}); see $OUT/logs/$name.log"
  if [[ " $* " == *" --no-check "* ]]; then
    ! grep -q '^CHECK FAILED' "$OUT/logs/$name.log" || die "$name: CHECK FAILED"
  else
    grep -q '^CHECK PASSED' "$OUT/logs/$name.log" || die "$name: no CHECK PASSED; see its log"
  fi
}
# num LOG ERE AWK_FIELD_EXPR: from the first line matching ERE; dies on none
num() {
  local v
  v=$(grep -E -m1 -- "$2" "$1" | awk "{ print $3 }")
  [ -n "$v" ] || die "no /$2/ in $1"
  echo "$v"
}

# before NAME NP ARGS...: the earlier build's step time, or - (not asked, or S too long)
before() {
  local name=$1 np=$2 S=$4
  if [ -z "$BEFORE" ] || [ "$S" -gt "$BEFORE_MAX" ]; then echo -; return; fi
  shift 2
  BIN=$BEFORE run "before_$name" "$np" "$@" --no-check >&2
  num "$OUT/logs/before_$name.log" '^  time per step' '$4'
}

echo "S,np,mode,step_ms,blocks_max_ms,blocks_min_ms,fwd_bytes,bwd_bytes,attn_mem,scores_one_process,before_step_ms" >"$CSV"
first=${SEQS[0]}
for S in "${SEQS[@]}"; do
  check=(); [ "$S" = "$first" ] || check=(--no-check)
  for np in 2 4; do
    for mode in contiguous zigzag ulysses; do
      mflag=(--split $mode); [ $mode = ulysses ] && mflag=(--ulysses)
      args=(--seq "$S" "${MODEL[@]}" "${check[@]}" "${mflag[@]}")
      name=S${S}_np${np}_$mode
      run "$name" "$np" "${args[@]}"
      log=$OUT/logs/$name.log
      step=$(num "$log" '^  time per step' '$4')
      blocks=$(grep -E '^    rank [0-9]+ .* formula ' "$log" | awk '{ print $(NF-3) }')
      [ -n "$blocks" ] || die "no rank lines in $log"
      mx=$(echo "$blocks" | sort -g | tail -n1) mn=$(echo "$blocks" | sort -g | head -n1)
      fwd=$(num "$log" '^    forward ' '$2') bwd=$(num "$log" '^    backward ' '$2')
      mem=$(num "$log" '^  attention memory' '$3')
      one=$(grep -E -m1 '^  attention memory' "$log" | sed -E 's/.* = ([0-9]+) for the scores alone.*/\1/')
      old=$(before "$name" "$np" --seq "$S" "${MODEL[@]}" "${mflag[@]}")
      echo "$S,$np,$mode,$step,$mx,$mn,$fwd,$bwd,$mem,$one,$old" >>"$CSV"
      say "$(printf '%-26s step %9.1f ms  blocks %9.1f .. %9.1f ms  before %s ms' "$name" "$step" "$mn" "$mx" "$old")"
    done
  done
done

# NP=1: our whole step beside PyTorch's, the rate beside sgemm's, attention alone
ONE=$OUT/one.csv
echo "S,ours_step_ms,before_step_ms,torch_step_ms,gflops,sgemm_gflops,ours_attn_ms,torch_attn_ms" >"$ONE"
TORCH_LOG=$OUT/logs/torch_attn.log
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "/usr/bin/python3 bench/torch_attn.py --seqs ${TORCH_SEQS[*]} --batch 1 --heads 4 --dh 8 --repeat $REPEAT" >>"$OUT/commands.txt"
  timeout -k 5 "$TIMEOUT" /usr/bin/python3 bench/torch_attn.py --seqs "${TORCH_SEQS[@]}" --batch 1 \
    --heads 4 --dh 8 --repeat "$REPEAT" >"$TORCH_LOG" 2>&1 || die "bench/torch_attn.py failed; see $TORCH_LOG"
  TORCH_VERSION=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)')
else
  echo "PyTorch is not importable" >"$TORCH_LOG"
fi
ONE_MODEL=(--layers 1 --dim 32 --heads 4 --batch 1 --samples 8 --steps 3)
for S in "${TORCH_SEQS[@]}"; do
  check=(); [ "$S" = "$first" ] || check=(--no-check)
  best="" rate="" gemm="" attn="" # the fastest step of REPEAT runs, and that run's figures
  for r in $(seq "$REPEAT"); do
    run "S${S}_np1_$r" 1 --seq "$S" "${ONE_MODEL[@]}" "${check[@]}"
    log=$OUT/logs/S${S}_np1_$r.log
    step=$(num "$log" '^  time per step' '$4')
    if [ -z "$best" ] || awk -v a="$step" -v b="$best" 'BEGIN { exit !(a < b) }'; then
      best=$step
      rate=$(num "$log" '^    rank 0 +[0-9.]+ GFLOP/s' '$3') gemm=$(num "$log" '^    rank 0 +[0-9.]+ GFLOP/s' '$6')
      attn=$(grep -E '^    rank 0 .* formula ' "$log" | awk '{ print $(NF-3) }')
    fi
  done
  old=-
  if [ -n "$BEFORE" ] && [ "$S" -le "$BEFORE_MAX" ]; then
    for r in $(seq "$REPEAT"); do
      o=$(before "S${S}_np1_$r" 1 --seq "$S" "${ONE_MODEL[@]}")
      if [ "$old" = - ] || awk -v a="$o" -v b="$old" 'BEGIN { exit !(a < b) }'; then old=$o; fi
    done
  fi
  tstep=$(sed -n "s/^torch-step: S=$S ms=\([0-9.]*\)$/\1/p" "$TORCH_LOG")
  tattn=$(sed -n "s/^torch-attn: S=$S ms=\([0-9.]*\)$/\1/p" "$TORCH_LOG")
  echo "$S,$best,$old,${tstep:--},$rate,$gemm,$attn,${tattn:--}" >>"$ONE"
  say "$(printf 'S%-6s np=1 step %8.1f ms (before %s, PyTorch %s)  %s GFLOP/s, sgemm %s' "$S" "$best" "$old" "${tstep:--}" "$rate" "$gemm")"
done

{
  echo "## Context parallelism (11_cp, \`bench/cp.sh\`, also \`make bench-cp\`)"
  echo
  echo "One layer, D=32, 4 heads of 8, one sequence of S tokens a step, 3 steps of AdamW, cpu"
  echo "backend (one thread per rank). S=$first ran the lesson's check"
  echo "(CHECK PASSED); longer sequences ran \`--no-check\`. *blocks* is the CPU time a rank spent in"
  echo "its score blocks per step (forward and backward), the slowest and the fastest rank: the"
  echo "split's balance; *step* is wall time and includes the waits. Bytes are attention's per rank"
  echo "per step (each equal to its formula in the lesson's own output); memory is what attention"
  echo "keeps and moves per rank, beside the S^2 scores one process with them materialised would keep."
  [ -n "$BEFORE" ] && echo "*before*: the step of the build in \`$BEFORE\` (an earlier tree), same flags, same machine, run just after ours."
  echo
  echo "| S | NP | attention | step ms | before ms | blocks max ms | blocks min ms | max/min | fwd bytes | bwd bytes | attn memory | scores, one process |"
  echo "|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
  awk -F, 'function hb(b) { return b >= 1048576 ? sprintf("%.2f MiB", b / 1048576) : b >= 1024 ? sprintf("%.1f KiB", b / 1024) : sprintf("%d B", b) }
    NR > 1 { printf "| %d | %d | %s | %.1f | %s | %.1f | %.1f | %.2f | %s | %s | %s | %s |\n", $1, $2, ($3 == "ulysses" ? "Ulysses" : "ring, " $3), $4, $11, $5, $6, ($6 > 0 ? $5 / $6 : 0), hb($7), hb($8), hb($9), hb($10) }' "$CSV"
  echo
  echo "At NP=1, the lesson's whole training step (\`time per step\`: inputs, forward, backward,"
  echo "AdamW; 3 steps, the fastest of $REPEAT runs) beside the same transformer's step in PyTorch"
  echo "${TORCH_VERSION:+$TORCH_VERSION }(bench/torch_attn.py: explicit softmax(QK^T / sqrt(dh)) V with the causal mask, the S x S"
  echo "scores materialised, torch.optim.AdamW; one thread, the fastest of $REPEAT after a warm-up);"
  echo "our attention's rate in its score blocks beside one core's sgemm alone at the tiles' shapes"
  echo "(both as the lesson prints them, CPU time); and attention alone: our score blocks, forward"
  echo "and backward, beside PyTorch's attention forward + backward."
  echo
  echo "| S | step ms | before ms | PyTorch step ms | ours / PyTorch | attention GFLOP/s | sgemm GFLOP/s | share | our blocks ms | PyTorch attention ms |"
  echo "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
  awk -F, 'NR > 1 { printf "| %d | %.1f | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, ($4 == "-" ? "-" : sprintf("%.2f", $2 / $4)), $5, $6, ($6 > 0 ? sprintf("%.0f%%", 100 * $5 / $6) : "-"), $7, $8 }' "$ONE"
  echo
  grep -q 'not importable' "$TORCH_LOG" && echo "PyTorch is not importable here: its columns are empty." && echo
  echo "Load average (1, 5, 15 min) at the end: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)."
  echo
} >"$MD"
say "wrote $MD and $CSV"
