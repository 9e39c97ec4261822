#!/usr/bin/env bash
# opcts on a Slurm cluster: a job array of shards on GPU nodes, then a job that merges the shards'
# reports and gates the arch. From a clone on a filesystem the nodes share:
#   OPCTS_ARCH=sm90 OPCTS_TIER=default ci/slurm.sh submit
# builds opcts for that arch (the login node needs the CUDA toolkit; or build in a job first),
# submits this file as the array (`--array=1-4`: keep it and nothing else in step with the
# shard count, which `opcts run --shard auto` reads from SLURM_ARRAY_TASK_ID and
# SLURM_ARRAY_TASK_COUNT), and the gate as a job that runs after every task ended, however it
# ended (afterany), so a lost shard's cases are MISSING to the gate. Set the partition, GPUs
# and time for your cluster below. Checked by tests/test_ci.cpp (the commands it runs, each
# task's shard).
#SBATCH --job-name=opcts
#SBATCH --array=1-4
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=16
#SBATCH --time=03:00:00
#SBATCH --output=reports/slurm-%A_%a.out
set -euo pipefail
: "${OPCTS_ARCH:=sm90}" "${OPCTS_TIER:=default}"
export OPCTS_ARCH OPCTS_TIER

case "${1:-shard}" in
  submit)
    scripts/install-deps.sh --for build
    cmake --preset cuda -DOPCTS_ARCHS="$OPCTS_ARCH" -DCMAKE_CUDA_ARCHITECTURES="${OPCTS_ARCH#sm}"
    cmake --build --preset cuda --target opcts -j "$(nproc)"
    mkdir -p reports
    array=$(sbatch --parsable --export=ALL "$0" shard)
    sbatch --parsable --export=ALL --dependency="afterany:${array%%;*}" --job-name=opcts-gate \
      --output=reports/slurm-gate-%j.out --wrap "$0 gate"
    ;;
  shard)
    # A cancelled task (scancel: SIGTERM) still writes its reports: finished cases, the rest MISSING.
    build/cuda/bin/opcts run --arch "$OPCTS_ARCH" --tier "$OPCTS_TIER" --shard auto --allow-empty --bitwise \
      --junit "reports/shard$SLURM_ARRAY_TASK_ID.xml" \
      --results "reports/shard$SLURM_ARRAY_TASK_ID.jsonl" \
      --summary "reports/shard$SLURM_ARRAY_TASK_ID.md"
    ;;
  gate)
    build/cuda/bin/opcts report merge reports --prefer-later \
      --junit merged/junit.xml --summary merged/summary.md --results merged/results.jsonl
    # Every planned case of the tier must be in the merged results: a lost shard is MISSING.
    build/cuda/bin/opcts gate --arch "$OPCTS_ARCH" --tier "$OPCTS_TIER" merged/results.jsonl
    ;;
  *) echo "usage: $0 [submit|shard|gate]" >&2; exit 2 ;;
esac
