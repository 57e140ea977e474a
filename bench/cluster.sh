#!/usr/bin/env bash
# `make bench-cluster`: the hierarchical all-reduce on a slow link between
# emulated nodes (tools/cluster.sh). For 2 nodes x 2 ranks and 3 nodes x 2
# ranks, each node's link unshaped, then shaped with tc tbf (1 Gbit/s and
# 200 Mbit/s per direction; with a netem delay where the kernel has
# sch_netem), it runs
#   - 03_all_reduce --hierarchical --no-sweep at 16 MiB: the flat ring over
#     all ranks vs the hierarchical all-reduce, taking turns call by call;
#   - 05_dp with the flat gradient all-reduce and with --hierarchical, as
#     two runs one after the other (their order alternates);
# and counts the bytes that crossed node 0's link (the kernel's counters of
# its veth, TCP/IP headers included) beside the formula's payload bytes and
# the link's lower bound (bytes / rate). Every configuration runs
# BENCH_CLUSTER_REPEAT times, the configurations taking turns, so that load
# from other processes on a shared machine hits them alike; the tables give
# medians. It reads what the lessons print and measures nothing itself but
# the link's counters.
# Writes bench/cluster/results.md, bench/cluster/cluster.csv and, when gnuplot
# is installed, bench/cluster/cluster.png; logs in bench/out/cluster/.
# Exit 77 (skip) where the machine forbids network namespaces.
#
# Environment: BENCH_CLUSTER_REPEAT (default 5), BENCH_CLUSTER_RATES (default
# "unshaped 1gbit 200mbit"), BENCH_CLUSTER_TOPOS (default "2x2 3x2"),
# BENCH_CLUSTER_BYTES (03's size, default 16M), BENCH_CLUSTER_STEPS (05's
# steps, default 8), BENCH_TIMEOUT (seconds per configuration, default 600).
set -euo pipefail
cd "$(dirname "$0")/.."

# ---- inside one emulated cluster: one repetition of one configuration ----------------
# bench/cluster.sh --inside LOGDIR REP: every line it appends to
# LOGDIR/rows.txt is "topo rate rep what value".
if [ "${1:-}" = --inside ]; then
  LOGDIR=$2 REP=$3
  TOPO="${CLUSTER_NODES}x$CLUSTER_SLOTS" RATE=$CLUSTER_RATE
  NP=$((CLUSTER_NODES * CLUSTER_SLOTS))
  tag="$TOPO-$RATE-$REP"
  # bytes node 0 sent over its link: the bridge side of its veth receives them
  sent0() { awk '$1 == "vn0:" { print $2 }' /proc/net/dev; }
  row() { echo "$TOPO $RATE $REP $1 $2" >>"$LOGDIR/rows.txt"; }
  run() { # run LOG ARGS...: one mpirun through the hostfile; CHECK PASSED (or, with --no-check, no CHECK FAILED) required
    local log=$LOGDIR/$1
    shift
    echo "mpirun --hostfile \$CLUSTER_HOSTFILE -np $NP $*" >"$log"
    mpirun --hostfile "$CLUSTER_HOSTFILE" -np "$NP" "$@" >>"$log" 2>&1 || {
      echo "bench-cluster: FAILED: $* (see $log)" >&2
      exit 1
    }
    if [[ " $* " == *" --no-check "* ]]; then # the timed repetitions after the first
      ! grep -q '^CHECK FAILED' "$log" || { echo "bench-cluster: CHECK FAILED: $* (see $log)" >&2; exit 1; }
    else
      grep -q '^CHECK PASSED' "$log" || { echo "bench-cluster: no CHECK PASSED: $* (see $log)" >&2; exit 1; }
    fi
  }
  num() { # num LOG REGEX FIELD: field FIELD of the first line matching REGEX
    awk -v re="$2" -v f="$3" '$0 ~ re { print $f; found = 1; exit } END { exit !found }' "$1" ||
      { echo "bench-cluster: $1: no line /$2/" >&2; exit 1; }
  }
  ITERS=5
  b0=$(sent0)
  run "03-$tag.log" ./03_all_reduce/all_reduce --hierarchical --no-sweep --max-bytes "$BYTES" \
    --iters $ITERS --warmup 1
  b1=$(sent0)
  log=$LOGDIR/03-$tag.log
  row 03_flat_us "$(num "$log" '^flat ring +[0-9]' 3)"
  row 03_hier_us "$(num "$log" '^hierarchical +[0-9]' 2)"
  row 03_link_bytes_per_pair "$(((b1 - b0) / (ITERS + 1)))"
  # 05: flat and hierarchical alternate which goes first
  order=(flat hier)
  [ $((REP % 2)) = 0 ] && order=(hier flat)
  check=(--no-check)
  [ "$REP" = 1 ] && check=()
  for v in "${order[@]}"; do
    flag=()
    [ $v = hier ] && flag=(--hierarchical)
    b0=$(sent0)
    run "05-$v-$tag.log" ./05_dp/dp --layers 4 --dim 256 --hidden 1024 --batch 48 \
      --steps "$STEPS" "${check[@]}" "${flag[@]}"
    b1=$(sent0)
    log=$LOGDIR/05-$v-$tag.log
    # the median step time of the run, its first step (warm-up) left out
    ms=$(awk '/^step +[0-9]+\/[0-9]+ +loss/ { split($2, s, "/"); if (s[1] > 1) print $(NF - 1) }' "$log" |
      sort -g | awk '{ v[NR] = $1 } END { if (NR) print (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2; else exit 1 }') ||
      { echo "bench-cluster: $log: no step lines" >&2; exit 1; }
    row "05_${v}_ms" "$ms"
    row "05_${v}_link_bytes_per_step" "$(((b1 - b0) / STEPS))"
  done
  exit 0
