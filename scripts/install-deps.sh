#!/usr/bin/env bash
# Installs the Debian packages opcts builds with, skipping those already present.
# CUDA (nvcc, cuBLAS) is optional and not installed here: the build uses it when found. hipcc
# (Debian's HIP 5.2) and rocPRIM are installed so CI compiles the portable kernels for AMD
# (OPCTS_HIP=AUTO builds them when both are found).
set -euo pipefail

packages=(
  cmake g++ make pkg-config
  libgtest-dev            # GoogleTest: the worker and the harness's own tests
  libeigen3-dev           # CPU references
  libyaml-cpp-dev         # catalogs, manifests, tolerances
  libpugixml-dev          # JUnit writing and reading
  libcli11-dev            # the opcts command line
  libfmt-dev              # formatting (header-only use)
  librandom123-dev        # counter-based RNG (Philox)
  nlohmann-json3-dev      # result lines
  libxxhash-dev           # XXH3 (header-only use): the fingerprints of inputs the harness checks after every run
  clang libclang-rt-dev   # libFuzzer targets (scripts/run-fuzz.sh): clang and its fuzzer/sanitizer runtimes
  llvm                    # llvm-symbolizer: readable stack traces in fuzzer reports
  libxml2-utils           # xmllint: the tests validate JUnit against tests/data/junit_ant.xsd
  hipcc                   # HIP 5.2: the portable kernels built for gfx90a/gfx940 (cmake/hip.cmake); ~99 MiB, 28 packages with clang-15
  librocprim-dev          # rocPRIM 5.3 (headers, ~2 MiB): cuda.sorted's sort and segmented reduction under HIP (hipcc needs it)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
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
