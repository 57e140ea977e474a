#!/usr/bin/env bash
# Test helpers shared by run_tests.sh and the per-lesson files it sources.
#
#   check NAME NP RC [PATTERN ...] -- CMD [ARGS ...]
# runs CMD with NP MPI ranks (NP=0: without mpirun) under a timeout of
# $TEST_TIMEOUT seconds, and passes when the exit code is RC and the output
# (stdout and stderr) matches every extended regular expression PATTERN.
# RC may be 'nonzero'. The output is kept in build/test-logs.
LOGS=${LOGS:-build/test-logs}
mkdir -p "$LOGS"
TEST_TIMEOUT=${TEST_TIMEOUT:-120}
CORES=${CORES:-$(nproc 2>/dev/null || echo 1)}
MPIRUN=${MPIRUN:-mpirun}
PASSED=0
FAILED=0
FAILED_NAMES=()

# Open MPI wants --allow-run-as-root as root, and --oversubscribe for more
# ranks than cores (the README explains both).
mpirun_cmd() {
  local np=$1 flags=""
  [ "$(id -u)" = 0 ] && flags="$flags --allow-run-as-root"
  [ "$np" -gt "$CORES" ] && flags="$flags --oversubscribe"
  echo "$MPIRUN$flags -np $np"
}

pass() { PASSED=$((PASSED + 1)); echo "PASS $1"; }
fail() {
  FAILED=$((FAILED + 1)); FAILED_NAMES+=("$1"); echo "FAIL $1"
  [ -n "${2:-}" ] && [ -f "$2" ] && tail -n 15 "$2" | sed 's/^/    | /'
  [ -n "${3:-}" ] && echo "    $3"
  return 0
}

check() {
  local name=$1 np=$2 want=$3; shift 3
  local patterns=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do patterns+=("$1"); shift; done
  shift
  local log="$LOGS/$(echo "$name" | tr -c 'A-Za-z0-9_.=-' '_').log"
  local launcher=""
  [ "$np" -gt 0 ] && launcher=$(mpirun_cmd "$np")
  timeout -k 5 "$TEST_TIMEOUT" $launcher "$@" >"$log" 2>&1
  local rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then fail "$name" "$log" "timed out after ${TEST_TIMEOUT}s: $launcher $*"; return; fi
  local wrong=0 # spelled out: `A && B || C && D` is ((A && B) || C) && D in the shell
  if [ "$want" = nonzero ]; then [ $rc -ne 0 ] || wrong=1; else [ $rc -eq "$want" ] || wrong=1; fi
  if [ $wrong = 1 ]; then
    fail "$name" "$log" "exit code $rc, expected $want: $launcher $*"; return
  fi
  local p
  for p in "${patterns[@]}"; do
    grep -Eq -- "$p" "$log" || { fail "$name" "$log" "output lacks /$p/: $launcher $*"; return; }
  done
  pass "$name"
}

summary() {
  if [ $FAILED -gt 0 ]; then
    echo "failed:"; printf '  %s\n' "${FAILED_NAMES[@]}"
  fi
  echo "$PASSED passed, $FAILED failed"
  [ $FAILED -eq 0 ]
}
