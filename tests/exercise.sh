#!/usr/bin/env bash
# Classroom exercises: the engine behind `make exercise-N` and `make check-N`.
#
#   tests/exercise.sh make  N|NN_name   write the student's workspace
#   tests/exercise.sh check N|NN_name   build the student's file, run the checks
#   tests/exercise.sh list              the exercises and their titles
#
# Each lesson marks its concept once, in comments of its own source:
#     /* exercise: <title> */
#     ... the code the student writes ...
#     /* end of exercise */
# and tests/exercises/NN_name.txt holds what replaces it: the TODO (the
# contract and hints), a stub that compiles, does no communication and so
# fails the checks, the runs of the check (NP and flags) and the hints keyed
# to the output of a failed run. Its format:
#     @title   one line                 @run NP FLAGS...  one check per line
#     @todo    lines until the next @   @stub  C lines until the next @
#     @require ERE | what | KEY         every line of a run's output that KEY
#                                       finds (one at least) must match ERE too;
#                                       else the first that does not is shown
#     @expect  text                     what the check lines say is expected
#     @hint    ERE [&& ERE ...]         then the hint's lines; the first
#                                       @hint whose EREs all match a failed
#                                       run's output is printed, else @hint-default;
#     @hint-crash                       lines, instead of all that after a crash
# A lesson with k marked regions has k @todo and @stub blocks, in order.
#
# The marked file is the lesson's name.c, or else the one other .c of its
# folder that holds the markers (06_fsdp/shard.c: a piece 08 reuses). The
# workspace is $EXERCISE_DIR/NN_name/ and that file's name (default
# exercises/, ignored by git); make exercise-N never overwrites it. make check-N passes the
# compiler settings (MPICC CFLAGS LDFLAGS LDLIBS LIBDT LESSON_OBJS OBJDIR MPIRUN
# CORES); run by hand, the defaults below build against build/cpu's two libraries.
# The student's file replaces the marked file alone: LESSON_OBJS are the
# objects of every .c of the lesson and of the pieces of other lessons it
# includes, as the Makefile links them (unset: asked of make,
# print-lesson-objs-N, and built there with BACKEND=cpu), less the marked one.
# EXERCISE_DIR=. checks the lesson itself (the test suite does). Each run
# gets --timeout $EXERCISE_TIMEOUT (the lesson's watchdog catches deadlocks)
# and an outer limit of $EXERCISE_LIMIT seconds in case even that fails.
# EXERCISE_FIRST=K runs only the first K checks (the test suite's shortcut).
set -u
cd "$(dirname "$0")/.." || exit 2
source tests/lib.sh # with_timeout, cores

EXERCISE_DIR=${EXERCISE_DIR:-exercises}
EXERCISE_TIMEOUT=${EXERCISE_TIMEOUT:-10}
EXERCISE_LIMIT=${EXERCISE_LIMIT:-90}
MPICC=${MPICC:-mpicc}
CFLAGS=${CFLAGS:--O2 -g -std=c11 -Wall -Wextra -I. -Icommon/comm -Icommon/train -Itests}
LDFLAGS=${LDFLAGS:-}
LDLIBS=${LDLIBS:--lopenblas -lm -pthread}
LIBDT=${LIBDT:-build/cpu/libdttrain.a build/cpu/libdtcomm.a} # training first: it calls into comm
OBJDIR=${OBJDIR:-build/cpu/exercises}
MPIRUN=${MPIRUN:-mpirun}
CORES=${CORES:-$(cores)}

die() { echo "exercise: $*" >&2; exit 2; }

# N or NN_name -> NN_name (the lesson's folder)
lesson_dir() {
  local want=$1 d
  [[ $want =~ ^[0-9]+$ ]] && want=$(printf '%02d_' "$((10#$want))")
  for d in [0-9][0-9]_*/; do
    d=${d%/}
    [[ $d == "$want"* ]] && { echo "$d"; return; }
  done
  die "no lesson '$1' (lessons: $(ls -d [0-9][0-9]_*/ | tr -d / | tr '\n' ' '))"
}
# 03_all_reduce -> 03_all_reduce/all_reduce.c, or the other file with markers
lesson_src() {
  local f main="$1/${1#*_}.c"
  for f in "$main" "$1"/*.c; do
    grep -q '^[[:space:]]*/\* exercise: ' "$f" 2>/dev/null && { echo "$f"; return; }
  done
  echo "$main"
}
spec_of() { echo "tests/exercises/$1.txt"; }

