#!/usr/bin/env bash
# Builds the comparison library and its tests (compare_tests: metrics, verdict rules, every SIMD
# kernel against the scalar one) for AArch64 and runs them under qemu-user: the vec128 kernel is
# NEON there, the kernel Kunpeng, Graviton and Grace hosts run. Not part of the test suite: it
# needs a cross compiler and arm64 libraries, which change the machine's package architectures:
#
#   dpkg --add-architecture arm64 && apt-get update &&
#   apt-get install g++-aarch64-linux-gnu qemu-user \
#       libprotobuf-dev:arm64 libabsl-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64
#
# Usage: scripts/cross-check-aarch64.sh [BUILD_DIR]   (BUILD_DIR: a configured x86-64 build, for
# the generated parity.pb.cc and standards_data.cc; default build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${build}/aarch64
cxx=aarch64-linux-gnu-g++
for tool in "$cxx" qemu-aarch64; do
  command -v "$tool" >/dev/null || {
    echo "$tool not found: see the packages at the top of $0" >&2
    exit 2
  }
done
ninja -C "$build" parity_proto parity_compare >/dev/null  # the generated sources
for f in "$build/proto/parity/v1/parity.pb.cc" "$build/server/standards_data.cc"; do
  [[ -f $f ]] || { echo "$f missing: configure $build first" >&2; exit 2; }
done
mkdir -p "$out"

sources=(
  "$build/proto/parity/v1/parity.pb.cc" "$build/server/standards_data.cc"
  common/config.cc common/config_reader.cc common/dtype.cc common/log.cc
  server/compare/judge.cc server/compare/metrics.cc server/compare/metrics_simd.cc
  server/compare/standards.cc
  tests/server/metrics_test.cc tests/server/judge_test.cc tests/server/metrics_kernel_test.cc)
objects=()
for src in "${sources[@]}"; do
  obj="$out/$(echo "$src" | tr / _).o"
  objects+=("$obj")
  [[ $obj -nt $src ]] && continue
  echo "compiling $src"
  "$cxx" -std=c++17 -O2 -Wall -Wextra -Werror -I. -I"$build/proto" -c "$src" -o "$obj" &
  while (($(jobs -r | wc -l) >= $(nproc))); do wait -n; done
done
wait
echo "linking $out/compare_tests"
"$cxx" -o "$out/compare_tests" "${objects[@]}" \
  -lgmock -lgtest -lgtest_main -lprotobuf \
  $(PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig \
    pkg-config --libs absl_statusor absl_strings absl_str_format) -pthread
file "$out/compare_tests"
# Debian bookworm's qemu-user (7.2) never returns from creating a thread (a five-line
# std::thread program hangs too), so the one test that compares thread counts is left out.
for kernel in vec128 scalar; do
  echo "PARITY_COMPARE_KERNEL=$kernel"
  timeout 600 qemu-aarch64 -L /usr/aarch64-linux-gnu \
    -E LD_LIBRARY_PATH=/usr/lib/aarch64-linux-gnu -E PARITY_COMPARE_KERNEL=$kernel \
    "$out/compare_tests" --gtest_brief=1 --gtest_filter=-*ResultsDoNotDependOnTheNumberOfThreads
done
