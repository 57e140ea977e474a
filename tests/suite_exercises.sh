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
# a check's output as one line: the lines it folds at spaces joined again
flat() { tr '\n' ' ' <"$1" | tr -s ' '; }

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
  # a lesson's second exercise: NN_name-PART.txt, make exercise-N-PART
  d=$(basename "$spec" .txt) part=""
  [[ $d == *-* ]] && part=-${d#*-} d=${d%%-*}
  n=$((10#${d%%_*}))$part
  [ -d "$d" ] || continue
  d=$d$part

  log="$LOGS/exercise-$d-pristine.log"
  ex_run "$d" . "$n" "$log"
  runs=$(grep -c '^@run ' "$spec")
  # a pass at np=1 where nothing is sent is labelled and not counted
  triv=$(grep -c '^PASS (trivial at np=1: nothing to send; not counted)  np=1 ' "$log")
  counted=$((runs - triv))
  if [ $ex_rc -eq 0 ] && [ "$(grep -c '^PASS' "$log")" -eq "$runs" ] &&
    grep -q "^$counted checks: $counted passed, 0 failed" "$log"; then
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
  [ -z "$why" ] && ! { grep -q '^FAIL  np=' "$log" && flat "$log" | grep -q 'FAIL np=[^|]* got: '; } && why="no FAIL line with what came out"
  [ -z "$why" ] && ! grep -q '^      hint: ' "$log" && why="no hint"
  [ -z "$why" ] && ! grep -qE "^[12] checks: " "$log" && why="not every run reported"
  if [ -z "$why" ]; then
    pass "exercise $d: the untouched exercise fails make check-$n cleanly (${t}s)"
  else
    fail "exercise $d: the untouched exercise fails make check-$n cleanly" "$log" "$why (exit code $ex_rc)"
  fi
done

# 09's second exercise: the untouched stub's hint is computed from the run's own
# plan line (tests/exercise.sh's facts): its first forward out of Megatron's order
log="$LOGS/exercise-09_pp-interleave-untouched.log"
if [ -f "$log" ]; then
  if flat "$log" | grep -q "measured: stage 0's forward 1 is F0b; Megatron's order runs F1a there: chunk (k mod NV)/N = (1 mod 4)/2 = 0 (a)" &&
    flat "$log" | grep -q "hint: the forwards leave Megatron's order where the measured line above says"; then
    pass "exercise 09_pp-interleave: the stub's hint names its first forward out of order, computed from its plan"
  else
    fail "exercise 09_pp-interleave: the stub's hint names its first forward out of order, computed from its plan" "$log"
  fi
fi

# The markers: one start and one end per region, the TODO and stub in between,
# and the rest of the lesson untouched (the workspace minus its regions equals
# the lesson minus its regions).
outside() { awk '/\/\* exercise: .*\*\//{skip=1} !skip{print} /\/\* end of exercise \*\//{skip=0}' "$1"; }
bad=""
for spec in tests/exercises/[0-9][0-9]_*.txt; do
  d=$(basename "$spec" .txt) src=$d/${d#*_}.c
  # the marked file, as tests/exercise.sh finds it: name.c, or the .c that holds the markers
  # (not a second exercise's: NN_name-PART.txt's is NN_name/PART.c)
  if [[ $d == *-* ]]; then
    src=${d%%-*}/${d#*-}.c
  elif ! grep -q '^[[:space:]]*/\* exercise: ' "$src" 2>/dev/null; then
    src=$(for f in "$d"/*.c; do [ -f "tests/exercises/$d-$(basename "$f" .c).txt" ] ||
      grep -l '^[[:space:]]*/\* exercise: ' "$f"; done | head -n 1)
  fi
  ws="$EX_WS/$src"
  [ -f "$ws" ] || continue
  cmp -s <(outside "$src") <(outside "$ws") || bad="$bad $d(outside differs)"
  [ "$(grep -c '/\* exercise: ' "$src")" -eq "$(grep -c '^@todo' "$spec")" ] || bad="$bad $d(regions)"
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
  if [ $ex_rc -ne 124 ] && flat "$log" | grep -Eq 'got: the watchdog stopped it: rank [0-9]+ stuck for 2 s in recv' &&
    flat "$log" | grep -q 'hint: every rank is waiting in dt_recv, each on the right peer (prev): nobody sent first'; then
    pass "exercise 01: a student's deadlock is stopped by the watchdog and named"
  else
    fail "exercise 01: a student's deadlock is stopped by the watchdog and named" "$log" "exit code $ex_rc"
  fi
fi

# The feedback a student acts on (issue 27). Each planted mistake is a sed
# of the lesson's own solution (a sed that changes nothing fails the test);
# each must bring, besides FAIL, the hint and the measured figures that tell
# it from its look-alikes.
# ex_expect NAME LOG ERE...: every ERE matches some line of LOG
ex_expect() {
  local name=$1 log=$2 re
  shift 2
  for re in "$@"; do # on a line, or across the lines a long one folds into
    grep -Eq -- "$re" "$log" || flat "$log" | grep -Eq -- "$re" ||
      { fail "$name" "$log" "no line matches: $re"; return; }
  done
  pass "$name"
}
# ex_plant D FILE SED LABEL: the lesson's FILE with SED applied, in
# $LOGS/exercises-planted/LABEL/D/FILE; sets ex_dir ("" when SED changed nothing)
ex_plant() {
  local d=$1 f=$2 sed=$3 label=$4
  ex_dir=$LOGS/exercises-planted/$label
  rm -rf "$ex_dir" && mkdir -p "$ex_dir/$d"
  sed "$sed" "$d/$f" >"$ex_dir/$d/$f"
  if cmp -s "$d/$f" "$ex_dir/$d/$f"; then
    fail "planted mistake $label: the sed changes $d/$f" "" "$sed"
    ex_dir=""
  fi
}

# ex_case LABEL N FILE SED NP NAME ERE...: plant SED in lesson N's FILE, check at NP, expect each ERE
ex_case() {
  local label=$1 n=$2 file=$3 sed=$4 np=$5 name=$6 d
  shift 6
  d=$(ls -d "$(printf '%02d' "$n")"_*/)
  ex_plant "${d%/}" "$file" "$sed" "$label"
  [ -n "$ex_dir" ] || return
  ex_run "$n" "$ex_dir" "$n" "$LOGS/exercise-feedback-$label.log" CHECK_NP="$np"
  ex_expect "$name" "$LOGS/exercise-feedback-$label.log" "$@"
}

# build: quiet, the student's file:line first, the solution not compiled,
# the log path once
log=$LOGS/exercise-feedback-build.log
ex_plant 06_fsdp shard.c 's|^  if (f->g) {$|  if (f->g) { int x = ;|' syntax
if [ -n "$ex_dir" ]; then
  ex_run 06 "$ex_dir" 6 "$log"
  ex_expect "check-6 on a syntax error: FAIL build, the student's file:line first, no make or mpicc lines" "$log" \
    '^FAIL  build: it does not compile' "^      $ex_dir/06_fsdp/shard.c:[0-9]+:[0-9]+: error"
  if grep -Eq '^(mpicc|/usr/bin/mpicc|gcc|cc) ' "$log" || [ $ex_rc -eq 0 ]; then
    fail "check-6 on a syntax error prints no compiler command and fails" "$log" "exit code $ex_rc"
  fi
fi
solo=$(${MAKE:-make} -s --no-print-directory print-lesson-objs-6 | tr ' ' '\n' | grep '/06_fsdp/shard.o$')
if [ -n "$solo" ] && [ -f "$solo" ]; then
  touch 06_fsdp/shard.c
  log=$LOGS/exercise-feedback-quiet.log
  ex_run 06 "$EX_WS" 6 "$log" EXERCISE_FIRST=2
  out=$(sed -n 's/^      whole output: //p' "$log" | head -n 1)
  why=""
  [ 06_fsdp/shard.c -nt "$solo" ] || why="$solo was rebuilt"
  grep -Eq 'mpicc|-Wall' "$log" && why="$why; compiler lines in the output"
  [ -n "$out" ] && [ -f "$out" ] || why="$why; no log at '$out'"
  [[ $out == *exercises/exercises/* ]] && why="$why; doubled folder in $out"
  if [ -z "$why" ]; then
    pass "check-6: no compiler lines, the lesson's own shard.c not recompiled, the log path exists once"
  else
    fail "check-6: no compiler lines, the lesson's own shard.c not recompiled, the log path exists once" "$log" "$why"
  fi
fi

# 06: wrong operation, wrong layer offset, count S/N: the same bytes table
# for the first two, three different hints
ex_plant 06_fsdp shard.c 's/f->wire.type, f->op);/f->wire.type, DT_SUM);/' fsdp-op
if [ -n "$ex_dir" ]; then
  log=$LOGS/exercise-feedback-06-op.log
  ex_run 06 "$ex_dir" 6 "$log" CHECK_NP=2
  whole=$(sed -n 's/^      whole output: //p' "$log" | head -n 1)
  ex_expect "check-6, DT_SUM for DT_AVG: its output marks each row ok or FAIL" "${whole:-/dev/null}" \
    '^  FAIL gradient, worst tensor rel L2 diff ' '^  ok   update, elements not bit for bit ' '^  gradients off: 8 of 8 tensors$'
  ex_expect "check-6, DT_SUM for DT_AVG: the first step off named, 'N times one process's' hint" "$log" \
    "got: CHECK FAILED: .*\(step 1: a gradient is off: layers\.[0-9]\.w[12]'s rel L2 diff" \
    'measured: the run.s gradient of the tensors off was [0-9.]+ times one process.s' \
    'hint: the bytes match, but every tensor.s gradient is about N times one process.s'
fi
ex_plant 06_fsdp shard.c 's/dt_reduce_scatter(f->comm, send, recv,/dt_reduce_scatter(f->comm, send, f->gs,/' fsdp-offset
if [ -n "$ex_dir" ]; then
  log=$LOGS/exercise-feedback-06-offset.log
  ex_run 06 "$ex_dir" 6 "$log" CHECK_NP=2
  ex_expect "check-6, f->gs for the layer's slice: layers with no gradient and the layer-offset hint" "$log" \
    'measured: [0-9]+ tensors got no gradient from the run at the first step off \(layers 1,2,3\): nothing reached them' \
    "hint: the bytes match, but whole layers got no gradient while layer 0.s is off" "f->gs \+ l \* f->S"
  grep -q 'hint: the bytes match, but every tensor.s gradient is about N times' "$log" &&
    fail "check-6, f->gs for the layer's slice: not the wrong-operation hint" "$log"
fi
ex_case fsdp-count 6 shard.c 's/mine, all, (size_t)f->S, f->wire.type)/mine, all, (size_t)f->S \/ (size_t)f->comm->size, f->wire.type)/' 2 \
  "check-6, all-gather count S/N: the measured fraction of the formula's bytes and its hint" \
  "measured: all_gather moved 1/2 of the formula's bytes \([0-9]+ of [0-9]+ per rank per step, N=2\)" \
  'hint: the all-gather moved 1/N of its formula: did each rank send only 1/N of its'

# 05: the scale never applied (DT_SUM) against applied twice
ex_plant 05_dp dp.c 's/p, p, k->count, m->bk.wire.type, m->bk.op);/p, p, k->count, m->bk.wire.type, DT_SUM);/' dp-sum
if [ -n "$ex_dir" ]; then
  log=$LOGS/exercise-feedback-05-sum.log
  ex_run 05 "$ex_dir" 5 "$log" EXERCISE_FIRST=1
  ex_expect "check-5, DT_SUM: 'summed and never divided by N'" "$log" 'hint: .*summed and never divided by N'
fi
ex_plant 05_dp dp.c 's/p, p, k->count, m->bk.wire.type, m->bk.op);/p, p, k->count, m->bk.wire.type, m->bk.op);\
      dt_scale(p, k->count, 1.0f \/ (float)m->world->size);/' dp-twice
if [ -n "$ex_dir" ]; then
  log=$LOGS/exercise-feedback-05-twice.log
  ex_run 05 "$ex_dir" 5 "$log" EXERCISE_FIRST=1
  ex_expect "check-5, averaged and divided again: 'divided by N twice'" "$log" 'hint: .*divided by N twice'
fi

# 12: a color that mixes in the axis's neighbour, a key that reverses a
# group, a color that includes the axis itself: each named beside the right
# groups, with its own hint
ex_case 12-mix 12 mesh.c 's/color = b == a ? color : color \* m->n\[b\] + m->at\[b\];/color = b == a || (a == TP \&\& b == CP) ? color : color * m->n[b] + m->at[b];/' 8 \
  "check-12, tp's color without cp: the group named beside the right ones, the mixing hint" \
  'rank 0 is in tensor group \{0, 1, 2, 3\}; with tp = 2 the tensor groups are \{0, 1\} and \{2, 3\}: the split.s color mixes tp with cp' \
  'hint: a group holds ranks of other groups'
ex_case 12-key 12 mesh.c 's/m->axis\[a\] = dt_comm_split(m->world, (int)color, (int)m->at\[a\]);/m->axis[a] = dt_comm_split(m->world, (int)color, -(int)m->at[a]);/' 2 \
  "check-12, a key that reverses the groups: the rank's place named, the key hint" \
  'rank 0 is rank 1 of its tensor group \{0, 1\}; it should be rank 0' 'hint: the groups are right but their order is not'
ex_case 12-self 12 mesh.c 's/color = b == a ? color : color \* m->n\[b\] + m->at\[b\];/color = color * m->n[b] + m->at[b];/' 2 \
  "check-12, a color of all four coordinates: the group cut apart, its hint" \
  'rank 0 is in tensor group \{0\}; with tp = 2 the tensor groups of its ranks are \{0, 1\}: the split.s color keeps apart' \
  'hint: a group was cut in pieces'

# 13: the ring all-reduce's alpha term counting one phase only, and the beta
# term in integer arithmetic (right at n = 2 by luck): each named with the
# ring's counted messages or bytes, with its own hint
ex_case plan-alpha 13 cost.c 's/return 2 \* (N - 1) \* k->alpha + /return (N - 1) * k->alpha + /' 3 \
  "check-13, (n-1) messages: the alpha term named beside the ring's count, its hint" \
  'the alpha term: collective_seconds counts 2 messages at n = 3; the ring sent 4, one after' \
  'hint: the latency term is off'
ex_case plan-int 13 cost.c 's/ + 2 \* (N - 1) \/ N \* bytes \* k->beta;/ + 2 * (n - 1) \/ n * bytes * k->beta;/' 3 \
  "check-13, 2(n-1)/n in integers: the beta term named at n = 3, the integer-division hint" \
  'the beta term: collective_seconds counts 12 bytes at n = 3, S = 12; the ring sent 16' \
  'hint: the bandwidth term is off' 'integer division'

# 01: a recv from the wrong peer against nobody sending first (the latter:
# the deadlock test above)
ex_plant 01_send_recv send_recv.c '/^  } else {$/{n;s/dt_recv(w, token, 1, DT_I32, prev);/dt_recv(w, token, 1, DT_I32, next);/;}' ring-peer
if [ -n "$ex_dir" ]; then
  log=$LOGS/exercise-feedback-01-peer.log
  ex_run 01 "$ex_dir" 1 "$log" CHECK_NP=3 EXERCISE_TIMEOUT=2
  ex_expect "check-1, recv from next: the wrong peer named, not 'nobody sent'" "$log" \
    'measured: rank [0-9] waits to receive from rank [0-9]; its prev is [0-9], its next [0-9]' \
    'hint: a rank waits to receive from the wrong peer'
fi

# 11: the merge's usual mistakes, each named from the factor --verify-merge
# measures (the rows against the right ones), with its own hint
ex_case merge-nodiv 11 ring.c 's|oi\[d\] = (sa \* oi\[d\] + sb \* bi\[d\]) / (sa + sb);|oi[d] = sa * oi[d] + sb * bi[d];|' 2 \
  "check-11, the merge not divided by wa + wb: the factor measured, the mistake named, its hint" \
  'got: .*the merged rows are [0-9.]+ to [0-9.]+ times the right ones' \
  'each row is exactly its own wa \+ wb times the right one' 'hint: your rows are the weighted sum wa o \+ wb ob'
ex_case merge-sum 11 ring.c 's|oi\[d\] = (sa \* oi\[d\] + sb \* bi\[d\]) / (sa + sb);|oi[d] = oi[d] + bi[d];|' 2 \
  "check-11, the plain sum o + ob: named, its hint" \
  'they are the plain sum o \+ ob' 'hint: you added the two outputs'
ex_expect "check-11 stub: the newer block alone, named, its hint" "$LOGS/exercise-11_cp-untouched.log" \
  "they are the newer block's alone \(ob\)" 'hint: the merged result is the new block alone'

# 14: the stub (each slice's own cross-entropy: its first loss is ln(V/tp),
# computed from the run), the max not all-reduced and R floats of [sum | tl]
# summed (the bytes against their formulas), each with its hint
ex_case ce-nomax 14 gpt.c '/gpt_pieces(m, h.mx, R, DT_MAX/d' 2 \
  "check-14, the max not all-reduced: its bytes measured, its hint" \
  "measured: tp all_reduce \(max\) moved none of the formula's bytes" 'hint: the rows. max was never all-reduced'
ex_case ce-half 14 gpt.c 's/gpt_pieces(m, h.sum, 2 \* R, DT_SUM/gpt_pieces(m, h.sum, R, DT_SUM/' 2 \
  "check-14, R floats of [sum | tl] summed: half the bytes, its hint" \
  "measured: tp all_reduce \(sum/target\) moved 1/2 of the formula's bytes" 'hint: half of the pieces were summed'
# V: README.md's characters padded to a multiple of 2 (the text changes)
v14=$(perl -CSD -0777 -ne 'my %s; $s{$_} = 1 for split //; print 2 * int((scalar(keys %s) + 1) / 2)' README.md)
ex_expect "check-14 stub: the first loss computed against ln(V/tp), its hint" "$LOGS/exercise-14_gpt-untouched.log" \
  "measured: the loss of the first step [0-9.]+ is about ln\\(V/tp\\) = ln\\($v14/2\\) = $(awk -v v="$v14" 'BEGIN { printf "%.4f", log(v / 2) }')" \
  'hint: each rank computed the cross-entropy of its own slice'

# 09's stub (GPipe for 1F1B): a sentence, whole words, the plans under the FAIL
log=$LOGS/exercise-feedback-09.log
if EXERCISE_DIR="$EX_WS" ex_make exercise-9 >/dev/null 2>&1; then
  ex_run 09 "$EX_WS" 9 "$log" CHECK_NP=2
  ex_expect "check-9 stub: the broken rule as a sentence and each stage's plan under the FAIL" "$log" \
    "got: CHECK PASSED, but this does not hold: every stage's" \
    '^      \| \[rank 0\] stage 0: layers [0-9-]+, plan F0 F1 F2 F3 B0' '^      \| \[rank 1\] stage 1: layers'
  awk 'length($0) > 108 && !/run it again|whole output/' "$log" | grep -q . &&
    fail "check-9 stub: every line folded at a space" "$log"
  grep -q '\.\.\.$' "$log" && fail "check-9 stub: no line cut with ..." "$log"
fi

# np=1 trivial, NP honoured, a bf16 run in check-6
log=$LOGS/exercise-feedback-np.log
ex_run 06 "$EX_WS" 6 "$log" EXERCISE_FIRST=1
ex_expect "check-6 stub at np=1: labelled trivial, not counted" "$log" \
  '^PASS \(trivial at np=1: nothing to send; not counted\)  np=1 ' \
  '^0 checks: 0 passed, 0 failed; 1 more passed trivially at np=1'
log=$LOGS/exercise-feedback-np2.log
with_timeout -k 5 "$EX_LIMIT" env EXERCISE_DIR=. ${MAKE:-make} -s --no-print-directory check-6 NP=2 >"$log" 2>&1
ex_expect "make check-6 NP=2 runs the np=2 check alone" "$log" '^  NP=2: the checks at np=2 only' '^1 checks: 1 passed, 0 failed$'
grep -q '^PASS.*np=[134] ' "$log" && fail "make check-6 NP=2 runs no other np" "$log"
ex_expect "exercise 06's pristine check includes a bf16 run that passes" "$LOGS/exercise-06_fsdp-pristine.log" \
  '^PASS  np=4 .*--precision bf16'

# make grade: one exercise right, one wrong
gdir=$LOGS/grade-student
rm -rf "$gdir" && mkdir -p "$gdir/05_dp" "$gdir/06_fsdp"
cp 05_dp/dp.c "$gdir/05_dp/" && cp "$LOGS/exercises-planted/fsdp-offset/06_fsdp/shard.c" "$gdir/06_fsdp/" 2>/dev/null
log=$LOGS/grade.log
with_timeout -k 5 $((2 * EX_LIMIT)) ${MAKE:-make} -s --no-print-directory grade DIR="$gdir" >"$log" 2>&1
g_rc=$?
ex_expect "make grade: a table of both exercises, the total, the results file last" "$log" \
  '^  check-5 +3/3 +ok +data parallel' '^  check-6 +[0-4]/5 +FAIL +FSDP' '^  total +[0-9]+/8'
# (after it make adds its own line for the failed recipe: "make: ***", or
# "make[1]: ***" when make test runs it from a make of its own)
if grep -Ev '^make(\[[0-9]+\])?: ' "$log" | tail -n 1 |
  grep -Eq "^grade: [0-9]+ of 8 checks passed; results: $gdir/results.json$"; then
  pass "make grade: the last line names the results file"
else
  fail "make grade: the last line names the results file" "$log"
fi
[ $g_rc -ne 0 ] || fail "make grade: a failed exercise gives a non-zero exit code" "$log"
# Gradescope's format: tests[] with name, score <= max_score, output
if command -v python3 >/dev/null 2>&1; then
  if python3 - "$gdir/results.json" >"$LOGS/grade-json.log" 2>&1 <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d["tests"], list) and len(d["tests"]) == 2, "two tests"
for t in d["tests"]:
    assert isinstance(t["name"], str) and isinstance(t["output"], str), t
    assert isinstance(t["score"], (int, float)) and isinstance(t["max_score"], (int, float)), t
    assert 0 <= t["score"] <= t["max_score"], t
assert d["tests"][0]["score"] == d["tests"][0]["max_score"] == 3, "05 right"
assert d["tests"][1]["score"] < d["tests"][1]["max_score"], "06 wrong"
assert "layer 0's slice" in d["tests"][1]["output"].replace("\n", " "), "the hint in the output"
assert d["score"] == sum(t["score"] for t in d["tests"])
PY
    pass "make grade: results.json has Gradescope's fields (name, score <= max_score, output) and the hint"
  else
    fail "make grade: results.json has Gradescope's fields" "$LOGS/grade-json.log"
  fi
fi
rm -rf "$gdir/06_fsdp" "$gdir/results.json"
with_timeout -k 5 "$EX_LIMIT" ${MAKE:-make} -s --no-print-directory grade DIR="$gdir" >"$log.ok" 2>&1
[ $? -eq 0 ] && [ -f "$gdir/results.json" ] && pass "make grade: every check passed, exit code 0" ||
  fail "make grade: every check passed, exit code 0" "$log.ok"
