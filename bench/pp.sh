#!/usr/bin/env bash
# The pipeline's schedules measured (`make bench-pp`; not in `make bench` or
# `make test`): GPipe, 1F1B, interleaved 1F1B at V 2 and 4, and ZB-H1, each
# at M = 4, 8 and 16 microbatches, first in 09_pp at NP 4 (L 16 so that V 4
# splits it: 16 layers of D 128, H 512, a global batch of 64), then on
# 12_mesh's 16-rank mesh dp 2 x pp 4 x tp 2 (L 16, D 64, 8 heads, 32
# sequences of 32 tokens), the same walk with tensor and data parallelism
# around it. Per run, what the lesson prints: the step's median time and its
# compute and blocked communication (rank 0's summary), the bubble measured
# (idle over N x step, all steps) beside the schedule's formula, the plan's
# bubble in the slot model (interleaved, ZB-H1: every action one slot), and
# one stage's messages and bytes a step (09: stage 1's; 12: rank 0's pipeline
# row, beside its formula). Runs skip the check against one process
# (tests/lesson_09.sh and tests/lesson_12.sh check every schedule).
# Environment: BIN_DIR, MPIRUN, CORES, BENCH_PP_NP (4), BENCH_PP_MESH (1; 0
# skips the mesh), BENCH_PP_MS ("4 8 16"), BENCH_PP_STEPS (20; the mesh
# half as many), BENCH_PP_TIMEOUT (seconds a run, 300), GNUPLOT. Writes
# bench/pp.md, bench/pp.csv, bench/pp_mesh.csv and, with gnuplot,
# bench/pp.png; logs in bench/out/pp/logs.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${BIN_DIR:-.}
MPIRUN=${MPIRUN:-mpirun}
CORES=${CORES:-$(nproc 2>/dev/null || echo 1)}
NP=${BENCH_PP_NP:-4}
MPP=4 # the mesh's stages: dp 2 x pp 4 x tp 2
MNP=$((${BENCH_PP_MESH:-1} ? 2 * MPP * 2 : 0))
read -ra MS <<<"${BENCH_PP_MS:-4 8 16}"
STEPS=${BENCH_PP_STEPS:-20}
MSTEPS=$(((STEPS + 1) / 2))
TIMEOUT=${BENCH_PP_TIMEOUT:-300}
MODEL=(--layers 16 --dim 128 --hidden 512 --batch 64)
MESH=(--dp 2 --pp "$MPP" --tp 2)
MMODEL=(--layers 16 --dim 64 --heads 8 --seq 32 --batch 32)
SCHEDS=(gpipe 1f1b v2 v4 zb1)
OUT=bench/out/pp
rm -rf "$OUT" && mkdir -p "$OUT/logs"
die() { echo "bench-pp: FAILED: $*" >&2; exit 1; }
say() { echo "bench-pp: $*"; }
for b in 09_pp/pp 12_mesh/mesh; do
  [ -x "$BIN_DIR/$b" ] || die "$BIN_DIR/$b is missing: run 'make all' first"
done
mpi_flags() { # the launcher's flags for $1 ranks
  [ "$(id -u)" = 0 ] && printf '%s\n' --allow-run-as-root
  [ "$1" -gt "$CORES" ] && printf '%s\n' --oversubscribe
  return 0
}
load0=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")
t0=$(date +%s)
: >"$OUT/commands.txt"

# run LOG NP PP ARGS...: one run of a lesson at M microbatches on PP stages;
# its common figures into step (time, compute, blocked), bub (measured,
# formula) and slots (idle, T)
run() {
  local log=$1 np=$2 pp=$3 flags
  shift 3
  mapfile -t flags < <(mpi_flags "$np")
  local cmd=("$MPIRUN" "${flags[@]}" -np "$np" "$@" --no-check --timeout 60)
  echo "${cmd[*]}" >>"$OUT/commands.txt"
  timeout "$TIMEOUT" "${cmd[@]}" >"$log" 2>&1 || die "exit $? (see $log)"
  step=$(sed -nE 's/^  time per step +([0-9.]+) ms +compute ([0-9.]+) ms +communication ([0-9.]+) ms.*/\1 \2 \3/p' "$log")
  [ -n "$step" ] || die "no 'time per step' line in $log"
  bub=$(sed -nE 's/^bubble over all steps: measured idle .* = ([0-9.]+)%; formula .* = ([0-9.]+)%$/\1 \2/p' "$log")
  [ -n "$bub" ] || die "no bubble line in $log"
  slots=$(sed -nE 's/^the plan in the slot model .*: ([0-9]+) slots, bubble .* = ([0-9]+)\/[0-9]+ = .*/\2 \1/p' "$log")
  # GPipe and 1F1B: no slot model printed; their plans take 2(M + N-1) slots, 2(N-1) idle
  [ -n "$slots" ] || slots="$((2 * (pp - 1))) $((2 * (M + pp - 1)))"
}
sched_flags() { # a schedule's flags
  case $1 in
    v2) echo "--schedule 1f1b --virtual-stages 2" ;;
    v4) echo "--schedule 1f1b --virtual-stages 4" ;;
    *) echo "--schedule $1" ;;
  esac
}

