#!/usr/bin/env bash
# The evidence runs a docs/status/<arch>.md entry records, on the GPU found (else the host
# device), with an opcts already built (scripts/run-suite.sh or run-tests.sh build it):
#
#   scripts/status-runs.sh tier    the tier as run-suite.sh runs it: the CTest shard tests (with
#                                  --bitwise, as the build's glue writes them), a resource spec with
#                                  OPCTS_SHARDS_PER_GPU slots, a cold reference cache; then the
#                                  merged report, the gate over it, the tightness report, the
#                                  slowest cases and the wall time
#   scripts/status-runs.sh trust   the planted impls of the arch's backend (the new plant classes
#                                  on the tier, every plant on smoke), `opcts probe accumulators`,
#                                  and a runner stopped by SIGTERM, resumed, killed by SIGKILL and
#                                  resumed to the end, against a clean run of the smoke tier
#
# Writes everything under OPCTS_STATUS_OUT (default build/<preset>/status/<arch>). Knobs:
#   OPCTS_TIER (default: "default" on a GPU, "smoke" on the host device), OPCTS_STATUS_LIMIT
#   (seconds the tier's ctest may take before it is stopped, default 3600: the records finished
#   by then are kept and the gate names the rest MISSING), OPCTS_SHARDS_PER_GPU (default 4: the
#   tier's shards and the plant sweeps' lanes at once), OPCTS_STATUS_RESUME_SELECT (the stop and
#   resume runs' selection, default "--tier smoke"), OPCTS_STATUS_KILL_AFTER (seconds before each
#   stop, default a third of the clean run's wall).
set -uo pipefail
source "$(dirname "$0")/common.sh"
cd "$OPCTS_ROOT"
what=${1:-}
[ "$what" = tier ] || [ "$what" = trust ] || { echo "usage: scripts/status-runs.sh tier|trust" >&2; exit 2; }
build="$OPCTS_ROOT/build/$OPCTS_PRESET"
bin="$build/bin/opcts"
[ -x "$bin" ] || { echo "status-runs: no $bin; build it first (scripts/run-suite.sh builds it)" >&2; exit 2; }
arch=host
if command -v nvidia-smi >/dev/null 2>&1; then
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .' || true)
  [ -n "$cc" ] && arch="sm$cc"
fi
tier=${OPCTS_TIER:-$([ "$arch" = host ] && echo smoke || echo default)}
out=${OPCTS_STATUS_OUT:-$build/status/$arch}
mkdir -p "$out"
export OPCTS_CASES_DIR=${OPCTS_CASES_DIR:-$OPCTS_ROOT/cases}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{ git rev-parse HEAD; "$bin" --version; command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,uuid,driver_version --format=csv; } \
  > "$out/machine.txt" 2>&1

