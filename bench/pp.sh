#!/usr/bin/env bash
# Lesson 09's schedules measured (`make bench-pp`; not in `make bench` or
# `make test`): 09_pp at NP 4 with GPipe, 1F1B, interleaved 1F1B at V 2 and
# 4, and ZB-H1, each at M = 4, 8 and 16 microbatches, on one model (L 16 so
# that V 4 splits it: 16 layers of D 128, H 512, a global batch of 64). Per
# run, what the lesson prints: the step's median time and its compute and
# blocked communication (rank 0's summary), the bubble measured (idle over N
# x step, all steps) beside the schedule's formula, the plan's bubble in the
# slot model (interleaved, ZB-H1: every action one slot), and stage 1's
# messages and bytes a step. Runs skip the check against one process
# (tests/lesson_09.sh checks every schedule).
# Environment: BIN_DIR, MPIRUN, CORES, BENCH_PP_NP (4), BENCH_PP_MS ("4 8
# 16"), BENCH_PP_STEPS (20), BENCH_PP_TIMEOUT (seconds a run, 300),
# GNUPLOT. Writes bench/pp.md, bench/pp.csv and, with gnuplot, bench/pp.png;
# logs in bench/out/pp/logs.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${BIN_DIR:-.}
MPIRUN=${MPIRUN:-mpirun}
CORES=${CORES:-$(nproc 2>/dev/null || echo 1)}
NP=${BENCH_PP_NP:-4}
read -ra MS <<<"${BENCH_PP_MS:-4 8 16}"
STEPS=${BENCH_PP_STEPS:-20}
TIMEOUT=${BENCH_PP_TIMEOUT:-300}
MODEL=(--layers 16 --dim 128 --hidden 512 --batch 64)
OUT=bench/out/pp
BIN=$BIN_DIR/09_pp/pp
rm -rf "$OUT" && mkdir -p "$OUT/logs"
die() { echo "bench-pp: FAILED: $*" >&2; exit 1; }
say() { echo "bench-pp: $*"; }
[ -x "$BIN" ] || die "$BIN is missing: run 'make all' first"
flags=()
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
[ "$NP" -gt "$CORES" ] && flags+=(--oversubscribe)
load0=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")
t0=$(date +%s)

CSV=bench/pp.csv
echo "schedule,M,step_ms,compute_ms,comm_ms,bubble_measured_pct,bubble_formula_pct,plan_idle_slots,plan_slots,messages_stage1,sendrecvs_stage1,bytes_stage1" >"$CSV"
: >"$OUT/commands.txt"
for M in "${MS[@]}"; do
  for sched in gpipe 1f1b v2 v4 zb1; do
    case $sched in
      v2) run=(--schedule 1f1b --virtual-stages 2) ;;
      v4) run=(--schedule 1f1b --virtual-stages 4) ;;
      *) run=(--schedule "$sched") ;;
    esac
    log="$OUT/logs/$sched-m$M.log"
    cmd=("$MPIRUN" "${flags[@]}" -np "$NP" "$BIN" "${MODEL[@]}" --microbatches "$M" "${run[@]}" --steps "$STEPS" --no-check --timeout 60)
    echo "${cmd[*]}" >>"$OUT/commands.txt"
    timeout "$TIMEOUT" "${cmd[@]}" >"$log" 2>&1 || die "$sched at M $M: exit $? (see $log)"
    step=$(sed -nE 's/^  time per step +([0-9.]+) ms +compute ([0-9.]+) ms +communication ([0-9.]+) ms.*/\1 \2 \3/p' "$log")
    [ -n "$step" ] || die "$sched at M $M: no 'time per step' line in $log"
    bub=$(sed -nE 's/^bubble over all steps: measured idle .* = ([0-9.]+)%; formula .* = ([0-9.]+)%$/\1 \2/p' "$log")
    [ -n "$bub" ] || die "$sched at M $M: no bubble line in $log"
    slots=$(sed -nE 's/^the plan in the slot model .*: ([0-9]+) slots, bubble .* = ([0-9]+)\/[0-9]+ = .*/\2 \1/p' "$log")
    # GPipe and 1F1B: no slot model printed; their plans take 2(M + N-1) slots, 2(N-1) idle
    [ -n "$slots" ] || slots="$((2 * (NP - 1))) $((2 * (M + NP - 1)))"
    bytes=$(sed -nE 's/^\[rank 1\] stage 1 \| sendrecv bytes per step ([0-9]+) .*/\1/p' "$log")
    msgs=$(sed -nE 's/^\[rank 1\] stage 1 \| messages sent per step ([0-9]+) .* in ([0-9]+) sendrecvs.*/\1 \2/p' "$log")
    [ -n "$msgs" ] || msgs="$((2 * M)) -" # one message each way a microbatch, one sendrecv each
    read -r s c m <<<"$step"
    read -r bm bf <<<"$bub"
    read -r idle T <<<"$slots"
    read -r nm ns <<<"$msgs"
    echo "$sched,$M,$s,$c,$m,$bm,$bf,$idle,$T,$nm,$ns,$bytes" >>"$CSV"
    say "$sched M $M: $s ms a step (compute $c, blocked $m), bubble measured $bm% formula $bf%, plan $idle/$T slots idle"
  done
