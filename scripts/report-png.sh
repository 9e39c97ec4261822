#!/usr/bin/env bash
# Regenerates docs/report.png from a real run: the host device's smoke tier with the planted-bug
# impls (each caught bug an XFAIL), plus any reports given (e.g. a GPU run's results.jsonl), as
# `opcts report html` shows them, screenshotted in headless Chromium (scripts/screenshot-report.sh).
#   scripts/report-png.sh [REPORTS...]
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$OPCTS_ROOT"
opcts="build/$OPCTS_PRESET/bin/opcts"
[ -x "$opcts" ] || { echo "report-png: no $opcts; run scripts/run-suite.sh or scripts/run-tests.sh first" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Exit 0 when every case is what the manifest expects, planted bugs caught included.
"$opcts" run --arch host --tier smoke --include-planted --results "$out/host.jsonl" < /dev/null
"$opcts" report html "$out/host.jsonl" "$@" --out "$out/report.html" --title "opcts report: host smoke tier, planted bugs included"
scripts/screenshot-report.sh "$out/report.html" docs/report.png 1280x2400
