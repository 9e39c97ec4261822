"""NEEDS A GPU (CUDA and PyTorch): not run in CI, only compiled (python/tests).

PyTorch's scaled_dot_product_attention, one impl per backend, on the case's stream, and on
packed (varlen) sequences FlashAttention-2 as torch.flash_varlen, the memory-efficient
(CUTLASS, xFormers') kernel as torch.efficient_varlen, and the public
torch.nn.attention.varlen.varlen_attn (PyTorch 2.10+) as torch.varlen_attn:

    opcts run --arch sm90 --plugin plugins/python/examples/torch_sdpa.py --filter 'sdpa.torch_*'

SDPA returns no lse: each impl writes torch.logsumexp of the fp32 scores (two passes over the
row), declared as such. Windows and softcap are not SDPA's arguments: those problems SKIP, as do
the problems a backend's own dispatcher check (torch.backends.cuda.can_use_flash_attention and its
siblings) refuses, so that "No available kernel" is never a case's ERROR. Backward runs autograd
through the same call: dQ, dK, dV and, with an additive mask that asks for it (plugin ABI 1.7),
its gradient dbias — the memory-efficient kernel's grad_bias, summed by autograd over the axes the
mask broadcasts.
"""

import opcts


def _dtype(torch, p):
    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[p.dtype]


def _empty(torch, p, heads, seq, dim):
    """An uninitialised tensor with the case's shape and strides (BSHD viewed as BHSD)."""
    dt = _dtype(torch, p)
    if p.layout == "bshd":
        return torch.empty(p.batch, seq, heads, dim, dtype=dt, device="cuda").permute(0, 2, 1, 3)
    return torch.empty(p.batch, heads, seq, dim, dtype=dt, device="cuda")


def _sdpa_params(torch, p):
    """torch.backends.cuda.SDPAParams for the problem, on uninitialised tensors of its shapes:
    what scaled_dot_product_attention's dispatcher checks (sizes, strides, dtype, mask, GQA, and
    for a backward the gradients it must give)."""
    grad = p.direction == "backward"
    q, k, v = (_empty(torch, p, h, s, d).requires_grad_(grad)
               for h, s, d in ((p.heads_q, p.seq_q, p.head_dim_qk), (p.heads_kv, p.seq_k, p.head_dim_qk),
                               (p.heads_kv, p.seq_k, p.head_dim_v)))
    mask = None
    if p.attn_mask.kind != "none":
        shape = (p.batch if p.attn_mask.per_batch else 1, p.heads_q if p.attn_mask.per_head else 1,
                 p.seq_q if p.attn_mask.per_query else 1, p.seq_k)
        mask = torch.empty(shape, dtype=torch.bool if p.attn_mask.kind == "bool" else _dtype(torch, p), device="cuda")
        mask.requires_grad_(p.dbias)
    return torch.backends.cuda.SDPAParams(q, k, v, mask, 0.0, p.mask != "none", p.heads_q != p.heads_kv)


def supports(backend):
    def check(p, arch):
        if p.layout not in ("bhsd", "bshd"):
            return "takes the dense layouts (the varlen impls below take packed sequences)"
        if p.window != (-1, -1) or p.softcap != 0:
            return "SDPA has no window or softcap"
        if p.chunk != 0 or p.sinks or p.alibi != "none":
            return "SDPA has no chunked-local attention, sinks or ALiBi"
        if p.mask == "causal_lower_right" and p.seq_q != p.seq_k:
            return "is_causal is upper-left; lower-right with Sq != Sk needs a mask"
        if p.mask != "none" and p.attn_mask.kind != "none":
            return "SDPA takes an attn_mask or is_causal, not both"
        if backend == "math":
            return True
        # Ask PyTorch's dispatcher, as scaled_dot_product_attention will: a backend that
        # refuses the problem (fp32 on flash, GQA on efficient, an empty batch ...) is a SKIP,
        # not a case that errs with "No available kernel".
        import torch

        can_use = {"flash_attention": torch.backends.cuda.can_use_flash_attention,
                   "efficient_attention": torch.backends.cuda.can_use_efficient_attention,
                   "cudnn_attention": torch.backends.cuda.can_use_cudnn_attention}[backend]
        if p.batch == 0 or p.seq_q == 0 or p.seq_k == 0:
            return f"PyTorch's {backend} is not asked about an empty batch or sequence"
        return True if can_use(_sdpa_params(torch, p), False) else f"PyTorch's can_use_{backend} says no"

    return check


