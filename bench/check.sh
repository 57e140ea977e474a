#!/usr/bin/env bash
# `make bench-check`: the self-check at the model sizes `make bench` trains,
# on every OpenBLAS kernel this CPU can execute (CHECKING.md, "Discrete
# decisions"). make test's kernel matrix (tests/suite_kernels.sh) runs the
# lessons' small defaults; at bench's sizes a pre-activation within rounding
# of 0 is met in most runs, and the check must still hold: ReLU's decisions
# replayed, every figure within its bound.
#
# Each training lesson at its bench model (05-09 as bench/run.sh trains them,
# 10 as bench/ep.sh's large model, 11 at S = 1024 as bench/cp.sh, 12 as
# bench/mesh.sh's model), NP 2 and 4, its default optimizer with seeds
# 1..CHECK_SEEDS and the other optimizer with seed 1, under every kernel of
# CHECK_KERNELS the CPU runs (one it cannot is skipped and named). Every run
# must end CHECK PASSED; the ReLU line of each is kept. Writes bench/check.md
# (per lesson and kernel: runs, runs that met a decision apart and replayed
# it, the worst figures) and bench/out/check/ (every log, commands.txt).
#
# Environment: BIN_DIR, MPIRUN, CORES, BLAS_CFLAGS, BLAS_LIBS, CHECK_KERNELS ("native": the
# one OpenBLAS picks here), CHECK_SEEDS (default 3),
# CHECK_NPS (default "2 4"), CHECK_LESSONS (default: every one below),
# CHECK_TIMEOUT (seconds per run), CHECK_MD (default bench/check.md).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN_DIR=${BIN_DIR:-.}
MPIRUN=${MPIRUN:-mpirun}
CORES=${CORES:-$(nproc 2>/dev/null || echo 1)}
case $(uname -m) in
aarch64 | arm64) KERNELS=${CHECK_KERNELS:-ARMV8 NEOVERSEN1 CORTEXA57 THUNDERX2T99} ;;
*) KERNELS=${CHECK_KERNELS:-Prescott Nehalem Sandybridge Haswell SkylakeX Zen} ;;
esac
SEEDS=${CHECK_SEEDS:-3}
read -ra NPS <<<"${CHECK_NPS:-2 4}"
TIMEOUT=${CHECK_TIMEOUT:-300}
MD=${CHECK_MD:-bench/check.md}
OUT=${BENCH_OUT:-bench/out}/check # BENCH_OUT: make bench-quick puts its own apart
rm -rf "$OUT"
mkdir -p "$OUT"
: >"$OUT/commands.txt"

# lesson binary | its bench model | its default optimizer | flags of its SGD runs
# (the mesh's 8 layers diverge at SGD's default rate, 0.2)
BENCH_MLP="--layers 4 --dim 256 --hidden 1024 --batch 64 --steps 10"
MODELS=(
  "05_dp/dp|$BENCH_MLP|sgd"
  "06_fsdp/fsdp|$BENCH_MLP|sgd"
  "07_tp/tp|$BENCH_MLP|sgd"
  "08_fsdp_tp/fsdp_tp|$BENCH_MLP|sgd"
  "09_pp/pp|$BENCH_MLP|sgd"
  "10_ep/ep|--dim 256 --hidden 1024 --batch 256 --steps 10|adamw"
  "11_cp/cp|--layers 1 --dim 32 --heads 4 --batch 1 --samples 8 --seq 1024 --steps 3|adamw"
  "12_mesh/mesh|--layers 8 --dim 64 --hidden 256 --heads 8 --seq 64 --batch 16 --steps 10|adamw|--lr 0.1"
)
if [ -n "${CHECK_LESSONS:-}" ]; then
  kept=()
  for m in "${MODELS[@]}"; do [[ " $CHECK_LESSONS " == *" ${m%%/*} "* ]] && kept+=("$m"); done
  MODELS=("${kept[@]}")
fi

die() {
  echo "bench-check: FAILED: $*" >&2
  exit 1
}
flags=()
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)

# which kernels run here: OpenBLAS names the one it picked (tests/openblas_core.c)
probe=build/openblas_core
# shellcheck disable=SC2086 # BLAS_CFLAGS/BLAS_LIBS: from the Makefile (Homebrew's paths on macOS)
cc -O1 ${BLAS_CFLAGS:-} tests/openblas_core.c -o "$probe" ${BLAS_LIBS:--lopenblas} 2>"$OUT/openblas_core.log" ||
  die "tests/openblas_core.c does not build; see $OUT/openblas_core.log"
# CHECK_KERNELS=native (make bench-quick): the one kernel OpenBLAS picks here
[ "$KERNELS" != native ] || KERNELS=$("./$probe") || die "$probe: OpenBLAS names no kernel"
ran=() skipped=()
for k in $KERNELS; do
  rc=0
  got=$(OPENBLAS_CORETYPE=$k timeout 20 "./$probe" 2>/dev/null) || rc=$?
  if [ $rc -eq 132 ] || [ $rc -eq 4 ]; then
    skipped+=("$k (this CPU cannot execute it: SIGILL)")
  elif [ $rc -ne 0 ]; then
    skipped+=("$k (the probe failed, exit $rc)")
  elif [ "$(echo "$got" | tr '[:upper:]' '[:lower:]')" != "$(echo "$k" | tr '[:upper:]' '[:lower:]')" ]; then
    skipped+=("$k (OpenBLAS runs $got instead)")
  else
    ran+=("$k")
  fi
