"""Loaded as `--plugin py:opcts_testpkg.kernels` with this folder's parent on PYTHONPATH."""

import numpy as np

import opcts


@opcts.impl("cast", name="pypkg.decode_e8m0", backend="host",
            supports=lambda p: p.from_ == "e8m0fnu" and p.to == "fp32" or "decodes e8m0fnu only")
def decode_e8m0(p, t, ctx):
    c = t.x.astype(np.int64)
    t.y[...] = np.where(c == 255, np.nan, np.ldexp(1.0, c - 127)).astype(np.float32)
