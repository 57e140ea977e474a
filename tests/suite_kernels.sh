# The self-check on every BLAS kernel this CPU can run (CHECKING.md).
#
# OpenBLAS picks its kernel from the CPU, so one machine's verdict says
# nothing about another's: the same lesson sums in another order on an
# AVX-512 machine than on an AVX2 one. OPENBLAS_CORETYPE forces a kernel, so
# this suite runs the training lessons' checks under several of them (SSE3 up
# to AVX-512): under each kernel every lesson at NP 2 and 4 with AdamW and
# SGD, the seed turned from kernel to kernel (11_cp also in its other modes:
# zigzag, Ulysses; 12_mesh on half of its list of meshes, NP 2 to 16, the
# other half under the next kernel; 14_gpt on four meshes of its own).
# Every run must end CHECK PASSED.
# A kernel this CPU cannot execute is skipped, and said so.
# OpenBLAS's kernels by architecture (OPENBLAS_CORETYPE names), x86-64 or ARM64
case $(uname -m) in
aarch64 | arm64) KERNELS=${KERNELS:-ARMV8 NEOVERSEN1 CORTEXA57 THUNDERX2T99} ;;
*) KERNELS=${KERNELS:-Prescott Nehalem Sandybridge Haswell SkylakeX Zen} ;;
esac
KERNEL_SEEDS=${KERNEL_SEEDS:-1 2 3}
read -ra seeds <<<"$KERNEL_SEEDS"

if [ "${BACKEND:-cpu}" != cpu ]; then
  echo "SKIP kernel matrix: OpenBLAS kernels concern the cpu backend (this run: ${BACKEND})"
