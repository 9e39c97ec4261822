"""NEEDS A GPU (CUDA and CuPy): not run in CI, only compiled (python/tests).

A CuPy RawKernel cast: fp32 to e4m3fn / e5m2 with CUDA's own conversion (cuda_fp8.h,
__nv_cvt_float_to_fp8: round to nearest even, __NV_SATFINITE or __NV_NOSAT), on the case's
stream:

    opcts run --arch sm90 --plugin plugins/python/examples/cupy_cast.py --filter 'cast.cupy_*'
"""

import cupy

import opcts

_SOURCE = r"""
#include <cuda_fp8.h>
extern "C" __global__ void cast_fp32_fp8(const float* x, unsigned char* y, long long n, int satfinite, int e5m2) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  y[i] = __nv_cvt_float_to_fp8(x[i], satfinite ? __NV_SATFINITE : __NV_NOSAT, e5m2 ? __NV_E5M2 : __NV_E4M3);
}
"""
# Compiled and loaded at import, which every worker does once: a first compile inside run would
# load the module while opcts holds the case's stream.
_kernel = cupy.RawKernel(_SOURCE, "cast_fp32_fp8", options=("--std=c++17",))
_kernel.compile()


def supports(p):
    return p.from_ == "fp32" and p.to in ("e4m3fn", "e5m2") or "fp32 to e4m3fn or e5m2 only"


@opcts.impl("cast", name="cupy.cast_fp8", backend="cuda", supports=supports)
def cast(p, t, ctx):
    x, y = opcts.as_cupy(t.x), opcts.as_cupy(t.y)
    threads = 256
    with opcts.cupy_stream(ctx) as stream:
        _kernel(((p.n + threads - 1) // threads,), (threads,),
                (x, y, cupy.int64(p.n), cupy.int32(p.overflow == "satfinite"), cupy.int32(p.to == "e5m2")),
                stream=stream)