# Outcomes per id of a results file, for comparing two runs.
outcomes() { python3 -c 'import json,sys
for l in open(sys.argv[1]):
    try: r=json.loads(l)
    except ValueError: continue
    if "outcome" in r: print(r["id"], r["outcome"])' "$1" | sort; }

if [ "$what" = tier ]; then
  per_gpu=${OPCTS_SHARDS_PER_GPU:-4}
  rm -rf "${XDG_CACHE_HOME:-$HOME/.cache}/opcts" "$build/reports/$arch"
  # The shard tests the build's CTest glue writes (opcts ctest-tests, with --bitwise), for this
  # arch and tier, in a folder of their own; as many shards a family as run at once.
  "$bin" ctest-tests --archs "$arch" --tier "$tier" --shards "$per_gpu" --bitwise --exe "$bin" \
    --reports-dir "$build/reports" --out "$work/shards.cmake" || exit 2
  echo "include(\"$work/shards.cmake\")" > "$work/CTestTestfile.cmake"
  resources=()
  if [ "$arch" != host ]; then
    "$bin" resources --out "$work/gpus.json"
    sed -i "s/\"slots\": *1\b/\"slots\": $per_gpu/" "$work/gpus.json"
    resources=(--resource-spec-file "$work/gpus.json")
  fi
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( ($(opcts_cores) + per_gpu - 1) / per_gpu ))}
  start=$(date +%s)
  (cd "$work" && timeout -s TERM "${OPCTS_STATUS_LIMIT:-3600}" ctest -L "^$arch\$" -j "$per_gpu" "${resources[@]}" \
    --no-tests=error > "$out/ctest.log" 2>&1)
  echo "ctest exit $? after $(( $(date +%s) - start )) s (tier $tier, $per_gpu at once, OMP_NUM_THREADS=$OMP_NUM_THREADS)" \
    | tee -a "$out/ctest.log"
  "$bin" report merge "$build/reports/$arch" --results "$work/merged.jsonl" --summary "$out/summary.md" > "$out/merge.txt" 2>&1
  "$bin" gate "$build/reports/$arch" > "$out/gate.txt" 2>&1
  echo "gate exit $?" >> "$out/gate.txt"
  "$bin" report tightness "$work/merged.jsonl" --markdown "$out/tightness.md" > /dev/null 2>&1
  python3 - "$work/merged.jsonl" > "$out/slowest.txt" <<'PY'
import json, sys
rs = []
for l in open(sys.argv[1]):
    try: r = json.loads(l)
    except ValueError: continue
    if "outcome" in r: rs.append(r)
rs.sort(key=lambda r: -r.get("ms", 0))
print(len(rs), "records")
for r in rs[:25]: print(f"{r.get('ms', 0) / 1000:8.2f} s {r['outcome']:6} {r['id']}")
PY
  gzip -c "$work/merged.jsonl" > "$out/results.jsonl.gz"
  tail -n 3 "$out/gate.txt"
  exit 0
fi

# trust: (a) the new plant classes on the tier, (b) every planted impl of the backend on smoke.
# in_lanes NAME SUMMARY LOG RUN-ARGS...: `opcts run` in OPCTS_SHARDS_PER_GPU shards at once (one
# worker each, as the tier's CTest shards share the GPU), merged into $work/NAME.jsonl and SUMMARY;
# the exit status is the worst shard's.
in_lanes() {
  local name=$1 summary=$2 log=$3 lanes=${OPCTS_SHARDS_PER_GPU:-4} i rc=0 pids=()
  shift 3
  : > "$log"
  for i in $(seq 1 "$lanes"); do
    OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( ($(opcts_cores) + lanes - 1) / lanes ))} \
      "$bin" run --arch "$arch" "$@" --shard "$i/$lanes" --allow-empty --min-run 0 --results "$work/$name.$i.jsonl" \
      > "$work/$name.$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || rc=$?; cat "$work/$name.$((i + 1)).log" >> "$log"; done
  "$bin" report merge "$work"/"$name".*.jsonl --results "$work/$name.jsonl" --summary "$summary" >> "$log" 2>&1
  return $rc
}
backend=$([ "$arch" = host ] && echo host || echo cuda)
new=()
for p in int4_mm.X_int4_mm_drop_last_k int4_mm.X_int4_mm_fp16_as_bf16 int4_mm.X_int4_mm_sum_in_dtype_64 \
         int4_mm.X_int4_mm_split_k4_in_dtype scaled_mm.X_cublaslt_product_low scaled_mm.X_cublaslt_product_high \
         scaled_mm.X_cublaslt_drop_last_k_step sdpa.X_flash_pv_in_dtype sdpa.X_flash_rowsum_in_dtype; do
  new+=(--filter "${p/X/$backend}/*")
