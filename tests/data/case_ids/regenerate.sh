#!/usr/bin/env bash
# Rewrites tests/data/case_ids/<backend>/<family>.txt, the case ids CaseIds.EveryArchListsTheRecordedIds
# (tests/test_family_kit.cpp) holds every arch to, from `opcts list` at the full tier with the
# planted impls: host from arch host, cuda from sm90, hip from gfx942 (ids do not depend on the
# build: a host build lists the GPU impls too). A family whose ids are every impl with every
# problem is written as its impls ("impl NAME") and its problems; any other is written id by id.
# An impl with tactics (ids "<impl>/<problem>/<tactic>") is written one problem a line, its
# tactics after the id ("scaled_mm.host_emulated_split_k/<problem> split_k1 split_k2").
#   tests/data/case_ids/regenerate.sh [path/to/opcts]   (default build/host/bin/opcts)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
opcts=${1:-$root/build/host/bin/opcts}
for pair in host:host sm90:cuda gfx942:hip; do
  arch=${pair%%:*} backend=${pair##*:}
  dir=$root/tests/data/case_ids/$backend
  mkdir -p "$dir"
  rm -f "$dir"/*.txt
  "$opcts" list --arch "$arch" --cases-dir "$root/cases" --tier full --include-planted |
    python3 -c '
import collections, sys
dir, backend, arch = sys.argv[1:]
ids = collections.defaultdict(set)
for line in sys.stdin:
    line = line.strip()
    if line:
        ids[line.split(".", 1)[0]].add(line)
for family, all_ids in ids.items():
    with_tactics = {i.split("/", 1)[0] for i in all_ids if i.count("/") == 2}
    tactics = collections.defaultdict(list)  # "<impl>/<problem>" of an impl with tactics -> its tactics
    for i in sorted(all_ids):
        if i.split("/", 1)[0] in with_tactics:
            parts = i.split("/")
            tactics["/".join(parts[:2])] += parts[2:]
    got = {i for i in all_ids if i.split("/", 1)[0] not in with_tactics}
    impls = sorted({i.split("/", 1)[0] for i in got})
    problems = sorted({i.split("/", 1)[1] for i in got})
    with open(f"{dir}/{family}.txt", "w") as out:
        out.write(f"# {family} on the {backend} backend ({arch}), full tier, planted impls included: "
                  "tests/data/case_ids/regenerate.sh\n")
        if len(impls) * len(problems) == len(got):  # every impl with every problem
            out.writelines(f"impl {i}\n" for i in impls)
            out.writelines(f"{p}\n" for p in problems)
        else:
            out.writelines(f"{i}\n" for i in sorted(got))
        out.writelines(" ".join([i] + t) + "\n" for i, t in sorted(tactics.items()))
' "$dir" "$backend" "$arch"
done
