#!/usr/bin/env bash
# Formats the C++/CUDA sources with the repository's .clang-format, or checks that they are.
#   scripts/format.sh            rewrite every tracked source file in place
#   scripts/format.sh --check    list the files that are not formatted; exit 1 if any
#   scripts/format.sh --check FILE...   the same for the files named (read as C++ whatever their name)
# The style is pinned to clang-format 14 (Debian 12's): other versions break lines differently,
# so with another version (or none) --check exits 77, which the selftest reports as a SKIP.
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
case "${1:-}" in
  --check) check=1; shift ;;
  "") ;;
  *) echo "format.sh: unknown argument '$1' (use --check [FILE...] or nothing)" >&2; exit 2 ;;
esac
cf=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$cf" ] || ! "$cf" --version | grep -q 'version 14\.'; then
  echo "format.sh: clang-format 14 not found (scripts/install-deps.sh --for test installs it)" >&2
  exit 77
fi
if [ $# -gt 0 ]; then
  files=("$@")
elif git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h' '*.c')
else
  mapfile -t files < <(find . -path ./build -prune -o -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' \
    -o -name '*.cuh' -o -name '*.h' -o -name '*.c' \) -print | sed 's|^\./||' | sort)
fi
if [ "$check" = 0 ]; then
  printf '%s\0' "${files[@]}" | xargs -0 "$cf" -i --style=file
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  [ -f "$f" ] || { echo "format.sh: no file '$f'" >&2; exit 2; }
  if ! "$cf" --style=file --assume-filename="${f%.*}.cpp" <"$f" | cmp -s - "$f"; then
    echo "not formatted: $f (scripts/format.sh rewrites it)"
    bad=1
  fi
done
exit "$bad"
