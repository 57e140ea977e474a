# Adding a lesson is copying a folder (docs/adding-a-lesson.md), sourced by
# tests/run_tests.sh. In a throwaway copy of the build files, common/ and
# 05_dp/ (never in this tree):
#   - the page's blocks marked "tests/suite_new_lesson.sh runs the next block"
#     are run as they stand: 05_dp copied to 90_dp_copy/, renamed, built and
#     run; the page's tests/lesson_90.sh is written and run alone;
#   - then two new lessons nobody registers anywhere: 90_dp_copy/ gets
#     piece.c/piece.h, a second .c of the folder and a piece another lesson
#     uses; 91_probe/ has probe.c (main), extra.c (a second file) and
#     #include "90_dp_copy/piece.h" (the piece of another lesson).
# make lesson-90 and lesson-91 must build them, make run-90 run 90_dp_copy's
# own check at NP=2, 91_probe print what its extension and the piece return
# (it links only if both were linked), make tour list both, and make check-90
# link the lesson, and the exercise's copy of it, with piece.c.
NL_LIMIT=${NL_LIMIT:-300} # seconds for each make
NL=$(mktemp -d "${TMPDIR:-/tmp}/dt-new-lesson.XXXXXX")
NL_MAKE=(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$NL" --no-print-directory "BACKEND=${BACKEND:-cpu}")

mkdir -p "$NL/tools" "$NL/tests/exercises" "$NL/05_dp" "$NL/91_probe"
cp -r Makefile common "$NL/"
cp tools/find_nccl.sh "$NL/tools/"
cp tests/lib.sh tests/tour.sh tests/exercise.sh tests/*.h "$NL/tests/"
cp 05_dp/*.[ch] 05_dp/README.md "$NL/05_dp/"
# the earlier lessons whose pieces 05_dp includes come along (they are
# lessons of the copy too)
for used in $(sed -n 's|^#include "\([0-9][0-9]_[^/"]*\)/.*|\1|p' 05_dp/*.[ch] | sort -u); do
  [ "$used" = 05_dp ] || { mkdir -p "$NL/$used" && cp "$used"/*.[ch] "$NL/$used/"; }
done
# the page's blocks: each fenced block after a line naming this script
NL_DOC=docs/adding-a-lesson.md
awk -v d="$NL" '/<!-- tests\/suite_new_lesson.sh / { want = 1; next }
  want && /^```/ { if (on) { on = 0; want = 0; close(f) } else { on = 1; n++; f = d "/doc-block-" n } next }
  on { print > f }' "$NL_DOC"
# the copy's own make: not the MAKEFLAGS and command-line variables of the
# make running make test
NL_ENV=(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "BACKEND=${BACKEND:-cpu}")
TEST_TIMEOUT=$NL_LIMIT check "new lesson: $NL_DOC's commands, as they stand, copy, build and run lesson 90" 0 0 \
  '^90_dp_copy \| backend ' '^CHECK PASSED' -- bash -c 'cd "$1" && shift && "$@"' _ "$NL" "${NL_ENV[@]}" bash -e doc-block-1
nl_test=$(sed -n '1s/^# \(tests\/lesson_[0-9]*\.sh\):.*/\1/p' "$NL/doc-block-2" 2>/dev/null)
if [ -n "$nl_test" ]; then
  cp "$NL/doc-block-2" "$NL/$nl_test"
  TEST_TIMEOUT=$NL_LIMIT check "new lesson: $NL_DOC's $nl_test passes, run as the page says" 0 0 '^2 passed, 0 failed$' \
    -- bash -c 'cd "$1" && shift && "$@"' _ "$NL" "${NL_ENV[@]}" bash -e doc-block-3
else
  fail "new lesson: $NL_DOC's second block is a test file" "" "its first line does not name tests/lesson_NN.sh"
fi
for nl_n in 1 2 3; do rm -f "$NL/doc-block-$nl_n"; done
# the main file uses the folder's piece too: it links only with piece.c, and
# an exercise's copy, elsewhere, still finds "piece.h"
printf '\n#include "piece.h"\nint dp_copy_piece(void) { return piece_answer(); }\n' >>"$NL/90_dp_copy/dp_copy.c"
cp tests/exercises/05_dp.txt "$NL/tests/exercises/90_dp_copy.txt"
cat >"$NL/90_dp_copy/piece.h" <<'EOF'
int piece_answer(void);
EOF
cat >"$NL/90_dp_copy/piece.c" <<'EOF'
#include "piece.h"
int piece_answer(void) { return 42; }
EOF
cat >"$NL/91_probe/extra.c" <<'EOF'
int extra_twice(int x) { return 2 * x; }
EOF
cat >"$NL/91_probe/probe.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>

#include "90_dp_copy/piece.h"

int extra_twice(int x);

int main(int argc, char **argv) {
  int rank = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0)
    printf("91_probe\na lesson of two files using a piece of another lesson\n"
           "probe: piece %d, extra %d\nCHECK PASSED: linked\n", piece_answer(), extra_twice(21));
  MPI_Finalize();
  return 0;
}
EOF

