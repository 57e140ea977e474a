#!/usr/bin/env bash
# tools/gpu-node/check.sh [OUTDIR]: `make gpu-check`, what a GPU must show of
# lessons 10-14 and the cuda backend, in one command of about 8 minutes on one
# H100 (docs/gpu.md, "make gpu-check"). On the GPU machine, in bash:
#   source tools/gpu-node/env.sh && make gpu-check
# In order, each under its own timeout, none stopping the next:
#   build     make BACKEND=cuda for this GPU's architecture (warnings counted)
#   unit      the unit tests (tests/test_*.c) under cuda at NP 1 and 2
#   tour      make tour BACKEND=cuda at NP 1 and 2 (every lesson, its check)
#   lessons   10 top-1 and top-2; 11 ring (contiguous, zigzag) and Ulysses;
#             12 on meshes (dp,pp,cp,tp) 2,1,1,2 and 1,2,2,1; 13 --measure
#             of 14's kernels; 14 at NP 1 (with --sample and an evaluation),
#             tp 2 with --sequence-parallel, pp 2 with --recompute: a few
#             steps each, with the check against one process
#   sanitize  compute-sanitizer memcheck on 11 and 14 at NP 1
# Every log goes to OUTDIR (default build/gpu-check), one a check, and
# OUTDIR/summary.txt is the one-screen summary printed at the end; the exit
# is 0 when every check passed. Where nvidia-smi lists no GPU it is a dry
# run: it says so, lists exactly what it would run (and writes the list to
# OUTDIR/summary.txt) and exits 0 having run nothing; make test runs it so.
# Knobs: GPU_CHECK_DRY=1 (a dry run anyway), GPU_CHECK_FORCE=1 (run without
# a GPU: every CUDA run then fails, naming the CUDA error), GPU_CHECK_BIN
# (the binaries' folder, BIN_DIR: default the tree, where make BACKEND=cuda
# puts them), GPU_CHECK_BUILD=0 (use that build as it is), GPU_CHECK_DEADLINE
# (seconds; a check that would start after it is skipped, default 480),
# GPU_CHECK_ONLY (a regular expression: only the checks whose names match),
# ARCH (default: the GPU's compute capability, e.g. 90 for an H100).
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh # with_timeout, now
OUT=${1:-build/gpu-check}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BIN=${GPU_CHECK_BIN:-.}
DEADLINE=${GPU_CHECK_DEADLINE:-480}
SUM=$OUT/summary.txt
: >"$SUM"
say() { echo "$*" | tee -a "$SUM"; }

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
dry=0
if [ "${GPU_CHECK_DRY:-0}" = 1 ]; then
  dry=1
  say "gpu-check: a dry run (GPU_CHECK_DRY=1): what it would run, nothing run"
elif [ "$gpus" = 0 ] && [ "${GPU_CHECK_FORCE:-0}" != 1 ]; then
  dry=1
  say "gpu-check: no GPU here (nvidia-smi lists none): a dry run, what it would run on one, nothing run"
fi
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')
ARCH=${ARCH:-${cap:-80 90}}
CORES=$(cores)
MAKE_CUDA="make -s BACKEND=cuda ARCH=\"$ARCH\" BIN_DIR=$BIN"
[ "$dry" = 1 ] || say "gpu-check $(date -u +%FT%TZ) on $(hostname): $gpus GPU(s), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1), ARCH $ARCH, $CORES cores; logs in $OUT"

# The checks: NAME|NP (0: no mpirun)|TIMEOUT s|PATTERN the output must hold ('' none)|COMMAND
checks=()
add() { checks+=("$1|$2|$3|$4|$5"); }
[ "${GPU_CHECK_BUILD:-1}" = 0 ] ||
  add build 0 400 '' "$MAKE_CUDA -j$CORES all"
for t in tests/test_*.c; do
  t=$(basename "${t%.c}")
  for np in 1 2; do add "unit $t np=$np" "$np" 180 'UNIT PASSED' "$BIN/tests/$t"; done
