#!/usr/bin/env bash
# Lesson 12's bench (`make bench-mesh`):
#   1. every mesh shape of NP 8 (dp x pp x cp x tp = 8, each a power of 2:
#      20 shapes) on one model: time per step, the calls' bytes per rank on
#      each axis, memory per rank, the time blocked on each axis, the
#      pipeline's bubble beside (pp-1)/(M+pp-1); every run checked against
#      one process;
#   2. on emulated nodes (tools/cluster.sh: 2 nodes x 4 ranks, a shaped link
#      between them) the same mesh with tensor parallelism inside a node
#      (ranks filled node by node: a tp group's ranks are neighbours) and
#      across the link (ranks dealt round-robin over the nodes, mpirun
#      --map-by node): what breaking "tp inside a node" costs, with the bytes
#      that crossed node 0's link (its veth's counters) beside the formulas.
# It reads what the lesson prints and measures nothing itself but the link's
# counters. Writes bench/mesh.md, bench/mesh.csv, bench/mesh_cluster.csv and,
# with gnuplot, bench/mesh.png; logs in bench/out/mesh/.
# Environment: BIN_DIR, MPIRUN, CORES, BENCH_MESH_STEPS (default 6),
# BENCH_MESH_RATES (default "unshaped 1gbit"), BENCH_MESH_REPEAT (default 3),
# BENCH_MESH_TIMEOUT (seconds per run, default 600), BENCH_MESH_PART (1, 2
# or "1 2"), BENCH_MESH_DEST (where mesh.md, the CSVs and the plot go, default
# bench), BENCH_OUT (raw output, default bench/out).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${BIN_DIR:-.}
MPIRUN=${MPIRUN:-mpirun}
CORES=${CORES:-$(nproc 2>/dev/null || echo 1)}
STEPS=${BENCH_MESH_STEPS:-6}
RATES=(${BENCH_MESH_RATES:-unshaped 1gbit})
REPEAT=${BENCH_MESH_REPEAT:-3}
TIMEOUT=${BENCH_MESH_TIMEOUT:-600}
PARTS=${BENCH_MESH_PART:-1 2}
MODEL=(--layers 8 --dim 64 --hidden 256 --heads 8 --seq 64 --batch 16 --steps "$STEPS")
OUT=${BENCH_OUT:-bench/out}/mesh # BENCH_OUT: make bench-quick puts its own apart
BIN=$BIN_DIR/12_mesh/mesh
die() { echo "bench-mesh: FAILED: $*" >&2; exit 1; }
say() { echo "bench-mesh: $*"; }
[ -x "$BIN" ] || die "$BIN is missing: run 'make all' first"

# field LOG REGEX N: field N of the first line matching REGEX
field() {
  awk -v re="$2" -v f="$3" '$0 ~ re { print $f; found = 1; exit } END { exit !found }' "$1" ||
    die "$1: no line /$2/"
}
# verdict LOG: the run passed its check and every figure equals its formula
verdict() {
  grep -q '^CHECK PASSED' "$1" || die "$1: no CHECK PASSED"
  grep -q "every rank's calls and bytes equal their formulas: yes" "$1" || die "$1: bytes differ from their formulas"
  grep -q "every rank's memory equals its formulas: yes" "$1" || die "$1: memory differs from its formulas"
}
# bytes LOG AXIS: the bytes per step rank 0 sent on AXIS, every kind of call summed
bytes() {
  sed -En "s/^    $2 +[a-z_]+ \([^)]*\) +[0-9]+ +[0-9]+ +([0-9]+) .*/\1/p" "$1" | awk '{ s += $1 } END { print s + 0 }'
}