fi

# ---- outside: every configuration, in turns ------------------------------------------
REPEAT=${BENCH_CLUSTER_REPEAT:-5}
RATES=(${BENCH_CLUSTER_RATES:-unshaped 1gbit 200mbit})
TOPOS=(${BENCH_CLUSTER_TOPOS:-2x2 3x2})
export BYTES=${BENCH_CLUSTER_BYTES:-16M} STEPS=${BENCH_CLUSTER_STEPS:-8}
TIMEOUT=${BENCH_TIMEOUT:-600}
say() { echo "bench-cluster: $*"; }
if ! why=$(tools/cluster.sh check 2>&1); then
  say "${why#cluster: }"
  exit 77
fi
for b in 03_all_reduce/all_reduce 05_dp/dp; do
  [ -x "$b" ] || { say "FAILED: $b is missing: run 'make all' first"; exit 1; }
done
DELAY_NOTE="no added delay: this kernel has no sch_netem (tc netem), so only the rate is emulated"
if tools/cluster.sh --delay 1ms -- true >/dev/null 2>&1; then
  DELAY_NOTE="netem delay 1ms one way on every node's link (unshaped rate) as an extra row"
  RATES+=(delay1ms)
fi

LOGDIR=bench/out/cluster
rm -rf "$LOGDIR"
mkdir -p "$LOGDIR"
: >"$LOGDIR/rows.txt"
T0=$(date +%s)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
say "$(tools/cluster.sh check 2>&1 | sed 's/^cluster: //')"
say "${#TOPOS[@]} topologies x ${#RATES[@]} links x $REPEAT repetitions, configurations in turns; load average $LOAD_START"
for ((rep = 1; rep <= REPEAT; rep++)); do
  for topo in "${TOPOS[@]}"; do
    for rate in "${RATES[@]}"; do
      opts=(--nodes "${topo%x*}" --slots "${topo#*x}")
      case $rate in
      unshaped) ;;
      delay1ms) opts+=(--delay 1ms) ;;
      *) opts+=(--rate "$rate") ;;
      esac
      t=$(date +%s)
      timeout -k 5 "$TIMEOUT" tools/cluster.sh "${opts[@]}" -- bash bench/cluster.sh --inside "$LOGDIR" "$rep" ||
        { say "FAILED: $topo $rate repetition $rep (logs in $LOGDIR)"; exit 1; }
      say "$(printf 'repetition %d/%d  %-4s %-9s %4d s  load %s' "$rep" "$REPEAT" "$topo" "$rate" $(($(date +%s) - t)) "$(cut -d' ' -f1 /proc/loadavg)")"
    done
  done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
ELAPSED=$(($(date +%s) - T0))

