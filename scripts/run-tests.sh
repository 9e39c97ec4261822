#!/usr/bin/env bash
# Installs what is missing, builds, then runs the harness's own tests, the host suite's smoke tier
# and the libFuzzer targets for a bounded time (scripts/run-fuzz.sh).
# With nvcc present the CUDA impls are compiled too (for one arch, OPCTS_CUDA_ARCH: the GPU's, else 90);
# with hipcc, the portable kernels for OPCTS_TEST_HIP_ARCHS (default gfx90a;gfx940, MI200 and the
# MI300 family) at OPCTS_TEST_HIP_OPT (default -O0: a compile check).
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$OPCTS_ROOT"
scripts/install-deps.sh --for all

# The fuzz targets (clang, a build of their own, a fifth of CI's CPU) build in the background at
# the lowest priority from the start: they take only the CPU the main build and the tests leave
# idle (a link, the last long kernel file, a test that waits on a child).
fuzz_build_pid=""
if [ "${OPCTS_FUZZ_SECONDS:-20}" != 0 ]; then
  mkdir -p build
  # Its own process group (setsid), so that an early exit ends the whole build with it. A new
  # session is a new scheduling autogroup where the kernel has them (sched_autogroup_enabled),
  # and nice only ranks processes inside one: the group's own nice is set too.
  OPCTS_FUZZ_OPT=${OPCTS_FUZZ_OPT:--O0} OPCTS_FUZZ_BUILD_ONLY=1 setsid bash -c \
    'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 scripts/run-fuzz.sh' >build/fuzz-build.log 2>&1 &
  fuzz_build_pid=$!
  trap '[ -n "$fuzz_build_pid" ] && kill -- -"$fuzz_build_pid" 2>/dev/null; true' EXIT
fi

# The folder and options run-suite.sh uses too (common.sh: opcts_configure): one CUDA arch
# (OPCTS_CUDA_ARCH, default the GPU's, else 90), HIP at -O0 (OPCTS_TEST_HIP_OPT: nothing runs
# these objects here, and -O3's register allocation of the spilling flash kernels was ~340 of
# the HIP build's ~370 s of CPU, cmake/hip.cmake).
cores=$(opcts_cores)
opcts_configure
cmake --build --preset "$OPCTS_PRESET" -j "$cores"

build="build/$OPCTS_PRESET"
ctest --test-dir "$build" -L selftest -j "$cores" --output-on-failure --no-tests=error \
  --output-junit "$OPCTS_ROOT/$build/reports/selftest.xml"

mkdir -p "$build/reports/host-smoke"
"$build/bin/opcts" run --arch host --tier smoke \
  --junit "$build/reports/host-smoke/junit.xml" \
  --results "$build/reports/host-smoke/results.jsonl" \
  --summary "$build/reports/host-smoke/summary.md"

# libFuzzer targets (fuzz/, clang + ASan/UBSan), OPCTS_FUZZ_SECONDS each (default 20; 0 skips),
# built at -O0 (fuzz/CMakeLists.txt: about half the build of -O1, for fewer executions a second).
if [ -n "$fuzz_build_pid" ]; then
  wait "$fuzz_build_pid" || { cat build/fuzz-build.log >&2; fuzz_build_pid=""; exit 1; }
  fuzz_build_pid=""
  cat build/fuzz-build.log
  OPCTS_FUZZ_OPT=${OPCTS_FUZZ_OPT:--O0} scripts/run-fuzz.sh "${OPCTS_FUZZ_SECONDS:-20}"
fi
