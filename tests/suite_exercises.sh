# Classroom exercises (tests/exercise.sh, TEACHING.md), sourced by
# tests/run_tests.sh (pass/fail come from tests/lib.sh). For every lesson
# with an exercise (tests/exercises/NN_name.txt):
#   - the lesson itself passes its own `make check-N` (EXERCISE_DIR=.);
#   - the untouched exercise, as `make exercise-N` writes it, builds without
#     warnings and fails `make check-N` cleanly: a FAIL line per run with what came out,
#     and a hint, no build error, no crash, no hang, within a time limit
#     (its first two runs: the stubs fail every run alike).
# Then the mechanism itself: every lesson's markers cut cleanly, an existing
# workspace is never overwritten, and a deadlock a student writes (every
# rank receives first in lesson 01's token ring) is named by the watchdog
# with the hint for it. The workspaces live in $LOGS, never in exercises/.
EX_WS=$LOGS/exercises
EX_LIMIT=${EX_LIMIT:-100} # seconds for one lesson's whole check
ex_make() { ${MAKE:-make} -s --no-print-directory "$@"; }

# ex_run NAME DIR N LOG [ENV=VALUE ...]: make check-N on DIR's file; sets ex_rc
ex_run() {
  local name=$1 dir=$2 n=$3 log=$4
  shift 4
  with_timeout -k 5 "$EX_LIMIT" env EXERCISE_DIR="$dir" EXERCISE_LIMIT=60 "$@" \
    ${MAKE:-make} -s --no-print-directory "check-$n" >"$log" 2>&1
  ex_rc=$?
}

rm -rf "$EX_WS"
for spec in tests/exercises/[0-9][0-9]_*.txt; do
  d=$(basename "$spec" .txt)
  n=$((10#${d%%_*}))
  [ -d "$d" ] || continue

  log="$LOGS/exercise-$d-pristine.log"
  ex_run "$d" . "$n" "$log"
  runs=$(grep -c '^@run ' "$spec")
  if [ $ex_rc -eq 0 ] && [ "$(grep -c '^PASS  np=' "$log")" -eq "$runs" ] &&
    grep -q "^$runs checks: $runs passed, 0 failed" "$log"; then
    pass "exercise $d: the lesson passes make check-$n ($runs runs)"
  else
    fail "exercise $d: the lesson passes make check-$n ($runs runs)" "$log" "exit code $ex_rc"
  fi

  log="$LOGS/exercise-$d-untouched.log"
  if ! EXERCISE_DIR="$EX_WS" ex_make "exercise-$n" >"$log.make" 2>&1; then
    fail "exercise $d: make exercise-$n writes the workspace" "$log.make"
    continue
  fi
  t0=$(date +%s)
  ex_run "$d" "$EX_WS" "$n" "$log" EXERCISE_FIRST=2
  t=$(($(date +%s) - t0))
  why=""
  [ $ex_rc -eq 124 ] || [ $ex_rc -eq 137 ] && why="no answer within ${EX_LIMIT}s"
  [ -z "$why" ] && [ $ex_rc -eq 0 ] && why="the untouched exercise passed"
  [ -z "$why" ] && grep -q '^FAIL  build' "$log" && why="it does not build"
  [ -z "$why" ] && grep -q '^  warnings' "$log" && why="it builds with warnings (a stub out of date?)"
  [ -z "$why" ] && grep -q 'no answer within' "$log" && why="a run hung past the watchdog"
  [ -z "$why" ] && grep -qE 'Signal: |exited on signal' "$log" && why="a run crashed"
  [ -z "$why" ] && ! grep -q '^FAIL  np=.*got: ' "$log" && why="no FAIL line with what came out"
  [ -z "$why" ] && ! grep -q '^      hint: ' "$log" && why="no hint"
  [ -z "$why" ] && ! grep -qE "^[12] checks: " "$log" && why="not every run reported"
  if [ -z "$why" ]; then
    pass "exercise $d: the untouched exercise fails make check-$n cleanly (${t}s)"
  else
    fail "exercise $d: the untouched exercise fails make check-$n cleanly" "$log" "$why (exit code $ex_rc)"
  fi
done

# The markers: one start and one end per region, the TODO and stub in between,
# and the rest of the lesson untouched (the workspace minus its regions equals
# the lesson minus its regions).
outside() { awk '/\/\* exercise: .*\*\//{skip=1} !skip{print} /\/\* end of exercise \*\//{skip=0}' "$1"; }
bad=""
for spec in tests/exercises/[0-9][0-9]_*.txt; do
  d=$(basename "$spec" .txt) name=${d#*_}
  ws="$EX_WS/$d/$name.c"
  [ -f "$ws" ] || continue
  cmp -s <(outside "$d/$name.c") <(outside "$ws") || bad="$bad $d(outside differs)"
  [ "$(grep -c '/\* exercise: ' "$d/$name.c")" -eq "$(grep -c '^@todo' "$spec")" ] || bad="$bad $d(regions)"
  grep -q 'TODO: ' "$ws" && grep -q 'stub:' "$ws" || bad="$bad $d(no TODO or stub)"
done
if [ -z "$bad" ]; then
  pass "exercise workspaces: the lesson outside the marked regions is kept as is"
else
  fail "exercise workspaces: the lesson outside the marked regions is kept as is" "" "$bad"
fi

# make exercise-N never overwrites a student's file.
if [ -f "$EX_WS/01_send_recv/send_recv.c" ]; then
  echo "/* my work */" >>"$EX_WS/01_send_recv/send_recv.c"
  log="$LOGS/exercise-keep.log"
  EXERCISE_DIR="$EX_WS" ex_make exercise-1 >"$log" 2>&1
  if grep -q 'exists and is kept' "$log" && tail -n 1 "$EX_WS/01_send_recv/send_recv.c" | grep -q 'my work'; then
    pass "make exercise-1 keeps an existing workspace"
  else
    fail "make exercise-1 keeps an existing workspace" "$log"
  fi
fi

# A deadlock a student writes: every rank of the token ring receives first.
# The watchdog (--timeout 2 here) must stop each run and the hint name it.
ws=$LOGS/exercises-deadlock/01_send_recv
rm -rf "${ws%/*}" && mkdir -p "$ws"
if [ -f "$EX_WS/01_send_recv/send_recv.c" ]; then
  sed 's|^  (void)token; /\* stub:.*|  dt_recv(w, token, 1, DT_I32, prev);\n  dt_copy_to_host(\&got, token, sizeof got);\n  sent = got + w->rank;\n  dt_copy_from_host(token, \&sent, sizeof sent);\n  dt_send(w, token, 1, DT_I32, next);|' \
    "$EX_WS/01_send_recv/send_recv.c" >"$ws/send_recv.c"
  log="$LOGS/exercise-01-deadlock.log"
  ex_run 01 "${ws%/*}" 1 "$log" EXERCISE_TIMEOUT=2 EXERCISE_FIRST=1
  if [ $ex_rc -ne 124 ] && grep -Eq 'got: the watchdog stopped it: rank [0-9]+ stuck for 2 s in recv' "$log" &&
    grep -q 'hint: every rank is waiting in dt_recv for a token that nobody sent' "$log"; then
    pass "exercise 01: a student's deadlock is stopped by the watchdog and named"
  else
    fail "exercise 01: a student's deadlock is stopped by the watchdog and named" "$log" "exit code $ex_rc"
  fi
fi
