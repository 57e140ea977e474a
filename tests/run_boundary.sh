#!/usr/bin/env bash
# `make test-boundary`: every lesson's own suite (tests/lesson_NN.sh) with the
# cpu backend in its device-boundary mode (DT_DEVICE_BOUNDARY=1, docs/gpu.md,
# "The device boundary on the cpu"): the same checks, dt_alloc's memory out of
# the host's reach outside the backend's kernels, copies and collectives. All
# but 13's, whose --verify judges measured step times against its cost model,
# which the mode's switches of the arena distort (13's tour and its --measure
# of 14's kernels run in the mode in make test: tests/suite_boundary.sh).
# Ends with "N passed, N failed" (exit 1 if any failed).
set -u
cd "$(dirname "$0")/.."
if [ "${BACKEND:-cpu}" != cpu ]; then
  echo "make test-boundary: the cpu backend's mode (this build: ${BACKEND}; the GPU enforces it)"
  exit 0
fi
export DT_DEVICE_BOUNDARY=1
LOGS=${LOGS:-build/test-logs-boundary}
source tests/lib.sh
for f in tests/lesson_[0-9][0-9].sh; do
  if [ "$f" = tests/lesson_13.sh ]; then
    echo "SKIP $f: its --verify times steps against the cost model, which the mode's switches distort"
    continue
  fi
  source "$f"
done
summary