# ---- tables ------------------------------------------------------------------------------
# median TOPO RATE WHAT: the median over the repetitions
median() {
  awk -v t="$1" -v r="$2" -v w="$3" '$1 == t && $2 == r && $4 == w { print $5 }' "$LOGDIR/rows.txt" |
    sort -g | awk '{ v[NR] = $1 } END { if (!NR) exit 1; print (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'
}
all_of() { # the values of every repetition, for the table's spread
  awk -v t="$1" -v r="$2" -v w="$3" '$1 == t && $2 == r && $4 == w { printf "%s%s", n++ ? " " : "", $5 }' "$LOGDIR/rows.txt"
}
bits_per_s() { # tc's units are SI: 1gbit = 1e9 bit/s
  case $1 in
  *gbit) awk -v x="${1%gbit}" 'BEGIN { print x * 1e9 }' ;;
  *mbit) awk -v x="${1%mbit}" 'BEGIN { print x * 1e6 }' ;;
  *) echo 0 ;;
  esac
}
to_bytes() { numfmt --from=iec "$1"; }
S03=$(to_bytes "$BYTES")
P05=$((4 * 2 * 256 * 1024)) # L x 2 x D x H parameters
OUTD=bench/cluster
NEWD=$LOGDIR/new
mkdir -p "$NEWD"
CSV=$NEWD/cluster.csv
echo "topology,link,bits_per_s,what,flat,hierarchical,flat_over_hier,bound_ratio,flat_bound,hier_bound,link_bytes_measured,link_bytes_formula" >"$CSV"
T03=$LOGDIR/t03.md T05=$LOGDIR/t05.md
: >"$T03"
: >"$T05"
for topo in "${TOPOS[@]}"; do
  M=${topo%x*} K=${topo#*x}
  N=$((M * K))
  # payload bytes node 0 sends over its link per call: the flat ring's one
  # crossing edge carries 2(N-1)/N x S; the leaders' ring 2(M-1)/M x S
  for rate in "${RATES[@]}"; do
    bps=$(bits_per_s "$rate")
    f=$(median "$topo" "$rate" 03_flat_us) h=$(median "$topo" "$rate" 03_hier_us)
    lb=$(median "$topo" "$rate" 03_link_bytes_per_pair)
    awk -v topo="$topo" -v rate="$rate" -v bps="$bps" -v f="$f" -v h="$h" -v lb="$lb" -v S="$S03" \
      -v N="$N" -v M="$M" -v fa="$(all_of "$topo" "$rate" 03_flat_us)" -v ha="$(all_of "$topo" "$rate" 03_hier_us)" \
      -v csv="$CSV" 'BEGIN {
        fb = 2 * (N - 1) / N * S; hb = 2 * (M - 1) / M * S; bound = fb / hb
        ft = bps ? fb * 8 / bps * 1e3 : 0; ht = bps ? hb * 8 / bps * 1e3 : 0
        printf "| %s | %s | %.1f | %s | %.1f | %s | **%.2f** | %.2f | %.0f + %.0f = %.0f | %.0f |\n",
          topo, rate, f / 1e3, bps ? sprintf("%.1f", ft) : "-", h / 1e3, bps ? sprintf("%.1f", ht) : "-",
          f / h, bound, fb, hb, fb + hb, lb
        printf "%s,%s,%s,03_allreduce_ms,%.3f,%.3f,%.4f,%.4f,%.3f,%.3f,%.0f,%.0f\n", topo, rate, bps,
          f / 1e3, h / 1e3, f / h, bound, ft, ht, lb, fb + hb >> csv
      }' >>"$T03"
    f=$(median "$topo" "$rate" 05_flat_ms) h=$(median "$topo" "$rate" 05_hier_ms)
    lf=$(median "$topo" "$rate" 05_flat_link_bytes_per_step) lh=$(median "$topo" "$rate" 05_hier_link_bytes_per_step)
    awk -v topo="$topo" -v rate="$rate" -v bps="$bps" -v f="$f" -v h="$h" -v lf="$lf" -v lh="$lh" \
      -v S="$((P05 * 4))" -v N="$N" -v M="$M" -v csv="$CSV" 'BEGIN {
        fb = 2 * (N - 1) / N * S; hb = 2 * (M - 1) / M * S
        ft = bps ? fb * 8 / bps * 1e3 : 0; ht = bps ? hb * 8 / bps * 1e3 : 0
        printf "| %s | %s | %.1f | %s | %.0f / %.0f | %.1f | %s | %.0f / %.0f | **%.2f** |\n",
          topo, rate, f, bps ? sprintf("%.1f", ft) : "-", lf, fb, h, bps ? sprintf("%.1f", ht) : "-", lh, hb, f / h
        printf "%s,%s,%s,05_step_ms,%.3f,%.3f,%.4f,%.4f,%.3f,%.3f,%.0f,%.0f\n", topo, rate, bps,
          f, h, f / h, fb / hb, ft, ht, lf + lh, fb + hb >> csv
      }' >>"$T05"
  done
done

# ---- plot ---------------------------------------------------------------------------------
PLOT=""
if command -v gnuplot >/dev/null 2>&1; then
  awk -F, '$4 == "03_allreduce_ms" { print NR - 1, $1 "/" $2, $5, $6, ($3 > 0 ? $9 : "NaN"), ($3 > 0 ? $10 : "NaN") }' "$CSV" >"$LOGDIR/plot.dat"
  cat >"$LOGDIR/plot.gp" <<EOF