else
  probe=build/openblas_core
  mkdir -p build
  # shellcheck disable=SC2086 # BLAS_CFLAGS/BLAS_LIBS: from the Makefile (Homebrew's paths on macOS)
  cc -O1 ${BLAS_CFLAGS:-} tests/openblas_core.c -o "$probe" ${BLAS_LIBS:--lopenblas} 2>"$LOGS/openblas_core.log"
  # the training lessons: those whose --help lists --optimizer (05-09, and
  # any new NN_name/ folder that trains)
  trainers=()
  for dir in [0-9][0-9]_*/; do
    bin=${dir%/}/${dir#*_}
    bin=${bin%/}
    # 14_gpt: its own meshes below (its tour.flags' default model at 3 seeds
    # x 2 NPs x 2 optimizers would add minutes for what they cover)
    [ "$bin" = 14_gpt/gpt ] && continue
    [ -x "$bin" ] && "./$bin" --help 2>/dev/null | grep -q '^  --optimizer ' && trainers+=("$bin")
  done
  [ ${#trainers[@]} -gt 0 ] || fail "kernel matrix: a training lesson to run" "" "no built lesson lists --optimizer in its --help"
  ran=() skipped=()
  for k in $KERNELS; do
    got=$(OPENBLAS_CORETYPE=$k with_timeout 20 "./$probe" 2>/dev/null)
    rc=$?
    if [ $rc -eq 132 ] || [ $rc -eq 4 ]; then
      skipped+=("$k (this CPU cannot execute it: SIGILL)"); continue
    elif [ $rc -ne 0 ]; then
      skipped+=("$k (the probe failed, exit $rc)"); continue
    elif [ "$(lower "$got")" != "$(lower "$k")" ]; then
      skipped+=("$k (OpenBLAS runs $got instead)"); continue
    fi
    ran+=("$k")
    ki=$((${#ran[@]} - 1)) # this kernel's place among those run: it turns the seeds and specs below
    # Every lesson at NP 2 and 4 with both optimizers (4 runs a lesson), one
    # seed each, turned by kernel, lesson, NP and optimizer: over any 3
    # kernels in turn each (lesson, NP, optimizer) meets every seed of
    # KERNEL_SEEDS (a covering design: the full product, every seed on every
    # kernel, took twice the runs)
    li=0
    for bin in "${trainers[@]}"; do
      for np in 2 4; do
        for opt in adamw sgd; do
          oi=0 && [ $opt = sgd ] && oi=1
          seed=${seeds[$(((ki + li + np / 2 + oi) % ${#seeds[@]}))]}
          # shellcheck disable=SC2046 # tour.flags: a short run of a long default
          OPENBLAS_CORETYPE=$k check "kernel $k $(basename "$bin") np=$np $opt seed=$seed" "$np" 0 \
            'CHECK PASSED' -- "./$bin" --optimizer "$opt" --seed "$seed" $(cat "$(dirname "$bin")/tour.flags" 2>/dev/null)
        done
      done
      li=$((li + 1))
    done
    # 11_cp's other modes (its default is the contiguous ring): each at NP 2 and
    # 4, the optimizer turned by kernel (two kernels in turn: both at each NP)
    [ -x 11_cp/cp ] && for mode in "--split zigzag" --ulysses; do
      for np in 2 4; do
        opt=adamw && [ $(((ki + np / 2) % 2)) = 1 ] && opt=sgd
        # shellcheck disable=SC2086 # the mode's words are flags
        OPENBLAS_CORETYPE=$k check "kernel $k cp $mode np=$np $opt seed=${seeds[0]}" "$np" 0 \
          'CHECK PASSED' -- ./11_cp/cp $mode --optimizer "$opt" --seed "${seeds[0]}"
      done
    done
    # 12_mesh: each axis alone and the combinations, both splits, both
    # schedules, ZeRO 0 and 1, both optimizers (NP, then flags), in two halves
    # each of NP 2, 2, 4, 8 and 16 with both optimizers: a kernel runs one
    # half, the next kernel the other (every spec on every second kernel; 12's
    # default mesh ran above under every kernel)
    half=(
      "2 --dp 2|2 --pp 2 --schedule gpipe --optimizer sgd"
      "2 --tp 2 --optimizer sgd|2 --cp 2 --split zigzag"
      "4 --dp 2 --pp 2 --zero 1|4 --cp 2 --tp 2 --split zigzag --optimizer sgd"
      "8 --dp 2 --pp 2 --cp 2 --zero 1 --schedule gpipe --optimizer sgd|8 --pp 2 --cp 2 --tp 2"
      "16|16 --split zigzag --zero 1 --optimizer sgd")
    [ -x 12_mesh/mesh ] && for pair in "${half[@]}"; do
      spec=${pair%|*}
      [ $((ki % 2)) = 1 ] && spec=${pair#*|}
      # shellcheck disable=SC2086 # the spec's words are the NP and the flags
      OPENBLAS_CORETYPE=$k check "kernel $k mesh np=$spec" "${spec%% *}" 0 'CHECK PASSED' -- \
        ./12_mesh/mesh $(echo "$spec" | cut -s -d' ' -f2-)
    done
    # 14_gpt: the tied weight across stages, sequence parallelism, ZeRO-1, all four axes
    [ -x 14_gpt/gpt ] && for spec in "2 --pp 2 --optimizer sgd" "4 --tp 2 --pp 2 --sequence-parallel" \
      "8 --dp 2 --cp 2 --tp 2 --zero 1 --recompute --optimizer sgd" "16 --split zigzag"; do
      # shellcheck disable=SC2086 # the spec's words are the NP and the flags
      OPENBLAS_CORETYPE=$k check "kernel $k gpt np=$spec" "${spec%% *}" 0 'CHECK PASSED' -- \
        ./14_gpt/gpt --steps 10 --layers 2 --dim 32 --seq 32 --batch 8 --sample 0 \
        $(echo "$spec" | cut -s -d' ' -f2-)
    done
    # and 300 steps of AdamW on a real text, where two correct trajectories
    # end apart, compared step by step: a text, a mesh and a seed a kernel
    text_run=(
      "4 --text README.md --tp 2 --cp 2 --seed 1" "4 --text CHECKING.md --tp 4 --seed 2"
      "2 --text 14_gpt/README.md --pp 2 --seed 3" "4 --text tests/texts/drift.txt --dp 2 --tp 2 --seed 2"
      "2 --text docs/testing.md --cp 2 --seed 1" "4 --text TEACHING.md --pp 2 --tp 2 --seed 3")
    spec=${text_run[$ki]}
    # shellcheck disable=SC2086 # the spec's words are the NP and the flags
    [ -x 14_gpt/gpt ] && OPENBLAS_CORETYPE=$k check "kernel $k gpt 300 steps np=$spec" "${spec%% *}" 0 \
      'CHECK PASSED' '^lockstep: one process took 300 of the run.s 300 steps' -- \
      ./14_gpt/gpt --steps 300 --layers 2 --dim 32 --seq 32 --batch 8 --sample 0 \
      $(echo "$spec" | cut -s -d' ' -f2-)
  done
  # A ReLU input within rounding of 0 (CHECKING.md, "Discrete decisions"):
  # one run per kernel that meets one decided apart by one step's rounding,
  # found by searching seeds and meshes of 07 at D 256, B 64 with OpenBLAS
  # 0.3.21 (Debian 12's) on an AVX2 machine; the decision is replayed and the
  # run passes. SkylakeX (AVX-512) has none found (this search's CPU cannot
  # run it), and another OpenBLAS may sum in other orders: there, the
  # verdict and the replay's line are asserted, not the flip.
  blas=$("./$probe" --config 2>/dev/null)
  for k in "${ran[@]}"; do
    case $k in
    Prescott | Sandybridge) flip="2 07_tp/tp --dim 256 --batch 64 --steps 10 --seed 1" ;;
    Nehalem) flip="4 07_tp/tp --dim 256 --batch 64 --steps 10 --seed 1" ;;
    Haswell | Zen) flip="2 07_tp/tp --dim 256 --batch 64 --steps 10 --seed 3" ;;
    SkylakeX) flip="2 07_tp/tp --dim 256 --batch 64 --steps 10 --seed 1" ;;
    *) continue ;;
    esac
    apart='^ReLU decisions: .* [1-9][0-9]* of them decided apart by rounding, replayed'
    case $blas in "OpenBLAS 0.3.21 "*) ;; *) apart='^ReLU decisions: ' ;; esac
    [ "$k" = SkylakeX ] && apart='^ReLU decisions: '
    read -ra f <<<"$flip" # NP, the lesson, its flags
    [ -x "${f[1]}" ] && OPENBLAS_CORETYPE=$k check "kernel $k: a ReLU decision apart by rounding, replayed (np=$flip)" \
      "${f[0]}" 0 "$apart" 'CHECK PASSED' -- "./${f[1]}" "${f[@]:2}"
  done
  echo "kernel matrix: ran ${ran[*]:-none}; skipped: ${skipped[*]:-none}"
  if [ ${#ran[@]} -ge 4 ]; then
    pass "kernel matrix covers at least 4 OpenBLAS kernels (${#ran[@]})"
  else
    fail "kernel matrix covers at least 4 OpenBLAS kernels (${#ran[@]})" "" "skipped: ${skipped[*]}"
  fi
fi
