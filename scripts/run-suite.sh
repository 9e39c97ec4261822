#!/usr/bin/env bash
# Installs what is missing, builds, and runs the suite on the GPU found (as sm<XY>, or gfx<N> for AMD), else on the host device.
# Writes build/<preset>/reports/junit.xml and summary.md. Environment knobs:
#   OPCTS_TIER    smoke | default | full (default: "default" on a GPU, "smoke" on the host device)
#   OPCTS_SHARDS  shards to split the run into, run in parallel on the host device (default 4)
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$OPCTS_ROOT"
scripts/install-deps.sh

arch=host
cc=""
if command -v nvidia-smi >/dev/null 2>&1; then
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .' || true)
  [ -n "$cc" ] && arch="sm$cc"
fi
# An AMD GPU: its gcnArchName (rocminfo's agent "Name: gfx942"; feature suffixes such as
# ":sramecc+:xnack-" dropped). The hip.* rows are SKIP until opcts runs them through a HIP
# backend (issue 15); the arch's manifest and gate apply as on any GPU.
if [ "$arch" = host ] && command -v rocminfo >/dev/null 2>&1; then
  gfx=$(rocminfo 2>/dev/null | opcts_gfx_from_rocminfo || true)
  [ -n "$gfx" ] && arch="$gfx"
fi
preset=host
extra=()
if [ "$arch" != host ] && [ "${arch#gfx}" = "$arch" ]; then
  if [ "$OPCTS_PRESET" != cuda ]; then
    echo "run-suite: found GPU $arch but no nvcc; install the CUDA toolkit or set CUDACXX" >&2
    exit 1
  fi
  preset=cuda
  extra+=("-DCMAKE_CUDA_ARCHITECTURES=$cc")
fi
tier=${OPCTS_TIER:-$([ "$arch" = host ] && echo smoke || echo default)}
shards=${OPCTS_SHARDS:-4}

cmake --preset "$preset" "${extra[@]}" -DOPCTS_ARCHS="$arch" -DOPCTS_TIER="$tier" -DOPCTS_SHARDS="$shards"
cmake --build --preset "$preset" -j "$(nproc)"

build="build/$preset"
rm -rf "$build/reports/$arch"
jobs=1
[ "$arch" = host ] && jobs=$shards
echo "run-suite: arch $arch, tier $tier, $shards shards"
status=0
ctest --test-dir "$build" -L "^$arch\$" -j "$jobs" --output-on-failure --no-tests=error || status=$?
"$build/bin/opcts" report merge "$build/reports/$arch" \
  --junit "$build/reports/junit.xml" --summary "$build/reports/summary.md" --results "$build/reports/results.jsonl"
echo "run-suite: reports in $build/reports/junit.xml and $build/reports/summary.md"
exit $status