CSV=bench/pp.csv
echo "schedule,M,step_ms,compute_ms,comm_ms,bubble_measured_pct,bubble_formula_pct,plan_idle_slots,plan_slots,messages_stage1,sendrecvs_stage1,bytes_stage1" >"$CSV"
for M in "${MS[@]}"; do
  for sched in "${SCHEDS[@]}"; do
    log="$OUT/logs/$sched-m$M.log"
    read -ra sf <<<"$(sched_flags "$sched")"
    run "$log" "$NP" "$NP" "$BIN_DIR/09_pp/pp" "${MODEL[@]}" --microbatches "$M" "${sf[@]}" --steps "$STEPS"
    bytes=$(sed -nE 's/^\[rank 1\] stage 1 \| sendrecv bytes per step ([0-9]+) .*/\1/p' "$log")
    msgs=$(sed -nE 's/^\[rank 1\] stage 1 \| messages sent per step ([0-9]+) .* in ([0-9]+) sendrecvs.*/\1 \2/p' "$log")
    [ -n "$msgs" ] || msgs="$((2 * M)) -" # one message each way a microbatch, one sendrecv each
    read -r s c m <<<"$step"
    read -r bm bf <<<"$bub"
    read -r idle T <<<"$slots"
    read -r nm ns <<<"$msgs"
    echo "$sched,$M,$s,$c,$m,$bm,$bf,$idle,$T,$nm,$ns,$bytes" >>"$CSV"
    say "09 $sched M $M: $s ms a step (compute $c, blocked $m), bubble measured $bm% formula $bf%, plan $idle/$T slots idle"
  done
done

MCSV=bench/pp_mesh.csv
if [ "$MNP" -gt 0 ]; then
  echo "schedule,M,step_ms,compute_ms,comm_ms,pp_blocked_ms,bubble_measured_pct,bubble_formula_pct,plan_idle_slots,plan_slots,pp_calls,pp_calls_formula,pp_bytes,pp_bytes_formula" >"$MCSV"
  for M in "${MS[@]}"; do
    for sched in "${SCHEDS[@]}"; do
      log="$OUT/logs/mesh-$sched-m$M.log"
      read -ra sf <<<"$(sched_flags "$sched")"
      run "$log" "$MNP" "$MPP" "$BIN_DIR/12_mesh/mesh" "${MESH[@]}" "${MMODEL[@]}" --micro "$M" "${sf[@]}" --steps "$MSTEPS"
      row=$(sed -nE 's/^    pp +sendrecv \(activ\) +([0-9]+) +([0-9]+) +([0-9]+) +([0-9]+) .*/\1 \2 \3 \4/p' "$log")
      [ -n "$row" ] || die "no pipeline row in $log"
      ppb=$(sed -nE 's/^  time blocked per step \(rank 0\):.* pp ([0-9.]+) ms.*/\1/p' "$log")
      [ -n "$ppb" ] || die "no 'time blocked per step' line in $log"
      grep -q "every rank's calls and bytes equal their formulas: yes" "$log" || die "a rank's calls or bytes differ from their formulas (see $log)"
      read -r s c m <<<"$step"
      read -r bm bf <<<"$bub"
      read -r idle T <<<"$slots"
      read -r nc fc nb fb <<<"$row"
      echo "$sched,$M,$s,$c,$m,$ppb,$bm,$bf,$idle,$T,$nc,$fc,$nb,$fb" >>"$MCSV"
      say "12 $sched M $M: $s ms a step (compute $c, blocked $m, on pp $ppb), bubble measured $bm% formula $bf%, plan $idle/$T slots idle"
    done
  done
fi
load1=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")

