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

# ---- portable helpers (bash 3.2, BSD tools: macOS) -----------------------------
# cores: online cores, by POSIX getconf (Linux, macOS) or BSD sysctl.
cores() { getconf _NPROCESSORS_ONLN 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 1; }
CORES=${CORES:-$(cores)}

# with_timeout [-k KILL_AFTER] SECONDS CMD [ARGS ...]: GNU timeout's contract
# (124 when SECONDS ran out and TERM ended CMD, 137 when KILL_AFTER more
# seconds needed KILL, else CMD's own status), where macOS has no timeout:
# coreutils' timeout or gtimeout when installed, else perl, which macOS ships.
# Like GNU timeout, CMD runs in its own process group and the signal goes to
# the group, so mpirun's ranks are not left behind. DT_TIMEOUT=perl forces the
# fallback (tests/suite_portability.sh runs it on Linux).
with_timeout() {
  local kill_after=0
  if [ "$1" = -k ]; then kill_after=$2; shift 2; fi
  local impl=${DT_TIMEOUT:-}
  if [ -z "$impl" ]; then
    if command -v timeout >/dev/null 2>&1; then impl=timeout
    elif command -v gtimeout >/dev/null 2>&1; then impl=gtimeout
    else impl=perl; fi
  fi
  if [ "$impl" != perl ]; then "$impl" -k "$kill_after" "$@"; return; fi # portability-ok: found by command -v
  perl -e '
    my ($after, $limit) = (shift, shift);
    my $pid = fork;
    die "with_timeout: fork: $!\n" unless defined $pid;
    if ($pid == 0) { setpgrp(0, 0); exec @ARGV; print STDERR "with_timeout: $ARGV[0]: $!\n"; exit 127; }
    my $stage = 0;
    $SIG{ALRM} = sub {
      $stage++;
      if ($stage == 1) { kill "TERM", -$pid; alarm $after if $after > 0; }
      else { kill "KILL", -$pid; }
    };
    # a signal to this process goes to the group too, as GNU timeout does
    for my $sig (qw(TERM INT HUP)) { $SIG{$sig} = sub { kill $sig, -$pid; }; }
    alarm $limit;
    while (waitpid($pid, 0) != $pid) {}
    my $st = $?;
    alarm 0;
    exit 137 if $stage >= 2;
    exit 124 if $stage == 1;
    exit(($st & 127) ? 128 + ($st & 127) : $st >> 8);
  ' "$kill_after" "$@"
}

# now: seconds since the epoch with a fraction (GNU date's %N is not BSD's).
now() { perl -MTime::HiRes=time -e 'printf "%.3f\n", time' 2>/dev/null || date +%s; }

# file_size FILE: its bytes (stat -c is GNU, stat -f BSD; wc -c is both, and
# BSD pads it with blanks, which $(( )) drops).
file_size() { echo $(($(wc -c <"$1"))); }

# sed_inplace SCRIPT FILE...: GNU sed -i takes no suffix, BSD sed -i needs one.
sed_inplace() {
  local script=$1 f; shift
  for f in "$@"; do sed "$script" "$f" >"$f.sed-tmp" && mv "$f.sed-tmp" "$f" || return 1; done
}

# lower WORD: bash 4's ${x,,} without bash 4.
lower() { printf '%s\n' "$1" | tr '[:upper:]' '[:lower:]'; }

# real_path PATH: the file a chain of links ends at (readlink -f is GNU).
real_path() { perl -MCwd=abs_path -e 'print abs_path(shift), "\n"' "$1"; }
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

# check_log NAME: where check() keeps the output of test NAME
check_log() { echo "$LOGS/$(echo "$1" | tr -c 'A-Za-z0-9_.=-' '_').log"; }

# pairs_equal NAME WHAT MIN LOG PAIRS: PAIRS holds "measured formula" lines
# read from LOG; passes "NAME: WHAT" when there are at least MIN and each
# pair is equal (an argument, not a pipe: pass and fail count in this shell)
pairs_equal() {
  if [ "$(echo "$5" | grep -c .)" -ge "$3" ] && echo "$5" | awk '$1 != $2 { bad = 1 } END { exit bad }'; then
    pass "$1: $2"
  else
    fail "$1: $2" "$4" "pairs: $(echo $5)"
  fi
}

