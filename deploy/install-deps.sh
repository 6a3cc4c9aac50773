#!/usr/bin/env bash
# Installs the Debian packages Parity needs to build, test and run the demo.
# Idempotent: when every package is already installed it does nothing (no apt-get call).
# Usage: deploy/install-deps.sh [--print]   (--print lists the packages and exits)
set -euo pipefail

PACKAGES=(
  # toolchain
  cmake ninja-build g++ ccache pkg-config clang
  # libtorch (C++) and the Python torch used by the agent's Python front-end
  libtorch-dev python3-torch python3 python3-yaml
  # pip install of the agent into a virtual environment (docs/install.md; tests/e2e)
  python3-pip python3-venv python3-setuptools python3-wheel
  # transport, codec, metrics
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libssl-dev openssl prometheus-cpp-dev nlohmann-json3-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev prometheus
)

if [[ "${1:-}" == "--print" ]]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${#missing[@]} missing package(s): ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# Debian's prometheus package starts a system service listening on :9090; the tests run their own
# instance on a free loopback port, so the system one is left alone (it is harmless).
echo "install-deps: done"
