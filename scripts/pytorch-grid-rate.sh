#!/usr/bin/env bash
# PyTorch's SDPA sweep (cases/opt_in/pytorch_grid.yaml: test_flash_attention_vs_math_ref_grads,
# 12,288 problems) on two impls, in parallel lanes of `opcts run`, with a cold reference cache;
# prints the rate in PyTorch's unit (issue 16): forward+backward problems a second, a problem
# pair counted once for both impls, as one PyTorch test runs flash and math on one shape.
# PyTorch runs this sweep (test/test_transformers.py) at ~90 tests a second on one H200 host
# (issue 16).
#
# Usage: scripts/pytorch-grid-rate.sh [--opcts PATH] [--arch sm90] [--impls cuda.flash,cuda.math]
#          [--lanes N] [--limit SECONDS] [--out DIR] [--warm]
#   --lanes  parallel `opcts run --shard i/N` processes (default: cores / 2, each OMP_NUM_THREADS=2)
#   --limit  seconds a pass may take (default 0: none); a pass cut short still prints its rate
#            over the cases it finished (records are written as they finish)
#   --warm   a second pass over the same on-disk reference cache (OPCTS_REF_CACHE_GIB sets its cap,
#            default 4: the whole grid's references come to ~530 GiB, so only part of them stays warm)
#   --out    where results, summaries and logs go (default: a new folder under /tmp)
# The grid alone is selected: a cases folder holding only it (and the arch, tolerance and
# manifest files) is made under --out, so no built-in problem joins it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
opcts="$root/build/cuda/bin/opcts"
arch=sm90
impls=cuda.flash,cuda.math
lanes=$(( $(nproc) / 2 ))
limit=0
out=""
warm=0
while [ $# -gt 0 ]; do
  case "$1" in
    --opcts) opcts=$2; shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    --impls) impls=$2; shift 2 ;;
    --lanes) lanes=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --warm) warm=1; shift ;;
    *) echo "pytorch-grid-rate: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ "$lanes" -ge 1 ] || lanes=1
[ -x "$opcts" ] || { echo "pytorch-grid-rate: no opcts binary at $opcts (build first, or pass --opcts)" >&2; exit 2; }
[ -n "$out" ] || out=$(mktemp -d /tmp/pytorch-grid-rate.XXXXXX)
mkdir -p "$out/cases"
cp -r "$root/cases/archs.yaml" "$root/cases/tolerances.yaml" "$root/cases/manifests" "$out/cases/"
cp "$root/cases/opt_in/pytorch_grid.yaml" "$out/cases/sdpa.yaml"
filters=()
IFS=, read -ra names <<< "$impls"
for n in "${names[@]}"; do filters+=(--filter "sdpa.${n//./_}/*"); done
problems=$("$opcts" list --cases-dir "$out/cases" --arch "$arch" --tier full --filter "sdpa.${names[0]//./_}/*" --count)
cases=$("$opcts" list --cases-dir "$out/cases" --arch "$arch" --tier full "${filters[@]}" --count)
echo "pytorch-grid-rate: $problems problems ($((problems / 2)) forward+backward pairs), $cases cases on $impls, $lanes lanes, arch $arch, out $out"

# One pass: the lanes together, timed from the first start to the last end.
pass() {
  local name=$1
  mkdir -p "$out/$name"
  local t0 t1
  t0=$(date +%s.%N)
  for i in $(seq 1 "$lanes"); do
    local cmd=("$opcts" run --cases-dir "$out/cases" --arch "$arch" --tier full "${filters[@]}" --shard "$i/$lanes"
               --ref-cache "$out/ref_cache" --ref-cache-max-gib "${OPCTS_REF_CACHE_GIB:-4}"
               --results "$out/$name/r$i.jsonl" --summary "$out/$name/s$i.md" --artifacts "$out/$name/artifacts_$i")
    if [ "$limit" -gt 0 ]; then cmd=(timeout "$limit" "${cmd[@]}"); fi
    OMP_NUM_THREADS=2 "${cmd[@]}" > "$out/$name/o$i.txt" 2> "$out/$name/e$i.txt" &
  done
  wait || true
  t1=$(date +%s.%N)
  cat "$out/$name"/r*.jsonl 2>/dev/null | python3 -c '
import json, sys
t, problems, cases = float(sys.argv[2]) - float(sys.argv[1]), int(sys.argv[3]), int(sys.argv[4])
recs = [json.loads(l) for l in sys.stdin if l.strip()]
out = {}
for r in recs: out[r["outcome"]] = out.get(r["outcome"], 0) + 1
recs = [r for r in recs if r["outcome"] != "MISSING"]  # what a cut-short lane had not run
impls = int(sys.argv[6])
per_problem = {}
for r in recs: per_problem[r["id"].split("/", 1)[1]] = per_problem.get(r["id"].split("/", 1)[1], 0) + 1
done = [k for k, v in per_problem.items() if v == impls]  # a problem counts once every impl has its record
pairs = len(done) / 2
oc = ", ".join(k + " " + str(v) for k, v in sorted(out.items()))
print(f"  {sys.argv[5]}: {len(recs)} of {cases} cases in {t:.1f} s ({oc}); "
      f"{pairs:.0f} forward+backward pairs: {pairs / t:.1f} a second (PyTorch: ~90)"
      + ("" if len(recs) == cases else "  [cut short: the rate is over the problems finished]"))
' "$t0" "$t1" "$problems" "$cases" "$name" "${#names[@]}"
}
rm -rf "$out/ref_cache"
pass cold
if [ "$warm" = 1 ]; then pass warm; fi
