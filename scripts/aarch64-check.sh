#!/usr/bin/env bash
# The agent on aarch64 (a Kunpeng training host): cross-builds both halves of the agent for arm64
# with Debian's cross compiler against Debian's own arm64 libraries (libtorch, gRPC, protobuf,
# abseil, OpenSSL), then, under qemu-user, runs the agent's unit tests, the server's comparison
# tests (compare_tests: every SIMD kernel against the scalar one, vec128 being NEON there), and
# a tiny real training
# (arm64 Python and torch from the same archive, the cross-built agent) checked end to end over
# mutual TLS by this machine's x86 parity-server. Then the Ascend host's own combination, minus
# torch_npu: PyPI's aarch64 torch 2.1.0 wheel in a venv of the arm64 root, the agent installed
# there by the README's commands (arm64 pip, CMake and g++, all under qemu-user through
# binfmt_misc in a chroot), and train_mlp.py trained 2 steps with it, checked by the x86 server.
#
#   scripts/aarch64-check.sh
#
# Needs root (apt-get for the host tools, mounts and binfmt_misc for the chroot), the Debian
# archive, PyPI (the wheels, kept in PARITY_TORCH_CACHE, default /var/cache/parity-torch, so a
# rerun downloads nothing), and the x86 build with parity-server (PARITY_BUILD_DIR, default
# build/: scripts/test.sh makes it). PARITY_AARCH64_WHEEL=0 leaves the wheel stage out. Keeps the arm64 root
# and the cross build in PARITY_AARCH64_WORK (default build-aarch64/): a second run reuses them.
# Not in CI (the emulated training alone takes minutes); docs/install.md#aarch64 quotes a run.
#
# The root is debootstrap's first stage (every package downloaded and unpacked, none configured:
# configuring runs the arm64 maintainer scripts, slow under emulation and not needed to link
# against libtorch or to run it), plus the two links those scripts would have made (the BLAS and
# LAPACK alternatives libtorch loads).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${PARITY_AARCH64_WORK:-$ROOT/build-aarch64}"
SYSROOT="$WORK/rootfs"
XBUILD="$WORK/build"
HOST_BUILD="${PARITY_BUILD_DIR:-$ROOT/build}"
MIRROR="${PARITY_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES=libtorch-dev,python3-torch,libgrpc++-dev,protobuf-compiler-grpc,libprotobuf-dev,libabsl-dev,libssl-dev,libgtest-dev,libgmock-dev,nlohmann-json3-dev,libc-ares-dev,zlib1g-dev,libre2-dev
# What the README's install needs on the host: the venv, pip, CMake, a compiler.
PACKAGES+=,python3-venv,python3-pip,cmake,g++,make,ninja-build
WHEEL_TORCH=2.1.0
CACHE="${PARITY_TORCH_CACHE:-/var/cache/parity-torch}/aarch64"
START=$(date +%s)
step() { echo "== [$(($(date +%s) - START)) s] $*"; }

if [ ! -x "$HOST_BUILD/server/parity-server" ]; then
  echo "aarch64-check: no $HOST_BUILD/server/parity-server; build the project first (scripts/test.sh)" >&2
  exit 2
fi

step "host tools: debootstrap, qemu-user-static, g++-aarch64-linux-gnu"
need=()
for p in debootstrap qemu-user-static g++-aarch64-linux-gnu binutils; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi

step "the arm64 root ($SYSROOT)"
if [ ! -f "$SYSROOT/.parity-root-2" ]; then  # -2: the root holds the install's tools
  rm -rf "$SYSROOT"
  mkdir -p "$WORK"
  debootstrap --arch=arm64 --foreign --variant=minbase --include="$PACKAGES" bookworm "$SYSROOT" \
    "$MIRROR" >"$WORK/debootstrap.log" 2>&1 || {
    tail -20 "$WORK/debootstrap.log" >&2
    exit 1
  }
  for deb in "$SYSROOT"/var/cache/apt/archives/*.deb; do dpkg-deb -x "$deb" "$SYSROOT"; done
  ln -sf blas/libblas.so.3 "$SYSROOT/usr/lib/aarch64-linux-gnu/libblas.so.3"
  ln -sf lapack/liblapack.so.3 "$SYSROOT/usr/lib/aarch64-linux-gnu/liblapack.so.3"
  touch "$SYSROOT/.parity-root-2"
fi
ls "$SYSROOT"/var/cache/apt/archives/ | grep -E '^(libtorch1|python3-torch|libgrpc\+\+1|libprotobuf3)' | sed 's/^/   /'

step "cross-build: the agent's two halves, its server-free unit tests, the comparison tests"
cmake -S "$ROOT" -B "$XBUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/aarch64-linux-gnu.cmake" -DPARITY_AARCH64_ROOT="$SYSROOT" \
  -DPARITY_AGENT_ONLY=ON -DPARITY_AGENT_TESTS=ON >"$WORK/cmake.log"
ninja -C "$XBUILD"
for lib in "$XBUILD/agent/libparity_agent.so" "$XBUILD/agent/libparity_transport.so"; do
  echo "   $(basename "$lib"): $(readelf -h "$lib" | sed -n 's/^ *Machine: *//p')"