set terminal pngcairo size 900,480 noenhanced
set output '$NEWD/cluster.png'
set title "all-reduce of $BYTES across emulated nodes: flat ring vs hierarchical (medians)"
set ylabel "ms per all-reduce"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -30
set key top left
set logscale y
plot '$LOGDIR/plot.dat' using 3:xtic(2) title 'flat ring', '' using 4 title 'hierarchical', \
     '' using 5 title 'flat: link bound', '' using 6 title 'hierarchical: link bound'
EOF
  gnuplot "$LOGDIR/plot.gp" 2>"$LOGDIR/gnuplot.log" || { say "FAILED: gnuplot; see $LOGDIR/gnuplot.log"; exit 1; }
  PLOT=cluster.png
fi

# ---- results.md --------------------------------------------------------------------------
BANNER=$(head -2 "$(ls "$LOGDIR"/03-2x2-1gbit-1.log 2>/dev/null || ls "$LOGDIR"/03-*.log | head -1)" | tail -1)
{
  echo "# Emulated nodes and a slow link: flat vs hierarchical all-reduce"
  echo
  echo "Written by \`make bench-cluster\` (bench/cluster.sh) on $(date -u '+%Y-%m-%d %H:%M UTC'): cpu backend,"
  echo "$(mpirun --version 2>/dev/null | head -1), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')),"
  echo "kernel $(uname -r). Nodes from tools/cluster.sh: network and UTS namespaces on one machine,"
  echo "shared memory inside a node, TCP over veth pairs and a bridge between nodes, each node's link"
  echo "shaped in both directions with tc tbf (burst 32 KB); $DELAY_NOTE."
  echo "All ranks of all nodes share the machine's $(nproc) cores: compute is not that of a cluster."
  echo "Load average (1, 5, 15 min) at the start: $LOAD_START; at the end: $LOAD_END (other engineers'"
  echo "jobs shared the machine). $REPEAT repetitions of every configuration, the configurations in turns;"
  echo "every figure is the median over the repetitions. The suite took $ELAPSED s."
  echo
  echo "First run's banner: \`$BANNER\`"
  echo
  echo "## 03_all_reduce: one all-reduce of $BYTES ($S03 bytes)"
  echo
  echo "\`03_all_reduce --hierarchical --no-sweep --max-bytes $BYTES --iters 5 --warmup 1\`: flat ring over all N"
  echo "ranks vs hierarchical (reduce to the node leader, all-reduce among the M leaders, broadcast),"
  echo "call by call in turn; each run's median of 5 calls, then the median of $REPEAT runs. The bound is"
  echo "the time node 0's link needs for the payload it must send: flat 2(N-1)/N x S, hierarchical"
  echo "2(M-1)/M x S, divided by the rate. Link bytes: what node 0's veth carried per flat +"
  echo "hierarchical pair of calls (kernel counter, TCP/IP and MPI headers included), beside the payload formula."
  echo
  echo "| nodes x ranks | link | flat ms | flat bound ms | hier ms | hier bound ms | flat / hier | bytes bound ratio | payload per pair: flat + hier = formula (B) | link bytes measured (B) |"
  echo "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"
  cat "$T03"
  echo
  echo "## 05_dp: time per training step, flat vs hierarchical gradient all-reduce"
  echo
  echo "\`05_dp --layers 4 --dim 256 --hidden 1024 --batch 48 --steps $STEPS\` (P = $P05 parameters, $((P05 * 4)) bytes of"
  echo "fp32 gradients, 8 all-reduces per step, one per tensor) with and without \`--hierarchical\`, as"
  echo "two runs, which goes first alternating; each run's median step time (step 1 left out), then the"
  echo "median of $REPEAT runs. Link bytes per step: node 0's veth counter over the whole run / steps"
  echo "(start-up, the per-step loss all-reduce and headers included), beside the payload formula."
  echo
  echo "| nodes x ranks | link | flat ms/step | flat bound ms | flat link bytes / formula | hier ms/step | hier bound ms | hier link bytes / formula | flat / hier |"
  echo "|---|---|--:|--:|--:|--:|--:|--:|--:|"
  cat "$T05"
  echo
  if [ -n "$PLOT" ]; then
    echo "![flat vs hierarchical all-reduce per link]($PLOT)"
    echo
  else
    echo "Plot: skipped, gnuplot is not installed (\`apt-get install gnuplot-nox\`, then \`make bench-cluster\`)."
    echo
  fi
  echo "Raw values of every repetition: \`bench/out/cluster/rows.txt\` (not tracked); CSV: [cluster.csv](cluster.csv)."
} >"$NEWD/results.md"
mkdir -p "$OUTD"
rm -f "$OUTD"/*.png
mv "$NEWD"/* "$OUTD"/
rmdir "$NEWD"
say "wrote $OUTD/results.md, $OUTD/cluster.csv${PLOT:+ and $OUTD/$PLOT} in $ELAPSED s"
