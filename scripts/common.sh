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
