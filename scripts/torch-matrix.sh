#!/usr/bin/env bash
# The torch matrix: Parity's agent on the pip torch wheels its users run, checked by a server
# built here with Debian's torch (docs/install.md#the-torch-matrix).
#
#   scripts/torch-matrix.sh [VERSION ...]     (default: 2.1.0 2.6.0 and the newest release)
#   scripts/torch-matrix.sh --server-torch 2.15.0 2.15.0    (the server built against a wheel)
#   scripts/torch-matrix.sh --server-torch 2.15.0 --build-only   (only that build: a CUDA wheel
#                                      builds the CUDA compare, its GPU tests and replay_bench)
#
# For each version: a virtual environment of /usr/bin/python3 with that torch wheel from PyPI
# (the wheels are kept in PARITY_TORCH_CACHE, outside the checkout, so a rerun downloads
# nothing), the agent installed there by the README's own commands, the test libraries a training
# loads built against that torch, then the Python suites run with that interpreter against the
# server of PARITY_BUILD_DIR. Prints a table (torch x ABI x suite -> outcome, calls checked,
# recall, false errors) and writes it, with every log, under build/torch-matrix/. With
# --server-torch VERSION, the server is first built against that pip torch (its CMake config, as
# on a GPU host) and the suites run against it instead (build/torch-matrix/server-VERSION/).
#
#   PARITY_TORCH_CACHE     wheels and virtual environments (default /var/cache/parity-torch)
#   PARITY_MATRIX_SUITES   the suites, comma-separated (default: all; --list shows them)
#   PARITY_BUILD_DIR       the server's build (default build/; what is missing is built)
#
# Not in CI: PyPI's x86_64 torch wheels are CUDA builds that bring several GB of nvidia-* wheels.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" != "--list" ]]; then
  deploy/install-deps.sh
  build=${PARITY_BUILD_DIR:-build}
  [[ -f "$build/CMakeCache.txt" ]] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build "$build" -j "$(nproc)" --target parity-server parity_npu_reference parity_transport
fi
exec /usr/bin/python3 scripts/torch_matrix.py "$@"
