#!/usr/bin/env bash
# The checks of `make test-arm64` (tests/run_arm64.sh), run on arm64: inside
# the emulated Debian root, or natively on an ARM machine. The project built
# with the distribution's compiler without a warning; the unit tests at NP 2;
# every lesson at NP 2 and 4 (ARM64_NP) to CHECK PASSED; then the kernel x
# seed matrix of tests/suite_kernels.sh over OpenBLAS's ARM kernels (KERNELS,
# KERNEL_SEEDS; ARM64_MATRIX=0: not run). Emulation is slow: each run gets
# TEST_TIMEOUT (900 s).
set -u
cd "$(dirname "$0")/.." || exit 2
export TEST_TIMEOUT=${TEST_TIMEOUT:-900}
source tests/lib.sh
ARM64_NP=${ARM64_NP:-2 4}
KERNEL_SEEDS=${KERNEL_SEEDS:-1 2}
t0=$(now)
elapsed() { awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }

cc_version=$(cc --version | head -n 1)
echo "arm64: $(uname -m), $cc_version, $(ls /usr/lib/*/libopenblas*.so.0 2>/dev/null | head -n 1)"
build_log=$LOGS/arm64-build.log
if with_timeout 3600 make -j"$CORES" BACKEND=cpu all >"$build_log" 2>&1; then
  if grep -qiE 'warning|internal compiler error' "$build_log"; then
    fail "arm64: make builds warning-free ($cc_version)" "$build_log"
  else
    pass "arm64: make builds every lesson and test warning-free ($cc_version, $(elapsed) s)"
  fi
else
  fail "arm64: make builds ($cc_version)" "$build_log"
  summary; exit
fi

for t in tests/test_*.c; do
  check "arm64 unit $(basename "${t%.c}") np=2" 2 0 'UNIT PASSED' -- "./${t%.c}"
done
for dir in [0-9][0-9]_*/; do
  dir=${dir%/}
  flags=$(cat "$dir/tour.flags" 2>/dev/null)
  # 14 for 10 steps (the kernel matrix's), not the tour's 30: every step is still
  # compared with one process, and its run was the longest here (a fifth of the
  # lessons' and unit tests' time at NP 2, natively)
  [ "$dir" = 14_gpt ] && flags="--steps 10"
  for np in $ARM64_NP; do
    # shellcheck disable=SC2086 # tour.flags: a short run of a lesson whose defaults train for a minute
    check "arm64 $dir np=$np" "$np" 0 '^CHECK PASSED' -- "./$dir/${dir#*_}" $flags
  done
done
echo "arm64: lessons done after $(elapsed) s"
if [ "${ARM64_MATRIX:-1}" = 0 ]; then echo "SKIP kernel matrix (ARM64_MATRIX=0)"; else source tests/suite_kernels.sh; fi
echo "arm64: all done after $(elapsed) s"
summary
