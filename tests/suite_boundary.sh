# The device boundary (sourced by run_tests.sh): the cpu backend in its
# device-boundary mode (DT_DEVICE_BOUNDARY=1, common/comm/boundary.c), where
# dt_alloc's memory is PROT_NONE outside the backend's kernels, copies and
# collectives, as a GPU's memory is out of the host's reach: a host loop
# over device memory, an MPI call on a device buffer, a host pointer handed
# to a kernel end the run with a message naming the call (docs/gpu.md, "The
# device boundary on the cpu"). Every lesson's tour and its suite's
# variations at small sizes, and the unit tests, run in it here; so do bugs
# of each kind, planted in copies, each of which must end that way.
if [ "${BACKEND:-cpu}" != cpu ]; then
  echo "SKIP device boundary: the cpu backend's mode (this run: ${BACKEND}; the GPU enforces it)"
else
  BD_START=$(now)
  # bd NAME NP ARGS...: lesson run in the mode, its own check passed
  bd() {
    local name=$1 np=$2
    shift 2
    check "boundary: $name np=$np" "$np" 0 'CHECK PASSED' -- env DT_DEVICE_BOUNDARY=1 "$@"
  }
  # every lesson's tour (its tour.flags), at NP 1 (2 for 01) and 2
  for d in [0-9][0-9]_*/; do
    d=${d%/}
    bin=./$d/${d#*_}
    # shellcheck disable=SC2046 # the flags' words
    for np in 1 2; do
      [ "$d" = 01_send_recv ] && [ "$np" = 1 ] && continue # 01 needs 2 ranks
      bd "$d tour" "$np" "$bin" $(cat "$d/tour.flags" 2>/dev/null)
    done
  done
  # what each lesson's suite varies, at small sizes
  BDS="--layers 2 --dim 16 --hidden 32 --steps 4"
  bd "03 hierarchical" 4 ./03_all_reduce/all_reduce --ranks-per-node 2 --max-bytes 64K
  bd "05 overlap bf16 adamw" 2 ./05_dp/dp $BDS --overlap --bucket-mb 0.001 --precision bf16 --optimizer adamw
  bd "05 fp16" 2 ./05_dp/dp $BDS --precision fp16
  bd "05 topk" 2 ./05_dp/dp $BDS --compress topk:0.1
  bd "05 clip" 2 ./05_dp/dp $BDS --clip 0.5 --optimizer adamw
  for z in 1 2 3; do bd "06 zero $z prefetch" 2 ./06_fsdp/fsdp $BDS --zero "$z" --prefetch; done
  bd "07 bf16" 2 ./07_tp/tp $BDS --precision bf16
  bd "08" 4 ./08_fsdp_tp/fsdp_tp $BDS
  bd "09 gpipe" 2 ./09_pp/pp $BDS --schedule gpipe
  for k in 1 2; do bd "10 top-$k" 2 ./10_ep/ep $BDS --experts 4 --topk "$k" --verify-dispatch; done
  bd "10 hand all-to-all" 2 ./10_ep/ep $BDS --experts 4 --all-to-all hand
  BDA="--layers 2 --dim 16 --hidden 32 --steps 4 --seq 16 --batch 4 --heads 2"
  bd "11 ring" 2 ./11_cp/cp $BDA
  bd "11 zigzag bf16" 2 ./11_cp/cp $BDA --split zigzag --precision bf16
  bd "11 ulysses" 2 ./11_cp/cp $BDA --ulysses
  bd "12 2,1,1,2" 4 ./12_mesh/mesh $BDA --dp 2 --pp 1 --cp 1 --tp 2
  bd "12 1,2,2,1 zero" 4 ./12_mesh/mesh $BDA --dp 1 --pp 2 --cp 2 --tp 1 --zero 1
  bd "13 measure gpt14" 2 ./13_plan/plan --measure --model gpt14 --machine "$LOGS/boundary-machine.json"
  BDG="--layers 2 --dim 32 --seq 32 --batch 8 --steps 3 --eval-every 0 --sample 0"
  bd "14" 1 ./14_gpt/gpt $BDG --sample 20 --eval-every 2
  bd "14 tp" 2 ./14_gpt/gpt $BDG --tp 2 --sequence-parallel
  bd "14 pp recompute" 2 ./14_gpt/gpt $BDG --pp 2 --recompute
  bd "14 cp zigzag" 2 ./14_gpt/gpt $BDG --cp 2 --split zigzag
  bd "14 dp zero" 2 ./14_gpt/gpt $BDG --dp 2 --zero 1
  echo "boundary: the lessons in the mode took $(awk -v a="$BD_START" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }') s"
fi