# ---- part 2, inside one emulated cluster -------------------------------------------
# bench/mesh.sh --inside LOGDIR REP: both placements, in turn
if [ "${1:-}" = --inside ]; then
  LOGDIR=$2 REP=$3
  sent0() { awk '$1 == "vn0:" { print $2 }' /proc/net/dev; } # what node 0 sent over its link
  order=(slot node)
  [ $((REP % 2)) = 1 ] && order=(node slot) # alternate which runs first
  for map in "${order[@]}"; do
    log=$LOGDIR/cluster-$CLUSTER_RATE-$map-$REP.log
    b0=$(sent0)
    echo "mpirun --hostfile \$CLUSTER_HOSTFILE --map-by $map -np 8 $BIN --dp 4 --tp 2 ${MODEL[*]}" >"$log"
    timeout -k 5 "$TIMEOUT" mpirun --hostfile "$CLUSTER_HOSTFILE" --map-by "$map" -np 8 "$BIN" \
      --dp 4 --tp 2 "${MODEL[@]}" >>"$log" 2>&1 || die "$log: the run failed"
    verdict "$log"
    echo "$CLUSTER_RATE $map $REP $(field "$log" '^  time per step' 4) $(($(sent0) - b0))" >>"$LOGDIR/rows.txt"
  done
  exit 0
fi

mkdir -p "$OUT"
rm -f "$OUT"/*.log "$OUT"/rows.txt
DEST=${BENCH_MESH_DEST:-bench} # make bench-quick's: bench/out/quick/results
mkdir -p "$DEST"
MD=$DEST/mesh.md CSV=$DEST/mesh.csv CCSV=$DEST/mesh_cluster.csv
flags=()
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
[ 8 -gt "$CORES" ] && flags+=(--oversubscribe)

if [[ " $PARTS " == *" 1 "* ]]; then
  echo "dp,pp,cp,tp,ms_per_step,tp_bytes,cp_bytes,pp_bytes,dpcp_bytes,memory_bytes,tp_ms,cp_ms,pp_ms,dpcp_ms,bubble_pct,bubble_formula_pct" >"$CSV"
  for dp in 1 2 4 8; do for pp in 1 2 4 8; do for cp in 1 2 4 8; do for tp in 1 2 4 8; do
    [ $((dp * pp * cp * tp)) = 8 ] || continue
    log=$OUT/mesh-$dp-$pp-$cp-$tp.log
    say "dp $dp x pp $pp x cp $cp x tp $tp"
    echo "$MPIRUN ${flags[*]} -np 8 $BIN --dp $dp --pp $pp --cp $cp --tp $tp ${MODEL[*]}" >"$log"
    timeout -k 5 "$TIMEOUT" "$MPIRUN" "${flags[@]}" -np 8 "$BIN" --dp $dp --pp $pp --cp $cp --tp $tp \
      "${MODEL[@]}" >>"$log" 2>&1 || die "$log: the run failed"
    verdict "$log"
    ms=$(field "$log" '^  time per step' 4)
    mem=$(awk '/^    (params|grads|optim|activ|comm|data) +[0-9]+ +[0-9]+ / { s += $2 } END { print s }' "$log")
    blocked=$(sed -En 's/^  time blocked per step \(rank 0\): tp ([0-9.]+) ms, cp ([0-9.]+) ms, pp ([0-9.]+) ms, dp x cp ([0-9.]+) ms.*/\1,\2,\3,\4/p' "$log")
    bubble=$(sed -En 's/^bubble over all steps: measured idle \/ \(N x step\) = ([0-9.]+)%; formula .* = ([0-9.]+)%$/\1,\2/p' "$log")
    echo "$dp,$pp,$cp,$tp,$ms,$(bytes "$log" tp),$(bytes "$log" cp),$(bytes "$log" pp),$(bytes "$log" 'dp x cp'),$mem,$blocked,$bubble" >>"$CSV"
  done; done; done; done
fi

if [[ " $PARTS " == *" 2 "* ]]; then
  if why=$(bash tools/cluster.sh check 2>&1); then
    for rate in "${RATES[@]}"; do
      r=()
      [ "$rate" = unshaped ] || r=(--rate "$rate")
      for ((rep = 0; rep < REPEAT; rep++)); do
        say "emulated nodes, link $rate, repetition $((rep + 1)) of $REPEAT"
        bash tools/cluster.sh --nodes 2 --slots 4 "${r[@]}" -- bash "$PWD/bench/mesh.sh" --inside "$PWD/$OUT" "$rep" ||
          die "the emulated cluster run failed (link $rate)"
      done
    done
    echo "rate,placement,repetition,ms_per_step,node0_link_bytes" >"$CCSV"
    tr ' ' ',' <"$OUT/rows.txt" >>"$CCSV"
  else
    say "part 2 skipped: $why"
    echo "skipped: $why" >"$CCSV"
  fi
