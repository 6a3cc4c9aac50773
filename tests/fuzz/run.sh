#!/usr/bin/env bash
# Builds the decoder's libFuzzer target with clang (ASan + libFuzzer) and runs it.
#   tests/fuzz/run.sh [seconds]     default 60
# The malloc limit makes libFuzzer fail any input that makes the decoder allocate more than the
# caps the target sets (32 MiB per call) plus slack, so "never allocates beyond the caps" is
# checked, not assumed.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
command -v clang++ >/dev/null || { echo "run.sh: clang++ is needed (apt-get install clang)"; exit 1; }
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DPARITY_FUZZ=ON -DPARITY_WERROR=OFF >/dev/null
cmake --build build-fuzz --target decode_fuzzer -j "$(nproc)"
mkdir -p build-fuzz/corpus
build-fuzz/tests/decode_fuzzer build-fuzz/corpus -max_total_time="$seconds" \
  -malloc_limit_mb=256 -rss_limit_mb=2048 -print_final_stats=1 2>&1 | grep -v "^\[libprotobuf"
