#!/usr/bin/env bash
# Judges PyTorch's own GPU operators (aten.*) and the Triton SDPA kernel (triton.sdpa) with opcts:
# builds plugins/aten against the PyTorch it finds (libtorch through torch.utils.cmake_prefix_path)
# and, when Triton imports, plugins/triton with Triton's AOT compiler; then runs both plugins'
# cases on the NVIDIA GPUs found, in one shard per core (spread over the GPUs), with the manifest
# of PyTorch's findings where the arch has one (cases/manifests/<arch>_pytorch.yaml). Needs an
# opcts binary built for this GPU (docs/plugins.md, "PyTorch's operators"). Writes
# build/pytorch/reports/pytorch.{jsonl,xml,md} (merged from the shards in build/pytorch/reports/shards/).
#
#   scripts/run-pytorch-plugins.sh [--tier smoke|default|full]
#
# Exit status: 0 when every case met its expectation; 1 for a gate failure (the report says which
# case), a plugin that did not build or load, or a runner error; 2 for a usage error. Stopped by
# SIGINT or SIGTERM, it stops the shards (each keeps what it finished) and merges what they wrote.
#
# Environment: PYTHON (the Python with torch; default python3), OPCTS (the opcts binary; default
# build/cuda/bin/opcts), OPCTS_ARCH (the arch to plan for when nvidia-smi cannot say; default the
# GPU's sm<XY>), OPCTS_PLUGIN_JOBS (shards, run at once; default: one per CPU core).
set -euo pipefail
# OPCTS and PYTHON may be relative to where the script was called from (PYTHON may also be a
# command on PATH).
absolute() { if [ -n "$1" ] && [ "${1#/}" = "$1" ] && [ -e "$1" ]; then echo "$PWD/$1"; else echo "$1"; fi; }
opcts=$(absolute "${OPCTS:-}")
python=${PYTHON:-python3}
case "$python" in */*) python=$(absolute "$python") ;; esac
source "$(dirname "$0")/common.sh"
cd "$OPCTS_ROOT"
opcts=${opcts:-build/cuda/bin/opcts}
tier=smoke
while [ $# -gt 0 ]; do
  case "$1" in
    --tier)
      [ $# -ge 2 ] || { echo "run-pytorch-plugins: --tier needs smoke, default or full" >&2; exit 2; }
      tier=$2; shift 2 ;;
    *) echo "run-pytorch-plugins: unknown argument '$1' (usage: $0 [--tier smoke|default|full])" >&2; exit 2 ;;
  esac
done
case "$tier" in smoke|default|full) ;; *) echo "run-pytorch-plugins: --tier '$tier': smoke, default or full" >&2; exit 2 ;; esac
[ -x "$opcts" ] || { echo "run-pytorch-plugins: no opcts binary at $opcts (docs/plugins.md; or set OPCTS)" >&2; exit 1; }
if ! torch_dir=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null); then
  echo "run-pytorch-plugins: '$python' cannot import torch (set PYTHON to the Python that has PyTorch)" >&2
  exit 1
fi
prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
arch=${OPCTS_ARCH:-}
if [ -z "$arch" ]; then
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .' || true)
  [ -n "$cc" ] || { echo "run-pytorch-plugins: no NVIDIA GPU found by nvidia-smi (OPCTS_ARCH names the arch where a GPU is there but nvidia-smi is not)" >&2; exit 1; }
  arch="sm$cc"
fi
[ "$gpus" -ge 1 ] 2>/dev/null || gpus=1
out=build/pytorch
report="$out/reports/pytorch"
shards="$out/reports/shards"
mkdir -p "$out/reports"
rm -rf "$shards" "$report".jsonl "$report".xml "$report".md  # no earlier run's report survives this one
status=0

echo "== libopcts_aten against $("$python" -c 'import torch; print("PyTorch", torch.__version__)')"
cmake -S plugins/aten -B "$out/aten" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >"$out/aten_cmake.log" 2>&1 ||
  { tail -20 "$out/aten_cmake.log" >&2; exit 1; }
cmake --build "$out/aten" -j "$(nproc)" >"$out/aten_build.log" 2>&1 || { tail -30 "$out/aten_build.log" >&2; exit 1; }
plugins=("$out/aten/libopcts_aten.so")
if "$python" -c 'import triton' 2>/dev/null; then
  echo "== libopcts_triton with $("$python" -c 'import triton; print("Triton", triton.__version__)')"
  if PYTHON="$python" plugins/triton/build.sh "$out/triton" >"$out/triton_build.log" 2>&1; then
    plugins+=("$out/triton/libopcts_triton.so")
  else
    tail -20 "$out/triton_build.log" >&2
    echo "run-pytorch-plugins: plugins/triton did not build ($out/triton_build.log): running aten.* alone, exit 1 at the end" >&2
    status=1
  fi
else
  echo "== no Triton in '$python': triton.sdpa is not built"
fi

# PyTorch's wheels carry their own CUDA libraries (cuDNN, cuBLAS, ...) under site-packages/nvidia;
# opcts links cuBLASLt and cuDNN by soname, so those come first and both use the versions PyTorch
# was built with.
nvlibs=$( (find "$(dirname "$torch_dir")/nvidia" -name "lib*.so*" -printf "%h\n" 2>/dev/null || true) | sort -u | tr "\n" ":")
export LD_LIBRARY_PATH="${nvlibs}${torch_dir}/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
manifest=()
[ -f "cases/manifests/${arch}_pytorch.yaml" ] && manifest=(--manifest "cases/manifests/${arch}_pytorch.yaml")
plugin_args=()
for p in "${plugins[@]}"; do plugin_args+=(--plugin "$p"); done

# OPCTS_PLUGIN_JOBS shards of every family's cases at once (the references run on the CPU, one
# thread per process; each process loads PyTorch once, ~10 s with 16 starting together), shard i
# on GPU (i - 1) mod <GPUs>, merged into one report.
jobs_at_once=${OPCTS_PLUGIN_JOBS:-$(nproc)}
[ "$jobs_at_once" -ge 1 ] 2>/dev/null || { echo "run-pytorch-plugins: OPCTS_PLUGIN_JOBS must be a positive number" >&2; exit 2; }
threads=$(( $(nproc) / jobs_at_once )); [ "$threads" -ge 1 ] || threads=1
mkdir -p "$shards"
pids=()
merge() {
  "$opcts" report merge --results "$report.jsonl" --junit "$report.xml" --summary "$report.md" "$shards"/*.jsonl >/dev/null ||
    { echo "run-pytorch-plugins: no results to merge (see $shards/*.txt)" >&2; exit 1; }
}
stopped() {
  trap - INT TERM
  echo "run-pytorch-plugins: stopped; stopping the shards and merging what they finished" >&2
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  merge
  echo "partial report: $report.{jsonl,xml,md}" >&2
  exit 1
}
trap stopped INT TERM
for i in $(seq 1 "$jobs_at_once"); do
  OMP_NUM_THREADS=$threads "$opcts" run --arch "$arch" --tier "$tier" "${plugin_args[@]}" ${manifest[@]+"${manifest[@]}"} \
    --filter '*.aten_*' --filter '*.triton_*' --allow-empty --shard "$i/$jobs_at_once" --device $(( (i - 1) % gpus )) \
    --results "$shards/$i.jsonl" --junit "$shards/$i.xml" >"$shards/$i.txt" 2>&1 &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  rc=0; wait "${pids[$i]}" || rc=$?
  # exit 1 is a gate failure (the report says which case); anything else is the runner's own error
  [ "$rc" -eq 0 ] || { status=1; echo "shard $((i + 1)): exit $rc: $(tail -n 1 "$shards/$((i + 1)).txt")"; }
done
trap - INT TERM
# opcts goes on without a plugin it cannot load (it says so on stderr): here that is a failure.
if grep -h "going on without it" "$shards"/*.txt | sort -u | grep .; then status=1; fi
merge
sed -n '/^| family/,/^$/p' "$report.md"
grep -m 1 '^\*\*' "$report.md" || true
echo "reports: $report.{jsonl,xml,md} (shard logs in $shards/)"
exit $status
