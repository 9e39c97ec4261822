#!/usr/bin/env bash
# Renders an opcts HTML report in headless Chromium (installing Debian's chromium if absent) and writes a PNG screenshot.
# Usage: scripts/screenshot-report.sh REPORT.html OUT.png [WIDTHxHEIGHT]
set -euo pipefail
html=$(realpath "$1")
out=$2
size=${3:-1280x1600}
if [ ! -x /usr/bin/chromium ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
/usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
  --disable-component-update --no-first-run --disable-sync --hide-scrollbars --user-data-dir="$profile" \
  --screenshot="$(realpath -m "$out")" --window-size="${size/x/,}" "file://$html" >/dev/null 2>&1
[ -s "$out" ] || { echo "screenshot-report: no screenshot written to $out" >&2; exit 1; }
echo "screenshot-report: $out ($(stat -c %s "$out") bytes)"