field() { awk -v key="@$2" '$1 == key { sub(/^@[a-z-]+ +/, ""); print }' "$1"; }

# The lesson with each marked region replaced by its TODO comment and stub;
# the markers stay, so the student sees where the exercise begins and ends.
make_workspace() {
  local src=$1 spec=$2
  awk -v spec="$spec" '
    BEGIN {
      k = 0; sect = ""
      while ((getline line < spec) > 0) {
        if (line ~ /^@todo/) { sect = "todo"; todo[++nt] = ""; continue }
        if (line ~ /^@stub/) { sect = "stub"; stub[++ns] = ""; continue }
        if (line ~ /^@/) { sect = ""; continue }
        if (line ~ /^#/) continue
        if (sect == "todo") todo[nt] = todo[nt] line "\n"
        if (sect == "stub") stub[ns] = stub[ns] line "\n"
      }
    }
    function emit(text, ind, comment,   n, i, lines) {
      sub(/\n+$/, "", text)
      n = split(text, lines, "\n")
      for (i = 1; i <= n; i++) {
        if (comment) print ind (i == 1 ? "/* TODO: " : " * ") lines[i]
        else print (lines[i] == "" ? "" : ind lines[i])
      }
      if (comment) print ind " */"
    }
    /^[ \t]*\/\* exercise: .*\*\/[ \t]*$/ {
      if (inside) { print "nested exercise marker at line " NR > "/dev/stderr"; exit 3 }
      k++; inside = 1; print
      ind = $0; sub(/[^ \t].*$/, "", ind)
      if (k > nt || k > ns) { print "no @todo/@stub for region " k > "/dev/stderr"; exit 3 }
      emit(todo[k], ind, 1); emit(stub[k], ind, 0)
      next
    }
    /^[ \t]*\/\* end of exercise \*\/[ \t]*$/ {
      if (!inside) { print "end marker without a start at line " NR > "/dev/stderr"; exit 3 }
      inside = 0; print; next
    }
    !inside { print }
    END {
      if (inside) { print "region " k " has no end marker" > "/dev/stderr"; exit 3 }
      if (k == 0) { print "no exercise marker in the lesson" > "/dev/stderr"; exit 3 }
      if (k != nt || k != ns) { print k " regions but " nt " @todo and " ns " @stub blocks" > "/dev/stderr"; exit 3 }
    }' "$src"
}

cmd_make() {
  local d src spec dest
  d=$(lesson_dir "$1") || exit 2
  src=$(lesson_src "$d") spec=$(spec_of "$d")
  [ -f "$spec" ] || die "lesson $d has no exercise yet ($spec is missing)"
  dest="$EXERCISE_DIR/$d/$(basename "$src")"
  if [ -e "$dest" ]; then
    echo "exercise: $dest exists and is kept (your work is never overwritten)."
    echo "  to start over: rm $dest && make exercise-$((10#${d%%_*}))"
    return 0
  fi
  mkdir -p "$EXERCISE_DIR/$d"
  make_workspace "$src" "$spec" >"$dest.tmp" || { rm -f "$dest.tmp"; die "could not cut $src (markers)"; }
  mv "$dest.tmp" "$dest"
  local n=$((10#${d%%_*}))
  echo "exercise $n: $(field "$spec" title)"
  echo "  your file:  $dest  (the TODO inside says what to write; the rest is the lesson)"
  echo "  check it:   make check-$n   (builds it and runs the lesson's own verification)"
  echo "  the lesson's own version (peek only when done): $src, between the same comments"
}

mpirun_cmd() {
  local np=$1 flags=""
  [ "$(id -u)" = 0 ] && flags="$flags --allow-run-as-root"
  [ "$np" -gt "$CORES" ] && flags="$flags --oversubscribe"
  echo "$MPIRUN$flags -np $np"
}

# The first @hint whose ERE (grep -E, so \1 back-references work) matches
# the log of a failed run, else @hint-default (or, with a third argument W,
# the block @hint-W alone). A hint's lines are joined. "ERE1 && ERE2" needs
# both, each on some line of the output.
matches() {
  local re=$1 log=$2 part
  while [ -n "$re" ]; do
    part=${re%% && *}
    grep -Eq -- "$part" "$log" || return 1
    [ "$part" = "$re" ] && return 0
    re=${re#* && }
  done
}
hint_for() {
  local spec=$1 log=$2 which=${3:-default} line re="" msg="" def="" sect=""
  while IFS= read -r line || [ -n "$line" ]; do
    case $line in
      '#'*) continue ;;
      "@hint-$which"*) sect=d; continue ;;
      '@hint-'*) sect=""; continue ;;
      '@hint '*)
        [ -n "$re" ] && matches "$re" "$log" && { echo "$msg"; return; }
        sect=h re=${line#@hint } msg=""
        [ "$which" = default ] || re=""
        continue ;;
      '@'*) sect=""; continue ;;
    esac
    [ "$sect" = h ] && msg="${msg:+$msg }$line"
    [ "$sect" = d ] && def="${def:+$def }$line"
  done <"$spec"
  [ -n "$re" ] && matches "$re" "$log" && { echo "$msg"; return; }
  echo "$def"
}

