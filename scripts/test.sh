#!/usr/bin/env bash
# Parity's whole test suite, from a fresh clone: installs the Debian packages it needs, builds,
# checks formatting, runs every ctest tier, then the sanitizer build (scripts/sanitize.sh). Extra
# arguments go to ctest (e.g. -L unit) and skip the sanitizer build.
#   PARITY_BUILD_DIR   build folder (default: build)
#   PARITY_SKIP_SANITIZE=1   skips the sanitizer build
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install-deps.sh
build_dir=${PARITY_BUILD_DIR:-build}
jobs=$(nproc)

start=$(date +%s)
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build_dir" -j "$jobs"
echo "test.sh: build took $(( $(date +%s) - start )) s"

scripts/check-format.sh

ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "$@"

if [[ $# -eq 0 && "${PARITY_SKIP_SANITIZE:-0}" != "1" ]]; then
  scripts/sanitize.sh
fi