# check_one_error NAME NP WANT PATTERN... -- CMD: check(), then exactly one
# "error: " line in the output (bad input: one message, from rank 0)
check_one_error() {
  local name=$1
  check "$@"
  if [ "$(grep -c '^error: ' "$(check_log "$name")")" = 1 ]; then
    pass "$name: one message"
  else
    fail "$name: one message" "$(check_log "$name")"
  fi
}

# loss_falls LABEL TEST STEPS: in test TEST's log (a run of STEPS steps) the
# last step's loss is below a quarter of the first's
loss_falls() {
  local log a b
  log=$(check_log "$2")
  a=$(sed -n "s/^step  *1\/$3  loss \([0-9.]*\) .*/\1/p" "$log")
  b=$(sed -n "s/^step  *$3\/$3  loss \([0-9.]*\) .*/\1/p" "$log")
  if awk -v a="$a" -v b="$b" 'BEGIN { exit !(a > 0 && b > 0 && b < a / 4) }'; then
    pass "$1: the default run's loss falls below a quarter ($a -> $b)"
  else
    fail "$1: the default run's loss falls below a quarter" "$log" "$a -> $b"
  fi
}

# transformer_saved LABEL FILE SEQ HEADS WQ WO: the safetensors header of the
# transformer (D 32, H 128) names layers.{l}.wq/wo [D,D] and w1 [D,H], with
# seq and heads in the metadata (WQ, WO: a layer to look for each in)
transformer_saved() {
  local head what="layers.{l}.wq/wk/wv/wo [D,D] and w1/w2, seq and heads in the metadata"
  head=$(head -c 3000 "$2" 2>/dev/null | tr -d '\0')
  if echo "$head" | grep -q "\"layers.$5.wq\":{\"dtype\":\"F32\",\"shape\":\[32,32\]" &&
    echo "$head" | grep -q "\"layers.$6.wo\":{\"dtype\":\"F32\",\"shape\":\[32,32\]" &&
    echo "$head" | grep -q '"layers.0.w1":{"dtype":"F32","shape":\[32,128\]' &&
    echo "$head" | grep -q "\"seq\":\"$3\",\"heads\":\"$4\""; then
    pass "$1 save: $what"
  else
    fail "$1 save: $what" "" "$(echo "$head" | head -c 600)"
  fi
}

