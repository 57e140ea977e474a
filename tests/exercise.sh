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
#     @show    ERE                      under a FAIL, print the lines it finds
#                                       (the plan, the bytes) beside the
#                                       comparison rows marked FAIL
#     @np1-checks  what                 what a run at np=1 checks; without it
#                                       a pass at np=1 (nothing to send) is
#                                       labelled trivial and not counted
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
# EXERCISE_FIRST=K runs only the first K checks (the test suite's shortcut);
# CHECK_NP=k (make check-N NP=k) only those at np=k, or each one's flags at np=k.
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
# 03_all_reduce -> 03_all_reduce/all_reduce.c, or the other file with
# markers (not one a second exercise of the lesson holds: its PART.c)
lesson_src() {
  local f main="$1/${1#*_}.c"
  for f in "$main" "$1"/*.c; do
    [ -f "tests/exercises/$1-$(basename "$f" .c).txt" ] && continue
    grep -q '^[[:space:]]*/\* exercise: ' "$f" 2>/dev/null && { echo "$f"; return; }
  done
  echo "$main"
}
# An exercise: N or NN_name, or a lesson's second one, N-PART or
# NN_name-PART (9-interleave: tests/exercises/09_pp-interleave.txt, the
# markers in 09_pp/interleave.c). Sets d (the lesson's folder), part, id
# (what make calls it: 9, 9-interleave), spec and src (the marked file).
exercise_of() {
  local want=$1
  part=""
  [[ $want == *-* ]] && part=${want#*-} want=${want%%-*}
  d=$(lesson_dir "$want") || exit 2
  id=$((10#${d%%_*}))${part:+-$part}
  spec="tests/exercises/$d${part:+-$part}.txt"
  if [ -n "$part" ]; then src="$d/$part.c"; else src=$(lesson_src "$d"); fi
}

field() { awk -v key="@$2" '$1 == key { sub(/^@[a-z0-9-]+ +/, ""); print }' "$1"; }

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
  local d part id src spec dest
  exercise_of "$1"
  [ -f "$spec" ] || die "lesson $d has no exercise ${part:+'$part' }yet ($spec is missing)"
  dest="$EXERCISE_DIR/$d/$(basename "$src")"
  if [ -e "$dest" ]; then
    echo "exercise: $dest exists and is kept (your work is never overwritten)."
    echo "  to start over: rm $dest && make exercise-$id"
    return 0
  fi
  mkdir -p "$EXERCISE_DIR/$d"
  make_workspace "$src" "$spec" >"$dest.tmp" || { rm -f "$dest.tmp"; die "could not cut $src (markers)"; }
  mv "$dest.tmp" "$dest"
  echo "exercise $id: $(field "$spec" title)"
  echo "  your file:  $dest  (the TODO inside says what to write; the rest is the lesson)"
  echo "  check it:   make check-$id   (builds it and runs the lesson's own verification)"
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

# stdin folded at spaces to 100 columns, lines after the first indented by $1
wrap() {
  local pad
  pad=$(printf "%${1}s" "")
  fold -s -w 100 | sed 's/ *$//' | sed "2,\$s/^/$pad/"
}

# Under a FAIL, the lines of the run's output that each @show ERE of the
# spec finds (the plan of each stage, the bytes table): what the measured
# lines above sum up, as the run printed it.
show_lines() {
  local spec=$1 log=$2 re="" line
  while IFS= read -r line; do re="${re:+$re|}$line"; done < <(field "$spec" show)
  [ -n "$re" ] || return 0
  grep -E -- "$re" "$log" | head -n 24 | sed 's/^ *//' | while IFS= read -r line; do
    echo "$line" | fold -s -w 90 | sed 's/ *$//' | sed '1s/^/      | /; 2,$s/^/      |     /'
  done
}

# What the run measured, set against the formulas, one "fact: TAG | what it
# says" line each; the spec's @hint EREs can key on the TAGs (the hint is
# then chosen from the figures, not only from the verdict's words), and the
# "what it says" half is printed under the FAIL:
#   bytes NAME R [=1/N|=N]  a collective moved R (p/q, or 0) of its formula
#                            (05-08's bytes table, or 12's and 14's rows
#                            "tp all_reduce (max)"; extra: its formula is 0)
#   loss slice               14: the first loss is ln(V/tp), not ln V: each
#                            rank's cross-entropy over its own slice alone
#   no-gradient LAYERS       tensors the run gave no gradient at the first step off
#   gradient =N | =1/N | R   how large the run's gradient of the tensors off was
#                            against one process's from the same state
#   off LAYERS [all]         which layers have a tensor off (all: every one)
#   peer prev|next|other     whom the rank the watchdog stopped waits on
facts_of() {
  awk -v N="$2" '
    function gcd(a, b) { while (b) { t = b; b = a % b; a = t } return a }
    function ratio(m, f,   g) {
      if (m == 0) return "0"
      g = gcd(m, f)
      if (f / g <= 16 && m / g <= 64) return (f / g == 1) ? (m / g) "x" : (m / g) "/" (f / g)
      return sprintf("%.2fx", m / f)
    }
    function tagN(m, f) { return m * N == f ? " =1/N" : (m == f * N ? " =N" : "") }
    function say_bytes(name, m, f,   r) {
      r = ratio(m, f)
      printf "fact: bytes %s %s%s | %s moved %s of the formula'"'"'s bytes (%d of %d per rank per step%s)\n", \
        name, r, tagN(m, f), name, (r == "0" ? "none" : r), m, f, (tagN(m, f) != "" ? ", N=" N : "")
    }
    /bytes sent per rank per step +calls +measured +formula/ { table = 1; next }
    table && /^    total/ { table = 0 }
    table && $1 ~ /^[a-z_]+$/ && $3 ~ /^[0-9]+$/ && $4 ~ /^[0-9]+$/ && $3 != $4 { say_bytes($1, $3 + 0, $4 + 0) }
    /bytes sent per rank per step [0-9]+, formula .* = [0-9]+$/ {
      m = $0; sub(/.*per step /, "", m); sub(/,.*/, "", m); f = $NF
      if (m != f) say_bytes("the all-reduce", m + 0, f + 0)
    }
    # the table of the mesh lessons (12, 14): axis, op (what), calls, formula, bytes, formula
    /per rank per step \(rank 0\) +calls formula +bytes sent +formula/ { mesh = 1; next }
    mesh && /^    every rank/ { mesh = 0 }
    mesh && /^    [a-z]/ && index($0, ")") {
      row = $0; sub(/^ +/, "", row); name = substr(row, 1, index(row, ")")); gsub(/ +/, " ", name); gsub(/[|]/, "/", name)
      if (split(substr(row, index(row, ")") + 1), fld, " ") >= 4 && fld[3] ~ /^[0-9]+$/ && fld[4] ~ /^[0-9]+$/ && fld[3] != fld[4]) {
        if (fld[4] == 0) printf "fact: bytes %s extra | %s moved %d bytes where its formula has none\n", name, name, fld[3]
        else say_bytes(name, fld[3] + 0, fld[4] + 0)
      }
    }
    # lesson 09, interleaved: stage 0'"'"'s forwards against Megatron'"'"'s order
    /^pipeline: [0-9]+ stages, [0-9]+ microbatches/ { NS = $2 + 0 }
    /^interleaved: V = [0-9]+ chunks a stage/ { VC = $4 + 0 }
    /\] stage 0: layers .*, plan / { plan0 = $0; sub(/.*, plan /, "", plan0) }
    # lesson 14: the first loss against ln(V/tp), a cross-entropy over one slice
    /^the mesh: dp [0-9]+ x pp [0-9]+ x cp [0-9]+ x tp [0-9]+/ { T = $13 + 0 }
    /^model: GPT .* V=[0-9]+/ { v = $0; sub(/.* V=/, "", v); V = v + 0 }
    /^step +1\/[0-9]+ +loss [0-9.]+/ { l1 = $4 + 0; has1 = 1 }
    /^lockstep: step 1 is off .* one process.s [0-9.]+\)/ { r1 = $0; sub(/.* one process.s /, "", r1); r1 += 0; hasr = 1 }
    /^    layers\.[0-9]+\.w[12]  rel diff .* gradient [0-9.]+ x/ {
      split($1, p, "."); l = p[2] + 0
      if (!(l in seen)) { seen[l] = 1; offl = offl (offl == "" ? "" : ",") l }
      n_off++
      if ($0 ~ /no gradient reached it\)/) { nev[l]++; n_nev++ } else { mv[++n_mv] = $6 + 0 }
    }
    /^  gradients off: [0-9]+ of [0-9]+ tensors/ { total = $5 + 0 }
    # every rank the watchdog stopped in a recv: one waiting on a wrong peer
    # (not its prev) is the one to name
    /^watchdog: rank [0-9]+ stuck .* in recv .*peer rank [0-9]+/ {
      r = $3 + 0; pr = $0; sub(/.*peer rank /, "", pr); pr += 0
      prev = (r + N - 1) % N; next_ = (r + 1) % N
      w = pr == prev ? "prev" : (pr == next_ ? "next" : "other")
      if (wd == "" || (wd == "prev" && w != "prev")) {
        wd = w
        wdsay = sprintf("rank %d waits to receive from rank %d; its prev is %d, its next %d%s", r, pr, prev, next_, \
          (N == 2 ? " (N = 2: the same rank)" : ""))
      }
    }
    END {
      if (wd != "") printf "fact: peer %s | %s\n", wd, wdsay
      if (VC > 1 && NS > 0 && plan0 != "") {
        n = split(plan0, act, " "); k = 0
        for (i = 1; i <= n; i++) {
          if (substr(act[i], 1, 1) != "F") continue
          g = int(k / (NS * VC)); c = int((k % (NS * VC)) / NS); mb = g * NS + k % NS
          want = "F" mb substr("abcdefghijklmnopqrstuvwxyz", c + 1, 1)
          if (act[i] != want) {
            printf "fact: order %d | stage 0'"'"'s forward %d is %s; Megatron'"'"'s order runs %s there: chunk (k mod NV)/N = (%d mod %d)/%d = %d (%s), microbatch (k/NV) N + k mod N = %d x %d + %d = %d (N = %d, V = %d)\n", \
              k, k, act[i], want, k, NS * VC, NS, c, substr("abcdefghijklmnopqrstuvwxyz", c + 1, 1), g, NS, k % NS, mb, NS, VC
            break
          }
          k++
        }
      }
      if (T > 1 && V > 0 && has1 && hasr) {
        a = log(V / T); b = log(V)
        if ((l1 - a) ^ 2 < (l1 - b) ^ 2 && (l1 - r1) ^ 2 > 1e-6)
          printf "fact: loss slice | the loss of the first step %.4f is about ln(V/tp) = ln(%d/%d) = %.4f, a cross-entropy over one slice of the vocabulary; one process had %.4f, about ln V = %.4f\n", l1, V, T, a, r1, b
      }
      if (n_off == 0) exit
      nl = 0; for (l in seen) nl++
      printf "fact: off %s%s | %d of %d tensors off, in layer%s %s\n", offl, (2 * nl == total ? " all" : ""), \
        n_off, total, (nl > 1 ? "s" : ""), offl
      if (n_nev) {
        lst = ""; for (l = 0; l < total; l++) if (l in nev) lst = lst (lst == "" ? "" : ",") l
        printf "fact: no-gradient %s | %d tensor%s got no gradient from the run at the first step off (layer%s %s): nothing reached %s\n", \
          lst, n_nev, (n_nev > 1 ? "s" : ""), (n_nev > 1 ? "s" : ""), lst, (n_nev > 1 ? "them" : "it")
      }
      if (n_mv) { # the median, against N and 1/N
        for (i = 1; i <= n_mv; i++) for (j = i + 1; j <= n_mv; j++) if (mv[j] < mv[i]) { t = mv[i]; mv[i] = mv[j]; mv[j] = t }
        med = mv[int((n_mv + 1) / 2)]
        # nearer N (or 1/N) than 1 on a log scale (against one process from the
        # same state, a sum of N means is N times it, exactly but for rounding)
        lm = log(med > 0 ? med : 1e-9); lN = log(N > 1 ? N : 2)
        tag = (N > 1 && lm > lN / 2 && lm < 1.5 * lN) ? "=N" : ((N > 1 && -lm > lN / 2 && -lm < 1.5 * lN) ? "=1/N" : sprintf("%.2f", med))
        printf "fact: gradient %s | the run\047s gradient of the tensors off was %.2f times one process\047s from the same state (median of %d; N=%d)\n", tag, med, n_mv, N
      }
    }' "$1"
}

