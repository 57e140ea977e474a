# make gpu-check (sourced by run_tests.sh): tools/gpu-node/check.sh, the one
# command a GPU machine runs (docs/gpu.md, "make gpu-check"). Here, without a
# GPU, its dry run: it says so and lists exactly what it would run, and runs
# nothing; and its machinery, run on what this machine can run: the cpu
# backend's binaries standing in for a GPU's pass (tests/cuda_build.sh runs
# it on the cuda binaries, where every run must fail naming the CUDA error).
GC=$LOGS/gpu-check
rm -rf "$GC"
# the build, each unit test at NP 1 and 2, the tour at NP 1 and 2, and 16 runs
GC_N=$((1 + 2 * $(ls tests/test_*.c | wc -l) + 2 + 16))
check "gpu-check: the dry run lists every check of the issue and runs none" 0 0 \
  '^gpu-check: a dry run' "^dry run: $GC_N checks listed, none run" \
  'build +limit 400s: make -s BACKEND=cuda ' \
  'unit test_gpt np=2 +limit 180s: .*-np 2 \./tests/test_gpt +\[wants: UNIT PASSED\]' \
  'tour np=1 +limit 300s: make -s BACKEND=cuda .* tour NP=1 ' 'tour np=2 +limit 300s: make .* tour NP=2 ' \
  '10 top-1 .*-np 2 \./10_ep/ep --steps 5 --topk 1 ' '10 top-2 .*--topk 2 ' \
  '11 ring contiguous .*-np 2 \./11_cp/cp --steps 5 +\[' '11 ring zigzag .*--split zigzag ' \
  '11 ulysses .*--ulysses ' '12 mesh 2,1,1,2 .*-np 4 .*--dp 2 --pp 1 --cp 1 --tp 2 ' \
  '12 mesh 1,2,2,1 .*-np 4 .*--dp 1 --pp 2 --cp 2 --tp 1 ' \
  '13 measure gpt14 .*\./13_plan/plan --measure --model gpt14 ' \
  '14 np=1 sample eval .*-np 1 \./14_gpt/gpt --steps 5 --sample 50 --eval-every 5 ' \
  '14 tp 2 sequence-parallel .*-np 2 .*--tp 2 --sequence-parallel ' \
  '14 pp 2 recompute .*-np 2 .*--pp 2 --recompute ' \
  '12 mesh 2,1,1,2 bf16 .*-np 4 .*--tp 2 --precision bf16 ' '14 tp 2 bf16 .*-np 2 .*--tp 2 --precision bf16 ' \
  '14 tp 2 bpe .*-np 2 .*--tp 2 --tokens bpe:64 ' \
  'memcheck 11 .*-np 1 compute-sanitizer --tool memcheck .* \./11_cp/cp --steps 2 +\[wants: ERROR SUMMARY: 0 errors\]' \
  'memcheck 14 .*compute-sanitizer --tool memcheck .* \./14_gpt/gpt --steps 2 ' \
  -- env GPU_CHECK_DRY=1 bash tools/gpu-node/check.sh "$GC/dry"
check "gpu-check: the dry run leaves its summary alone in the folder" 0 0 '^summary\.txt$' -- \
  bash -c '[ "$(ls "$1" | wc -l)" -eq 1 ] && ls "$1"' _ "$GC/dry"
if [ "${GPUS:-0}" = 0 ]; then
  check "gpu-check: make gpu-check without a GPU is that dry run, said so" 0 0 \
    '^gpu-check: no GPU here \(nvidia-smi lists none\): a dry run' "^dry run: $GC_N checks listed, none run" \
    -- ${MAKE:-make} -s gpu-check GPU_CHECK_DIR="$GC/make"
fi
# the machinery's pass and summary, on the cpu backend's binaries (the cuda
# ones fail without a GPU: tests/cuda_build.sh)
check "gpu-check: its checks, run (the cpu's binaries for a GPU's), pass and are summed up" 0 0 \
  '^11 ulysses +PASSED +[0-9]+ +11_ulysses_\.log' '^14 pp 2 recompute +PASSED ' \
  '^gpu-check: 2 passed, 0 failed, 0 skipped in ' -- \
  env GPU_CHECK_FORCE=1 GPU_CHECK_BUILD=0 GPU_CHECK_BIN=. GPU_CHECK_ONLY='^(11 ulysses|14 pp 2 recompute)$' \
  bash tools/gpu-node/check.sh "$GC/cpu"
