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
  # the unit tests: every kernel handed device buffers (the kernels check it)
  for t in tests/test_*.c; do
    for np in 1 2; do
      check "boundary: unit $(basename "${t%.c}") np=$np" "$np" 0 'UNIT PASSED' -- \
        env DT_DEVICE_BOUNDARY=1 "./${t%.c}"
    done
  done
  # what each lesson's suite varies, at small sizes
  BDS="--layers 2 --dim 16 --hidden 32 --steps 4"
  bd "03 hierarchical" 4 ./03_all_reduce/all_reduce --ranks-per-node 2 --max-bytes 64K
  bd "05 overlap bf16 adamw" 2 ./05_dp/dp $BDS --overlap --bucket-mb 0.001 --precision bf16 --optimizer adamw
  bd "05 fp16" 2 ./05_dp/dp $BDS --precision fp16
  bd "05 topk" 2 ./05_dp/dp $BDS --compress topk:0.1
  bd "05 clip" 2 ./05_dp/dp $BDS --clip 0.5 --optimizer adamw
  rm -rf "$LOGS/boundary-ckpt"
  bd "05 save ckpt trace" 2 ./05_dp/dp $BDS --save "$LOGS/boundary.st" --ckpt "$LOGS/boundary-ckpt" \
    --save-every 2 --trace "$LOGS/boundary-trace.json"
  bd "05 resume load" 2 ./05_dp/dp $BDS --steps 6 --ckpt "$LOGS/boundary-ckpt" --resume
  for z in 1 2 3; do bd "06 zero $z prefetch" 2 ./06_fsdp/fsdp $BDS --zero "$z" --prefetch; done
  bd "06 zero 3 bf16 prefetch" 2 ./06_fsdp/fsdp $BDS --zero 3 --precision bf16 --prefetch
  bd "07 bf16" 2 ./07_tp/tp $BDS --precision bf16
  bd "08" 4 ./08_fsdp_tp/fsdp_tp $BDS
  bd "09 gpipe" 2 ./09_pp/pp $BDS --schedule gpipe
  bd "09 fp16" 2 ./09_pp/pp $BDS --precision fp16
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
  bd "14 cp tp zigzag sequence-parallel" 4 ./14_gpt/gpt $BDG --cp 2 --tp 2 --split zigzag --sequence-parallel
  # --- bugs of each kind, planted in copies: each must end the run, naming the call ---
  # planted ID LESSON_DIR FILE PERL_SUBSTITUTION DESCRIPTION NP PATTERN -- ARGS...: the copy
  # (build_copy, tests/lib.sh) in the mode ends with a non-zero exit and PATTERN
  BUILD_DIR=build/cpu
  BD_DIR=build/boundary-planted
  planted() {
    local id=$1 lesson=$2 file=$3 subst=$4 desc=$5 np=$6 want=$7 name rc
    shift 8
    name=$(basename "$lesson")
    name=${name#*_}
    build_copy "$BD_DIR/$id" "$lesson" "$file" "$subst"
    rc=$?
    if [ $rc = 2 ]; then
      fail "boundary: planted $id ($desc): the substitution no longer matches $file" "" "update it in tests/suite_boundary.sh"
    elif [ $rc != 0 ]; then
      fail "boundary: planted $id ($desc): does not build" "$BD_DIR/$id/build.log"
    else
      check "boundary: planted $id np=$np: $desc" "$np" nonzero "$want" -- \
        env DT_DEVICE_BOUNDARY=1 "./$BD_DIR/$id/$name" "$@"
    fi
  }
  # 14's token bug as it was (issue 52): the embedding's buckets made by a host
  # loop over the token ids, which live in device memory; the cpu without the
  # mode cannot see it (the run passes its check), the mode names the loop
  BD_TOKENS='s{  dt_embed_buckets\(tokens, R, v0, Vs, offsets, rows\);}{  int64_t *ho = dt_host_alloc((size_t)Vs + 1, sizeof *ho);
  int32_t *hr = dt_host_alloc((size_t)R, sizeof *hr);
  for (int64_t v = 0; v < Vs; v++) dt_token_bucket(tokens, R, v0, Vs, v, ho, hr);
  dt_copy_from_host(offsets, ho, (size_t)(Vs + 1) * sizeof *ho);
  dt_copy_from_host(rows, hr, (size_t)R * sizeof *hr);
  free(ho);
  free(hr);}; s{#include "train_internal.h"}{#include "gpt_core.h"\n#include "train_internal.h"}'
  planted tokens-on-host 14_gpt common/train/gpt.c "$BD_TOKENS" \
    "14's token bug: the embedding's buckets made on the host from device token ids" 1 \
    'device boundary: dt_token_bucket \(common/train/gpt_core.h:[0-9]+\), called by dt_embed_backward \(.*gpt.c:[0-9]+\) touched device memory \(byte [0-9]+ of a [0-9]+-byte data buffer from dt_alloc\)' \
    -- $BDG
  check "boundary: planted tokens-on-host, without the mode: the cpu's own check cannot see it" 1 0 \
    'CHECK PASSED' -- "./$BD_DIR/tokens-on-host/gpt" $BDG
  # its other half: kernels.cu's staged(), a copy "from the host" of what is
  # device memory already
  planted tokens-staged 14_gpt common/train/gpt.c \
    's{  dt_embed_buckets\(tokens, R, v0, Vs, offsets, rows\);}{  static int32_t *staged;\n  if (!staged) staged = dt_alloc((size_t)R * sizeof *staged, DT_OTHER);\n  dt_copy_from_host(staged, tokens, (size_t)R * sizeof *staged);\n  dt_embed_buckets(staged, R, v0, Vs, offsets, rows);}' \
    "a device pointer staged as if it were host memory" 1 \
    'device boundary: dt_copy_from_host was handed device memory as `host` \(byte 0 of a [0-9]+-byte data buffer from dt_alloc, [0-9]+ bytes\) by dt_embed_backward' \
    -- $BDG
  # a host pointer to a kernel: 14 embedding the host copy of its ids
  planted host-ids-to-kernel 14_gpt 14_gpt/gpt.c \
    's{embed\(m, slot, m->step\.tokens \+ at\)}{embed(m, slot, m->step.windows + m->step.Bm * (m->weights.S + 1) + at)}' \
    "the host copy of the ids handed to the embedding's kernel" 1 \
    'device boundary: dt_embed_forward was handed host memory as `tokens` \(0x[0-9a-f]+\) by embed \(.*gpt.c:[0-9]+\)' \
    -- $BDG
  # an MPI call on a device buffer: 05's gradient averaged by MPI itself
  planted mpi-on-device 05_dp 05_dp/dp.c \
    's{dt_all_reduce\(m->world, p, p, k->count, m->bk.wire.type, m->bk.op\);}{DT_MPI(MPI_Allreduce(MPI_IN_PLACE, p, (int)k->count, MPI_FLOAT, MPI_SUM, m->world->mpi));}' \
    "MPI_Allreduce on the gradient, a device buffer" 2 \
    'device boundary: MPI_Allreduce, called by average_gradients \(.*dp.c:[0-9]+\) touched device memory \(byte [0-9]+ of a [0-9]+-byte grads buffer' \
    -- $BDS
  check "boundary: planted mpi-on-device: the MPI call named with its line" 0 0 \
    'in MPI_Allreduce\(MPI_IN_PLACE, p, .*called from .*dp.c:[0-9]+' -- \
    cat "$(check_log "boundary: planted mpi-on-device np=2: MPI_Allreduce on the gradient, a device buffer")"
  # the same through the bookkeeping call (host memory only): refused by name
  planted bookkeeping-on-device 07_tp 07_tp/tensor.c \
    's{dt_all_reduce\(tp, p, p, n, wire->type, DT_SUM\);}{dt_host_all_reduce(tp, p, n, wire->type, DT_SUM);}' \
    "tensor parallelism's sum through the bookkeeping all-reduce" 2 \
    'device boundary: dt_host_all_reduce was handed device memory as `buf` \(byte [0-9]+ of a [0-9]+-byte activ buffer from dt_alloc, [0-9]+ bytes\) by tp_sum \(.*tensor.c:[0-9]+\)' \
    -- $BDS
  # a host loop over device memory in a lesson: the gradient printed
  planted host-read 05_dp 05_dp/dp.c \
    's{(    average_gradients\(m, m->overlap\);\n)}{$1  dt_print0("first gradient %g\\n", m->g[0]);\n}' \
    "a lesson printing a gradient it reads from device memory" 1 \
    'device boundary: train_step \(.*dp.c:[0-9]+\), called by main \(.*dp.c:[0-9]+\) touched device memory \(byte 0 of a [0-9]+-byte grads buffer' \
    -- $BDS
  echo "boundary: the lessons in the mode took $(awk -v a="$BD_START" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }') s"
fi