cmd_check() {
  local d src spec name bin obj log_dir
  d=$(lesson_dir "$1") || exit 2
  spec=$(spec_of "$d") name=${d#*_}
  [ -f "$spec" ] || die "lesson $d has no exercise yet ($spec is missing)"
  local marked
  marked=$(basename "$(lesson_src "$d")" .c)
  src="$EXERCISE_DIR/$d/$marked.c"
  [ -f "$src" ] || die "no $src yet: run 'make exercise-$((10#${d%%_*}))' first"
  local lib
  for lib in $LIBDT; do
    [ -f "$lib" ] || die "no $lib: build the common libraries first ('make', or run 'make check-N')"
  done
  local tag
  tag=$(echo "$EXERCISE_DIR" | tr -c 'A-Za-z0-9_\n' '_')
  obj="$OBJDIR/$tag/$d/$marked.o"
  # the binary sits beside the student's file, to run by hand; a lesson's own
  # folder keeps its binary, so the pristine one goes to the build folder
  if [ "$(cd "$EXERCISE_DIR" && pwd)" = "$(pwd)" ]; then bin="$OBJDIR/$tag/$d/$name"; else bin="$EXERCISE_DIR/$d/$name"; fi
  log_dir="$OBJDIR/$tag/$d/logs"
  mkdir -p "$(dirname "$obj")" "$log_dir"
  echo "check-$((10#${d%%_*})): $(field "$spec" title)"
  echo "  file: $src"
  local cflags=${CFLAGS//-MMD/} build_log="$log_dir/build.log" n=$((10#${d%%_*}))
  cflags=${cflags//-MP/}
  if [ -z "${LESSON_OBJS+set}" ]; then
    LESSON_OBJS=$(${MAKE:-make} -s --no-print-directory BACKEND=cpu "print-lesson-objs-$n") || die "make print-lesson-objs-$n failed"
    [ -z "$LESSON_OBJS" ] || ${MAKE:-make} -s --no-print-directory BACKEND=cpu $LESSON_OBJS >&2 || die "could not build $LESSON_OBJS"
  fi
  local o others=""
  for o in $LESSON_OBJS; do
    [[ $o == */"$d/$marked.o" ]] || others+=" $o"
  done
  # -I the lesson's folder: the student's copy sits elsewhere but includes
  # the lesson's own headers ("compress.h") as name.c does
  # shellcheck disable=SC2086
  if ! { $MPICC $cflags -I"$d" -c "$src" -o "$obj" && $MPICC $LDFLAGS "$obj" $others $LIBDT -o "$bin" $LDLIBS; } >"$build_log" 2>&1; then
    echo "FAIL  build: it does not compile; the compiler says:"
    grep -E 'error|undefined reference' "$build_log" | head -n 12 | sed 's/^/      /'
    echo "1 check: 0 passed, 1 failed (build)"
    return 1
  fi
  grep -q 'warning' "$build_log" && { echo "  warnings (fix them: they often point at the bug):"; grep 'warning' "$build_log" | head -n 6 | sed 's/^/    /'; }
  grep -q 'stub:' "$src" &&
    echo "  note: the stub is still there (the line with 'stub:'): replace it with your code"

  local -a requires=()
  local r
  while IFS= read -r r; do requires+=("$r"); done < <(field "$spec" require)
  local expected="CHECK PASSED" r
  for r in "${requires[@]}"; do r=${r#* | }; expected="$expected and ${r%% | *}"; done
  [ -n "$(field "$spec" expect)" ] && expected=$(field "$spec" expect)
  local passed=0 failed=0 np args line rc log got verdict run_cmd hint last_hint=""
  while read -r np args; do
    [ -n "$np" ] || continue
    log="$log_dir/check$((passed + failed + 1))-np$np.log"
    run_cmd="$(mpirun_cmd "$np") $bin $args --timeout $EXERCISE_TIMEOUT"
    # shellcheck disable=SC2086
    with_timeout -k 5 "$EXERCISE_LIMIT" $run_cmd >"$log" 2>&1 </dev/null
    rc=$?
    got=$(grep -m1 -E '^CHECK (PASSED|FAILED)' "$log")
    verdict=FAIL
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      got="no answer within ${EXERCISE_LIMIT} s, and the watchdog did not fire"
    elif line=$(grep -m1 -E '^watchdog: ' "$log"); then
      got="the watchdog stopped it: ${line#watchdog: }"
    elif [ -z "$got" ]; then
      line=$(grep -m1 -E 'Signal: |exited on signal|error' "$log" || tail -n 1 "$log")
      got="no verdict, exit code $rc: ${line#*] }"
    elif [ $rc -eq 0 ] && [[ $got == "CHECK PASSED"* ]]; then
      verdict=PASS
      for r in "${requires[@]}"; do
        local re=${r%% | *} what=${r#* | } key="" found
        [[ $what == *' | '* ]] && key=${what#* | } what=${what%% | *}
        if [ -z "$key" ]; then
          grep -Eq -- "$re" "$log" && continue
        else # every line KEY finds must match, and there must be one
          grep -Eq -- "$key" "$log" && ! grep -E -- "$key" "$log" | grep -Evq -- "$re" && continue
        fi
        verdict=FAIL
        found=$(grep -E -- "${key:-^$}" "$log" | grep -Ev -- "$re" | head -n 1 | sed 's/^ *//; s/  */ /g')
        got="CHECK PASSED, but $what does not hold${found:+: $found}"
      done
    fi
    [ ${#got} -gt 200 ] && got="${got:0:197}..."
    echo "$verdict  np=$np $args: expected $expected, got: $got"
    if [ $verdict = PASS ]; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1))
      hint=$(hint_for "$spec" "$log")
      if grep -qE 'Signal: |exited on signal' "$log"; then
        hint=$(hint_for "$spec" /dev/null crash)
        [ -n "$hint" ] || hint="it crashed: a pointer or an index outside its buffer? Counts are elements, not bytes: check every count and offset."
      fi
      if [ "$hint" = "$last_hint" ]; then
        echo "      hint: as above"
      else
        echo "      hint: $hint" | fold -s -w 90 | sed 's/ *$//; 2,$s/^/            /'
      fi
      last_hint=$hint
      echo "      whole output: $log"
      echo "      run it again: $run_cmd"
    fi
  done < <(field "$spec" run | head -n "${EXERCISE_FIRST:-1000}")
  echo "$((passed + failed)) checks: $passed passed, $failed failed"
  [ $failed -eq 0 ]
}

cmd_list() {
  local s d
  for s in tests/exercises/*.txt; do
    d=$(basename "$s" .txt)
    printf '  make exercise-%-2s %-14s %s\n' "$((10#${d%%_*}))" "$d" "$(field "$s" title)"
  done
}

case "${1:-}" in
  make) [ $# -eq 2 ] || die "usage: $0 make N"; cmd_make "$2" ;;
  check) [ $# -eq 2 ] || die "usage: $0 check N"; cmd_check "$2" ;;
  list) cmd_list ;;
  *) die "usage: $0 make N | check N | list" ;;
esac
