#!/usr/bin/env bash
# C sources compiled (not linked) by GCC for arm64 at the Makefile's
# optimisation, on this machine: every one of the tree's, or the files
# given. Debian 12's GCC 12.2 for arm64 stops with an internal compiler
# error where the x86 one does not (an fmax reduction over floats widened to
# double, vectorized at -O3), and make test-arm64 finds that only after an
# emulated root and a 10-minute build. Needs aarch64-linux-gnu-gcc
# (apt-get install gcc-aarch64-linux-gnu); the host's MPI and BLAS headers
# stand in for arm64's (only their declarations are read). Prints each file
# that fails with its first lines; exit 1 if any does.
set -u
cd "$(dirname "$0")/.." || exit 2
CROSS=${CROSS_CC:-aarch64-linux-gnu-gcc}
# the host's BLAS headers, each as the host compiler finds it, in a folder
# of their own (its multiarch include folder would bring x86's libc headers)
BLAS_INC=build/cross-arm64-include
rm -rf "$BLAS_INC" && mkdir -p "$BLAS_INC"
# shellcheck disable=SC2086 # the flags split into words
for h in $(echo '#include <cblas.h>' | cc ${BLAS_CFLAGS:-} -M -x c - 2>/dev/null | tr ' ' '\n' |
  grep -E '/(cblas|openblas|f77blas)[^/]*\.h$'); do ln -sf "$h" "$BLAS_INC/"; done
INCS="$(mpicc --showme:incdirs 2>/dev/null | sed 's/[^ ][^ ]*/-I&/g') -I$BLAS_INC"
export CROSS INCS
compile() { # shellcheck disable=SC2086 # the flags split into words
  out=$("$CROSS" -O3 -funroll-loops -std=c11 -Wall -Wextra -I. -Icommon/comm -Icommon/train \
    -Itests $INCS -c "$1" -o /dev/null 2>&1) || { printf 'FAIL %s\n%s\n' "$1" "$(printf '%s\n' "$out" | grep -m 3 -E 'error|during')"; exit 1; }
}
export -f compile
files=("$@")
if [ $# = 0 ]; then while IFS= read -r f; do files+=("$f"); done < <(git ls-files '*.c'); fi
printf '%s\n' "${files[@]}" | xargs -P "${CORES:-2}" -n 1 bash -c 'compile "$0"'
rc=$?
[ $rc = 0 ] && echo "${#files[@]} sources compiled by $($CROSS --version | head -n 1)"
exit $((rc != 0))
