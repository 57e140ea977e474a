# Where the cuda build takes NCCL from (tools/find_nccl.sh, read by the
# Makefile): NCCL_HOME, else pip's nvidia-nccl-cu* of the python3 on PATH,
# else the system. Sourced by run_tests.sh. Fake layouts, no GPU and no nvcc
# needed: a pip-style NCCL holds only libnccl.so.2, as the real wheel does.
ND=$(cd "$LOGS" && pwd)/nccl-discovery
rm -rf "$ND" && mkdir -p "$ND/bin"
fake_nccl() { # fake_nccl DIR MINOR [LIBDIR]: nccl.h of version 2.MINOR.1, a libnccl.so.2
  mkdir -p "$1/include" "$1/${3:-lib}"
  printf '#define NCCL_MAJOR 2\n#define NCCL_MINOR %s\n#define NCCL_PATCH 1\n' "$2" >"$1/include/nccl.h"
  : >"$1/${3:-lib}/libnccl.so.2"
}
fake_nccl "$ND/site/nvidia/nccl" 98 # what 'pip install nvidia-nccl-cu13' lays out
mkdir -p "$ND/site/nvidia_nccl_cu13-2.98.1.dist-info"
printf 'Metadata-Version: 2.1\nName: nvidia-nccl-cu13\nVersion: 2.98.1\n' \
  >"$ND/site/nvidia_nccl_cu13-2.98.1.dist-info/METADATA"
fake_nccl "$ND/cuda" 97 lib64 # NCCL installed into a CUDA tree
fake_nccl "$ND/home" 96       # somewhere NCCL_HOME names
mkdir -p "$ND/cuda/bin" && printf '#!/bin/sh\necho "nvcc: fake"\n' >"$ND/cuda/bin/nvcc"
chmod +x "$ND/cuda/bin/nvcc"
# the python3 of a venv that has the package, and one that has not
REAL_PY=$(command -v python3)
printf '#!/bin/sh\nPYTHONPATH=%s exec %s "$@"\n' "$ND/site" "$REAL_PY" >"$ND/bin/python3"
chmod +x "$ND/bin/python3"

find_nccl_case() { # NAME RC PATTERN -- ENV...
  local name=$1 want=$2 pattern=$3 out rc
  shift 4
  out=$(env -u NCCL_HOME "$@" bash tools/find_nccl.sh 2>&1)
  rc=$?
  if [ $rc -eq "$want" ] && echo "$out" | grep -Eq -- "$pattern"; then
    pass "nccl discovery: $name"
  else
    fail "nccl discovery: $name" "" "exit $rc (want $want), output: $out"
  fi
}
if [ -n "$REAL_PY" ]; then
  find_nccl_case "pip's nvidia-nccl-cu13 before the system" 0 \
    "^$ND/site/nvidia/nccl/include $ND/site/nvidia/nccl/lib NCCL 2\.98\.1 from pip nvidia-nccl-cu13 2\.98\.1 of $ND/bin/python3\$" \
    -- PATH="$ND/bin:$PATH" CUDA_HOME="$ND/cuda"
else
  echo "SKIP nccl discovery through pip: no python3"
fi
find_nccl_case "NCCL_HOME before pip" 0 "^$ND/home/include $ND/home/lib NCCL 2\.96\.1 from NCCL_HOME=$ND/home\$" \
  -- PATH="$ND/bin:$PATH" CUDA_HOME="$ND/cuda" NCCL_HOME="$ND/home"
find_nccl_case "a wrong NCCL_HOME is an error, not another NCCL" 1 "NCCL_HOME=$ND/nowhere has no include/nccl.h" \
  -- PATH="$ND/bin:$PATH" CUDA_HOME="$ND/cuda" NCCL_HOME="$ND/nowhere"
find_nccl_case "the system (CUDA_HOME/lib64) without pip's" 0 \
  "^$ND/cuda/include $ND/cuda/lib64 NCCL 2\.97\.1 from the system \($ND/cuda\)\$" \
  -- CUDA_HOME="$ND/cuda" PYTHON=/nonexistent/python3
find_nccl_case "none at all: a clear error" 1 "NCCL not found: set NCCL_HOME, or install it" \
  -- CUDA_HOME="$ND/nowhere" PYTHON=/nonexistent/python3 PATH=/nonexistent:/bin

# The Makefile (with a stand-in nvcc): the banner says which NCCL, the link
# line takes libnccl.so.2 by name from pip's folder, and no OpenBLAS.
if [ -n "$REAL_PY" ]; then
  out=$(env -u NCCL_HOME PATH="$ND/bin:$PATH" ${MAKE:-make} --no-print-directory BACKEND=cuda \
    CUDA_HOME="$ND/cuda" BUILD_ROOT="$ND/build" BIN_DIR="$ND/bin-out" -n banner "$ND/bin-out/01_send_recv/send_recv" 2>&1)
  if echo "$out" | grep -q "NCCL 2.98.1 from pip nvidia-nccl-cu13 2.98.1" &&
    echo "$out" | grep -Eq -- "-L$ND/site/nvidia/nccl/lib .*-l:libnccl\.so\.2" &&
    echo "$out" | grep -Eq -- "-Wl,-rpath,$ND/site/nvidia/nccl/lib .*-Wl,-rpath,$ND/cuda/lib64" &&
    echo "$out" | grep -q -- "-gencode arch=compute_90,code=compute_90" &&
    ! echo "$out" | grep -q -- "-lopenblas" && ! echo "$out" | grep -q "kernels_cpu"; then
    pass "make BACKEND=cuda: names pip's NCCL, links -l:libnccl.so.2 from it (its rpath first), PTX, no OpenBLAS"
  else
    echo "$out" >"$ND/make.log"
    fail "make BACKEND=cuda: names pip's NCCL, links -l:libnccl.so.2 from it (its rpath first), PTX, no OpenBLAS" "$ND/make.log"
  fi
fi
