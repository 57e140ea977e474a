#!/usr/bin/env bash
# The driver behind `make test`. It runs, each under a timeout:
#   - the unit tests of common (tests/test_*.c) at several NP,
#   - every lesson's own checks (tests/lesson_NN.sh, one file per lesson),
#   - a compile and link of the cuda backend whenever nvcc exists, and then
#     the checks of tests/cuda_build.sh that need no GPU,
# and ends with the line "N passed, N failed" (exit 1 if any failed).
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh

for t in tests/test_*.c; do
  bin=${t%.c}
  for np in 1 2 3 4; do check "unit $(basename "$bin") np=$np" "$np" 0 'UNIT PASSED' -- "./$bin"; done
done

for f in tests/lesson_[0-9][0-9].sh tests/suite_*.sh; do
  [ -f "$f" ] && source "$f"
done

# The cuda backend must compile and link wherever nvcc is, GPU or not. Its
# binaries go to their own folder so they never replace the ones tested here.
if [ -n "${NVCC:-}" ] && [ "${BACKEND:-cpu}" != cuda ]; then
  if with_timeout 900 ${MAKE:-make} -s BACKEND=cuda BIN_DIR=build/cuda/bin all >"$LOGS/cuda-build.log" 2>&1 \
     && ! grep -qi "warning" "$LOGS/cuda-build.log"; then
    pass "cuda backend compiles and links without warnings"
    source tests/cuda_build.sh
  else
    fail "cuda backend compiles and links without warnings" "$LOGS/cuda-build.log"
  fi
else
  echo "SKIP cuda compile: ${NVCC:+already the main backend}${NVCC:-nvcc not found}"
fi

summary
