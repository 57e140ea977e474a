#!/usr/bin/env bash
# `make bench-ep-stability`: does 10_ep's default train for 10,000 steps?
#
# Runs 10_ep --no-check for STAB_STEPS steps (default 10000) in each
# configuration of STAB_RUNS (lines "NP|flags"): by default the lesson's
# AdamW rate before this bench existed (--lr 0.003) and the two remedies the
# first report of the divergence tried (--clip 1, --aux-coef 0), rates in
# between, and the default (lr 0.0005) at NP 1, 2 and 4. From each run's step
# lines (loss = task + balance, every tenth step) it takes the mean task loss
# of the ten printed steps up to each milestone, and the step a diverged run
# stopped at (the lesson ends a run whose loss is 10^4 times its first).
# Writes STAB_DEST (default bench/) ep_stability.md, raw logs in
# bench/out/ep_stability/. It fails (exit 1) unless every run without flags
# (the default) trained every step, its task loss lower at the last milestone
# than at step 1000 (100 for runs of 1000 steps or fewer): the long run that
# make test has no time for.
#
# Environment: BIN_DIR, MPIRUN, CORES, STAB_STEPS, STAB_RUNS, STAB_TIMEOUT
# (seconds per run, default 3600), STAB_DEST.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN_DIR=${BIN_DIR:-.}
MPIRUN=${MPIRUN:-mpirun}
CORES=${CORES:-$(nproc 2>/dev/null || echo 1)}
STEPS=${STAB_STEPS:-10000}
TIMEOUT=${STAB_TIMEOUT:-3600}
DEST=${STAB_DEST:-bench}
RUNS=${STAB_RUNS:-"1|--lr 0.003
2|--lr 0.003
4|--lr 0.003
1|--lr 0.003 --clip 1
1|--lr 0.003 --aux-coef 0
1|--lr 0.002
1|--lr 0.0015
1|--lr 0.001
2|--lr 0.001
1|
2|
4|"}
EP=$BIN_DIR/10_ep/ep
OUT=bench/out/ep_stability
rm -rf "$OUT"
mkdir -p "$OUT"
T_START=$(date +%s)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
die() {
  echo "bench-ep-stability: FAILED: $*" >&2
  exit 1
}
[ -x "$EP" ] || die "$EP is missing: run 'make all' first"

# the milestones: step 1, then 100, 1000, 2000, 3000, 5000 and the last, up to STEPS
MILES=1
for m in 100 1000 2000 3000 5000; do [ "$m" -lt "$STEPS" ] && MILES="$MILES $m"; done
MILES="$MILES $STEPS"
REF=1000 # the default's task loss must be lower at the end than here
[ "$STEPS" -gt 1000 ] || REF=100

# task LOG M: the mean task loss of the printed steps in (M - 100, M] ("-": none)
task() {
  awk -v m="$2" -v n="$STEPS" '$1 == "step" && $5 == "=" {
      split($2, s, "/"); if (s[1] + 0 > m - 100 && s[1] + 0 <= m) { t += $7; k++ } }
    END { if (k) printf "%.6f", t / k; else printf "-" }' "$1"
}

# peak LOG: the largest task loss of the printed steps after step REF (a burst)
peak() {
  awk -v r="$REF" '$1 == "step" && $5 == "=" { split($2, s, "/"); if (s[1] + 0 > r && $7 > p) p = $7 }
    END { printf "%.6f", p }' "$1"
}

rows=() failed=()
i=0
while IFS='|' read -r np flags; do
  [ -n "$np" ] || continue
  i=$((i + 1))
  log=$OUT/run$i.log
  extra=()
  [ "$(id -u)" = 0 ] && extra+=(--allow-run-as-root)
  [ "$np" -gt "$CORES" ] && extra+=(--oversubscribe)
  read -ra args <<<"$flags"
  echo "bench-ep-stability: NP=$np ${flags:-(the default)}, $STEPS steps"
  echo "$MPIRUN ${extra[*]} -np $np $EP --steps $STEPS --no-check${flags:+ $flags}" >>"$OUT/commands.txt"
  rc=0
  timeout -k 5 "$TIMEOUT" "$MPIRUN" ${extra[@]+"${extra[@]}"} -np "$np" "$EP" --steps "$STEPS" --no-check \
    ${args[@]+"${args[@]}"} >"$log" 2>&1 </dev/null || rc=$?
  at=$(sed -nE 's/^error: training diverged at step ([0-9]+):.*/\1/p' "$log")
  [ "$rc" = 0 ] || [ -n "$at" ] || die "exit code $rc from NP=$np $flags; see $log"
  lr=$(sed -nE 's/^model: .* steps of adamw, lr ([0-9.e-]+).*/\1/p' "$log")
  row="| ${flags:-(default)} | $lr | $np | ${at:-no}"
  for m in $MILES; do row="$row | $(task "$log" "$m")"; done
  rows+=("$row | $(peak "$log") |")
  if [ -z "$flags" ]; then # the default must train on, and learn
    first=$(task "$log" "$REF") last=$(task "$log" "$STEPS")
    if [ -n "$at" ] || ! awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'; then
      failed+=("NP=$np: diverged at ${at:-no step}, task loss ${first} at step $REF and ${last} at $STEPS")
    fi
  fi
done <<<"$RUNS"

header="| flags | lr | NP | diverged at step"
rule="|---|--:|--:|--:"
for m in $MILES; do
  if [ "$m" = 1 ]; then header="$header | task loss, step 1"; else header="$header | $m"; fi
  rule="$rule|--:"
done
header="$header | largest, after step $REF"
rule="$rule|--:"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- 2>/dev/null || commit="$commit (with uncommitted changes)"
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
mkdir -p "$DEST"
{
  echo "## 10_ep over $STEPS steps: the task loss, and where a run diverged"
  echo
  echo "Written by \`make bench-ep-stability\` (bench/ep_stability.sh) on $(date -u '+%Y-%m-%d %H:%M UTC'),"
  echo "commit $commit; ${cpu:-$(uname -m)}, $CORES cores; load average at the start $LOAD_START, at the end"
  echo "$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown); $(($(date +%s) - T_START)) s."
  echo "10_ep's default model (L=4 D=64 H=256, E=8, k=2, cf 1.25, B=32, AdamW), \`--no-check\`. Each"
  echo "column: the mean task loss (the step line's \`task\`, the loss without the balance term) of the"
  echo "printed steps up to that step (the ten of every tenth step after the one 100 before; step 1"
  echo "alone); the last column, the largest task loss of any printed step after step $REF (a burst"
  echo "the means miss). A run whose loss reached 10^4 times its first stopped there (\`diverged at\`)."
  echo
  echo "$header |"
  echo "$rule|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Commands (each under \`timeout -k 5 $TIMEOUT\`; logs in $OUT/):"
  echo
  echo '```'
  cat "$OUT/commands.txt"
  echo '```'
} >"$DEST/ep_stability.md"
cat "$DEST/ep_stability.md"
[ ${#failed[@]} = 0 ] || die "the default did not train on: ${failed[*]}"
echo "bench-ep-stability: every default run trained $STEPS steps, its task loss falling"