fi

# ---- the page ------------------------------------------------------------------------
{
  echo "# 12_mesh: every mesh of 8 ranks, and tensor parallelism across a node's link"
  echo
  echo "Made by \`make bench-mesh\` (bench/mesh.sh) on $(uname -sm), $CORES cores, $(date -u '+%Y-%m-%d %H:%M UTC')."
  echo "Model: ${MODEL[*]} (L 8, D 64, H 256, 8 heads, B 16 sequences of 64 tokens; M = 2 pp"
  echo "microbatches with a pipeline, else 1). Every run passed its check against one process, and"
  echo "every byte and memory figure equalled its formula (the runs' logs: bench/out/mesh/)."
  if [ -f "$CSV" ]; then
    echo
    echo "## Every mesh of 8 ranks"
    echo
    echo "Bytes sent per rank per step by rank 0 on each axis; memory: rank 0's peaks summed over kinds;"
    echo "blocked: rank 0's time in each axis's calls; bubble: idle / (pp x step) beside (pp-1)/(M+pp-1)."
    echo
    echo "| dp | pp | cp | tp | ms/step | tp bytes | cp bytes | pp bytes | dp x cp bytes | memory | blocked tp/cp/pp/dc ms | bubble (formula) |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
    tail -n +2 "$CSV" | sort -t, -k5 -g | awk -F, '{ printf "| %s | %s | %s | %s | %.1f | %s | %s | %s | %s | %s | %.1f/%.1f/%.1f/%.1f | %.1f%% (%.1f%%) |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16 }'
  fi
  if [ -f "$CCSV" ] && ! grep -q '^skipped' "$CCSV"; then
    echo
    echo "## Tensor parallelism inside a node, and across the link"
    echo
    echo "2 emulated nodes x 4 ranks (tools/cluster.sh), the mesh dp 4 x tp 2. slot: ranks fill node 0"
    echo "first, so each tp pair shares a node; node: ranks dealt round-robin over the nodes (mpirun"
    echo "--map-by node), so each tp pair spans the link. Medians of $REPEAT repetitions, placements in turn."
    echo
    echo "| link | placement | ms/step (median) | bytes over node 0's link per run (median) |"
    echo "|---|---|---|---|"
    for rate in "${RATES[@]}"; do for map in slot node; do
      awk -F, -v r="$rate" -v m="$map" '$1 == r && $2 == m { print $4, $5 }' "$CCSV" | sort -g |
        awk -v r="$rate" -v m="$map" '{ t[NR] = $1; b[NR] = $2 } END { if (NR) printf "| %s | %s | %.1f | %d |\n", r, m == "slot" ? "tp inside a node" : "tp across the link", t[int((NR + 1) / 2)], b[int((NR + 1) / 2)] }'
    done; done
  elif [ -f "$CCSV" ]; then
    echo
    echo "Part 2 (emulated nodes): $(cat "$CCSV")"
  fi
} >"$MD"
if command -v gnuplot >/dev/null && [ -f "$CSV" ]; then
  tail -n +2 "$CSV" | sort -t, -k5 -g | awk -F, '{ print NR - 1, $5, $1 "x" $2 "x" $3 "x" $4 }' >"$OUT/plot.dat"
  gnuplot -e "set terminal png size 1000,420; set output '$DEST/mesh.png'; set style fill solid; set boxwidth 0.7; set ylabel 'ms per step'; set xtics rotate by -45 font ',9'; set title 'every mesh dp x pp x cp x tp of 8 ranks ($(uname -m), $CORES cores)'; plot '$OUT/plot.dat' using 1:2:xtic(3) with boxes notitle"
else
  say "no plot: gnuplot not installed ($DEST/mesh.png left as it was)"
fi
say "wrote $MD"
