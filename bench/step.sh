#!/usr/bin/env bash
# `make bench-step`: the training step of our lessons against the same model
# in PyTorch (bench/torch_step.py), in one run, and the GEMM floor of ours.
#
# Default: 05_dp at NP=1 against one PyTorch process, and at NP=2 against
# PyTorch DDP over gloo; L=4 D=256 H=1024 B=64, 40 steps of SGD, one thread
# per rank on both sides. Each configuration first runs once with the
# self-check (it must print CHECK PASSED; untimed), then STEP_RUNS times
# (default 5) with --no-check and DT_GEMM_TIME=1 (rank 0's time inside
# dt_matmul: the GEMM floor of the same step), interleaved with PyTorch's runs
# (which side goes first alternates), so that load from other processes hits
# both alike. The 1-minute load average is recorded before every pair.
# Prints every run, then min and median of each column and the ratios:
# ours/PyTorch (of the minima, of the medians) and ours/GEMM.
#
# Our ranks run with mpirun --bind-to none (STEP_BIND), unpinned as PyTorch's
# processes are: Open MPI pins ranks to cores by default (at NP <= 2), and
# every other mpirun on a shared machine pins its rank 0 to the same core 0.
#
# Environment: BIN_DIR, MPIRUN, CORES, PYTHON (default /usr/bin/python3),
# STEP_TORCH (the PyTorch side, default bench/torch_step.py; bench/ep.sh
# names bench/torch_moe.py), STEP_TORCH_ARGS (more flags for it),
# STEP_OPTIMIZER (what the summary says both sides train with, default SGD),
# STEP_RUNS, STEP_LAYERS, STEP_DIM, STEP_HIDDEN, STEP_BATCH, STEP_STEPS,
# STEP_TIMEOUT (seconds per run), STEP_CONFIGS (lines "name|binary|flags|torch
# mode|NP|environment of our run"; see the default below), STEP_MD (also write
# the summary as a markdown table to this file), STEP_OUT (raw logs and
# commands.txt, default bench/out/step/).
#
# The third default line runs 05 at NP=2 with OMPI_MCA_mpi_yield_when_idle=1:
# Open MPI's ranks spin while they wait in a collective, gloo's block. On a
# machine that other processes load, a spinning rank takes core time from
# the rank it waits for; yielding (what Open MPI does by itself only when
# ranks outnumber cores) shows how much of a gap that is.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN_DIR=${BIN_DIR:-.}
MPIRUN=${MPIRUN:-mpirun}
CORES=${CORES:-$(nproc 2>/dev/null || echo 1)}
PYTHON=${PYTHON:-/usr/bin/python3}
TORCH_SCRIPT=${STEP_TORCH:-bench/torch_step.py}
read -ra TORCH_ARGS <<<"${STEP_TORCH_ARGS:-}"
OPTIMIZER=${STEP_OPTIMIZER:-SGD}
RUNS=${STEP_RUNS:-5}
LAYERS=${STEP_LAYERS:-4}
DIM=${STEP_DIM:-256}
HIDDEN=${STEP_HIDDEN:-1024}
BATCH=${STEP_BATCH:-64}
STEPS=${STEP_STEPS:-40}
TIMEOUT=${STEP_TIMEOUT:-300}
CONFIGS=${STEP_CONFIGS:-"05_dp|05_dp/dp||single|1
05_dp|05_dp/dp||ddp|2
05_dp|05_dp/dp||ddp|2|OMPI_MCA_mpi_yield_when_idle=1"}
OUT=${STEP_OUT:-${BENCH_OUT:-bench/out}/step}
mkdir -p "$OUT"
MODEL=(--layers "$LAYERS" --dim "$DIM" --hidden "$HIDDEN" --batch "$BATCH" --steps "$STEPS")

die() {
  echo "bench-step: FAILED: $*" >&2
  exit 1
}
say() { echo "bench-step: $*"; }
load1() { cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?"; }

HAVE_TORCH=0
if "$PYTHON" -c 'import torch' 2>/dev/null; then
  HAVE_TORCH=1
  TORCH_VERSION=$("$PYTHON" -c 'import torch; print(torch.__version__)')
else
  say "PyTorch is not importable with $PYTHON: the PyTorch side is skipped (apt-get install python3-torch); ours and the GEMM floor are still timed"
fi

# ours LOG NP BIN FLAGS...: one mpirun under a timeout ($ENVS in its
# environment); must exit 0.
ours() {
  local log=$1 np=$2 bin=$3 flags=()
  shift 3
  [ -x "$BIN_DIR/$bin" ] || die "$BIN_DIR/$bin is missing: run 'make all' first"
  if [ "$(id -u)" = 0 ]; then flags+=(--allow-run-as-root); fi
  if [ "$np" -gt "$CORES" ]; then flags+=(--oversubscribe); fi
  flags+=(--bind-to "${STEP_BIND:-none}")
  echo "${ENVS:+$ENVS }DT_GEMM_TIME=1 $MPIRUN ${flags[*]} -np $np $BIN_DIR/$bin $*" >>"$OUT/commands.txt"
  # shellcheck disable=SC2086 # ENVS: assignments, split on spaces
  env $ENVS DT_GEMM_TIME=1 timeout -k 5 "$TIMEOUT" "$MPIRUN" "${flags[@]}" -np "$np" "$BIN_DIR/$bin" "$@" \
    >"$log" 2>&1 </dev/null || die "exit code $? from $bin at NP=$np; see $log"
}
# theirs LOG MODE NP: the PyTorch script (STEP_TORCH) under a timeout; must exit 0.
theirs() {
  local log=$1 mode=$2 np=$3
  local cmd=("$PYTHON" "$TORCH_SCRIPT" --mode "$mode" --np "$np" "${MODEL[@]}" ${TORCH_ARGS[@]+"${TORCH_ARGS[@]}"})
  echo "${cmd[*]}" >>"$OUT/commands.txt"
  timeout -k 5 "$TIMEOUT" "${cmd[@]}" >"$log" 2>&1 </dev/null || return 1
}
num() { # num LOG REGEX: the first number after REGEX
  grep -Eo -m1 -- "$2 *[0-9.]+" "$1" | grep -Eo '[0-9.]+$' || die "$1: no number after /$2/"
}
stats() { # stats NUMBERS...: "min median"
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f %.2f", v[1], m }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }'; }

: >"$OUT/commands.txt"
say "L=$LAYERS D=$DIM H=$HIDDEN B=$BATCH (global), $STEPS steps of $OPTIMIZER, $RUNS runs each; $CORES cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
say "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
SUMMARY=()
while IFS='|' read -r name bin extra mode np ENVS; do
  [ -n "$name" ] || continue
  tag="${name}${extra:+ $extra} NP=$np${ENVS:+ (yield)}"
  [ -z "$ENVS" ] || [ "$ENVS" = OMPI_MCA_mpi_yield_when_idle=1 ] || tag="${name}${extra:+ $extra} NP=$np ($ENVS)"
  file=$(printf '%s' "${name}_${extra}_np${np}_$ENVS" | tr -c 'A-Za-z0-9_=-' '_')
  # shellcheck disable=SC2086 # extra is a list of flags
  ours "$OUT/${file}_check.log" "$np" "$bin" $extra "${MODEL[@]}"
  grep -q '^CHECK PASSED' "$OUT/${file}_check.log" || die "$tag: no CHECK PASSED; see $OUT/${file}_check.log"
  torch_ok=$HAVE_TORCH
  if [ "$HAVE_TORCH" = 1 ] && ! theirs "$OUT/${file}_torch_try.log" "$mode" "$np" &&
    ! theirs "$OUT/${file}_torch_try.log" "$mode" "$np"; then # twice: a port taken meanwhile
    say "$tag: PyTorch --mode $mode did not run ($(grep -m1 'torch:\|Error' "$OUT/${file}_torch_try.log" || echo "see $OUT/${file}_torch_try.log")): its side skipped"
    torch_ok=0
  fi
  printf '%-22s %6s %10s %10s %7s %10s %7s\n' "$tag" run "ours ms" "torch ms" ratio "gemm ms" "ours/gemm"
  O=() T=() G=() R=() OG=() LOADS=()
  for r in $(seq "$RUNS"); do
    l=$(load1)
    LOADS+=("$l")
    if [ $((r % 2)) = 0 ] && [ "$torch_ok" = 1 ]; then theirs "$OUT/${file}_torch_r$r.log" "$mode" "$np" || die "PyTorch run failed; see $OUT/${file}_torch_r$r.log"; fi
    # shellcheck disable=SC2086
    ours "$OUT/${file}_r$r.log" "$np" "$bin" $extra "${MODEL[@]}" --no-check
    if [ $((r % 2)) = 1 ] && [ "$torch_ok" = 1 ]; then theirs "$OUT/${file}_torch_r$r.log" "$mode" "$np" || die "PyTorch run failed; see $OUT/${file}_torch_r$r.log"; fi
    o=$(num "$OUT/${file}_r$r.log" 'time per step')
    gs=$(grep -Eo 'gemm time \(DT_GEMM_TIME\): rank 0: [0-9]+ calls, [0-9.]+ s' "$OUT/${file}_r$r.log" | grep -Eo '[0-9.]+ s$' | grep -Eo '[0-9.]+') ||
      die "no GEMM time in $OUT/${file}_r$r.log"
    g=$(awk -v s="$gs" -v n="$STEPS" 'BEGIN { printf "%.2f", s * 1e3 / n }')
    t="-" rt="-"
    if [ "$torch_ok" = 1 ]; then
      t=$(num "$OUT/${file}_torch_r$r.log" 'ms_per_step=')
      rt=$(ratio "$o" "$t")
      T+=("$t") R+=("$rt")
    fi
    O+=("$o") G+=("$g") OG+=("$(ratio "$o" "$g")")
    printf '%-22s %6s %10s %10s %7s %10s %7s   load %s\n' "" "$r" "$o" "$t" "$rt" "$g" "$(ratio "$o" "$g")" "$l"
  done
  read -r omin omed <<<"$(stats "${O[@]}")"
  read -r gmin gmed <<<"$(stats "${G[@]}")"
  read -r ogmin ogmed <<<"$(stats "${OG[@]}")"
  read -r lmin lmed <<<"$(stats "${LOADS[@]}")"
  tmin="-" tmed="-" rmin="-" rmed="-" rrmed="-"
  if [ "$torch_ok" = 1 ]; then
    read -r tmin tmed <<<"$(stats "${T[@]}")"
    rmin=$(ratio "$omin" "$tmin") rmed=$(ratio "$omed" "$tmed")
    read -r _ rrmed <<<"$(stats "${R[@]}")"
  fi
  printf '%-22s %6s %10s %10s %7s %10s %7s\n' "" min "$omin" "$tmin" "$rmin" "$gmin" "$(ratio "$omin" "$gmin")"
  printf '%-22s %6s %10s %10s %7s %10s %7s   load %s-%s\n' "" median "$omed" "$tmed" "$rmed" "$gmed" "$ogmed" "$lmin" "$(printf '%s\n' "${LOADS[@]}" | sort -g | tail -1)"
  echo
  SUMMARY+=("| $name${extra:+ \`$extra\`}${ENVS:+ \`$ENVS\`} | $np | ${mode} | $omin / $omed | $tmin / $tmed | $rmin / $rmed | $rrmed | $gmin / $gmed | $ogmin / $ogmed | $lmin-$(printf '%s\n' "${LOADS[@]}" | sort -g | tail -1) |")
done <<<"$CONFIGS"
say "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
say "ratio = ours / PyTorch (of the minima / of the medians); ours/gemm = step time / time in dt_matmul"

if [ -n "${STEP_MD:-}" ]; then
  {
    echo "| ours | NP | PyTorch | ours ms/step min / median | PyTorch ms/step min / median | ratio of min / of median | median of per-run ratios | GEMM ms/step min / median | ours/GEMM min / median | load avg (1 min) |"
    echo "|---|--:|---|--:|--:|--:|--:|--:|--:|--:|"
    printf '%s\n' "${SUMMARY[@]}"
    echo
    echo "PyTorch: ${TORCH_VERSION:-not importable}; $RUNS runs per row, interleaved with ours; L=$LAYERS D=$DIM H=$HIDDEN B=$BATCH, $STEPS steps of $OPTIMIZER."
  } >"$STEP_MD"
fi
