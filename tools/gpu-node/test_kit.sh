#!/usr/bin/env bash
# test_kit.sh (make test-gpu-node-kit): the kit in .gpu-kit/ must carry a
# working Open MPI by itself. With the system's Open MPI hidden, source
# tools/gpu-node/env.sh into a fresh prefix, build lessons 03 and 05 with the
# kit's mpicc, check that they load the kit's libmpi (ldd), run both at NP=4
# with the kit's mpirun to CHECK PASSED, and, where nvcc is, link them with
# BACKEND=cuda too (with no GPU here they must say why they cannot run).
#
# Hiding: in a private mount namespace (unshare -m, as root) every file of the
# system's Open MPI (mpicc, mpirun, libmpi, its plugin folder) is covered by
# an empty one, so nothing can fall back on it; where namespaces are not
# allowed, PATH alone hides the commands and ldd checks the libraries.
# Ends with "N passed, N failed" like make test.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD

if [ "${1:-}" != --inside ] && [ -z "${GPU_KIT_NO_NAMESPACE:-}" ] &&
  unshare --mount --propagation private true 2>/dev/null; then
  exec unshare --mount --propagation private bash "$0" --inside
fi
source tests/lib.sh
LOGS=build/test-logs/gpu-kit
mkdir -p "$LOGS"
TEST_TIMEOUT=${TEST_TIMEOUT:-180}
WORK=$(mktemp -d /tmp/gpu-kit-test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# ---- hide the system's Open MPI ----------------------------------------
ML=/usr/lib/$(uname -m)-linux-gnu
SYSTEM_MPI=(/usr/bin/mpicc /usr/bin/mpirun /usr/bin/mpiexec /usr/bin/orterun /usr/bin/opal_wrapper
  "$ML"/libmpi.so* "$ML"/libopen-pal.so* "$ML"/libopen-rte.so* "$ML/openmpi" /usr/lib/openmpi)
if [ "${1:-}" = --inside ]; then
  hidden=0
  for f in "${SYSTEM_MPI[@]}"; do
    [ -e "$f" ] || continue
    real=$(readlink -f "$f")
    if [ -d "$real" ]; then mount -t tmpfs none "$real"; else mount --bind /dev/null "$real"; fi &&
      hidden=$((hidden + 1))
  done
  how="mount namespace: $hidden files and folders of the system's Open MPI covered"
else
  how="PATH only (no mount namespace here): commands hidden, libraries checked with ldd"
fi
# PATH: every folder but those with an mpicc, plus a folder of links to
# /usr/bin's tools without MPI's (cc, make and the rest stay)
mkdir -p "$WORK/bin"
for t in /usr/bin/*; do
  case ${t##*/} in mpi* | orte* | ompi* | opal*) ;; *) ln -s "$t" "$WORK/bin/" ;; esac
done
newpath=$WORK/bin
IFS=: read -ra dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  [ -n "$d" ] && [ "$d" != /usr/bin ] && [ ! -e "$d/mpicc" ] && newpath=$newpath:$d
done
export PATH=$newpath
unset MPI_HOME OPAL_PREFIX
echo "gpu-kit test: $how"

if command -v mpicc >/dev/null 2>&1 || mpirun --version >/dev/null 2>&1; then
  fail "the system's Open MPI is hidden" "" "mpicc is still $(command -v mpicc)"
else
  pass "the system's Open MPI is hidden ($how)"
fi

# ---- the kit ----------------------------------------------------------------
export GPU_KIT_PREFIX=$WORK/prefix
if source tools/gpu-node/env.sh >"$LOGS/env.log" 2>&1 &&
  [ "$(command -v mpicc)" = "$GPU_KIT_PREFIX/openmpi/bin/mpicc" ] &&
  mpirun --version 2>/dev/null | grep -q "Open MPI) $(sed -n 's/^openmpi=//p' .gpu-kit/MANIFEST)"; then
  pass "env.sh unpacks the kit, its MPI self-test passes, mpicc and mpirun are the kit's"
else
  fail "env.sh unpacks the kit, its MPI self-test passes, mpicc and mpirun are the kit's" "$LOGS/env.log"
  summary
  exit 1
fi
cat "$LOGS/env.log"

# links: every library found, and libmpi from the kit, not the system
links_kit() {
  local bin=$1 out
  out=$(ldd "$bin" 2>&1)
  echo "$out" | grep -q 'not found' && { echo "$out" | grep 'not found'; return 1; }
  echo "$out" | grep -Eq "libmpi\.so\.40 => $MPI_HOME/lib/libmpi\.so\.40" || { echo "$out" | grep mpi; return 1; }
  # and by itself, not only through env.sh's LD_LIBRARY_PATH: the kit's mpicc
  # writes its lib folder into the binary
  readelf -d "$bin" | grep -E 'RUNPATH|RPATH' | grep -q "$MPI_HOME/lib" ||
    { readelf -d "$bin" | grep -E 'RUNPATH|RPATH'; return 1; }
}

B=build/gpu-kit
rm -rf "$B" # a fresh build with this kit, every time
BINS=($B/cpu/bin/03_all_reduce/all_reduce $B/cpu/bin/05_dp/dp)
if make -s -j2 BACKEND=cpu BUILD_ROOT=$B/cpu BIN_DIR=$B/cpu/bin "${BINS[@]}" >"$LOGS/build-cpu.log" 2>&1; then
  pass "lessons 03 and 05 build with the kit's mpicc (BACKEND=cpu)"
else
  fail "lessons 03 and 05 build with the kit's mpicc (BACKEND=cpu)" "$LOGS/build-cpu.log"
fi
for b in "${BINS[@]}"; do
  if why=$(links_kit "$b"); then pass "$b loads the kit's libmpi"; else fail "$b loads the kit's libmpi" "" "$why"; fi
done
MPIRUN=mpirun # the kit's, on PATH
check "kit: 03_all_reduce np=4 with the kit's mpirun" 4 0 'CHECK PASSED' 'Open MPI v4\.1\.8' \
  -- "${BINS[0]}" --max-bytes 1M
check "kit: 05_dp np=4 with the kit's mpirun" 4 0 \
  'CHECK PASSED: each step.s loss, gradient and update match one process.s fp32 step' 'Open MPI v4\.1\.8' \
  -- "${BINS[1]}" --steps 20

if [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then
  CB=($B/cuda/bin/03_all_reduce/all_reduce $B/cuda/bin/05_dp/dp)
  if make -s -j2 BACKEND=cuda BUILD_ROOT=$B/cuda BIN_DIR=$B/cuda/bin "${CB[@]}" >"$LOGS/build-cuda.log" 2>&1 &&
    ! grep -qi warning "$LOGS/build-cuda.log"; then
    pass "lessons 03 and 05 build with the kit's mpicc and nvcc (BACKEND=cuda), no warning"
  else
    fail "lessons 03 and 05 build with the kit's mpicc and nvcc (BACKEND=cuda), no warning" "$LOGS/build-cuda.log"
  fi
  for b in "${CB[@]}"; do
    if why=$(links_kit "$b"); then pass "$b loads the kit's libmpi"; else fail "$b loads the kit's libmpi" "" "$why"; fi
  done
  if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" = 0 ]; then
    check "kit: the cuda 05_dp without a GPU names the CUDA error" 2 2 \
      'error: this binary was built with BACKEND=cuda but rank 0 sees no CUDA GPU: [A-Za-z]' \
      -- "${CB[1]}" --steps 2
  fi
else
  echo "SKIP the cuda build with the kit: no nvcc"
fi
summary
