#!/usr/bin/env bash
# `make tour`: run every lesson at NP ranks with its default flags (and those
# of its folder's tour.flags, a short run of a lesson whose defaults train for
# a minute), show its output, then one table: lesson, concept, verdict, time. Each run is under a
# timeout; the exit code is non-zero if any lesson failed its own check. A
# lesson that refuses this NP (01 at NP=1) is shown so ("needs 2+"), as is one
# that refuses the cuda backend ("cpu only": none does now, every lesson is
# built for it), not as a failure.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh # with_timeout, now
NP=${NP:-4}
MPIRUN=${MPIRUN:-mpirun}
mkdir -p build/tour
rows=()
status=0
for bin in "$@"; do
  lesson=$(basename "$(dirname "$bin")")
  log=build/tour/$lesson.log
  echo
  echo "================================================================ $lesson"
  # a lesson whose defaults train for a minute names a short run in tour.flags
  flags=$(cat "$(dirname "$bin")/tour.flags" 2>/dev/null)
  echo "\$ mpirun -np $NP ./$bin${flags:+ $flags}"
  start=$(now)
  # shellcheck disable=SC2086 # the flags' words
  with_timeout -k 5 300 $MPIRUN $MPIRUN_FLAGS -np "$NP" "./$bin" $flags 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  seconds=$(awk -v a="$start" -v b="$(now)" 'BEGIN { print b - a }')
  concept=$(sed -n 2p "$log")
  # a refusal has no banner: the concept is then the first line of --help
  head -n 1 "$log" | grep -Eq "^$lesson( |\$)" ||
    concept=$(with_timeout 30 "./$bin" --help 2>/dev/null | sed -n "1s/^$lesson: //p")
  # a lesson that refuses this NP or this backend says why, and is no failure
  need=$(sed -n 's/^error: .* needs at least \([0-9]*\) ranks, got .*/\1/p' "$log" | head -n 1)
  if [ "$rc" -eq 0 ] && grep -q '^CHECK PASSED' "$log"; then verdict="PASSED"
  elif grep -q '^error: .* runs on the cpu backend only' "$log"; then verdict="cpu only"
  elif [ -n "$need" ]; then verdict="needs $need+"
  else verdict="FAILED (exit $rc)"; status=1; fi
  # the concept whole, wrapped at a space into the 66 columns, never cut
  first=1
  while IFS= read -r part; do
    if [ $first = 1 ]; then rows+=("$(printf '%-14s %-66s %-10s %6.1f' "$lesson" "$part" "$verdict" "$seconds")")
    else rows+=("$(printf '%-14s %s' "" "$part")"); fi
    first=0
  done < <(printf '%s\n' "$concept" | fold -s -w 66 | sed 's/ *$//')
done
echo
echo "================================================================ tour summary (NP=$NP)"
printf '%-14s %-66s %-10s %6s\n' lesson concept verdict "time s"
printf '%s\n' "${rows[@]}"
exit $status