done
[ "$backend" = host ] && new=(--filter 'int4_mm.host_int4_*' --filter 'scaled_mm.host_emulated_hopper_*' --filter 'sdpa.host_flash_*_in_dtype/*')
start=$(date +%s)
in_lanes new "$out/planted_new.md" "$out/planted_new.log" --tier "$tier" --include-planted "${new[@]}"
echo "new plant classes: exit $? after $(( $(date +%s) - start )) s" | tee -a "$out/planted_new.log"
"$bin" list --arch "$arch" --tier smoke > "$work/plain.txt" 2>/dev/null
"$bin" list --arch "$arch" --tier smoke --include-planted > "$work/all.txt" 2>/dev/null
planted=()
while read -r impl; do planted+=(--filter "$impl/*"); done < <(comm -13 <(cut -d/ -f1 "$work/plain.txt" | sort -u) \
  <(cut -d/ -f1 "$work/all.txt" | sort -u) | grep "\.${backend}_")
start=$(date +%s)
in_lanes planted "$out/planted_smoke.md" "$out/planted_smoke.log" --tier smoke --include-planted "${planted[@]}"
echo "every planted impl, smoke: exit $? after $(( $(date +%s) - start )) s" | tee -a "$out/planted_smoke.log"
cat "$work/new.jsonl" "$work/planted.jsonl" > "$work/planted_all.jsonl"
gzip -c "$work/planted_all.jsonl" > "$out/planted_results.jsonl.gz"
"$bin" report tightness "$work/planted_all.jsonl" --markdown "$out/planted_tightness.md" > /dev/null 2>&1
timeout 300 "$bin" probe accumulators --arch "$arch" > "$out/probe.txt" 2>&1
echo "probe exit $?" >> "$out/probe.txt"
# Stopped and resumed: the same outcomes as a clean run.
start=$(date +%s)
read -r -a resume_sel <<< "${OPCTS_STATUS_RESUME_SELECT:---tier smoke}"
"$bin" run --arch "$arch" "${resume_sel[@]}" --no-ref-cache --results "$work/clean.jsonl" > "$work/clean.log" 2>&1
echo "clean run: exit $?" > "$out/resume.txt"
# Stop a third of the way in, kill two thirds in (of the clean run's wall, references computed
# again: --no-ref-cache, so the stops land mid-tier).
wall=$(( $(date +%s) - start ))
kill_after=${OPCTS_STATUS_KILL_AFTER:-$(( wall / 3 > 1 ? wall / 3 : 1 ))}
"$bin" run --arch "$arch" "${resume_sel[@]}" --no-ref-cache --results "$work/stopped.jsonl" > "$work/s1.log" 2>&1 &
pid=$!; sleep "$kill_after"; kill -TERM "$pid"; wait "$pid"
echo "stopped by SIGTERM: exit $?, $(grep -c '"outcome"' "$work/stopped.jsonl") records" >> "$out/resume.txt"
"$bin" run --arch "$arch" "${resume_sel[@]}" --no-ref-cache --resume "$work/stopped.jsonl" > "$work/s2.log" 2>&1 &
pid=$!; sleep "$kill_after"; kill -KILL "$pid"; wait "$pid"
echo "resumed, killed by SIGKILL: exit $?, $(grep -c '"outcome"' "$work/stopped.jsonl") records" >> "$out/resume.txt"
sleep 1  # the killed supervisor's workers die with it (PR_SET_PDEATHSIG)
"$bin" run --arch "$arch" "${resume_sel[@]}" --no-ref-cache --resume "$work/stopped.jsonl" > "$work/s3.log" 2>&1
echo "resumed to the end: exit $?, $(grep -c '"outcome"' "$work/stopped.jsonl") records" >> "$out/resume.txt"
if diff <(outcomes "$work/clean.jsonl") <(outcomes "$work/stopped.jsonl") > "$work/diff.txt"; then
  echo "same outcomes as the clean run: $(outcomes "$work/clean.jsonl" | wc -l) cases" >> "$out/resume.txt"
else
  echo "DIFFERENT outcomes from the clean run:" >> "$out/resume.txt"; head -n 20 "$work/diff.txt" >> "$out/resume.txt"
fi
cat "$out/resume.txt"