def _deterministic(backend):
    # The forward kernels write each output once; the backward ones but the math path's may
    # accumulate dQ (or dK, dV, dbias) with atomics.
    return lambda p: backend == "math" or p.direction == "forward"


def _backward(torch, F, p, t, q, k, v, mask, causal):
    """dQ, dK, dV (and dbias) by autograd through scaled_dot_product_attention at dO."""
    q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
    if p.dbias:
        mask = mask.detach().requires_grad_()
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=p.scale,
                                         enable_gqa=p.heads_q != p.heads_kv)
    d_o = opcts.as_torch(t.dO)
    if p.layout == "bshd":
        d_o = d_o.permute(0, 2, 1, 3)
    out.backward(d_o)
    for name, x in (("dQ", q), ("dK", k), ("dV", v)) + ((("dbias", mask),) if p.dbias else ()):
        got = opcts.as_torch(t[name])
        if p.layout == "bshd" and name != "dbias":
            got = got.permute(0, 2, 1, 3)
        got.copy_(x.grad)


def make(backend):
    @opcts.impl("sdpa", name=f"torch.sdpa_{backend}", backend="cuda", deterministic=_deterministic(backend),
                supports=supports(backend), accumulation={"lse": "two_pass"}, abi_minor=7,
                reason="torch.logsumexp over the fp32 scores: the row's max, then the sum")
    def run(p, t, ctx):
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        if p.heads_kv <= 0 or p.heads_q % p.heads_kv != 0:
            raise opcts.InvalidArgument("heads_kv", "heads_q must be a multiple of heads_kv")
        if p.window_left < -1 or p.window_right < -1 or p.softcap < 0:
            arg = "window_left" if p.window_left < -1 else "window_right" if p.window_right < -1 else "softcap"
            raise opcts.InvalidArgument(arg, "out of range")
        q, k, v = (opcts.as_torch(t[n]) for n in ("q", "k", "v"))
        if p.layout == "bshd":
            q, k, v = (x.permute(0, 2, 1, 3) for x in (q, k, v))
        mask = None
        if p.attn_mask.kind != "none":
            mask = opcts.as_torch(t.attn_mask)
            mask = mask.bool() if p.attn_mask.kind == "bool" else mask
        causal = p.mask != "none"
        with torch.cuda.stream(opcts.torch_stream(ctx)):
            if p.direction == "backward":
                with sdpa_kernel(getattr(SDPBackend, backend.upper())):
                    try:
                        _backward(torch, F, p, t, q, k, v, mask, causal)
                    except RuntimeError as e:
                        raise opcts.Unsupported(str(e).splitlines()[0]) from None
                return
            with sdpa_kernel(getattr(SDPBackend, backend.upper())):
                try:
                    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=p.scale,
                                                         enable_gqa=p.heads_q != p.heads_kv)
                except RuntimeError as e:
                    raise opcts.Unsupported(str(e).splitlines()[0]) from None
            o = opcts.as_torch(t.O)
            (o.permute(0, 2, 1, 3) if p.layout == "bshd" else o).copy_(out)
            g = p.heads_q // p.heads_kv
            s = (q.float() @ k.float().repeat_interleave(g, dim=1).transpose(-1, -2)) * p.scale
            if causal:
                s = s.masked_fill(~torch.ones(p.seq_q, p.seq_k, dtype=torch.bool, device=s.device).tril(), float("-inf"))
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.float()
            opcts.as_torch(t.lse).copy_(torch.logsumexp(s, dim=-1))

    return run


for _backend in ("math", "flash_attention", "efficient_attention", "cudnn_attention"):
    make(_backend)


