#!/usr/bin/env bash
# Reliability (sourced by run_tests.sh): a rank killed mid-training must end
# the job with a non-zero exit within a bounded time, never a hang.
#
# The bound: Open MPI's mpirun notices a child's death at once (SIGCHLD) and
# kills the other ranks; we allow DEAD_RANK_BOUND seconds for all of it.
DEAD_RANK_BOUND=${DEAD_RANK_BOUND:-20}
# Time allowed to reach the first step: CUDA start-up (context, cuBLAS, NCCL's
# bootstrap, on one GPU shared by every rank) takes seconds where MPI alone
# takes a fraction of one.
START_BOUND=${START_BOUND:-$([ "${BACKEND:-cpu}" = cuda ] && echo 60 || echo 10)}

dead_rank_test() {
  local np=$1 victim=$2 name="a rank killed mid-training ends the job np=$1 (rank $2 killed)"
  local log="$LOGS/dead-rank-np$np-$victim.log" tag=$((RANDOM * 32768 + RANDOM))
  : >"$log" # an old log must not look like a started run
  # --seed is a unique tag, so we kill our own ranks and nobody else's
  $(mpirun_cmd "$np") ./05_dp/dp --steps 1000000 --no-check --seed "$tag" >"$log" 2>&1 &
  local launcher=$!
  local started=""
  for _ in $(seq $((START_BOUND * 10))); do # wait until it trains
    grep -q '^step' "$log" 2>/dev/null && { started=1; break; }
    sleep 0.1
  done
  local pids=($(pgrep -f -- "^./05_dp/dp --steps 1000000 --no-check --seed $tag\$" | sort -n))
  if [ -z "$started" ] || [ ${#pids[@]} -ne "$np" ]; then
    kill -9 $launcher "${pids[@]}" 2>/dev/null; wait $launcher 2>/dev/null
    fail "$name" "$log" "did not start training with $np ranks within ${START_BOUND}s (found ${#pids[@]} processes)"
    return
  fi
  local t0=$(date +%s.%N)
  kill -9 "${pids[$victim]}"
  local rc=0 waited=0
  while kill -0 $launcher 2>/dev/null && [ $waited -lt $((DEAD_RANK_BOUND * 10)) ]; do
    sleep 0.1; waited=$((waited + 1))
  done
  if kill -0 $launcher 2>/dev/null; then
    kill -9 $launcher "${pids[@]}" 2>/dev/null; wait $launcher 2>/dev/null
    fail "$name" "$log" "still running ${DEAD_RANK_BOUND}s after the kill: a hang"
    return
  fi
  wait $launcher; rc=$?
  local took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  local left=$(pgrep -f -- "--seed $tag\$" | wc -l)
  if [ $rc -ne 0 ] && [ "$left" -eq 0 ]; then
    pass "$name: exit $rc after ${took}s, no process left"
  else
    fail "$name" "$log" "exit $rc, $left processes left"
  fi
}

dead_rank_test 2 1
dead_rank_test 4 2
dead_rank_test 4 0

# A collective that never completes (rank 0 never joins): the other ranks
# sit inside a blocking MPI_Allreduce, where only the watchdog thread can see
# them. It must name the call and end the job with exit 3, well within the
# test's own timeout.
check "watchdog ends a hung collective np=3" 3 3 \
  'watchdog: rank [12] stuck for 2 s in all_reduce #1 on the world communicator \(1 elements\), called from tests/test_common.c:[0-9]+' \
  -- ./tests/test_common --hang --timeout 2
