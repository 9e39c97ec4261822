#!/usr/bin/env bash
# Installs the Debian packages opcts needs for a purpose, skipping those already present.
#   scripts/install-deps.sh [--for build|test|fuzz|hip|all]...   (default: all; repeatable)
#     build  what `opcts` builds and runs with (run-suite.sh, a CI shard, a merge/gate job)
#     test   build + the harness's own tests (GoogleTest, xmllint for the JUnit schema check)
#     fuzz   clang, libFuzzer's runtimes and llvm-symbolizer (scripts/run-fuzz.sh)
#     hip    hipcc (Debian's HIP 5.2) and rocPRIM: the portable kernels' AMD compile check
#     all    every one of them (run-tests.sh)
# CUDA (nvcc, cuBLAS) is optional and never installed here: the build uses it when found.
set -euo pipefail

build=(
  cmake g++ make pkg-config
  libeigen3-dev           # CPU references
  libyaml-cpp-dev         # catalogs, manifests, tolerances
  libre2-dev              # manifests' xfail message patterns (linear-time matching)
  libpugixml-dev          # JUnit writing and reading
  libcli11-dev            # the opcts command line
  libfmt-dev              # formatting (header-only use)
  librandom123-dev        # counter-based RNG (Philox)
  python3-dev             # CPython's headers and libpython: the Python plugin host (--plugin FILE.py; built when found)
  nlohmann-json3-dev      # result lines
  libxxhash-dev           # XXH3 (header-only use): the fingerprints of inputs the harness checks after every run
)
test=(
  libgtest-dev            # GoogleTest: the harness's own tests
  libxml2-utils           # xmllint: the tests validate JUnit against tests/data/junit_ant.xsd
  clang-format            # clang-format 14: the sources_are_clang_formatted selftest (scripts/format.sh)
  python3-numpy           # the Python plugin host's numpy examples and tests (plugins/python, docs/python.md)
  python3-pytest          # python/tests and the pytest plugin (python/opcts/pytest_plugin.py)
)
fuzz=(
  clang libclang-rt-dev   # libFuzzer targets (scripts/run-fuzz.sh): clang and its fuzzer/sanitizer runtimes
  llvm                    # llvm-symbolizer: readable stack traces in fuzzer reports
)
hip=(
  hipcc                   # HIP 5.2: the portable kernels built for gfx90a/gfx940 (cmake/hip.cmake); ~99 MiB, 28 packages with clang-15
  librocprim-dev          # rocPRIM 5.3 (headers, ~2 MiB): cuda.sorted's sort and segmented reduction under HIP (hipcc needs it)
)

purposes=()
while [ $# -gt 0 ]; do
  case "$1" in
    --for) [ $# -ge 2 ] || { echo "install-deps: --for needs build, test, fuzz, hip or all" >&2; exit 2; }
           purposes+=("$2"); shift 2 ;;
    --for=*) purposes+=("${1#--for=}"); shift ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-deps: unknown argument '$1' (use --for build|test|fuzz|hip|all)" >&2; exit 2 ;;
  esac
done
[ ${#purposes[@]} -gt 0 ] || purposes=(all)
packages=()
for p in "${purposes[@]}"; do
  case "$p" in
    build) packages+=("${build[@]}") ;;
    test) packages+=("${build[@]}" "${test[@]}") ;;
    fuzz) packages+=("${fuzz[@]}") ;;
    hip) packages+=("${hip[@]}") ;;
    all) packages+=("${build[@]}" "${test[@]}" "${fuzz[@]}" "${hip[@]}") ;;
    *) echo "install-deps: unknown purpose '$p' (build, test, fuzz, hip or all)" >&2; exit 2 ;;
  esac
done

missing=()
for p in $(printf '%s\n' "${packages[@]}" | awk '!seen[$0]++'); do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages for ${purposes[*]} present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
