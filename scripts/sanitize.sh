#!/usr/bin/env bash
# The server's untrusted-input paths under AddressSanitizer and UndefinedBehaviorSanitizer: builds
# the tests that decode, replay and serve calls from the network (and the reference kernels that
# run on them) with -fsanitize=address,undefined
# in their own build folder and runs them. scripts/test.sh runs it after the main suite.
#   PARITY_SANITIZE_BUILD_DIR   build folder (default: build-asan)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${PARITY_SANITIZE_BUILD_DIR:-build-asan}
targets=(codec_tests decode_fuzz_replay replay_tests server_tests oplib_tests)

start=$(date +%s)
# Warnings stay warnings here: GCC's sanitizer instrumentation makes some of its own headers
# (<regex>) warn, and the main build already holds the code to -Werror.
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPARITY_SANITIZE=address,undefined -DPARITY_WERROR=OFF >/dev/null
cmake --build "$build_dir" --target "${targets[@]}" -j "$(nproc)"
echo "sanitize.sh: build took $(( $(date +%s) - start )) s"

# Leak checking is off: libtorch and gRPC keep process-lifetime singletons that LeakSanitizer
# reports at exit. Everything else (overflows, use-after-free, undefined behaviour) aborts.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
for t in "${targets[@]}"; do
  args=()
  [[ "$t" == *_tests ]] && args=(--gtest_brief=1)  # decode_fuzz_replay takes input files
  if "$build_dir/tests/$t" "${args[@]}" >"$build_dir/$t.log" 2>&1; then
    echo "sanitize.sh: $t clean ($(grep -Eo '[0-9]+ tests? from [0-9]+ test suites? ran|survived [0-9]+ mutated messages' "$build_dir/$t.log" | tail -1))"
  else
    echo "sanitize.sh: $t FAILED under the sanitizers:" >&2
    grep -E "ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer)|runtime error|FAILED" \
      "$build_dir/$t.log" | head -20 >&2
    status=1
  fi
done
exit $status