# FlashAttention-2 on packed sequences, as PyTorch ships it: aten::_flash_attention_forward and
# _backward with cumulative sequence offsets (flash_attn_varlen_func's kernel, mha_varlen_fwd).
# Its causal mask is FlashAttention-2's, bottom-right aligned per sequence, and it takes windows
# as window_size_left/right; no softcap, Dqk = Dv only, fp16 and bf16, head dims up to 256.
def _empty_varlen(p, t):
    """No query or no key in the whole batch: O = 0 and lse = -inf, or zero gradients, as sdpa
    gives for empty inputs, without a kernel."""
    if p.direction == "forward":
        opcts.as_torch(t.O).zero_()
        opcts.as_torch(t.lse).fill_(float("-inf"))
    else:
        for name in ("dQ", "dK", "dV"):
            opcts.as_torch(t[name]).zero_()


def _write_forward(t, out, lse):
    """O [Tq, Hq, Dv] and the logsumexp, which FlashAttention's varlen kernels give as [Hq, Tq]."""
    opcts.as_torch(t.O).copy_(out)
    got = opcts.as_torch(t.lse)
    if tuple(lse.shape) != tuple(got.shape):
        raise opcts.Unsupported(f"logsumexp came back {tuple(lse.shape)}, not [Hq, Tq] {tuple(got.shape)}")
    got.copy_(lse)


def _varlen_supports(p, arch):
    if p.layout != "varlen":
        return "takes the varlen layout only (the sdpa impls above take the dense ones)"
    if p.dtype not in ("fp16", "bf16"):
        return "FlashAttention-2 takes fp16 and bf16 only"
    if p.head_dim_qk != p.head_dim_v or p.head_dim_qk % 8 != 0 or p.head_dim_qk > 256:
        return "FlashAttention-2 takes Dqk = Dv, a multiple of 8, at most 256"
    if p.softcap != 0:
        return "PyTorch's _flash_attention_forward takes no softcap"
    if p.mask == "causal_upper_left":
        return "FlashAttention-2's causal is lower-right; upper-left with Sq != Sk needs a mask it has not"
    if p.batch == 0:
        return "an empty batch"
    return True


@opcts.impl("sdpa", name="torch.flash_varlen", backend="cuda", abi_minor=1, supports=_varlen_supports)
def flash_varlen(p, t, ctx):
    import torch

    if p.heads_kv <= 0 or p.heads_q % p.heads_kv != 0:
        raise opcts.InvalidArgument("heads_kv", "heads_q must be a multiple of heads_kv")
    if p.window_left < -1 or p.window_right < -1:
        raise opcts.InvalidArgument("window_left" if p.window_left < -1 else "window_right", "out of range")
    q, k, v = (opcts.as_torch(t[n]) for n in ("q", "k", "v"))  # [T, H, D]
    cu_q, cu_k = opcts.as_torch(t.cu_seqlens_q), opcts.as_torch(t.cu_seqlens_k)
    window = {}
    if p.window != (-1, -1):
        window = {"window_size_left": p.window_left, "window_size_right": p.window_right}
    causal = p.mask == "causal_lower_right"
    with torch.cuda.stream(opcts.torch_stream(ctx)):
        if q.shape[0] == 0 or k.shape[0] == 0:
            return _empty_varlen(p, t)
        try:
            out, lse, rng, unused, _ = torch.ops.aten._flash_attention_forward(
                q, k, v, cu_q, cu_k, p.seq_q, p.seq_k, 0.0, causal, False, scale=p.scale, **window)
        except RuntimeError as e:
            raise opcts.Unsupported(str(e).splitlines()[0]) from None
        if p.direction == "forward":
            return _write_forward(t, out, lse)
        d_o = opcts.as_torch(t.dO)
        try:
            dq, dk, dv = torch.ops.aten._flash_attention_backward(
                d_o, q, k, v, out, lse, cu_q, cu_k, p.seq_q, p.seq_k, 0.0, causal, rng, unused, scale=p.scale,
                **window)[:3]
        except RuntimeError as e:
            raise opcts.Unsupported(str(e).splitlines()[0]) from None
        for name, g in (("dQ", dq), ("dK", dk), ("dV", dv)):
            opcts.as_torch(t[name]).copy_(g)


