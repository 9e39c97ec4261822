#!/usr/bin/env bash
# Installs what is missing, builds, then runs the harness's own tests, the host suite's smoke tier
# and the libFuzzer targets for a bounded time (scripts/run-fuzz.sh).
# With nvcc present the CUDA impls are compiled too (for one arch, OPCTS_TEST_CUDA_ARCH, default 90).
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$OPCTS_ROOT"
scripts/install-deps.sh

extra=()
[ "$OPCTS_PRESET" = cuda ] && extra+=("-DCMAKE_CUDA_ARCHITECTURES=${OPCTS_TEST_CUDA_ARCH:-90}")
cmake --preset "$OPCTS_PRESET" "${extra[@]}"
cmake --build --preset "$OPCTS_PRESET" -j "$(nproc)"

build="build/$OPCTS_PRESET"
ctest --test-dir "$build" -L selftest -j "$(nproc)" --output-on-failure --no-tests=error \
  --output-junit "$OPCTS_ROOT/$build/reports/selftest.xml"

mkdir -p "$build/reports/host-smoke"
"$build/bin/opcts" run --arch host --tier smoke \
  --junit "$build/reports/host-smoke/junit.xml" \
  --results "$build/reports/host-smoke/results.jsonl" \
  --summary "$build/reports/host-smoke/summary.md"

# libFuzzer targets (fuzz/, clang + ASan/UBSan), OPCTS_FUZZ_SECONDS each (default 20; 0 skips).
if [ "${OPCTS_FUZZ_SECONDS:-20}" != 0 ]; then scripts/run-fuzz.sh "${OPCTS_FUZZ_SECONDS:-20}"; fi