check() {
  local name=$1 np=$2 want=$3; shift 3
  local patterns=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do patterns+=("$1"); shift; done
  shift
  local log
  log=$(check_log "$name")
  local launcher=""
  [ "$np" -gt 0 ] && launcher=$(mpirun_cmd "$np")
  # A run expected to be refused, as one process, never talks: Open MPI need
  # not start its daemon nor UCX for it (0.4 s a run here, 0.1 s without; make
  # test refuses about a thousand). What an accepted run starts is untouched.
  [ "$np" -eq 0 ] && [ "$want" = 2 ] && launcher="env OMPI_MCA_ess_singleton_isolated=1 OMPI_MCA_pml=ob1"
  with_timeout -k 5 "$TEST_TIMEOUT" $launcher "$@" >"$log" 2>&1
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

# build_copy DIR LESSON_DIR FILE [PERL_SUBSTITUTION]: DIR/<name>, the lesson
# built with FILE replaced by a copy (mutated when a substitution is given),
# linked with the common libraries of $BUILD_DIR (tests/suite_mutants.sh,
# tests/suite_boundary.sh: bugs planted in copies, never in the tree).
# Returns 2 when the substitution no longer matches, 1 when it does not build.
build_copy() {
  local dir=$1 lesson=$2 file=$3 subst=${4:-} name
  name=$(basename "$lesson"); name=${name#*_}
  mkdir -p "$dir"
  cp "$file" "$dir/$(basename "$file")"
  if [ -n "$subst" ]; then
    perl -0pi -e "$subst" "$dir/$(basename "$file")"
    cmp -s "$file" "$dir/$(basename "$file")" && return 2
  fi
  # the lesson's other objects (its folder's, its tool's in tools/<name>/,
  # and the pieces of other lessons it includes as "NN_x/y.h"), as the
  # Makefile links them
  local objs=() o piece srcs=("$lesson"/*.c)
  [ -d "tools/$name" ] && srcs+=("tools/$name"/*.c)
  for o in "$BUILD_DIR/$lesson"/*.o $([ -d "tools/$name" ] && echo "$BUILD_DIR/tools/$name"/*.o); do
    [ "$o" = "$BUILD_DIR/${file%.c}.o" ] || objs+=("$o")
  done
  for piece in $(sed -n 's|^#include "\([0-9][0-9]_[^/"]*/[^"]*\)\.h".*|\1|p' "${srcs[@]}" | sort -u); do
    [ -f "$piece.c" ] && [ "${piece%%/*}" != "$lesson" ] && [ "$piece.c" != "$file" ] && objs+=("$BUILD_DIR/$piece.o")
  done
  local link=("${objs[@]}" "$dir/copy.o" "$BUILD_DIR/libdttrain.a" "$BUILD_DIR/libdtcomm.a")
  case $file in
    common/*) link+=(-Wl,--allow-multiple-definition) ;;
  esac
  mpicc -O2 -g -std=c11 ${BLAS_CFLAGS:-} -I. -I"$lesson" -I"$(dirname "$file")" -Icommon/comm -Icommon/train -Itests -c "$dir/$(basename "$file")" -o "$dir/copy.o" >"$dir/build.log" 2>&1 &&
    mpicc "${link[@]}" -o "$dir/$name" ${BLAS_LIBS:--lopenblas} -rdynamic -lm -pthread >>"$dir/build.log" 2>&1 || return 1
}

# halved NAME FP32_TEST HALF_TEST [KEPT]: 12's and 14's bytes tables (rows
# "    axis  kind (what)  calls formula  bytes formula"), the same mesh run in
# fp32 and in 16 bits: each row's calls the same and its bytes exactly half,
# but for rows whose kind matches the regex KEPT (messages kept in fp32),
# the same bytes; at least one row with bytes
halved() {
  local rows a b pairs
  rows() { sed -En 's/^    (tp|cp|pp|dp x cp|emb) +([a-z_]+ \([^)]*\)) +([0-9]+) +[0-9]+ +([0-9]+) .*/\2 \3 \4/p' "$(check_log "$1")"; }
  a=$(rows "$2")
  b=$(rows "$3")
  pairs=$(paste -d' ' <(echo "$a") <(echo "$b") | awk -v kept="${4:-^$}" '
    { n = NF / 2; ka = $1; kb = $(n + 1); ca = $(n - 1); cb = $(2 * n - 1); ba = $n; bb = $(2 * n)
      for (i = 2; i < n - 1; i++) { ka = ka " " $i; kb = kb " " $(n + i) }
      print ka == kb ? 1 : 0, 1; print ca, cb
      if (ba > 0) rows++
      print (ka ~ kept ? bb : 2 * bb), ba }
    END { print (rows >= 1), 1 }')
  if [ -n "$a" ] && [ "$(echo "$a" | wc -l)" = "$(echo "$b" | wc -l)" ]; then
    pairs_equal "$1" "each row's bytes half of fp32's (calls the same)" 4 "$(check_log "$3")" "$pairs"
  else
    fail "$1: each row's bytes half of fp32's (calls the same)" "$(check_log "$3")" "rows: $a / $b"
  fi
}

summary() {
  if [ $FAILED -gt 0 ]; then
    echo "failed:"; printf '  %s\n' "${FAILED_NAMES[@]}"
  fi
  echo "$PASSED passed, $FAILED failed"
  [ $FAILED -eq 0 ]
}