done
[ ${#ran[@]} -gt 0 ] || die "no kernel of '$KERNELS' runs here: ${skipped[*]}"

# rows: lesson kernel runs flips_runs flips worst_sgd_weights worst_adamw_weights
ROWS=$OUT/rows.csv
: >"$ROWS"
t_start=$(date +%s)
for m in "${MODELS[@]}"; do
  IFS='|' read -r bin model opt sgd_flags <<<"$m"
  [ -x "$BIN_DIR/$bin" ] || die "$BIN_DIR/$bin is missing: run 'make all' first"
  other=$([ "$opt" = sgd ] && echo adamw || echo sgd)
  for k in "${ran[@]}"; do
    runs=0 flipped_runs=0 flips=0 worst_sgd=0 worst_adamw=0
    for np in "${NPS[@]}"; do
      for run in $(seq "$SEEDS") other; do
        seed=$run o=$opt
        [ "$run" = other ] && seed=1 o=$other
        np_flags=("${flags[@]}")
        [ "$np" -gt "$CORES" ] && np_flags+=(--oversubscribe)
        name="$(basename "$bin")_${k}_np${np}_${o}_s$seed"
        log=$OUT/$name.log
        extra=""
        [ "$o" = sgd ] && extra=$sgd_flags
        # shellcheck disable=SC2086 # the model's words
        cmd=("$MPIRUN" "${np_flags[@]}" -np "$np" "$BIN_DIR/$bin" $model $extra --optimizer "$o" --seed "$seed")
        echo "OPENBLAS_CORETYPE=$k ${cmd[*]}" >>"$OUT/commands.txt"
        rc=0
        OPENBLAS_CORETYPE=$k timeout -k 5 "$TIMEOUT" "${cmd[@]}" >"$log" 2>&1 || rc=$?
        grep -q '^CHECK PASSED' "$log" || die "$name: no CHECK PASSED (exit $rc); see $log"
        apart=$(awk '/^ReLU decisions:/ { for (i = 1; i <= NF; i++) if ($i == "decided") print $(i - 3) }' "$log")
        [ -n "$apart" ] || die "$name: no ReLU decisions line; see $log"
        w=$(awk '/worst tensor rel L2 diff/ { print $8; exit }' "$log")
        [ -n "$w" ] || die "$name: no worst-gradient figure; see $log"
        runs=$((runs + 1))
        flips=$((flips + apart))
        [ "$apart" -gt 0 ] && flipped_runs=$((flipped_runs + 1))
        if [ "$o" = sgd ]; then
          worst_sgd=$(awk -v a="$worst_sgd" -v b="$w" 'BEGIN { print (b + 0 > a + 0) ? b : a }')
        else
          worst_adamw=$(awk -v a="$worst_adamw" -v b="$w" 'BEGIN { print (b + 0 > a + 0) ? b : a }')
        fi
      done
    done
    echo "$(dirname "$bin"),$k,$runs,$flipped_runs,$flips,$worst_sgd,$worst_adamw" >>"$ROWS"
    echo "bench-check: $(dirname "$bin") $k: $runs runs CHECK PASSED, $flips decisions apart replayed in $flipped_runs"
  done
done
minutes=$(awk -v s="$t_start" -v e="$(date +%s)" 'BEGIN { printf "%.1f", (e - s) / 60 }')

cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
{
  echo "# The self-check at bench sizes, on every kernel"
  echo
  echo "Written by \`make bench-check\` (bench/check.sh) on $(date -u +%Y-%m-%d), commit"
  echo "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- 2>/dev/null || echo ' (with uncommitted changes)'),"
  echo "cpu backend, ${cpu:-$(uname -m)}, $CORES cores; $minutes minutes. Kernels run: ${ran[*]};"
  echo "skipped: ${skipped[*]:-none}. Each lesson at its bench model, NP ${NPS[*]}, its default"
  echo "optimizer with seeds 1-$SEEDS and the other with seed 1: every run CHECK PASSED."
  echo
  echo "| lesson | model | kernel | runs | runs with a ReLU decision apart | decisions apart (replayed) | worst gradient, SGD | worst gradient, AdamW |"
  echo "|---|---|---|--:|--:|--:|--:|--:|"
  for m in "${MODELS[@]}"; do
    IFS='|' read -r bin model _ sgd_flags <<<"$m"
    [ -n "$sgd_flags" ] && model="$model (SGD: $sgd_flags)"
    awk -F, -v l="$(dirname "$bin")" -v model="\`$model\`" '$1 == l {
      printf "| %s | %s | %s | %d | %d | %d | %s | %s |\n", $1, model, $2, $3, $4, $5, $6, $7; model = "" }' "$ROWS"
  done
  echo
  echo "The worst gradient is the check's step-by-step figure (CHECKING.md): the worst tensor's rel L2"
  echo "difference at the worst step, bound K u with either optimizer (6.1e-5 for 05-10 here). Every"
  echo "log: bench/out/check/; every command: commands.txt there."
} >"$MD"
echo "bench-check: ${#MODELS[@]} lessons x ${#ran[@]} kernels, every run CHECK PASSED; wrote $MD ($minutes min)"