# The memory-efficient kernel on packed sequences, as PyTorch ships it: aten::_efficient_attention_
# forward and _backward with cu_seqlens (xFormers' CUTLASS kernel; query, key and value as one batch
# entry of [1, T, H, D]). custom_mask_type 1 is causal from the top left, 2 from the bottom right,
# per sequence. It takes no GQA: K and V are expanded to Hq heads first and dK, dV summed back over
# each group, as scaled_dot_product_attention's enable_gqa does for this backend. Its logsumexp is
# per sequence, [B, Hq, max_seqlen_q rounded up to 32]; the packed rows are gathered from it on the
# device (no host copy of the offsets, which would wait on the stream).
def _efficient_varlen_supports(p, arch):
    if p.layout != "varlen":
        return "takes the varlen layout only (the sdpa impls above take the dense ones)"
    if p.window != (-1, -1) or p.softcap != 0:
        return "PyTorch's _efficient_attention_forward takes no window_size_left/right or softcap"
    if p.batch == 0:
        return "an empty batch"
    return True


def _efficient_lse(torch, lse, cu_q, total_q):
    """[B, H, Lpad] per-sequence logsumexp as [H, total_q] packed rows."""
    t = torch.arange(total_q, device=lse.device, dtype=cu_q.dtype)
    b = torch.searchsorted(cu_q[1:].contiguous(), t, right=True)
    i = (t - cu_q[b]).long()
    return lse[b, :, i].transpose(0, 1)


@opcts.impl("sdpa", name="torch.efficient_varlen", backend="cuda", abi_minor=1, deterministic=False,
            supports=_efficient_varlen_supports)
def efficient_varlen(p, t, ctx):
    import torch

    if p.heads_kv <= 0 or p.heads_q % p.heads_kv != 0:
        raise opcts.InvalidArgument("heads_kv", "heads_q must be a multiple of heads_kv")
    group = p.heads_q // p.heads_kv
    q, k, v = (opcts.as_torch(t[n]) for n in ("q", "k", "v"))  # [T, H, D]
    cu_q, cu_k = opcts.as_torch(t.cu_seqlens_q), opcts.as_torch(t.cu_seqlens_k)
    mask_type = {"none": 0, "causal_upper_left": 1, "causal_lower_right": 2}[p.mask]
    with torch.cuda.stream(opcts.torch_stream(ctx)):
        if q.shape[0] == 0 or k.shape[0] == 0:
            return _empty_varlen(p, t)
        kx = k.repeat_interleave(group, dim=1) if group > 1 else k
        vx = v.repeat_interleave(group, dim=1) if group > 1 else v
        args = (q.unsqueeze(0), kx.unsqueeze(0), vx.unsqueeze(0))
        try:
            out, lse, seed, offset, _, _ = torch.ops.aten._efficient_attention_forward(
                *args, None, cu_q, cu_k, p.seq_q, p.seq_k, 0.0, mask_type, True, scale=p.scale)
        except RuntimeError as e:
            raise opcts.Unsupported(str(e).splitlines()[0]) from None
        if p.direction == "forward":
            opcts.as_torch(t.O).copy_(out[0])
            opcts.as_torch(t.lse).copy_(_efficient_lse(torch, lse, cu_q, q.shape[0]))
            return
        d_o = opcts.as_torch(t.dO).unsqueeze(0)
        try:
            dq, dk, dv = torch.ops.aten._efficient_attention_backward(
                d_o, *args, None, out, cu_q, cu_k, p.seq_q, p.seq_k, lse, 0.0, seed, offset, mask_type, False,
                scale=p.scale)[:3]
        except RuntimeError as e:
            raise opcts.Unsupported(str(e).splitlines()[0]) from None
        opcts.as_torch(t.dQ).copy_(dq[0])
        for name, g in (("dK", dk[0]), ("dV", dv[0])):
            if group > 1:  # the expanded heads' gradients summed back over each group
                g = g.unflatten(1, (p.heads_kv, group)).sum(2)
            opcts.as_torch(t[name]).copy_(g)


