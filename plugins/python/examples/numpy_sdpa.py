"""numpy host impl of sdpa's forward (families/sdpa/sdpa.hpp), judged against opcts's fp64
reference under sdpa's ref_relative bound:

    opcts run --arch host --tier smoke --plugin plugins/python/examples/numpy_sdpa.py --filter 'sdpa.np_*'

Per (batch, query head h, reading KV head h // (Hq / Hkv)): S = scale · Q Kᵀ in fp32, then
softcap (C · tanh(S / C)), the additive mask added, the masked scores (causal upper-left or
lower-right, FlashAttention-2's window bottom-right aligned, a boolean mask's zeros) dropped;
P = exp(S − rowmax), O = P V / ΣP rounded once to the dtype, lse = rowmax + log ΣP (fp32,
natural log). A row that sees no key has O = 0 and lse = −inf. Keys no query may see can hold
NaN (poison_masked): they are left out, never multiplied by a zero. The softmax is one pass over
the whole row (no online rescale), so the lse's structure is two_pass (docs/python.md). Each
(batch entry, head) is computed alone, so the impl declares the invariance contracts
(`opcts run --invariance` runs a batch entry alone and the batch reversed).
bf16 arrives as uint16 codes and leaves rounded to nearest even; fp16 and fp32 are numpy's own.
"""

import numpy as np

import opcts

MAX_WORK = 2.0 ** 31  # multiply-adds; the default tier's largest shapes are left to faster impls


def to_f32(a, dtype):
    if dtype == "bf16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def store(dst, x, dtype):
    """x (fp32) rounded once to dst's dtype, written into dst."""
    if dtype == "bf16":
        u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
        r = ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        r = np.where(np.isnan(x), np.uint16(0x7FC0), r)
        dst[...] = r
    else:
        dst[...] = x.astype(dst.dtype)


def supports(p):
    if p.direction != "forward":
        return "computes the forward only"
    work = float(p.batch) * p.heads_q * p.seq_q * p.seq_k * (p.head_dim_qk + p.head_dim_v)
    if work > MAX_WORK:
        return "problems over 2^31 multiply-adds are left to faster impls"
    return True


@opcts.impl("sdpa", name="np.sdpa", backend="host", deterministic=True, supports=supports,
            invariant=("batch_size", "batch_position"),
            accumulation={"lse": "two_pass"},
            reason="one max and one sum over the whole row of fp32 scores: no online rescale")
def sdpa(p, t, ctx):
    if p.heads_kv <= 0 or p.heads_q % p.heads_kv != 0:
        raise opcts.InvalidArgument("heads_kv", "heads_q must be a multiple of heads_kv")
    if p.window_left < -1:
        raise opcts.InvalidArgument("window_left", "must be >= -1")
    if p.window_right < -1:
        raise opcts.InvalidArgument("window_right", "must be >= -1")
    if p.softcap < 0:
        raise opcts.InvalidArgument("softcap", "must be >= 0")
    B, Hq, Hkv, Sq, Sk = p.batch, p.heads_q, p.heads_kv, p.seq_q, p.seq_k
    G = Hq // Hkv
    q, k, v, O, lse = t.q, t.k, t.v, t.O, t.lse
    if p.layout == "bshd":  # stored [B, S, H, D]: the same memory seen as [B, H, S, D]
        q, k, v, O = (a.transpose(0, 2, 1, 3) for a in (q, k, v, O))
    qf, kf, vf = to_f32(q, p.dtype), to_f32(k, p.dtype), to_f32(v, p.dtype)

    # Which keys each query row sees: causal, window (bottom-right aligned), boolean mask.
    i = np.arange(Sq)[:, None]
    j = np.arange(Sk)[None, :]
    off = Sk - Sq
    visible = np.ones((Sq, Sk), dtype=bool)
    if p.mask == "causal_upper_left":
        visible &= j <= i
    elif p.mask == "causal_lower_right":
        visible &= j <= i + off
    if p.window.left >= 0:
        visible &= j >= i + off - p.window.left
    if p.window.right >= 0:
        visible &= j <= i + off + p.window.right
    visible = np.broadcast_to(visible, (B, Hq, Sq, Sk))
    additive = None
    if p.attn_mask.kind != "none":
        m = t.attn_mask
        if p.attn_mask.kind == "bool":
            visible = visible & (m != 0)
        else:
            additive = to_f32(m, p.dtype)

    # Scores per KV head's group of query heads: [B, Hkv, G, Sq, Sk] -> [B, Hq, Sq, Sk].
    qg = qf.reshape(B, Hkv, G, Sq, p.head_dim_qk)
    with np.errstate(invalid="ignore", over="ignore"):
        s = (np.float32(p.scale) * (qg @ kf[:, :, None].swapaxes(-1, -2))).reshape(B, Hq, Sq, Sk)
        if p.softcap > 0:
            c = np.float32(p.softcap)
            s = c * np.tanh(s / c)
        if additive is not None:
            s = s + additive
        visible = visible & (s > -np.inf)
        s = np.where(visible, s, -np.inf).astype(np.float32)
        row_max = s.max(axis=-1, keepdims=True, initial=-np.inf)
        seen = row_max > -np.inf
        e = np.where(visible, np.exp(s - np.where(seen, row_max, 0)), 0).astype(np.float32)
        total = e.sum(axis=-1, keepdims=True, dtype=np.float32)
        # Keys no row of a KV head's group sees may hold NaN: zero them in V (never 0 * NaN).
        key_seen = visible.reshape(B, Hkv, G * Sq, Sk).any(axis=2)
        vz = np.where(key_seen[..., None], vf, 0).astype(np.float32)
        o = (e.reshape(B, Hkv, G * Sq, Sk) @ vz).reshape(B, Hq, Sq, p.head_dim_v)
        o = np.where(total > 0, o / np.where(total > 0, total, 1), 0).astype(np.float32)
        store(O, o, p.dtype)
        lse[...] = np.where(seen[..., 0], row_max[..., 0] + np.log(np.where(seen, total, 1)[..., 0]), -np.inf)