done
for np in 1 2; do add "tour np=$np" 0 300 'tour summary' "$MAKE_CUDA tour NP=$np"; done
STEPS="--steps 5"
add "10 top-1" 2 120 'CHECK PASSED' "$BIN/10_ep/ep $STEPS --topk 1"
add "10 top-2" 2 120 'CHECK PASSED' "$BIN/10_ep/ep $STEPS --topk 2"
add "11 ring contiguous" 2 120 'CHECK PASSED' "$BIN/11_cp/cp $STEPS"
add "11 ring zigzag" 2 120 'CHECK PASSED' "$BIN/11_cp/cp $STEPS --split zigzag"
add "11 ulysses" 2 120 'CHECK PASSED' "$BIN/11_cp/cp $STEPS --ulysses"
add "12 mesh 2,1,1,2" 4 150 'CHECK PASSED' "$BIN/12_mesh/mesh $STEPS --dp 2 --pp 1 --cp 1 --tp 2"
add "12 mesh 1,2,2,1" 4 150 'CHECK PASSED' "$BIN/12_mesh/mesh $STEPS --dp 1 --pp 2 --cp 2 --tp 1"
add "13 measure gpt14" 1 150 'CHECK PASSED' "$BIN/13_plan/plan --measure --model gpt14 --machine $OUT/machine.json"
add "14 np=1 sample eval" 1 120 'CHECK PASSED' "$BIN/14_gpt/gpt $STEPS --sample 50 --eval-every 5"
add "14 tp 2 sequence-parallel" 2 120 'CHECK PASSED' "$BIN/14_gpt/gpt $STEPS --tp 2 --sequence-parallel"
add "14 pp 2 recompute" 2 120 'CHECK PASSED' "$BIN/14_gpt/gpt $STEPS --pp 2 --recompute"
# 16 bits on the wire (12, 14) and BPE tokens: paths no GPU has run yet
add "12 mesh 2,1,1,2 bf16" 4 150 'CHECK PASSED' "$BIN/12_mesh/mesh $STEPS --dp 2 --pp 1 --cp 1 --tp 2 --precision bf16"
add "14 tp 2 bf16" 2 120 'CHECK PASSED' "$BIN/14_gpt/gpt $STEPS --tp 2 --precision bf16"
add "14 tp 2 bpe" 2 120 'CHECK PASSED' "$BIN/14_gpt/gpt $STEPS --tp 2 --tokens bpe:64"
# --report-api-errors no: NCCL's start asks for kernels built for other GPUs
# (handled by NCCL, reported by default); memory errors are still reported
SAN="compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 99"
add "memcheck 11" 1 240 'ERROR SUMMARY: 0 errors' "$SAN $BIN/11_cp/cp --steps 2"
add "memcheck 14" 1 240 'ERROR SUMMARY: 0 errors' "$SAN $BIN/14_gpt/gpt --steps 2 --sample 10 --eval-every 2"

line() { printf '%-28s %-9s %6s  %s\n' "$@"; }
run_line() { # the command as run: under mpirun (NP > 0; tests/lib.sh's flags: root, oversubscribed)
  local np=$2 cmd=$5
  if [ "$np" -gt 0 ]; then echo "$(mpirun_cmd "$np") $cmd"; else echo "$cmd"; fi
}
# GPU_CHECK_ONLY: an extended regular expression; only the checks it matches
if [ -n "${GPU_CHECK_ONLY:-}" ]; then
  kept=()
  for c in "${checks[@]}"; do echo "${c%%|*}" | grep -Eq -- "$GPU_CHECK_ONLY" && kept+=("$c"); done
  checks=("${kept[@]}")
fi

if [ "$dry" = 1 ]; then
  say "it would run, in this order ($OUT/<check>.log each):"
  for c in "${checks[@]}"; do
    IFS='|' read -r name np limit want cmd <<<"$c"
    say "  $(printf '%-28s' "$name") limit ${limit}s: $(run_line "$name" "$np" "$limit" "$want" "$cmd")${want:+   [wants: $want]}"
  done
  say "dry run: ${#checks[@]} checks listed, none run; on a GPU machine: source tools/gpu-node/env.sh && make gpu-check"
  exit 0
fi

start=$(now)
passed=0
failed=0
skipped=0
rows=()
for c in "${checks[@]}"; do
  IFS='|' read -r name np limit want cmd <<<"$c"
  log=$OUT/$(echo "$name" | tr -c 'A-Za-z0-9_.=-' '_').log
  elapsed=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%d", b - a }')
  if [ "$elapsed" -ge "$DEADLINE" ]; then
    skipped=$((skipped + 1))
    rows+=("$(line "$name" SKIPPED - "past the deadline (${DEADLINE}s)")")
    continue
  fi
  case $cmd in compute-sanitizer*)
    if ! command -v compute-sanitizer >/dev/null 2>&1; then
      skipped=$((skipped + 1))
      rows+=("$(line "$name" SKIPPED - "compute-sanitizer not on PATH (it ships with the CUDA toolkit)")")
      continue
    fi
  ;;
  esac
  t0=$(now)
  run=$(run_line "$name" "$np" "$limit" "$want" "$cmd")
  echo "\$ $run" >"$log"
  # shellcheck disable=SC2086 # the command's words
  with_timeout -k 5 "$limit" bash -c "$run" >>"$log" 2>&1
  rc=$?
  secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }')
  why=""
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then why="timed out (${limit}s)"
  elif [ "$rc" != 0 ]; then why="exit $rc"
  elif [ -n "$want" ] && ! grep -Eq -- "$want" "$log"; then why="no '$want'"
  elif [ "$name" = build ] && grep -qi warning "$log"; then why="$(grep -ci warning "$log") warning line(s)"
  fi
  if [ -z "$why" ]; then
    passed=$((passed + 1))
    rows+=("$(line "$name" PASSED "$secs" "$(basename "$log")")")
  else
    failed=$((failed + 1))
    first=$( (grep -m1 -E 'FAILED|device boundary' "$log" || grep -m1 -E 'error|ERROR' "$log") | cut -c1-90)
    rows+=("$(line "$name" FAILED "$secs" "$why: $(basename "$log")${first:+ | $first}")")
  fi
done
total=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }')
say ""
say "$(line check verdict "time s" "log (in $OUT)")"
for r in "${rows[@]}"; do say "$r"; done
say "gpu-check: $passed passed, $failed failed, $skipped skipped in ${total}s"
[ "$failed" = 0 ]
