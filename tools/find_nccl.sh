#!/usr/bin/env bash
# find_nccl.sh: where the cuda build takes NCCL from, in this order:
#   1. $NCCL_HOME, when set (an error if it holds no NCCL: never silently another);
#   2. the pip package nvidia-nccl-cu* of the python3 on PATH ($PYTHON to choose
#      another), as in a PyTorch virtual environment;
#   3. the system: $CUDA_HOME (NCCL installed into the CUDA tree), /usr.
# Prints one line, "INCLUDE_DIR LIB_DIR SOURCE...", and exits 0; or says why on
# stderr and exits 1. LIB_DIR holds libnccl.so.2, the name the Makefile links
# (-l:libnccl.so.2): pip's wheel has no unversioned libnccl.so.
set -u
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PYTHON=${PYTHON:-python3}

# has_nccl HOME: HOME/include/nccl.h and libnccl.so.2 in HOME/lib or HOME/lib64
# (or the multiarch folder, for /usr); sets inc and lib.
has_nccl() {
  local d
  inc=$1/include lib=""
  [ -f "$inc/nccl.h" ] || return 1
  for d in "$1/lib" "$1/lib64" "$1/lib/$(uname -m)-linux-gnu"; do
    if [ -e "$d/libnccl.so.2" ]; then lib=$d && return 0; fi
  done
  return 1
}
version() {
  sed -nE 's/^#define NCCL_(MAJOR|MINOR|PATCH) *([0-9]*).*/\2/p' "$1/nccl.h" | paste -sd. -
}

if [ -n "${NCCL_HOME:-}" ]; then
  if has_nccl "$NCCL_HOME"; then
    echo "$inc $lib NCCL $(version "$inc") from NCCL_HOME=$NCCL_HOME"
    exit 0
  fi
  echo "find_nccl: NCCL_HOME=$NCCL_HOME has no include/nccl.h with libnccl.so.2 in lib or lib64" >&2
  exit 1
fi

if py=$(command -v "$PYTHON" 2>/dev/null) && [ -n "$py" ]; then
  # nvidia.nccl is a namespace package: each folder of its path may hold it
  while IFS= read -r d; do
    [ -n "$d" ] || continue
    if has_nccl "$d"; then
      pkg=$("$py" -c 'import importlib.metadata as m
print(" ".join(sorted(d.metadata["Name"] + " " + d.version for d in m.distributions()
      if (d.metadata["Name"] or "").lower().startswith("nvidia-nccl-cu"))))' 2>/dev/null)
      echo "$inc $lib NCCL $(version "$inc") from pip ${pkg:-nvidia-nccl} of $py"
      exit 0
    fi
  done < <("$py" -c 'import nvidia.nccl; print("\n".join(nvidia.nccl.__path__))' 2>/dev/null)
fi

for d in "$CUDA_HOME" /usr/local/nccl /usr; do
  if has_nccl "$d"; then
    echo "$inc $lib NCCL $(version "$inc") from the system ($d)"
    exit 0
  fi
done
echo "find_nccl: NCCL not found: set NCCL_HOME, or install it (pip install nvidia-nccl-cu13 in the python3 on PATH, or into $CUDA_HOME or /usr)" >&2
exit 1