GNUPLOT=${GNUPLOT:-gnuplot}
PLOT=""
if command -v "$GNUPLOT" >/dev/null 2>&1; then
  # dat CSV PREFIX COLUMNS: one file a schedule, M then the columns named
  # (step ms, bubble measured, its formula, the plan's bubble in %)
  dat() {
    for sched in "${SCHEDS[@]}"; do
      awk -F, -v s="$sched" -v c="$3" 'NR > 1 && $1 == s { split(c, k, " "); print $2, $k[1], $k[2], $k[3], ($k[5] > 0 ? 100 * $k[4] / $k[5] : 0) }' "$1" >"$OUT/$2$sched.dat"
    done
  }
  dat "$CSV" "" "3 6 7 8 9"
  [ "$MNP" -gt 0 ] && dat "$MCSV" mesh- "3 7 8 9 10"
  # plot_column PREFIX C: each schedule's column C against M, one line each
  plot_column() {
    printf 'plot '
    local sep="" sched
    for sched in "${SCHEDS[@]}"; do
      printf "%s'%s' using 1:%s with linespoints title '%s'" "$sep" "$OUT/$1$sched.dat" "$2" "$sched"
      sep=", "
    done
    echo
  }
  # panels PREFIX WHAT: the plan beside its formula, the measured bubble, the step
  panels() {
    echo "set ylabel 'bubble, % of the step'; set title '$2: the plan in the slot model (lines), its formula (points)'; set yrange [0:*]; set key top right"
    printf 'plot '
    local sep="" sched
    for sched in "${SCHEDS[@]}"; do
      printf "%s'%s' using 1:5 with lines title '%s plan', '%s' using 1:4 with points title '%s formula'" "$sep" "$OUT/$1$sched.dat" "$sched" "$OUT/$1$sched.dat" "$sched"
      sep=", "
    done
    echo
    echo "set ylabel 'idle, % of N x step'; set title '$2: bubble measured (all steps)'; set yrange [0:100]; set key bottom right"
    plot_column "$1" 3
    echo "set ylabel 'ms a step (measured)'; set title '$2: time a step, $CORES cores shared'; set yrange [0:*]; set key top left"
    plot_column "$1" 2
  }
  rows=1
  [ "$MNP" -gt 0 ] && rows=2
  {
    echo 'if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) { set terminal pngcairo size 1200,'$((440 * rows))' font ",10" } else { set terminal png size 1200,'$((440 * rows))' }'
    echo "set output 'bench/pp.png'"
    echo "set multiplot layout $rows,3 title 'GPipe, 1F1B, interleaved (V 2, 4), ZB-H1: 09\\_pp at NP $NP$([ "$MNP" -gt 0 ] && echo ", 12\\_mesh dp 2 x pp 4 x tp 2 at NP $MNP")'"
    echo "set xlabel 'microbatches M'; set logscale x 2; set xrange [3.5:18]; set xtics (4, 8, 16); set grid; set termoption noenhanced"
    panels "" "09 NP $NP"
    [ "$MNP" -gt 0 ] && panels mesh- "12 NP $MNP"
    echo "unset multiplot"
  } >"$OUT/pp.gp"
  if "$GNUPLOT" "$OUT/pp.gp" 2>"$OUT/logs/gnuplot.log"; then PLOT=1; else say "gnuplot failed; see $OUT/logs/gnuplot.log"; fi
else
  say "no gnuplot: no plot (the tables alone)"
fi

{
  echo "# The pipeline's schedules measured (make bench-pp)"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(uname -m), $CORES cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)),"
  echo "load average $load0 before, $load1 after; $(($(date +%s) - t0)) s. Commands: bench/out/pp/commands.txt."
  echo
  echo "## 09_pp at NP $NP$([ "$NP" -gt "$CORES" ] && echo ", oversubscribed")"
  echo
  echo "Model: ${MODEL[*]}, $STEPS steps, --no-check."
  echo
  echo "| schedule | M | step ms | compute ms | blocked ms | bubble measured | formula | plan: idle / slots | stage 1: messages (sendrecvs) | stage 1 bytes |"
  echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
  awk -F, 'NR > 1 { printf "| %s | %s | %s | %s | %s | %s%% | %s%% | %s / %s | %s (%s) | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 }' "$CSV"
  if [ "$MNP" -gt 0 ]; then
    echo
    echo "## 12_mesh at NP $MNP: ${MESH[*]}$([ "$MNP" -gt "$CORES" ] && echo ", oversubscribed")"
    echo
    echo "Model: ${MMODEL[*]}, $MSTEPS steps, --no-check. Rank 0 is stage 0; its pipeline row: sendrecvs and bytes a step, each beside its formula."
    echo
    echo "| schedule | M | step ms | compute ms | blocked ms | on pp | bubble measured | formula | plan: idle / slots | pp sendrecvs (formula) | pp bytes (formula) |"
    echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
    awk -F, 'NR > 1 { printf "| %s | %s | %s | %s | %s | %s | %s%% | %s%% | %s / %s | %s (%s) | %s (%s) |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14 }' "$MCSV"
  fi
  echo
  [ -n "$PLOT" ] && echo "![the pipeline's schedules](pp.png)"
} >bench/pp.md
say "wrote bench/pp.md, $CSV$([ "$MNP" -gt 0 ] && echo ", $MCSV")$([ -n "$PLOT" ] && echo ", bench/pp.png")"
