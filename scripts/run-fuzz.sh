#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/CMakeLists.txt, with clang, ASan + UBSan) in build/fuzz and
# runs each for SECONDS_PER_TARGET (default 60) over a temporary copy of its seed corpus
# fuzz/corpus/<target>/ (the tree is not written to). Prints one line per target; exits 1 when
# any target finds a crash, UB, a leak, a timeout or an out-of-memory, and leaves the input
# that did it in build/fuzz/artifacts/. Without clang it says so and exits 0 (skipped).
#   scripts/run-fuzz.sh [SECONDS_PER_TARGET]
#   OPCTS_FUZZ_TARGETS="junit catalog"   only these targets
#   OPCTS_FUZZ_JOBS=N                    targets run at once (default: nproc)
#   OPCTS_FUZZ_OPT=-O0                   the targets' optimisation (default -O1; fuzz/CMakeLists.txt)
#   OPCTS_FUZZ_BUILD_ONLY=1              build the targets, run none (run-tests.sh builds them
#                                        alongside its own build and tests)
set -euo pipefail
OPCTS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$OPCTS_ROOT"

seconds=${1:-60}
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "usage: $0 [SECONDS_PER_TARGET]" >&2; exit 2; }
targets=(${OPCTS_FUZZ_TARGETS:-catalog manifest tolerance junit suite cli})
jobs=${OPCTS_FUZZ_JOBS:-$(nproc)}
build=build/fuzz

cxx=${OPCTS_FUZZ_CXX:-$(command -v clang++ || command -v clang++-14 || true)}
if [ -z "$cxx" ]; then
  echo "run-fuzz: SKIPPED: no clang++ found (scripts/install-deps.sh installs clang and libclang-rt-dev)"
  exit 0
fi
cc=${OPCTS_FUZZ_CC:-${cxx/clang++/clang}}

# libFuzzer ships in libclang-rt-<N>-dev, which clang does not pull in.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <cstddef>\n#include <cstdint>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n' \
  >"$probe/p.cpp"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" 2>"$probe/err"; then
  cat "$probe/err" >&2
  echo "run-fuzz: $cxx cannot link libFuzzer: install libclang-rt-dev (scripts/install-deps.sh)" >&2
  exit 1
fi

CC="$cc" CXX="$cxx" cmake -S fuzz -B "$build" -DCMAKE_CXX_COMPILER="$cxx" -DOPCTS_FUZZ_OPT="${OPCTS_FUZZ_OPT:--O1}" >/dev/null
cmake --build "$build" -j "$(nproc)" -- --no-print-directory >/dev/null ||
  { cmake --build "$build" -j 1; exit 1; }  # again, serially, to show the first error
if [ "${OPCTS_FUZZ_BUILD_ONLY:-0}" = 1 ]; then echo "run-fuzz: built $build (no target run)"; exit 0; fi

work=$(mktemp -d)
trap 'rm -rf "$probe" "$work"' EXIT
mkdir -p "$build/artifacts" "$build/logs"
symbolizer=$(command -v llvm-symbolizer || true)
[ -n "$symbolizer" ] && export ASAN_SYMBOLIZER_PATH=$symbolizer

# One target: fuzz a copy of its corpus; its temp files go to its own TMPDIR (the targets make
# a folder there per process), removed with $work even when the target aborts.
run_target() {
  local t=$1 corpus="$work/$1/corpus" tmp="$work/$1/tmp" log="$build/logs/fuzz_$1.log"
  mkdir -p "$corpus" "$tmp"
  cp -r "fuzz/corpus/$t/." "$corpus/" 2>/dev/null || true
  set +e
  # Capped in wall time: libFuzzer's report of an out-of-memory can itself run for minutes
  # (seen: over 4 min) and would hold CI until its job limit.
  TMPDIR="$tmp" UBSAN_OPTIONS=print_stacktrace=1 timeout -k 10 $((seconds + 120)) "$build/bin/fuzz_$t" "$corpus" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=60 -print_final_stats=1 \
    -artifact_prefix="$OPCTS_ROOT/$build/artifacts/fuzz_$t-" >"$log" 2>&1
  local rc=$?
  set -e
  local runs cov files
  runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  files=$(find "$corpus" -type f | wc -l)
  if [ "$rc" -eq 0 ]; then
    echo "fuzz_$t: OK: ${runs:-?} runs in ${seconds} s, coverage ${cov:-?}, corpus $files inputs" >"$work/$t.result"
  else
    local what artifact
    what=$(grep -m1 -o -E 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer): [a-z-]+|runtime error: .*|invariant violated: .*' "$log" ||
      { [ "$rc" -ge 124 ] && echo "ran past $((seconds + 120)) s (killed)"; } || echo "exit $rc")
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    echo "fuzz_$t: FAILED: ${what:0:300}; input ${artifact:-none}; log $log; reproduce: $build/bin/fuzz_$t ${artifact:-}" \
      >"$work/$t.result"
  fi
}

running=0
for t in "${targets[@]}"; do
  [ -x "$build/bin/fuzz_$t" ] || { echo "run-fuzz: no target fuzz_$t" >&2; exit 2; }
  run_target "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
done
wait

failed=0
for t in "${targets[@]}"; do
  line=$(cat "$work/$t.result" 2>/dev/null || echo "fuzz_$t: FAILED: no result")
  echo "$line"
  case "$line" in *": OK:"*) ;; *) failed=1; tail -n 40 "$build/logs/fuzz_$t.log" >&2 || true ;; esac
done
if [ "$failed" -ne 0 ]; then
  echo "run-fuzz: FAILED (inputs that fail are in $build/artifacts/; see the logs in $build/logs/)" >&2
  exit 1
fi
echo "run-fuzz: ${#targets[@]} targets, $seconds s each: no crash, UB, leak or invariant violation"
