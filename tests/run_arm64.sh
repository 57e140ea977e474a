#!/usr/bin/env bash
# `make test-arm64`: the project on ARM64 Linux as a student's Debian has it,
# emulated on this machine: an arm64 Debian root (debootstrap) run through
# qemu-user-static (binfmt_misc), the project copied in and built there with
# the distribution's own compiler and packages, then tests/arm64_checks.sh
# inside: every lesson at NP 2 and 4 and the kernel x seed check matrix over
# OpenBLAS's ARM kernels. On an arm64 machine it runs natively.
#
# Exit 77 with "test-arm64: skipped: <reason>" where it cannot run (not
# Linux, not root, no debootstrap or qemu, binfmt_misc refused). The root is
# kept in $ARM64_ROOT (default .arm64/root, ignored by git) and reused; delete
# it to start afresh. ARM64_SUITE (bookworm: Debian 12, GCC 12),
# ARM64_MIRROR, ARM64_SCRIPT (debootstrap's script, for a suite newer than
# it knows) and ARM64_COMPONENTS choose the distribution; Ubuntu 24.04:
#   ARM64_ROOT=.arm64/noble ARM64_SUITE=noble ARM64_COMPONENTS=main,universe
#   ARM64_MIRROR=http://ports.ubuntu.com/ubuntu-ports
#   ARM64_SCRIPT=/usr/share/debootstrap/scripts/gutsy
# ARM64_MATRIX=0 leaves out the kernel matrix. Each step prints its seconds.
set -u
cd "$(dirname "$0")/.." || exit 2
source tests/lib.sh
ROOT=${ARM64_ROOT:-.arm64/root}
SUITE=${ARM64_SUITE:-bookworm}
MIRROR=${ARM64_MIRROR:-http://deb.debian.org/debian}
PACKAGES="gcc make libc6-dev libopenmpi-dev openmpi-bin libopenblas-dev procps perl"
SKIP=77
skip() { echo "test-arm64: skipped: $*"; exit $SKIP; }
die() { echo "test-arm64: $*" >&2; exit 1; }
t_start=$(now)
step() { echo "test-arm64: [$(awk -v a="$t_start" -v b="$(now)" 'BEGIN { printf "%6.0f", b - a }') s] $*"; }

case $(uname -m) in
aarch64 | arm64)
  step "native $(uname -m): the checks run here, no emulation"
  exec bash tests/arm64_checks.sh
  ;;
esac
[ "$(uname -s)" = Linux ] || skip "an emulated arm64 root needs Linux (binfmt_misc); on $(uname -s) run make test on an ARM machine"
[ "$(id -u)" = 0 ] || skip "debootstrap, chroot and binfmt_misc need root (run: sudo make test-arm64)"
command -v debootstrap >/dev/null 2>&1 || skip "no debootstrap (apt-get install debootstrap qemu-user-static binfmt-support)"
command -v qemu-aarch64-static >/dev/null 2>&1 || skip "no qemu-aarch64-static (apt-get install qemu-user-static binfmt-support)"

# binfmt_misc: the kernel runs arm64 binaries through qemu. The F flag makes
# the kernel open qemu at registration, so it works inside the chroot.
BINFMT=/proc/sys/fs/binfmt_misc
[ -f $BINFMT/status ] || mount -t binfmt_misc binfmt_misc $BINFMT 2>/dev/null ||
  skip "binfmt_misc is not mounted and cannot be (a container without the privilege?)"
if ! grep -q '^enabled' $BINFMT/qemu-aarch64 2>/dev/null; then
  update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 ||
    skip "qemu-aarch64 cannot be registered with binfmt_misc (update-binfmts --enable qemu-aarch64 failed)"
fi
grep -q '^enabled' $BINFMT/qemu-aarch64 2>/dev/null || skip "binfmt_misc's qemu-aarch64 entry is not enabled"
grep -q '^flags:.*F' $BINFMT/qemu-aarch64 || die "binfmt_misc's qemu-aarch64 lacks the F flag: the chroot cannot find qemu"

# ---- the root: debootstrap, then the packages with apt (which resolves what
# debootstrap --include cannot: virtual packages such as automake-1.16) ----
mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[$i]}" 2>/dev/null || umount -l "${mounts[$i]}"; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mount_in() { # TYPE SOURCE TARGET [OPTIONS]: mount, and unmount at exit
  mkdir -p "$3"
  mount -t "$1" ${4:+-o "$4"} "$2" "$3" || die "cannot mount $2 on $3"
  mounts+=("$3")
}
if [ ! -f "$ROOT/.dt-ready" ]; then
  if [ ! -x "$ROOT/bin/sh" ]; then
    step "debootstrap --arch=arm64 --variant=minbase $SUITE (log: $ROOT.debootstrap.log)"
    mkdir -p "$(dirname "$ROOT")"
    debootstrap --arch=arm64 --variant=minbase ${ARM64_COMPONENTS:+--components="$ARM64_COMPONENTS"} \
      "$SUITE" "$ROOT" "$MIRROR" ${ARM64_SCRIPT:+"$ARM64_SCRIPT"} >"$ROOT.debootstrap.log" 2>&1 ||
      { tail -n 5 "$ROOT.debootstrap.log"; rm -rf "$ROOT"; skip "debootstrap could not make the root (no network to $MIRROR? see $ROOT.debootstrap.log)"; }
  fi
  step "apt-get install $PACKAGES (emulated)"
  cp /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null
  mount_in proc proc "$ROOT/proc"
  chroot "$ROOT" /usr/bin/env DEBIAN_FRONTEND=noninteractive sh -c \
    "apt-get update -qq && apt-get install -y -qq --no-install-recommends $PACKAGES" >"$ROOT.apt.log" 2>&1 ||
    { tail -n 5 "$ROOT.apt.log"; skip "apt-get in the arm64 root could not install the packages (no network? see $ROOT.apt.log)"; }
  touch "$ROOT/.dt-ready"
  cleanup; mounts=()
fi
chroot "$ROOT" /bin/true || skip "the arm64 root does not run here (binfmt_misc and qemu did not take it)"

# ---- the project, as a fresh clone has it (tracked and new files, no build) ----
step "copy the project into $ROOT/src"
rm -rf "$ROOT/src"; mkdir -p "$ROOT/src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -co --exclude-standard -z | xargs -0 tar cf - | tar xf - -C "$ROOT/src"
else
  tar cf - --exclude=./build --exclude=./.arm64 . | tar xf - -C "$ROOT/src"
fi

mount_in proc proc "$ROOT/proc"
# sysfs: without its cpu topology hwloc finds no cores, and Open MPI then
# refuses NP 2 on a 2-core machine ("all nodes ... are already filled")
mount_in sysfs sysfs "$ROOT/sys" ro
mount_in tmpfs tmpfs "$ROOT/dev/shm" mode=1777 # Open MPI's shared memory
step "run tests/arm64_checks.sh inside ($(chroot "$ROOT" uname -m), $(chroot "$ROOT" sh -c '. /etc/os-release; echo "$PRETTY_NAME"'))"
chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  ${ARM64_KERNELS:+KERNELS="$ARM64_KERNELS"} ${ARM64_SEEDS:+KERNEL_SEEDS="$ARM64_SEEDS"} \
  ${ARM64_NP:+ARM64_NP="$ARM64_NP"} ${ARM64_MATRIX:+ARM64_MATRIX="$ARM64_MATRIX"} \
  bash -c 'cd /src && bash tests/arm64_checks.sh'
rc=$?
step "done, exit $rc"
exit $rc
