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
  local t0=$(now)
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
  local took=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
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

# A rank stopped (SIGSTOP: a swapped-out, preempted or debugger-held process)
# never dies, so mpirun sees nothing: the other ranks wait in whatever
# blocking call comes next (a collective, the loss all-reduce, the final
# check, MPI_Finalize). Each is watched, so the job must end within --timeout
# plus a few seconds, naming a rank and the call, with a non-zero exit.
# WHEN is a pattern of the run's output that says the moment to stop it.
STOPPED_BOUND=${STOPPED_BOUND:-30}
stopped_rank_test() {
  local np=$1 victim=$2 when=$3 want=$4 label=$5; shift 5
  local name="a rank stopped $label ends the job np=$np (rank $victim stopped)"
  local tag=$((RANDOM * 32768 + RANDOM)) log="$LOGS/stopped-rank-$np-$victim-${label// /_}.log"
  : >"$log"
  $(mpirun_cmd "$np") "$@" --timeout 2 --seed "$tag" >"$log" 2>&1 &
  local launcher=$! started=""
  for _ in $(seq 300); do # up to 30 s
    grep -Eq -- "$when" "$log" 2>/dev/null && { started=1; break; }
    kill -0 $launcher 2>/dev/null || break
    sleep 0.1
  done
  local pids=($(pgrep -f -- "--timeout 2 --seed $tag\$" | grep -vx "$launcher" | sort -n))
  if [ -z "$started" ] || [ ${#pids[@]} -ne "$np" ]; then
    kill -9 $launcher "${pids[@]}" 2>/dev/null; wait $launcher 2>/dev/null
    fail "$name" "$log" "did not reach /$when/ with $np ranks (found ${#pids[@]} processes)"
    return
  fi
  kill -STOP "${pids[$victim]}"
  local t0=$(now) waited=0
  while kill -0 $launcher 2>/dev/null && [ $waited -lt $((STOPPED_BOUND * 10)) ]; do
    sleep 0.1; waited=$((waited + 1))
  done
  local hung=""
  kill -0 $launcher 2>/dev/null && hung=1
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  kill -9 $launcher 2>/dev/null; wait $launcher; local rc=$?
  local took=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  if [ -n "$hung" ]; then fail "$name" "$log" "still running ${STOPPED_BOUND}s after the stop: a hang"; return; fi
  if [ $rc -ne 0 ] && grep -Eq -- "$want" "$log"; then
    pass "$name: exit $rc after ${took}s, $(grep -E -m1 -- "$want" "$log" | cut -c1-150)"
  else
    fail "$name" "$log" "exit $rc, or no line matching /$want/"
  fi
}

# mid-training: the others wait in a gradient collective or the loss all-reduce
stopped_rank_test 2 1 '^step +20/' 'watchdog: rank 0 stuck for 2 s in (all_reduce|MPI_Allreduce)' \
  "mid-training" ./05_dp/dp --steps 1000000 --no-check
stopped_rank_test 3 0 '^step +20/' 'watchdog: rank [12] stuck for 2 s in ' \
  "mid-training" ./06_fsdp/fsdp --steps 1000000 --no-check --batch 24
stopped_rank_test 2 1 '^step +20/' 'watchdog: rank 0 stuck for 2 s in (sendrecv|MPI_)' \
  "mid-training" ./09_pp/pp --steps 1000000 --no-check --microbatches 2
stopped_rank_test 2 0 '^step +20/' 'watchdog: rank 1 stuck for 2 s in ' \
  "mid-training" ./08_fsdp_tp/fsdp_tp --steps 1000000 --no-check
# rank 0 stopped while it checkpoints every step (the others wait for it in
# the loss all-reduce); the manifest still names a complete checkpoint
rm -rf build/test-stop-ck
stopped_rank_test 2 0 '^checkpoint: step 20 ' 'watchdog: rank 1 stuck for 2 s in ' \
  "while checkpointing" ./05_dp/dp --steps 1000000 --no-check --ckpt build/test-stop-ck --save-every 1
stop_at=$(sed -n 's/^step-0*\([0-9]*\)\.safetensors$/\1/p' build/test-stop-ck/latest 2>/dev/null)
stop_seed=$(head -c 2000 "build/test-stop-ck/step-$(printf %08d "${stop_at:-0}").safetensors" 2>/dev/null |
  grep -ao '"seed":"[0-9]*"' | grep -oE '[0-9]+') # the run's tag, which resume must match
check "a rank stopped while checkpointing: its checkpoint resumes" 2 0 "resume: step ${stop_at:-none} " \
  -- ./05_dp/dp --no-check --ckpt build/test-stop-ck --resume --steps $((${stop_at:-0} + 1)) --seed "${stop_seed:-0}"
rm -rf build/test-stop-ck
# during the final check: rank 0 trains the reference, then waits for rank 1
# in MPI_Finalize
stopped_rank_test 2 1 '^ +activ ' 'watchdog: rank 0 stuck for 2 s in (MPI_Finalize|MPI_Bcast of rank 0.s weights|MPI_Gather of the replica)' \
  "during the final check" ./05_dp/dp --steps 60 --layers 8 --dim 128
# rank 0 stopped while it trains the reference: the others wait for the
# verdict (common/train/check.c), allowed --timeout plus twice N times the run so far
stopped_rank_test 2 0 '^ +activ ' "watchdog: rank 1 stuck for [0-9]+ s in MPI_(Bcast of the check's verdict|Bcast of rank 0's weights|Gather of the replica)" \
  "during the final check" ./05_dp/dp --steps 60 --layers 8 --dim 128

# Hung I/O: a FIFO nobody reads stands in for a stalled file system. Rank 0
# blocks opening it; the watchdog names the file and ends the job.
rm -f build/test-fifo && mkfifo build/test-fifo
check "hung I/O: --trace to a FIFO nobody reads ends the job" 2 nonzero \
  'watchdog: rank 0 stuck for 2 s in writing --trace build/test-fifo' \
  -- ./05_dp/dp --steps 3 --no-check --trace build/test-fifo --timeout 2
rm -f build/test-fifo

# Divergence: a loss that explodes or stops being a number ends training at
# that step, every rank alike, with a message naming divergence and what to
# change, and never reaches a final check that would blame the parallelism.
check "divergence: an exploding loss stops 05 at step 2" 2 2 \
  '^error: training diverged at step 2: the loss is 8\.2[0-9]*e\+06, 8e\+07 times the 0\.104646 of step 1' \
  'lower --lr \(now 100; try 10\), or bound each update with --clip 1' \
  -- ./05_dp/dp --lr 100 --steps 30
check "divergence: a NaN loss stops 05 (AdamW, 16 layers)" 2 2 \
  '^error: training diverged at step 2: the loss is NaN; one process diverges alike \(at step 2, from the run.s own state\): .*lower --lr \(now 100; try 10\)' \
  -- ./05_dp/dp --optimizer adamw --lr 100 --layers 16 --steps 30
check "divergence: 06 zero-1 with prefetch in flight stops cleanly" 2 2 '^error: training diverged at step 2' \
  -- ./06_fsdp/fsdp --zero 1 --prefetch --lr 100
check "divergence: 07 stops" 2 2 '^error: training diverged at step 2' -- ./07_tp/tp --lr 100
check "divergence: 08 stops" 4 2 '^error: training diverged at step 2' -- ./08_fsdp_tp/fsdp_tp --lr 100
check "divergence: 09 in bf16 stops, suggests fp32" 2 2 \
  '^error: training diverged at step 2: .*or train in --precision fp32' \
  -- ./09_pp/pp --microbatches 2 --precision bf16 --lr 100
div_log=$(ls "$LOGS"/divergence__an_exploding_loss_stops_05*.log 2>/dev/null | head -1)
if [ -f "$div_log" ] && grep -q '^step    2/30' "$div_log" && ! grep -q 'CHECK' "$div_log"; then
  pass "divergence: no final check after divergence"
else fail "divergence: no final check after divergence" "$div_log"; fi

# The memory guard respects the job's cgroup limit (what Slurm, Kubernetes or
# Docker set), not only the machine's free memory: past the limit the kernel
# would kill the job without a word. Needs a cgroup we may create (root);
# skipped elsewhere.
cgroup_test() {
  local rel v1=0 root dir
  rel=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3; exit }' /proc/self/cgroup)
  if [ -n "$rel" ]; then v1=1; root=/sys/fs/cgroup/memory; else rel=$(awk -F: '$1 == 0 { print $3 }' /proc/self/cgroup); root=/sys/fs/cgroup; fi
  dir="$root${rel%/}/dt-test-$$"
  local limit_file=memory.max; [ $v1 = 1 ] && limit_file=memory.limit_in_bytes
  if [ "$(id -u)" != 0 ] || ! mkdir "$dir" 2>/dev/null; then echo "SKIP cgroup memory limit: cannot create a cgroup"; return; fi
  if ! echo $((300 << 20)) >"$dir/$limit_file" 2>/dev/null; then rmdir "$dir"; echo "SKIP cgroup memory limit: cannot set $limit_file"; return; fi
  # weights of 0.5 GiB under a 300 MiB limit, on a machine with far more free
  check "memory guard: a model over the cgroup limit is refused" 0 2 \
    "^error: the model needs 0\.50 GiB for its weights alone .*only 0\.[0-9]+ GiB are available \(under the job's cgroup memory limit: .*/dt-test-$$/$limit_file = 0\.29 GiB" \
    -- bash -c "echo \$\$ >'$dir/cgroup.procs' && exec $(mpirun_cmd 2) ./05_dp/dp --layers 64 --dim 1024 --hidden 1024 --steps 1"
  # weights that fit, but weights + gradients do not: dt_alloc's guard says so
  check "memory guard: allocations past the cgroup limit end with a message" 0 nonzero \
    "dt_alloc failed: 0\.16 GiB of grads asked for, only 0\.[01][0-9] GiB available \(under the job's cgroup memory limit" \
    -- bash -c "echo \$\$ >'$dir/cgroup.procs' && exec $(mpirun_cmd 1) ./05_dp/dp --layers 20 --dim 1024 --hidden 1024 --steps 1 --no-check"
  # --dump-data holds every batch on rank 0's host: 0.49 GiB here
  check "memory guard: --dump-data past the cgroup limit is refused" 0 2 \
    "^error: --dump-data: 1000 steps of \[256, 256\] need 0\.49 GiB on rank 0; only 0\.[0-9]+ GiB are available \(under the job's cgroup" \
    -- bash -c "echo \$\$ >'$dir/cgroup.procs' && exec $(mpirun_cmd 2) ./05_dp/dp --steps 1000 --batch 256 --dim 256 --no-check --dump-data build/never.safetensors"
  rmdir "$dir" 2>/dev/null || { sleep 2; rmdir "$dir"; }
}
cgroup_test
