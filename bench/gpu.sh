#!/usr/bin/env bash
# bench/gpu.sh: the whole GPU run in one command, for a GPU machine lent for
# minutes (docs/gpu.md, "Running on a GPU node"). On it, in bash:
#   source tools/gpu-node/env.sh && bash bench/gpu.sh OUTDIR
# Phases, in this order, each under its own timeout, none stopping the next:
#   build      make BACKEND=cuda (warnings counted)
#   lessons    make tour at NP 1, 2 and 4 (NP 1: NCCL; 2 and 4 share the GPU,
#              staged through host memory over MPI)
#   bench      03's all-reduce at NP 1 from 8 B to 1 GiB beside
#              torch.distributed.all_reduce (NCCL, world size 1); 03 at NP 2 and
#              4 (staged); 13_plan --measure (the cuda backend's op times)
#   step       05_dp at NP 1 on L=8 D=1024 H=4096 B=256 beside the same model
#              in PyTorch on the same GPU (fp32, TF32 off), alternated, 3 each
#   ncu        05's kernels, 4 steps, by Nsight Compute: the GEMM share
#   sanitizer  compute-sanitizer memcheck and racecheck on 03, 05, 06, 09 at
#              NP 1, and 03 at NP 2 (GPU_SANITIZERS picks the tools)
#   tests      the lesson suites of make test, in parallel, under one timeout
# Phases named in GPU_PHASES (default all of them) run; GPU_DEADLINE (seconds
# from the start, default 500) skips a phase that would begin after it;
# GPU_TESTS_S bounds each test suite (default: what is left to DEADLINE + 120
# s). Each
# phase writes OUTDIR/<phase>.log; OUTDIR/summary.txt gathers the verdicts.
set -u
cd "$(dirname "$0")/.."
OUT=${1:?usage: bash bench/gpu.sh OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PHASES=${GPU_PHASES:-build lessons bench step ncu sanitizer tests}
DEADLINE=${GPU_DEADLINE:-500}
MAKEFLAGS_CUDA="BACKEND=cuda"
MODEL05="--layers 8 --dim 1024 --hidden 4096 --batch 256 --steps 50" # 05 beside PyTorch
START=$(date +%s)
SUM=$OUT/summary.txt
: >"$SUM"
say() { echo "$*" | tee -a "$SUM"; }
elapsed() { echo $(($(date +%s) - START)); }
want() { case " $PHASES " in *" $1 "*) [ "$(elapsed)" -lt "$DEADLINE" ] || { say "SKIP $1: past the deadline ($(elapsed) s)"; return 1; } ;; *) return 1 ;; esac; }
PY=${PYTHON:-python3}

say "gpu run $(date -u +%FT%TZ) on $(hostname), phases: $PHASES"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  nvcc --version | tail -n 2
  $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))'
  mpirun --version | head -n 1
  nproc
} >"$OUT/build.log" 2>&1
sed -n 2p "$OUT/build.log" | sed 's/^/device: /' | tee -a "$SUM"

if want build; then
  t=$(elapsed)
  timeout 300 make $MAKEFLAGS_CUDA -j"$(nproc)" all >>"$OUT/build.log" 2>&1
  rc=$?
  say "build: exit $rc, $(grep -ci warning "$OUT/build.log") warning line(s), $(($(elapsed) - t)) s; $(grep -m1 '^make: NCCL' "$OUT/build.log")"
fi

if want lessons; then
  for np in 1 2 4; do
    timeout 240 make -s $MAKEFLAGS_CUDA tour NP=$np >build/gpu-tour-$np.log 2>&1
    rc=$?
    { echo "######## make tour NP=$np: exit $rc"; cat build/gpu-tour-$np.log; } >>"$OUT/lessons.log"
    table=$(sed -n '/tour summary/,$p' build/gpu-tour-$np.log)
    say "lessons NP=$np: exit $rc; $(echo "$table" | grep -c ' PASSED ') PASSED, $(echo "$table" | grep -c 'FAILED') FAILED"
    echo "$table" >>"$SUM"
  done
fi