# PyTorch's public varlen entry point, torch.nn.attention.varlen.varlen_attn (added in 2.10):
# FlashAttention-2's kernel behind the arguments a user passes — cu_seq_q/k, max_q/k, scale,
# window_size (FlashAttention's, so causal is (-1, 0), lower-right per sequence), the logsumexp
# through return_aux, the backward through autograd. Later versions add enable_gqa, seqused_k and
# block_table: its signature says what this PyTorch takes. Without enable_gqa (2.11) K and V are
# expanded to Hq heads inside the autograd graph, which sums dK and dV back over each group, as a
# user of that version does; padding rows need ABI 1.3, which this impl does not declare.
def _varlen_attn():
    try:
        from torch.nn.attention import varlen
    except ImportError:
        return None
    return varlen if hasattr(varlen, "varlen_attn") else None


def _varlen_attn_supports(p, arch):
    import inspect

    varlen = _varlen_attn()
    if varlen is None:
        return "this PyTorch has no torch.nn.attention.varlen.varlen_attn (PyTorch 2.10 added it)"
    why = _varlen_supports(p, arch)
    if why is not True:
        return why
    takes = inspect.signature(varlen.varlen_attn).parameters
    if "window_size" not in takes and (p.window != (-1, -1) or (p.mask != "none" and "is_causal" not in takes)):
        return "this PyTorch's varlen_attn takes no window_size"
    return True


def _window_size(p):
    """FlashAttention's (left, right) for the problem: causal bounds the right at the diagonal."""
    left, right = p.window
    if p.mask == "causal_lower_right":
        right = 0 if right < 0 else min(right, 0)
    return (left, right)


@opcts.impl("sdpa", name="torch.varlen_attn", backend="cuda", abi_minor=1, supports=_varlen_attn_supports)
def varlen_attn(p, t, ctx):
    import inspect

    import torch

    varlen = _varlen_attn()
    if p.heads_kv <= 0 or p.heads_q % p.heads_kv != 0:
        raise opcts.InvalidArgument("heads_kv", "heads_q must be a multiple of heads_kv")
    if p.window_left < -1 or p.window_right < -1:
        raise opcts.InvalidArgument("window_left" if p.window_left < -1 else "window_right", "out of range")
    takes = inspect.signature(varlen.varlen_attn).parameters
    kwargs = {"scale": p.scale, "return_aux": varlen.AuxRequest(lse=True)}
    if "window_size" in takes:
        kwargs["window_size"] = _window_size(p)
    else:
        kwargs["is_causal"] = p.mask == "causal_lower_right"
    expand = p.heads_q // p.heads_kv if p.heads_q != p.heads_kv and "enable_gqa" not in takes else 1
    if p.heads_q != p.heads_kv and expand == 1:
        kwargs["enable_gqa"] = True
    q, k, v = (opcts.as_torch(t[n]) for n in ("q", "k", "v"))  # [T, H, D]
    cu_q, cu_k = opcts.as_torch(t.cu_seqlens_q), opcts.as_torch(t.cu_seqlens_k)
    backward = p.direction == "backward"
    with torch.cuda.stream(opcts.torch_stream(ctx)):
        if q.shape[0] == 0 or k.shape[0] == 0:
            return _empty_varlen(p, t)
        if backward:
            q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
        kx, vx = (x.repeat_interleave(expand, dim=1) if expand > 1 else x for x in (k, v))
        try:
            out, lse = varlen.varlen_attn(q, kx, vx, cu_q, cu_k, p.seq_q, p.seq_k, **kwargs)
        except RuntimeError as e:
            raise opcts.Unsupported(str(e).splitlines()[0]) from None
        if not backward:
            return _write_forward(t, out, lse)
        try:
            grads = torch.autograd.grad(out, (q, k, v), opcts.as_torch(t.dO))
        except RuntimeError as e:
            raise opcts.Unsupported(str(e).splitlines()[0]) from None
        for name, g in zip(("dQ", "dK", "dV"), grads):
            opcts.as_torch(t[name]).copy_(g)
