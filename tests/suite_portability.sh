# Portability (sourced by run_tests.sh): what macOS and ARM64 Linux need that
# this x86-64 Linux machine can check without them (docs/platforms.md).
#  - the scripts that make tour, make test and make check-N run use nothing
#    bash 3.2 (macOS's bash) or BSD tools lack (tests/portability.sh), and the
#    check is shown to report each construct of tests/portability_planted.txt;
#  - with_timeout's perl fallback (macOS has no timeout) keeps GNU timeout's
#    contract: 124, 137, the command's own status, the whole group stopped;
#  - every C source builds warning-free with clang (macOS's compiler) at
#    -D_POSIX_C_SOURCE=200809L without _GNU_SOURCE: no glibc extension.
PT=build/test-portability
rm -rf "$PT"; mkdir -p "$PT"
pt_scripts=()
for f in tests/*.sh tools/cluster.sh tools/find_nccl.sh; do
  [ "$f" = tests/portability.sh ] || pt_scripts+=("$f") # it quotes what it looks for
done
check "portability: ${#pt_scripts[@]} scripts use nothing bash 3.2 or BSD tools lack" 0 0 \
  '^portability: [0-9]+ scripts, nothing' -- bash tests/portability.sh "${pt_scripts[@]}"

# --- the check reports each planted construct, by its line, and nothing else ---
# tests/portability_planted.txt: one construct a line; the lines after
# "# clean" are portable forms and constructs in comments, not to be reported
pt_planted=tests/portability_planted.txt
pt_want=$(($(grep -n '^# clean$' "$pt_planted" | cut -d: -f1) - 1))
bash tests/portability.sh "$pt_planted" >"$LOGS/portability-planted.log" 2>&1
pt_rc=$?
pt_lines=$(sed -n "s|^$pt_planted:\([0-9]*\):.*|\1|p" "$LOGS/portability-planted.log" | sort -n | uniq)
pt_missed=""
for i in $(seq "$pt_want"); do
  printf '%s\n' "$pt_lines" | grep -qx "$i" || pt_missed="$pt_missed $i:$(sed -n "${i}p" "$pt_planted")"
done
pt_extra=$(printf '%s\n' "$pt_lines" | awk -v w="$pt_want" '$1 > w' | tr '\n' ' ')
if [ $pt_rc -eq 1 ] && [ -z "$pt_missed" ] && [ -z "$pt_extra" ]; then
  pass "portability: the check reports each of $pt_want planted constructs and none of the portable lines"
else
  fail "portability: the check reports each planted construct" "$LOGS/portability-planted.log" \
    "exit $pt_rc (want 1); missed:${pt_missed:- none}; reported portable lines: ${pt_extra:-none}"
fi

# --- with_timeout's fallback (DT_TIMEOUT=perl), as macOS without coreutils runs it ---
pt_tm='source tests/lib.sh; DT_TIMEOUT=perl'
check "portability: with_timeout (perl) passes the command's exit code" 0 3 -- \
  bash -c "$pt_tm with_timeout 10 sh -c 'exit 3'"
check "portability: with_timeout (perl) stops a long command with 124 in about its limit" 0 0 \
  '^rc=124 took=[12]$' -- \
  bash -c "$pt_tm; t=\$(date +%s); with_timeout 1 sleep 30; rc=\$?; echo rc=\$rc took=\$((\$(date +%s) - t))"
check "portability: with_timeout (perl) -k kills what ignores TERM, with 137" 0 0 '^rc=137$' -- \
  bash -c "$pt_tm with_timeout -k 1 1 sh -c 'trap \"\" TERM; sleep 30; sleep 30'; echo rc=\$?"
# the group, not only the child: a grandchild (as mpirun's ranks are) goes too
pt_mark="sleep 31$$"
check "portability: with_timeout (perl) stops the command's children too" 0 0 '^left=0$' -- \
  bash -c "$pt_tm with_timeout 1 sh -c '$pt_mark & wait'; sleep 0.5; echo left=\$((\$(pgrep -f '^$pt_mark\$' | wc -l)))"

# --- the C sources with clang, POSIX only ---
if ! command -v clang >/dev/null 2>&1; then
  echo "SKIP portability: clang build (clang not found; apt-get install clang)"
elif [ "${BACKEND:-cpu}" != cpu ]; then
  echo "SKIP portability: clang build (the cpu backend's sources; this run: ${BACKEND})"
else
  # no source asks for glibc's extensions (then the flags below would not
  # be what it is built with)
  check "portability: no C source defines _GNU_SOURCE" 0 1 -- \
    grep -rl --include='*.c' --include='*.h' _GNU_SOURCE common tests [0-9][0-9]_*
  pt_mpi=$(${MPICC:-mpicc} --showme:compile 2>/dev/null || ${MPICC:-mpicc} -show 2>/dev/null | cut -d' ' -f2-)
  check "portability: every C source builds with clang -D_POSIX_C_SOURCE=200809L, no warning" 0 0 \
    '^built [0-9]+ sources, 0 warnings$' -- bash -c '
    n=0; out=$1; shift
    for f in common/*/*.c [0-9][0-9]_*/*.c tests/*.c; do
      clang -std=c11 -D_POSIX_C_SOURCE=200809L -U_GNU_SOURCE -O2 -Wall -Wextra -I. -Icommon/comm \
        -Icommon/train -Itests "$@" -c "$f" -o "$out/clang.o" || { echo "failed: $f"; exit 1; }
      n=$((n + 1))
    done 2>"$out/clang.log"
    cat "$out/clang.log"
    echo "built $n sources, $(grep -c "warning:" "$out/clang.log") warnings"' _ "$PT" $pt_mpi
fi

# --- every C source against musl (Alpine, container images): C11 + POSIX, no glibc ---
# musl-gcc puts musl's headers in place of glibc's (-nostdinc), so the MPI and
# BLAS headers must come by their own folders: MPI's (mpicc --showme) hold no
# libc header and are named as they are; cblas.h sits in the multiarch folder
# beside glibc's own sys/ and bits/, so only it and the headers it includes
# by quotes are linked into a folder of their own. The cpu backend's sources
# (the cuda ones need the CUDA headers, which are glibc's).
if ! command -v musl-gcc >/dev/null 2>&1; then
  if [ "${CI:-}" = true ]; then # CI installs it (.ci/run): a skip there would hide a glibc-only call
    fail "portability: musl-gcc is installed in CI" "" "apt-get install musl-tools (.ci/run) did not provide it"
  else
    echo "SKIP portability: musl build (musl-gcc not found; apt-get install musl-tools: .ci/run does)"
  fi
elif [ "${BACKEND:-cpu}" != cpu ]; then
  echo "SKIP portability: musl build (the cpu backend's sources; this run: ${BACKEND})"
else
  pt_cblas=$(echo '#include <cblas.h>' | cc ${BLAS_CFLAGS:-} -E -x c - 2>/dev/null |
    sed -n 's/^# [0-9]* "\(.*\/cblas\.h\)".*/\1/p' | head -n 1)
  mkdir -p "$PT/musl-include"
  if [ -n "$pt_cblas" ]; then
    ln -sf "$pt_cblas" "$PT/musl-include/cblas.h"
    for h in $(sed -n 's/^#include "\(.*\)"/\1/p' "$pt_cblas"); do ln -sf "$(dirname "$pt_cblas")/$h" "$PT/musl-include/$h"; done
  fi
  pt_musl() { # FILE...: -fsyntax-only each, then "checked N sources, W warnings"
    local n=0 f rc=0
    : >"$PT/musl.log"
    for f in "$@"; do
      musl-gcc -std=c11 -fsyntax-only -Wall -Wextra -Werror=implicit-function-declaration -I. \
        -Icommon/comm -Icommon/train -Itests $pt_mpi -I"$PT/musl-include" "$f" 2>>"$PT/musl.log" ||
        { echo "failed: $f"; rc=1; }
      n=$((n + 1))
    done
    cat "$PT/musl.log"
    echo "checked $n sources, $(grep -c "warning:" "$PT/musl.log") warnings"
    return $rc
  }
  pt_mpi=$(${MPICC:-mpicc} --showme:compile 2>/dev/null || ${MPICC:-mpicc} -show 2>/dev/null | cut -d' ' -f2-)
  pt_sources=(common/*/*.c [0-9][0-9]_*/*.c tests/*.c tests/fuzz/*.c)
  check "portability: every C source (${#pt_sources[@]}) compiles against musl (musl-gcc -fsyntax-only), no warning" 0 0 \
    '^checked [0-9]+ sources, 0 warnings$' -- bash -c "$(declare -f pt_musl); PT=$PT pt_mpi='$pt_mpi'; pt_musl \"\$@\"" _ "${pt_sources[@]}"
  # and the check fails on a glibc-only call: memory.c's mallopt, unguarded
  printf '#include <malloc.h>\nvoid f(void) { mallopt(M_MMAP_THRESHOLD, 1 << 26); }\n' >"$PT/glibc_only.c"
  check "portability: the musl check fails on glibc's mallopt" 0 1 "glibc_only.c:.*mallopt" -- \
    bash -c "$(declare -f pt_musl); PT=$PT pt_mpi='$pt_mpi'; pt_musl \"\$@\"" _ "$PT/glibc_only.c"
fi

# --- a Windows checkout (core.autocrlf=true, Git for Windows' default), used from WSL2 ---
# .gitattributes keeps the text LF: a clone made so (of the committed HEAD,
# not of uncommitted changes) has no CR in a tracked text file, every script
# parses, and lesson 01 builds and passes its check there through tests/tour.sh.
# Then, to show the check can fail: tests/lib.sh checked out again in that
# clone without .gitattributes gets CRs, and bash -n stops on it.
if ! git rev-parse --verify -q HEAD >/dev/null 2>&1; then
  echo "SKIP portability: CRLF clone (this tree is not a git checkout with a commit)"
else
  pt_crlf=$PT/crlf
  rm -rf "$pt_crlf"
  check "portability: git -c core.autocrlf=true clone of HEAD" 0 0 -- \
    git -c core.autocrlf=true clone -q --no-local "$PWD" "$pt_crlf"
  check "portability: the CRLF-configured clone has no CR in any tracked text file" 0 0 '^crlf files: 0$' -- \
    bash -c 'cd "$1" && n=$(git -c core.autocrlf=true ls-files --eol | awk "\$2 ~ /crlf|mixed/" | tee /dev/stderr | wc -l) && echo "crlf files: $((n))"' _ "$pt_crlf"
  check "portability: every script of the CRLF-configured clone parses (bash -n)" 0 0 '^parsed [0-9]+ scripts$' -- \
    bash -c 'cd "$1" && n=0 && for f in tests/*.sh tools/*.sh tools/gpu-node/*.sh bench/*.sh .ci/run; do bash -n "$f" || exit 1; n=$((n + 1)); done && echo "parsed $n scripts"' _ "$pt_crlf"
  TEST_TIMEOUT=300 check "portability: in the CRLF-configured clone lesson 01 builds and passes through tests/tour.sh" 0 0 \
    '^01_send_recv +.* PASSED ' -- bash -c 'cd "$1" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s BACKEND=cpu lesson-1 >/dev/null &&
      NP=2 MPIRUN_FLAGS="$([ "$(id -u)" = 0 ] && echo --allow-run-as-root)" bash tests/tour.sh 01_send_recv/send_recv' _ "$pt_crlf"
  check "portability: without .gitattributes the same checkout has CRs, and bash -n fails" 0 0 'syntax error' -- \
    bash -c 'cd "$1" && git rm -q .gitattributes && rm tests/lib.sh && git -c core.autocrlf=true checkout -- tests/lib.sh &&
      ! bash -n tests/lib.sh' _ "$pt_crlf"
  rm -rf "$pt_crlf"
fi
