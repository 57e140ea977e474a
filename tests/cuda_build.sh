# After the cuda backend has compiled (run_tests.sh, where nvcc is): what can
# be checked of it without a GPU.
CB=build/cuda/bin

# NCCL as pip's nvidia-nccl-cu13 lays it out, with libnccl.so.2 and no
# unversioned libnccl.so: the lessons link and load it from there.
PIP_NCCL=$(cd "$LOGS" && pwd)/pip-nccl
read -r nccl_inc nccl_lib _ < <(bash tools/find_nccl.sh)
rm -rf "$PIP_NCCL" && mkdir -p "$PIP_NCCL/bin" "$PIP_NCCL/site/nvidia/nccl/include" "$PIP_NCCL/site/nvidia/nccl/lib"
cp "$nccl_inc/nccl.h" "$PIP_NCCL/site/nvidia/nccl/include/"
ln -s "$(real_path "$nccl_lib/libnccl.so.2")" "$PIP_NCCL/site/nvidia/nccl/lib/libnccl.so.2"
printf '#!/bin/sh\nPYTHONPATH=%s exec %s "$@"\n' "$PIP_NCCL/site" "$(command -v python3)" >"$PIP_NCCL/bin/python3"
chmod +x "$PIP_NCCL/bin/python3"
if env -u NCCL_HOME PATH="$PIP_NCCL/bin:$PATH" ${MAKE:-make} -s BACKEND=cuda BIN_DIR="$PIP_NCCL/out" \
  banner "$PIP_NCCL/out/05_dp/dp" >"$LOGS/cuda-pip-nccl.log" 2>&1 &&
  grep -q "from pip nvidia-nccl of $PIP_NCCL/bin/python3" "$LOGS/cuda-pip-nccl.log" &&
  ldd "$PIP_NCCL/out/05_dp/dp" | grep -q "libnccl.so.2 => $PIP_NCCL/site/nvidia/nccl/lib/libnccl.so.2"; then
  pass "cuda: 05_dp links pip-style NCCL (only libnccl.so.2) and loads it from there"
else
  ldd "$PIP_NCCL/out/05_dp/dp" >>"$LOGS/cuda-pip-nccl.log" 2>&1
  fail "cuda: 05_dp links pip-style NCCL (only libnccl.so.2) and loads it from there" "$LOGS/cuda-pip-nccl.log"
fi

# PTX of the newest ARCH is embedded, for GPUs newer than every ARCH (the
# PTX is compressed in the binary: only cuobjdump can list it)
if [ -x "${NVCC%/nvcc}/cuobjdump" ]; then
  ptx=$("${NVCC%/nvcc}/cuobjdump" --list-ptx "$CB/05_dp/dp" 2>&1)
  if echo "$ptx" | grep -Eq '(sm|compute)_[0-9]+'; then
    pass "cuda: PTX embedded ($(echo "$ptx" | grep -Eo '(sm|compute)_[0-9]+' | sort -u | tr '\n' ' '))"
  else
    fail "cuda: PTX embedded" "" "cuobjdump --list-ptx: $ptx"
  fi
else
  echo "SKIP cuda PTX listing: no cuobjdump in ${NVCC%/nvcc} (the nvcc line is checked in suite_nccl_discovery.sh)"
fi

# Without a GPU, the CUDA error itself is the message (driver, device, permission)
if [ "${GPUS:-0}" = 0 ]; then
  check "cuda without a GPU: rank 0 names the CUDA error np=2" 2 2 \
    '^error: this binary was built with BACKEND=cuda but rank 0 sees no CUDA GPU: [A-Za-z].*; rebuild with' \
    -- "$CB/05_dp/dp" --steps 2
fi

# make gpu-check's runs on the cuda binaries, forced without a GPU: each
# fails naming the CUDA error, the summary counts it, the exit says so
if [ "${GPUS:-0}" = 0 ]; then
  check "cuda: gpu-check forced without a GPU: every run fails, named in the summary" 0 1 \
    '^unit test_gpt np=2 +FAILED +[0-9]+ +exit 2: .*sees no CUDA GPU' \
    '^14 tp 2 sequence-parallel +FAILED ' '^gpu-check: 0 passed, 2 failed, 0 skipped in ' -- \
    env GPU_CHECK_FORCE=1 GPU_CHECK_BUILD=0 GPU_CHECK_BIN="$CB" \
    GPU_CHECK_ONLY='^(unit test_gpt np=2|14 tp 2 sequence-parallel)$' \
    bash tools/gpu-node/check.sh "$LOGS/gpu-check-cuda"
fi