if ! grep -q '"90_dp_copy"' "$NL/90_dp_copy/dp_copy.c"; then
  fail "new lesson: the copy renames its lesson" "" \
    "05_dp/dp.c no longer names itself \"05_dp\": update docs/adding-a-lesson.md"
fi
TEST_TIMEOUT=$NL_LIMIT check "new lesson: make lesson-90 lesson-91 builds two unregistered folders" 0 0 \
  '90_dp_copy/piece\.o .*-o (\./)?90_dp_copy/dp_copy\b' '90_dp_copy/piece\.o .*91_probe/extra\.o .*-o (\./)?91_probe/probe\b' \
  -- "${NL_MAKE[@]}" -j"$CORES" lesson-90 lesson-91
TEST_TIMEOUT=$NL_LIMIT check "new lesson: make run-90 NP=2 runs the copy's own check" 0 0 '^90_dp_copy \| backend ' \
  '^CHECK PASSED' -- "${NL_MAKE[@]}" run-90 NP=2 ARGS="--steps 3"
TEST_TIMEOUT=$NL_LIMIT check "new lesson: 91_probe links its second file and 90's piece" 2 0 '^probe: piece 42, extra 42$' \
  -- "$NL/91_probe/probe"
TEST_TIMEOUT=$NL_LIMIT check "new lesson: make tour runs both" 0 0 '^90_dp_copy +.* PASSED ' '^91_probe +a lesson of two files.* PASSED ' \
  -- "${NL_MAKE[@]}" tour NP=2
TEST_TIMEOUT=$NL_LIMIT check "new lesson: make -s print-lesson-objs-91 names the piece, the extension and main" 0 0 \
  "^build/${BACKEND:-cpu}/90_dp_copy/piece\.o build/${BACKEND:-cpu}/91_probe/extra\.o build/${BACKEND:-cpu}/91_probe/probe\.o\$" \
  -- "${NL_MAKE[@]}" -s print-lesson-objs-91
TEST_TIMEOUT=$NL_LIMIT check "new lesson: make check-90 links the exercise's copy with the folder's piece.c" 0 0 \
  '^PASS  np=' '^1 checks: 1 passed, 0 failed' \
  -- env EXERCISE_DIR=. EXERCISE_FIRST=1 "${NL_MAKE[@]}" -s check-90
TEST_TIMEOUT=$NL_LIMIT check "new lesson: make exercise-90 writes the workspace" 0 0 'exercise 90: ' \
  -- env EXERCISE_DIR=ws "${NL_MAKE[@]}" -s exercise-90
TEST_TIMEOUT=$NL_LIMIT check "new lesson: the untouched exercise-90 builds, then fails its check" 0 nonzero \
  '^FAIL  np=.*got: ' '^1 checks: 0 passed, 1 failed' \
  -- env EXERCISE_DIR=ws EXERCISE_FIRST=1 "${NL_MAKE[@]}" -s check-90
rm -rf "$NL"