# The spec's runs; with CHECK_NP=k (make check-N NP=k) those at np=k, or,
# where the spec has none, each of its flag sets once at np=k.
runs_of() {
  local spec=$1 np args seen=""
  if [ -z "${CHECK_NP:-}" ]; then
    field "$spec" run
    return
  fi
  if field "$spec" run | grep -q "^$CHECK_NP "; then
    field "$spec" run | grep "^$CHECK_NP "
    return
  fi
  field "$spec" run | while read -r np args; do
    case "$seen" in *"|$args|"*) continue ;; esac
    seen="$seen|$args|"
    echo "$CHECK_NP $args"
  done
}

cmd_check() {
  local d part id src spec name bin obj log_dir
  exercise_of "$1"
  name=${d#*_}
  [ -f "$spec" ] || die "lesson $d has no exercise ${part:+'$part' }yet ($spec is missing)"
  local marked
  marked=$(basename "$src" .c)
  src="$EXERCISE_DIR/$d/$marked.c"
  [ -f "$src" ] || die "no $src yet: run 'make exercise-$id' first"
  # the default workspace's build goes straight under OBJDIR (build/cpu/
  # exercises/06_fsdp); another EXERCISE_DIR gets a folder of its own name
  local sub=$d
  [ "$EXERCISE_DIR" = exercises ] || sub="$(echo "$EXERCISE_DIR" | tr -c 'A-Za-z0-9_\n' '_')/$d"
  obj="$OBJDIR/$sub/$marked.o"
  # the binary sits beside the student's file, to run by hand; a lesson's own
  # folder keeps its binary, so the pristine one goes to the build folder
  if [ "$(cd "$EXERCISE_DIR" && pwd)" = "$(pwd)" ]; then bin="$OBJDIR/$sub/$name"; else bin="$EXERCISE_DIR/$d/$name"; fi
  log_dir="$OBJDIR/$sub/logs"
  mkdir -p "$(dirname "$obj")" "$log_dir"
  echo "check-$id: $(field "$spec" title)"
  echo "  file: $src"
  if [ -n "${CHECK_NP:-}" ]; then
    [[ $CHECK_NP =~ ^[1-9][0-9]*$ ]] || die "NP=$CHECK_NP: a number of processes, 1 or more"
    field "$spec" run | grep -q "^$CHECK_NP " &&
      echo "  NP=$CHECK_NP: the checks at np=$CHECK_NP only" ||
      echo "  NP=$CHECK_NP: no check of this exercise runs at np=$CHECK_NP; each one's flags run at np=$CHECK_NP"
  fi
  local cflags=${CFLAGS//-MMD/} build_log="$log_dir/build.log" n=$((10#${d%%_*}))
  cflags=${cflags//-MP/}
  [ -n "${LESSON_OBJS+set}" ] ||
    LESSON_OBJS=$(${MAKE:-make} -s --no-print-directory BACKEND=cpu "print-lesson-objs-$n") || die "make print-lesson-objs-$n failed"
  # the lesson's own copy of the marked file is never built: the student's
  # replaces it
  local o others=""
  for o in $LESSON_OBJS; do
    [[ $o == */"$d/$marked.o" ]] || others+=" $o"
  done
  # the libraries and the lesson's other files, quietly: their output only
  # if they fail (a broken clone, not the student's code)
  # shellcheck disable=SC2086
  if ! ${MAKE:-make} -s --no-print-directory ${MAKE_ARGS:-BACKEND=cpu} $LIBDT $others >"$build_log" 2>&1; then
    echo "FAIL  build: the common libraries or the lesson's other files do not build (not your file);"
    echo "      make says (all of it: $build_log):"
    grep -E 'error|Error' "$build_log" | head -n 8 | sed 's/^/      /'
    echo "1 check: 0 passed, 1 failed (build)"
    return 1
  fi
  # -I the lesson's folder: the student's copy sits elsewhere but includes
  # the lesson's own headers ("compress.h") as name.c does
  # shellcheck disable=SC2086
  if ! { $MPICC $cflags -I"$d" -c "$src" -o "$obj" && $MPICC $LDFLAGS "$obj" $others $LIBDT -o "$bin" $LDLIBS; } >"$build_log" 2>&1; then
    echo "FAIL  build: it does not compile; the compiler says (all of it: $build_log):"
    # the student's own lines first (file:line: error), then the linker's
    { grep -E "^$src:[0-9]+(:[0-9]+)?: (fatal )?error" "$build_log"
      grep -E "^$src:[0-9]+(:[0-9]+)?: (warning|note)" "$build_log"
      grep -E 'undefined reference|ld returned' "$build_log"; } | head -n 12 | sed 's/^/      /'
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
  local passed=0 failed=0 trivial=0 np args line rc log got verdict run_cmd hint last_hint=""
  local np1
  np1=$(field "$spec" np1-checks)
  while read -r np args; do
    [ -n "$np" ] || continue
    log="$log_dir/check$((passed + failed + trivial + 1))-np$np.log"
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
        got="CHECK PASSED, but this does not hold: $what${found:+; the first line that breaks it: $found}"
      done
    fi
    # whole words: a long line wraps at a space, never cut
    # at np=1 nothing is sent: a pass there says nothing of the student's
    # communication, unless the spec names what that run does check
    if [ $verdict = PASS ] && [ "$np" = 1 ] && [ -z "$np1" ]; then
      verdict="PASS (trivial at np=1: nothing to send; not counted)"
    elif [ $verdict = PASS ] && [ "$np" = 1 ]; then
      verdict="PASS (np=1: nothing to send; this run checks $np1)"
    fi
    echo "$verdict  np=$np $args: expected $expected, got: $got" | wrap 6
    if [[ $verdict == *trivial* ]]; then
      trivial=$((trivial + 1))
    elif [[ $verdict == PASS* ]]; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1))
      facts_of "$log" "$np" >"$log.facts"
      cat "$log" "$log.facts" >"$log.why"
      hint=$(hint_for "$spec" "$log.why")
      if grep -qE 'Signal: |exited on signal' "$log"; then
        hint=$(hint_for "$spec" /dev/null crash)
        [ -n "$hint" ] || hint="it crashed: a pointer or an index outside its buffer? Counts are elements, not bytes: check every count and offset."
      fi
      sed -n 's/^fact: [^|]*| //p' "$log.facts" | while IFS= read -r line; do
        echo "      measured: $line" | wrap 16
      done
      if [ "$hint" = "$last_hint" ]; then
        echo "      hint: as above"
      else
        echo "      hint: $hint" | fold -s -w 90 | sed 's/ *$//; 2,$s/^/            /'
      fi
      last_hint=$hint
      show_lines "$spec" "$log"
      echo "      whole output: $log"
      echo "      run it again: $run_cmd"
    fi
  done < <(runs_of "$spec" | head -n "${EXERCISE_FIRST:-1000}")
  local more=""
  [ $trivial -gt 0 ] && more="; $trivial more passed trivially at np=1 (nothing to send), not counted"
  echo "$((passed + failed)) checks: $passed passed, $failed failed$more"
  [ $failed -eq 0 ]
}

cmd_list() {
  local s d
  for s in tests/exercises/*.txt; do
    d=$(basename "$s" .txt)
    part="" && [[ $d == *-* ]] && part=-${d#*-}
    printf '  make exercise-%-2s %-14s %s\n' "$((10#${d%%_*}))$part" "$d" "$(field "$s" title)"
  done
}

case "${1:-}" in
  make) [ $# -eq 2 ] || die "usage: $0 make N"; cmd_make "$2" ;;
  check) [ $# -eq 2 ] || die "usage: $0 check N"; cmd_check "$2" ;;
  list) cmd_list ;;
  *) die "usage: $0 make N | check N | list" ;;
esac