done
load1=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")

GNUPLOT=${GNUPLOT:-gnuplot}
PLOT=""
if command -v "$GNUPLOT" >/dev/null 2>&1; then
  for sched in gpipe 1f1b v2 v4 zb1; do
    awk -F, -v s="$sched" 'NR > 1 && $1 == s { print $2, $3, $6, $7, ($9 > 0 ? 100 * $8 / $9 : 0) }' "$CSV" >"$OUT/$sched.dat"
  done
  # plot_column C: each schedule's column C against M, one line each
  plot_column() {
    printf 'plot '
    local sep="" sched
    for sched in gpipe 1f1b v2 v4 zb1; do
      printf "%s'%s' using 1:%s with linespoints title '%s'" "$sep" "$OUT/$sched.dat" "$1" "$sched"
      sep=", "
    done
    echo
  }
  {
    echo 'if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) { set terminal pngcairo size 1200,440 font ",10" } else { set terminal png size 1200,440 }'
    echo "set output 'bench/pp.png'"
    echo "set multiplot layout 1,3 title '09\\_pp at NP $NP: GPipe, 1F1B, interleaved (V 2, 4), ZB-H1'"
    echo "set xlabel 'microbatches M'; set logscale x 2; set xrange [3.5:18]; set xtics (4, 8, 16); set grid; set key top right; set termoption noenhanced"
    echo "set ylabel 'bubble, % of the step'; set title 'the plan in the slot model (lines) and its formula (points)'"
    printf 'plot '
    sep=""
    for sched in gpipe 1f1b v2 v4 zb1; do
      printf "%s'%s' using 1:5 with lines title '%s plan', '%s' using 1:4 with points title '%s formula'" "$sep" "$OUT/$sched.dat" "$sched" "$OUT/$sched.dat" "$sched"
      sep=", "
    done
    echo
    echo "set ylabel 'idle, % of N x step'; set title 'bubble measured (all steps)'; set yrange [0:100]; set key bottom right"
    plot_column 3
    echo "set ylabel 'ms a step (measured)'; set title 'time a step, $CORES cores shared'; set autoscale y; set key top left"
    plot_column 2
    echo "unset multiplot"
  } >"$OUT/pp.gp"
  if "$GNUPLOT" "$OUT/pp.gp" 2>"$OUT/logs/gnuplot.log"; then PLOT=1; else say "gnuplot failed; see $OUT/logs/gnuplot.log"; fi
else
  say "no gnuplot: no plot (the table alone)"
fi

{
  echo "# 09_pp's schedules measured (make bench-pp)"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(uname -m), $CORES cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)),"
  echo "NP $NP$([ "$NP" -gt "$CORES" ] && echo ", oversubscribed"); load average $load0 before, $load1 after; $(($(date +%s) - t0)) s."
  echo "Model: ${MODEL[*]}, $STEPS steps, --no-check. Commands: bench/out/pp/commands.txt."
  echo
  echo "| schedule | M | step ms | compute ms | blocked ms | bubble measured | formula | plan: idle / slots | stage 1: messages (sendrecvs) | stage 1 bytes |"
  echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
  awk -F, 'NR > 1 { printf "| %s | %s | %s | %s | %s | %s%% | %s%% | %s / %s | %s (%s) | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 }' "$CSV"
  echo
  [ -n "$PLOT" ] && echo "![09's schedules](pp.png)"
} >bench/pp.md
say "wrote bench/pp.md, $CSV$([ -n "$PLOT" ] && echo ", bench/pp.png")"
