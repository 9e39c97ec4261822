#!/usr/bin/env bash
# Installs what is missing, builds opcts on every core, and runs the suite on the GPU found (as sm<XY>, or gfx<N> for
# AMD), else on the host device. Builds in the folder run-tests.sh uses (build/cuda with nvcc, else build/host),
# or on an AMD GPU without nvcc in build/hip (the HIP backend, which runs the hip.* rows).
# Writes build/<preset>/reports/junit.xml and summary.md. Environment knobs:
#   OPCTS_TIER    smoke | default | full (default: "default" on a GPU, "smoke" on the host device)
#   OPCTS_SHARDS  shards to split each family into (default 4 on the host device; on GPUs the
#                 number of shards that run at once, so that each family spreads over all of them)
#   OPCTS_SHARDS_PER_GPU  shards that share one GPU at a time (default: cores / (4 × GPUs), 1 to 4:
#                 the references run on the CPU and dominate a shard's time, so a GPU is kept
#                 busy by several shards when there are cores for their references)
#   OPCTS_CUDA_ARCH  the CUDA arch to build (default: the GPU's compute capability, else 90)
#   The CTest shards run with --bitwise (determinism checks; configure -DOPCTS_CTEST_BITWISE=OFF to leave them out)
#   and --invariance (the impls' invariance claims; -DOPCTS_CTEST_INVARIANCE=OFF leaves them out)
#   and --capture (each run recorded, a CUDA graph on a GPU, and replayed; -DOPCTS_CTEST_CAPTURE=OFF).
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$OPCTS_ROOT"
scripts/install-deps.sh --for build

arch=host
cc=""
if command -v nvidia-smi >/dev/null 2>&1; then
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .' || true)
  [ -n "$cc" ] && arch="sm$cc"
fi
# An AMD GPU: its gcnArchName (rocminfo's agent "Name: gfx942"; feature suffixes such as
# ":sramecc+:xnack-" dropped). Without nvcc the build is the hip preset's (the HIP backend, which
# runs the hip.* rows: OPCTS_HIP=ON, the kernels for this arch at -O3); the arch's manifest and
# gate apply as on any GPU.
if [ "$arch" = host ] && command -v rocminfo >/dev/null 2>&1; then
  gfx=$(rocminfo 2>/dev/null | opcts_gfx_from_rocminfo || true)
  [ -n "$gfx" ] && arch="$gfx"
fi
# An arch cases/archs.yaml does not know has no plan: say so before building.
if ! grep -q "^  $arch:\$" cases/archs.yaml; then
  echo "run-suite: found GPU arch $arch, which cases/archs.yaml does not know (known: $(sed -n 's/^  \([a-z0-9]*\):$/\1/p' cases/archs.yaml | tr '\n' ' '))" >&2
  exit 1
fi
if [ "$arch" != host ] && [ "${arch#gfx}" = "$arch" ] && [ "$OPCTS_PRESET" != cuda ]; then
  echo "run-suite: found GPU $arch but no nvcc; install the CUDA toolkit or set CUDACXX" >&2
  exit 1
fi
if [ "${arch#gfx}" != "$arch" ] && [ "$OPCTS_PRESET" != cuda ]; then
  OPCTS_PRESET=hip
  scripts/install-deps.sh --for hip
  export OPCTS_TEST_HIP_ARCHS=${OPCTS_TEST_HIP_ARCHS:-$arch} OPCTS_TEST_HIP_OPT=${OPCTS_TEST_HIP_OPT:--O3}
fi
# The folder and options run-tests.sh uses too (common.sh: opcts_configure), so running both
# builds once: build/cuda wherever nvcc is (the host device runs from it as well), build/hip on an
# AMD GPU, else build/host.
preset=$OPCTS_PRESET
tier=${OPCTS_TIER:-$([ "$arch" = host ] && echo smoke || echo default)}
cores=$(opcts_cores)
jobs=${OPCTS_SHARDS:-4}
if [ "$arch" != host ]; then
  if [ "${arch#gfx}" != "$arch" ]; then  # AMD: the KFD topology's GPU nodes (a CPU node has gfx_target_version 0)
    gpus=$(grep -ls '^gfx_target_version [1-9]' /sys/class/kfd/kfd/topology/nodes/*/properties 2>/dev/null | wc -l)
  else
    gpus=$(nvidia-smi -L | grep -c '^GPU' || true)
  fi
  [ "$gpus" -ge 1 ] || gpus=1
  per_gpu=${OPCTS_SHARDS_PER_GPU:-$((cores / (4 * gpus)))}
  [ "$per_gpu" -ge 1 ] || per_gpu=1
  [ -n "${OPCTS_SHARDS_PER_GPU:-}" ] || [ "$per_gpu" -le 4 ] || per_gpu=4
  jobs=$((gpus * per_gpu))
fi
shards=${OPCTS_SHARDS:-$jobs}

# Only what the suite needs (the opcts binary; the CTest glue is written at configure), on every core.
opcts_configure -DOPCTS_ARCHS="$arch" -DOPCTS_TIER="$tier" -DOPCTS_SHARDS="$shards"
cmake --build --preset "$preset" --target opcts -j "$cores"
# Each shard's references share the cores with the shards beside it.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(((cores + jobs - 1) / jobs))}

build="build/$preset"
rm -rf "$build/reports/$arch"
resources=()
if [ "$arch" != host ]; then
  # CTest's resource spec with $per_gpu slots a GPU: each GPU shard asks for one slot.
  "$build/bin/opcts" resources --out "$build/gpus.json"
  sed -i "s/\"slots\": *1\b/\"slots\": $per_gpu/" "$build/gpus.json"
  resources=(--resource-spec-file "$build/gpus.json")
  echo "run-suite: $gpus GPU(s), $per_gpu shard(s) per GPU, $cores cores, OMP_NUM_THREADS=$OMP_NUM_THREADS"
fi
echo "run-suite: arch $arch, tier $tier, $shards shards a family, $jobs at once"
status=0
ctest --test-dir "$build" -L "^$arch\$" -j "$jobs" "${resources[@]}" --output-on-failure --no-tests=error || status=$?
"$build/bin/opcts" report merge "$build/reports/$arch" \
  --junit "$build/reports/junit.xml" --summary "$build/reports/summary.md" --results "$build/reports/results.jsonl"
echo "run-suite: reports in $build/reports/junit.xml and $build/reports/summary.md"
exit $status