done

QEMU=(qemu-aarch64-static -L "$SYSROOT")
step "the agent's unit tests and the comparison tests, arm64 under qemu-user"
for t in common_tests agent_unit_tests compare_tests; do
  "${QEMU[@]}" "$XBUILD/tests/$t" --gtest_brief=1 --gtest_color=no | tail -3
done

step "a tiny training on arm64 (train_mlp.py, 2 steps), checked by the x86 server"
PARITY_BUILD_DIR="$HOST_BUILD" PARITY_AARCH64_WORK="$WORK" \
  /usr/bin/python3 "$ROOT/tests/transport/test_aarch64.py" -v Aarch64TrainingTest

if [ "${PARITY_AARCH64_WHEEL:-1}" = 0 ]; then
  step "done (PARITY_AARCH64_WHEEL=0: no wheel stage)"
  exit 0
fi

step "PyPI's aarch64 torch $WHEEL_TORCH wheel and its dependencies (cached in $CACHE)"
mkdir -p "$CACHE"
/usr/bin/python3 -m pip download -q --only-binary=:all: --platform manylinux2014_aarch64 \
  --python-version 3.11 --implementation cp -d "$CACHE" "torch==$WHEEL_TORCH" "numpy<2" \
  setuptools wheel  # torch 2.1 was built against NumPy 1
ls "$CACHE" | grep -E '^torch-' | sed 's/^/   /'

# The chroot runs arm64 programs through binfmt_misc (F: qemu is opened when registered, so it
# need not be inside the root), with the host's /dev and /sys (torch reads the processors from
# /sys; without it, it crashed under qemu-user) and a /proc of its own.
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
  [ -e /proc/sys/fs/binfmt_misc/register ] ||
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  cat /usr/lib/binfmt.d/qemu-aarch64.conf >/proc/sys/fs/binfmt_misc/register
fi
mounted=()
unmount() { for m in "${mounted[@]}"; do umount -l "$m" || true; done; }
trap unmount EXIT
mount --bind /dev "$SYSROOT/dev" && mounted+=("$SYSROOT/dev")
mount --bind /sys "$SYSROOT/sys" && mounted+=("$SYSROOT/sys")
mount -t proc proc "$SYSROOT/proc" && mounted+=("$SYSROOT/proc")
mkdir -p "$SYSROOT/wheels" && mount --bind "$CACHE" "$SYSROOT/wheels" && mounted+=("$SYSROOT/wheels")
in_root() { chroot "$SYSROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels PIP_DISABLE_PIP_VERSION_CHECK=1 "$@"; }
in_root /sbin/ldconfig

VENV="/opt/torch-$WHEEL_TORCH"
step "a venv in the root ($VENV) with the wheel: arm64 pip under qemu-user (offline: /wheels)"
[ -x "$SYSROOT$VENV/bin/python" ] || in_root /usr/bin/python3 -m venv "$VENV"
in_root "$VENV/bin/python" -m pip install -q \
  "/wheels/torch-$WHEEL_TORCH-cp311-cp311-manylinux2014_aarch64.whl" "numpy<2"
in_root "$VENV/bin/python" -c 'import platform, torch
print("   python", platform.python_version(), platform.machine(), "torch", torch.__version__,
      "C++11 ABI", int(torch._C._GLIBCXX_USE_CXX11_ABI))'

step "the agent installed by the README's commands (arm64 CMake and g++ under qemu-user)"
rm -rf "$SYSROOT/opt/parity" && mkdir -p "$SYSROOT/opt/parity"
git -C "$ROOT" ls-files -co --exclude-standard -z | tar -C "$ROOT" --null -T - -cf - |
  tar -C "$SYSROOT/opt/parity" -xf -
mkdir -p "$SYSROOT/opt/parity-build"
installed=$(date +%s)
in_root /usr/bin/env PARITY_PIP_BUILD_DIR=/opt/parity-build/torch-$WHEEL_TORCH sh -c "
  cd /tmp && $VENV/bin/python -m pip install -q setuptools wheel &&
  $VENV/bin/python -m pip install -q --no-build-isolation /opt/parity/python"
echo "   installed in $(($(date +%s) - installed)) s"
in_root "$VENV/bin/python" -c 'import json, os, parity
d = os.path.dirname(parity.__file__)
print("   parity from", d, json.load(open(os.path.join(d, "_build_info.json"))))'

step "a tiny training on arm64 with PyPI's torch $WHEEL_TORCH and the pip-installed agent"
PARITY_BUILD_DIR="$HOST_BUILD" PARITY_AARCH64_WORK="$WORK" PARITY_AARCH64_VENV="$VENV" \
  /usr/bin/python3 "$ROOT/tests/transport/test_aarch64.py" -v Aarch64WheelTrainingTest

step "done"
