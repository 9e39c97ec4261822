"""NEEDS A GPU (CUDA, PyTorch and Triton): not run in CI, only compiled (python/tests).

An SDPA forward as a Triton JIT kernel, judged by opcts through the Python plugin host: the
kernel plugins/triton/ compiles ahead of time (sdpa_fwd.py: online softmax over blocks of BLOCK_N
keys, causal upper-left or lower-right, GQA, lse in natural log), here launched by Triton's JIT
with no build step:

    opcts run --arch sm90 --plugin plugins/python/examples/triton_sdpa.py --filter 'sdpa.triton_jit_*' \\
        --manifest mine.yaml   # python3 -m opcts manifest plugins/python/examples/triton_sdpa.py --arch sm90 -o mine.yaml

It runs on the case's stream (torch's current stream inside `with torch.cuda.stream(
opcts.torch_stream(ctx))`, where Triton launches), never synchronised.
"""

import os
import struct
import sys

import triton

import opcts

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "triton"))
from sdpa_fwd import sdpa_fwd  # noqa: E402  the @triton.jit kernel

BLOCK_M, BLOCK_N = 64, 64
MASKS = {"none": 0, "causal_upper_left": 1, "causal_lower_right": 2}


def supports(p, arch):
    if p.direction != "forward":
        return "computes the forward only"
    if p.dtype not in ("fp16", "bf16"):
        return "fp16 and bf16 only"
    if p.head_dim_qk != p.head_dim_v or p.head_dim_qk > 256:
        return "the same head dim for q and v, at most 256"
    if p.window != (-1, -1) or p.softcap != 0 or p.attn_mask.kind != "none":
        return "no windows, softcap or attn_mask"
    return True


@opcts.impl("sdpa", name="triton_jit.sdpa", backend="cuda", deterministic=True, supports=supports,
            accumulation={"lse": "online_block64"},
            reason="online softmax over BLOCK_N = 64 keys: one max and one rescale per block")
def sdpa(p, t, ctx):
    import torch

    if p.heads_kv <= 0 or p.heads_q % p.heads_kv != 0:
        raise opcts.InvalidArgument("heads_kv", "heads_q must be a multiple of heads_kv")
    if p.window_left < -1 or p.window_right < -1:
        raise opcts.InvalidArgument("window_left" if p.window_left < -1 else "window_right", "must be >= -1")
    if p.softcap < 0:
        raise opcts.InvalidArgument("softcap", "must be >= 0")
    q, k, v, o = (opcts.as_torch(t[n]) for n in ("q", "k", "v", "O"))
    if p.layout == "bshd":  # stored [B, S, H, D]: strides for the logical [B, H, S, D]
        q, k, v, o = (x.permute(0, 2, 1, 3) for x in (q, k, v, o))
    if p.batch * p.heads_q * p.seq_q == 0:
        return
    scale_bits = struct.unpack("<i", struct.pack("<f", p.scale))[0]  # the kernel takes the fp32 bits
    grid_m, grid_bh = triton.cdiv(p.seq_q, BLOCK_M), p.batch * p.heads_q
    with torch.cuda.stream(opcts.torch_stream(ctx)):
        sdpa_fwd[(grid_bh, grid_m, 1)](q, k, v, o, opcts.as_torch(t.lse),
                                       *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
                                       p.heads_q, p.heads_q // p.heads_kv, p.seq_q, p.seq_k, p.head_dim_qk,
                                       scale_bits, MASKS[p.mask], grid_m, grid_bh,
                                       BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                       HEAD_DIM=max(16, triton.next_power_of_2(p.head_dim_qk)))
