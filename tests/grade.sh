#!/usr/bin/env bash
# make grade DIR=<student folder>: every exercise the folder holds, checked
# as make check-N checks it, then a summary table and a results file in the
# format of Gradescope's autograder (results.json; TEACHING.md, "Grading").
#
#   DIR/NN_name/<file>.c   the exercises found (as make exercise-N writes them)
#   RESULTS=path           where results.json goes (default DIR/results.json;
#                          on Gradescope /autograder/results/results.json)
#
# One test per exercise: score = its checks passed, max_score = its checks
# (a trivial pass at np=1, where nothing is sent, counts in neither); output
# = what make check-N printed. Exit code 0 when every check of every
# exercise passed, 1 otherwise (GitHub Classroom's autograding reads it), 2
# when there is nothing to grade. The last line names the results file.
set -u
cd "$(dirname "$0")/.." || exit 2
DIR=${1:-}
die() { echo "grade: $*" >&2; exit 2; }
[ -n "$DIR" ] || die "say which folder: make grade DIR=exercises/alice"
[ -d "$DIR" ] || die "no folder $DIR"
DIR=${DIR%/}
RESULTS=${RESULTS:-$DIR/results.json}
MAKE=${MAKE:-make}

# the marked file of each lesson, as tests/exercise.sh finds it
marked_of() {
  local d=$1 f
  for f in "$d/${d#*_}.c" "$d"/*.c; do
    [ -f "tests/exercises/$d-$(basename "$f" .c).txt" ] && continue # a second exercise's
    grep -q '^[[:space:]]*/\* exercise: ' "$f" 2>/dev/null && { basename "$f"; return; }
  done
}

# a JSON string: backslash, quote and control characters escaped, lines
# joined with \n
json_str() {
  awk 'BEGIN { ORS = "" } {
    gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); gsub(/\t/, "\\t"); gsub(/\r/, "")
    gsub(/[\001-\037]/, "")
    print (NR > 1 ? "\\n" : "") $0
  }' | sed 's/^/"/; s/$/"/'
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/grade.XXXXXX") || die "no temporary folder"
trap 'rm -rf "$tmp"' EXIT
names=() scores=() maxes=() outs=()
for spec in tests/exercises/[0-9][0-9]_*.txt; do
  d=$(basename "$spec" .txt) part="" # NN_name-PART: a lesson's second exercise, in PART.c
  [[ $d == *-* ]] && part=-${d#*-} d=${d%%-*}
  [ -d "$d" ] || continue
  if [ -n "$part" ]; then f=${part#-}.c; else f=$(marked_of "$d"); fi
  [ -n "$f" ] && [ -f "$DIR/$d/$f" ] || continue
  n=$((10#${d%%_*}))$part
  out="$tmp/$d$part.txt"
  echo "grade: check-$n on $DIR/$d/$f ..." >&2
  EXERCISE_DIR=$DIR $MAKE -s --no-print-directory "check-$n" 2>&1 | grep -v "^make: \*\*\*" >"$out"
  # max: the spec's runs, less those at np=1 that check nothing of the
  # student's (no @np1-checks): the same for every student. score: the
  # passes of "K checks: P passed, F failed" (trivial ones are not in P)
  max=$(awk '$1 == "@np1-checks" { keep = 1 } $1 == "@run" { n++; one += $2 == 1 }
    END { print n - (keep ? 0 : one) }' "$spec")
  line=$(grep -E '^[0-9]+ checks?: [0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
  score=0
  if ! grep -q '^FAIL  build' "$out" && [ -n "$line" ]; then
    score=${line#*: } score=${score%% *}
  fi
  [ "$score" -le "$max" ] || score=$max
  names+=("$n $(awk '$1 == "@title" { sub(/^@title +/, ""); print }' "$spec") ($d/$f)")
  scores+=("$score") maxes+=("$max") outs+=("$out")
done
[ ${#names[@]} -gt 0 ] || die "no exercise in $DIR (it holds none of $(for s in tests/exercises/*.txt; do d=$(basename "$s" .txt); printf '%s/%s ' "$d" "$(marked_of "$d")"; done))"

total=0 total_max=0 all=1 status=()
echo "grade: $DIR"
printf '  %-9s %-7s %-5s %s\n' "exercise" "checks" "" "what (the student's file)"
for i in "${!names[@]}"; do
  status[i]=failed
  [ "${scores[$i]}" = "${maxes[$i]}" ] && [ "${maxes[$i]}" -gt 0 ] && status[i]=passed
  [ "${status[$i]}" = passed ] || all=0
  printf '  %-9s %3s/%-3s %-5s %s\n' "check-${names[$i]%% *}" "${scores[$i]}" "${maxes[$i]}" \
    "$([ "${status[$i]}" = passed ] && echo ok || echo FAIL)" "${names[$i]#* }"
  total=$((total + scores[i])) total_max=$((total_max + maxes[i]))
done
printf '  %-9s %3s/%-3s\n' "total" "$total" "$total_max"

mkdir -p "$(dirname "$RESULTS")" || die "cannot write $RESULTS"
{
  echo "{"
  echo "  \"score\": $total,"
  echo "  \"output\": $(echo "make grade DIR=$DIR: $total of $total_max checks passed" | json_str),"
  echo "  \"tests\": ["
  for i in "${!names[@]}"; do
    sep=","
    [ "$i" -eq $((${#names[@]} - 1)) ] && sep=""
    echo "    {\"name\": $(echo "check-${names[$i]%% *}: ${names[$i]#* }" | json_str), \"score\": ${scores[$i]}, \"max_score\": ${maxes[$i]}, \"status\": \"${status[$i]}\", \"output\": $(json_str <"${outs[$i]}")}$sep"
  done
  echo "  ]"
  echo "}"
} >"$RESULTS.tmp" && mv "$RESULTS.tmp" "$RESULTS" || die "cannot write $RESULTS"
echo "grade: $total of $total_max checks passed; results: $RESULTS"
[ $all -eq 1 ]