if want bench; then
  B=$OUT/bench.log
  {
    echo "######## 03 NP=1 sweep 8 B .. 1 GiB"
    timeout 120 mpirun -np 1 ./03_all_reduce/all_reduce --min-bytes 8 --max-bytes 1G --factor 4 --iters 20 --warmup 3
    echo "######## torch.distributed.all_reduce NCCL world size 1"
    timeout 120 $PY bench/torch_allreduce.py --min-bytes 8 --max-bytes $((1 << 30)) --factor 4
    for np in 2 4; do
      echo "######## 03 NP=$np (one GPU shared: staged through host memory)"
      timeout 120 mpirun --oversubscribe -np $np ./03_all_reduce/all_reduce --min-bytes 4K --max-bytes 64M --factor 16 --iters 10
    done
    echo "######## 13_plan --measure NP=1"
    timeout 120 mpirun -np 1 ./13_plan/plan --measure --machine "$OUT/machine.json"
  } >"$B" 2>&1
  say "bench: $(grep -c '^CHECK PASSED' "$B") CHECK PASSED"
fi

if want step; then
  # 05 and PyTorch alternated, 3 runs each (order effects, clocks)
  t=$(elapsed)
  for rep in 1 2 3; do
    echo "######## 05 NP=1 $MODEL05 --no-check, run $rep"
    timeout 120 mpirun -np 1 ./05_dp/dp $MODEL05 --no-check | grep -v '^step'
    echo "######## torch single cuda, run $rep"
    timeout 120 $PY bench/torch_step.py --device cuda $MODEL05
  done >>"$OUT/step.log" 2>&1
  say "step ($(($(elapsed) - t)) s): 05 after the first step $(grep -o 'after the first step *[0-9.]*' "$OUT/step.log" | awk '{print $NF}' | tr '\n' ' ')ms; torch $(grep -o 'ms_per_step=[0-9.]*' "$OUT/step.log" | cut -d= -f2 | tr '\n' ' ')ms"
fi

if want ncu; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
  if [ -n "$NCU" ]; then
    # every kernel of 4 steps, its duration (the last steps are read: the first
    # holds the setup's kernels); --clock-control none keeps the clock a run has
    timeout 150 mpirun -np 1 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv \
      --launch-count 3000 ./05_dp/dp ${MODEL05/--steps 50/--steps 4} --no-check \
      >"$OUT/ncu.csv" 2>&1
    say "ncu: exit $?, $(grep -c gpu__time_duration "$OUT/ncu.csv") kernel rows"
  else
    say "SKIP ncu: not found"
  fi
fi

if want sanitizer; then
  # --report-api-errors no: NCCL's init asks cudaFuncGetAttributes of kernels
  # built for other GPUs (cudaErrorNoKernelImageForDevice, 8 calls, handled by
  # NCCL), which the default reports as errors; memory errors are still reported
  S=$OUT/sanitizer.log
  t=$(elapsed)
  for tool in ${GPU_SANITIZERS:-memcheck racecheck}; do
    for run in "1 03_all_reduce/all_reduce --max-bytes 1M" "2 03_all_reduce/all_reduce --max-bytes 1M" \
      "1 05_dp/dp --steps 3" "1 06_fsdp/fsdp --steps 3 --zero 3" "1 09_pp/pp --steps 3"; do
      np=${run%% *} run=${run#* }
      echo "######## $tool NP=$np $run" >>"$S"
      timeout 180 mpirun --oversubscribe -np "$np" compute-sanitizer --tool $tool --report-api-errors no \
        --error-exitcode 99 ./$run >build/gpu-san.log 2>&1
      rc=$?
      cat build/gpu-san.log >>"$S"
      say "sanitizer $tool NP=$np $run: exit $rc; $(grep -c '^CHECK PASSED' build/gpu-san.log) CHECK PASSED; $(grep 'SUMMARY' build/gpu-san.log | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
    done
  done
  say "sanitizer: $(($(elapsed) - t)) s"
fi

if want tests; then
  T=$OUT/tests.log
  left=${GPU_TESTS_S:-$((DEADLINE + 120 - $(elapsed)))}
  [ "$left" -gt 60 ] || left=60
  for f in tests/lesson_0[1-9].sh tests/lesson_1[0-2].sh; do
    n=$(basename "$f" .sh)
    (LOGS=build/test-logs-$n BACKEND=cuda GPUS=1 CORES=16 MPIRUN=mpirun MAKE=make \
      timeout $left bash -c "set -u; source tests/lib.sh; source $f; summary" >"build/$n.tests" 2>&1
     echo "exit $?" >>"build/$n.tests") &
  done
  wait
  for f in build/lesson_*.tests; do echo "######## $f"; cat "$f"; done >"$T"
  say "tests: $(grep -c '^PASS ' "$T") passed, $(grep -c '^FAIL ' "$T") failed ($left s limit per suite)"
  grep '^FAIL ' "$T" | head -n 40 >>"$SUM"
fi
say "total $(elapsed) s"
