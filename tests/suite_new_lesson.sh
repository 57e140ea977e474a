# Adding a lesson is copying a folder (README, "Adding a lesson"), sourced by
# tests/run_tests.sh. In a throwaway copy of the build files, common/ and
# 05_dp/ (never in this tree), two new lessons nobody registers anywhere:
#   10_dp_copy/  05_dp copied, dp.c renamed dp_copy.c and its name changed,
#                plus piece.c/piece.h: a second .c of the folder, and a piece
#                another lesson uses;
#   11_probe/    probe.c (main), extra.c (a second file) and
#                #include "10_dp_copy/piece.h" (the piece of another lesson).
# make lesson-10 and lesson-11 must build them, make run-10 run 10_dp_copy's
# own check at NP=2, 11_probe print what its extension and the piece return
# (it links only if both were linked), make tour list both, and make check-10
# link the lesson, and the exercise's copy of it, with piece.c.
NL_LIMIT=${NL_LIMIT:-300} # seconds for each make
NL=$(mktemp -d "${TMPDIR:-/tmp}/dt-new-lesson.XXXXXX")
# the copy's own make, not the one running make test (its MAKEFLAGS and
# command-line variables would leak in)
NL_MAKE=(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$NL" --no-print-directory "BACKEND=${BACKEND:-cpu}")

mkdir -p "$NL/tools" "$NL/tests/exercises" "$NL/10_dp_copy" "$NL/11_probe"
cp -r Makefile common "$NL/"
cp tools/find_nccl.sh "$NL/tools/"
cp tests/lib.sh tests/tour.sh tests/exercise.sh tests/*.h "$NL/tests/"
cp 05_dp/*.c "$NL/10_dp_copy/"
cp 05_dp/*.h "$NL/10_dp_copy/" 2>/dev/null
mv "$NL/10_dp_copy/dp.c" "$NL/10_dp_copy/dp_copy.c"
# README's step: the lesson's name and its includes of its own folder
sed_inplace 's/"05_dp\([/"]\)/"10_dp_copy\1/g' "$NL/10_dp_copy/"*.[ch]
# the earlier lessons whose pieces it includes come along (they are lessons
# of the copy too)
for used in $(sed -n 's|^#include "\([0-9][0-9]_[^/"]*\)/.*|\1|p' "$NL/10_dp_copy/"*.[ch] | sort -u); do
  [ "$used" = 10_dp_copy ] || { mkdir -p "$NL/$used" && cp "$used"/*.[ch] "$NL/$used/"; }
done
# the main file uses the folder's piece too: it links only with piece.c, and
# an exercise's copy, elsewhere, still finds "piece.h"
printf '\n#include "piece.h"\nint dp_copy_piece(void) { return piece_answer(); }\n' >>"$NL/10_dp_copy/dp_copy.c"
cp tests/exercises/05_dp.txt "$NL/tests/exercises/10_dp_copy.txt"
cat >"$NL/10_dp_copy/piece.h" <<'EOF'
int piece_answer(void);
EOF
cat >"$NL/10_dp_copy/piece.c" <<'EOF'
#include "piece.h"
int piece_answer(void) { return 42; }
EOF
cat >"$NL/11_probe/extra.c" <<'EOF'
int extra_twice(int x) { return 2 * x; }
EOF
cat >"$NL/11_probe/probe.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>

#include "10_dp_copy/piece.h"

int extra_twice(int x);

int main(int argc, char **argv) {
  int rank = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0)
    printf("11_probe\na lesson of two files using a piece of another lesson\n"
           "probe: piece %d, extra %d\nCHECK PASSED: linked\n", piece_answer(), extra_twice(21));
  MPI_Finalize();
  return 0;
}
EOF

if ! grep -q '"10_dp_copy"' "$NL/10_dp_copy/dp_copy.c"; then
  fail "new lesson: the copy renames its lesson" "" \
    "05_dp/dp.c no longer names itself \"05_dp\": update tests/suite_new_lesson.sh and README's \"Adding a lesson\""
fi
TEST_TIMEOUT=$NL_LIMIT check "new lesson: make lesson-10 lesson-11 builds two unregistered folders" 0 0 \
  '10_dp_copy/piece\.o .*-o (\./)?10_dp_copy/dp_copy\b' '10_dp_copy/piece\.o .*11_probe/extra\.o .*-o (\./)?11_probe/probe\b' \
  -- "${NL_MAKE[@]}" -j"$CORES" lesson-10 lesson-11
TEST_TIMEOUT=$NL_LIMIT check "new lesson: make run-10 NP=2 runs the copy's own check" 0 0 '^10_dp_copy \| backend ' \
  '^CHECK PASSED' -- "${NL_MAKE[@]}" run-10 NP=2 ARGS="--steps 3"
TEST_TIMEOUT=$NL_LIMIT check "new lesson: 11_probe links its second file and 10's piece" 2 0 '^probe: piece 42, extra 42$' \
  -- "$NL/11_probe/probe"
TEST_TIMEOUT=$NL_LIMIT check "new lesson: make tour runs both" 0 0 '^10_dp_copy +.* PASSED ' '^11_probe +a lesson of two files.* PASSED ' \
  -- "${NL_MAKE[@]}" tour NP=2
TEST_TIMEOUT=$NL_LIMIT check "new lesson: make -s print-lesson-objs-11 names the piece, the extension and main" 0 0 \
  "^build/${BACKEND:-cpu}/10_dp_copy/piece\.o build/${BACKEND:-cpu}/11_probe/extra\.o build/${BACKEND:-cpu}/11_probe/probe\.o\$" \
  -- "${NL_MAKE[@]}" -s print-lesson-objs-11
TEST_TIMEOUT=$NL_LIMIT check "new lesson: make check-10 links the exercise's copy with the folder's piece.c" 0 0 \
  '^PASS  np=' '^1 checks: 1 passed, 0 failed' \
  -- env EXERCISE_DIR=. EXERCISE_FIRST=1 "${NL_MAKE[@]}" -s check-10
TEST_TIMEOUT=$NL_LIMIT check "new lesson: make exercise-10 writes the workspace" 0 0 'exercise 10: ' \
  -- env EXERCISE_DIR=ws "${NL_MAKE[@]}" -s exercise-10
TEST_TIMEOUT=$NL_LIMIT check "new lesson: the untouched exercise-10 builds, then fails its check" 0 nonzero \
  '^FAIL  np=.*got: ' '^1 checks: 0 passed, 1 failed' \
  -- env EXERCISE_DIR=ws EXERCISE_FIRST=1 "${NL_MAKE[@]}" -s check-10
rm -rf "$NL"
