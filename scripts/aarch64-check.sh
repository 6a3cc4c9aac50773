#!/usr/bin/env bash
# The agent on aarch64 (a Kunpeng training host): cross-builds both halves of the agent for arm64
# with Debian's cross compiler against Debian's own arm64 libraries (libtorch, gRPC, protobuf,
# abseil, OpenSSL), then, under qemu-user, runs the agent's unit tests, the server's comparison
# tests (compare_tests: every SIMD kernel against the scalar one, vec128 being NEON there), and
# a tiny real training
# (arm64 Python and torch from the same archive, the cross-built agent) checked end to end over
# mutual TLS by this machine's x86 parity-server.
#
#   scripts/aarch64-check.sh
#
# Needs root (apt-get for the host tools), the Debian archive, and the x86 build with
# parity-server (PARITY_BUILD_DIR, default build/: scripts/test.sh makes it). Keeps the arm64 root
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
if [ ! -f "$SYSROOT/.parity-root" ]; then
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
  touch "$SYSROOT/.parity-root"
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
  /usr/bin/python3 "$ROOT/tests/transport/test_aarch64.py" -v

step "done"
