# Shared by run-suite.sh and run-tests.sh: finds nvcc and picks the build preset.
# Sets OPCTS_ROOT, OPCTS_PRESET (cuda when a CUDA compiler is found, else host) and,
# when found, CUDACXX.
OPCTS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${CUDACXX:-}" ]; then
  if command -v nvcc >/dev/null 2>&1; then CUDACXX=$(command -v nvcc)
  elif [ -x /usr/local/cuda/bin/nvcc ]; then CUDACXX=/usr/local/cuda/bin/nvcc
  fi
fi
if [ -n "${CUDACXX:-}" ] && [ "${OPCTS_CUDA:-AUTO}" != "OFF" ]; then
  export CUDACXX
  OPCTS_PRESET=cuda
else
  OPCTS_PRESET=host
fi

# The first GPU agent's gfx name in rocminfo's output on stdin ("  Name:   gfx942" -> gfx942).
opcts_gfx_from_rocminfo() {
  sed -n 's/^[[:space:]]*Name:[[:space:]]*\(gfx[0-9a-f]*\).*/\1/p' | head -n 1
}

# Every core this process may use. nproc honours OMP_NUM_THREADS (and OMP_THREAD_LIMIT), which
# run-suite.sh sets for its shards' references: the build must not shrink to that.
opcts_cores() {
  env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc
}

# The CUDA arch both scripts build for: OPCTS_CUDA_ARCH (or its older name OPCTS_TEST_CUDA_ARCH),
# else the first NVIDIA GPU's compute capability (90 on an H200), else 90.
opcts_cuda_arch() {
  local cc="${OPCTS_CUDA_ARCH:-${OPCTS_TEST_CUDA_ARCH:-}}"
  if [ -z "$cc" ] && command -v nvidia-smi >/dev/null 2>&1; then
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .' || true)
  fi
  echo "${cc:-90}"
}

# Configures build/$OPCTS_PRESET with the options run-suite.sh and run-tests.sh share, so that
# either builds into the folder the other configured without recompiling what it built: one
# CUDA arch (opcts_cuda_arch), HIP when hipcc is found (OPCTS_HIP=AUTO; the portable kernels'
# compile check for OPCTS_TEST_HIP_ARCHS at OPCTS_TEST_HIP_OPT, default -O0: nothing runs the
# objects). Further arguments (the CTest glue's OPCTS_ARCHS, OPCTS_TIER, OPCTS_SHARDS, which
# change no object) are passed on.
opcts_configure() {
  # The hip preset (run-suite.sh on an AMD GPU) builds the HIP backend: OPCTS_HIP=ON.
  local hip=AUTO
  [ "$OPCTS_PRESET" = hip ] && hip=ON
  local args=("-DOPCTS_HIP=$hip" "-DOPCTS_HIP_ARCHS=${OPCTS_TEST_HIP_ARCHS:-gfx90a;gfx940}"
              "-DOPCTS_HIP_OPT=${OPCTS_TEST_HIP_OPT:--O0}")
  # The Python the plugin host embeds (cmake/python.cmake): $PYTHON, else Debian's, where
  # install-deps.sh puts numpy and pytest (a python3 earlier on PATH, pyenv's, may lack them).
  local python="${PYTHON:-}"
  [ -z "$python" ] && [ -x /usr/bin/python3 ] && python=/usr/bin/python3
  [ -n "$python" ] && args+=("-DPython3_EXECUTABLE=$python")
  [ "$OPCTS_PRESET" = cuda ] && args+=("-DCMAKE_CUDA_ARCHITECTURES=$(opcts_cuda_arch)")
  cmake --preset "$OPCTS_PRESET" "${args[@]}" "$@"
}
