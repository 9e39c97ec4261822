"""NEEDS A GPU (CUDA and PyTorch; written against 2.11): not run in CI, only compiled, and its pure
parts tested without torch (python/tests/test_torch_flex.py).

PyTorch's FlexAttention (torch.nn.attention.flex_attention.flex_attention), compiled as users run
it, as the impl torch.flex_attention: the dense layouts, forward and backward.

    opcts run --arch sm90 --plugin plugins/python/examples/torch_flex.py --filter 'sdpa.torch_flex_attention/*'

What each problem becomes (q, k, v [B, H, S, D], bshd's seen as BHSD through permuted views):
- masks as one mask_mod (keep_mod below) given to create_block_mask at its default 128 × 128 blocks:
  causal upper-left (j <= i) and lower-right (j <= i + Sk − Sq), FlashAttention-2's window around
  the lower-right diagonal, FlashAttention 3's attention chunk, the case's block mask (read per
  element: block_mask[b, h, i // block_q, j // block_k]) and a boolean attn_mask;
- a score_mod for the softcap (c·tanh(s/c); FlexAttention scales q·k first), ALiBi
  (−slope·|i + Sk − Sq − j|, after the softcap) and an additive attn_mask (last); with dbias the
  mask is a captured tensor with requires_grad, whose gradient FlexAttention's backward gives;
- GQA through enable_gqa=True; the scale as given; the logsumexp from the kernel, natural log;
- sinks, which FlexAttention has no argument for, as users add them to its output (torchtitan's
  and transformers' gpt-oss): O·sigmoid(lse − sink) and lse' = logaddexp(lse, sink); dsinks is
  autograd's gradient of that composition (−Σ P_sink·rowsum(dO ⊙ O), the contract's).
Backward is autograd through the same calls: dQ, dK, dV, dbias and dsinks.

SKIPs: the varlen and paged layouts (FlexAttention takes [B, H, S, D] tensors), head dims under
16 or over 256, an empty batch or sequence; fp8 problems need plugin ABI 1.9, which this impl
does not declare (it reads 1.8's block masks at most), so opcts SKIPs them.

FlexAttention runs compiled, torch.compile(flex_attention, dynamic=False, fullgraph=True) (eager
flex_attention is an unfused reference path), once per worker: every problem is a recompile
(shapes and the mods' constants are guarded), so Dynamo's recompile limits
(torch._dynamo.config.recompile_limit and accumulated_recompile_limit, named cache_size_limit
and accumulated_cache_size_limit before pytorch/pytorch#143709) are raised at first use, and
fullgraph=True makes a limit still hit, or a graph break, an ERROR instead of a silent fall back
to eager.
"""

import opcts

MIN_HEAD_DIM = 16   # tl.dot's: "NYI: embedding dimension ... at least 16" (torch/_inductor/kernel/flex_attention.py)
MAX_HEAD_DIM = 256  # the Triton kernel stages head dims rounded up to a power of two (pytorch/pytorch#143832)
RECOMPILE_LIMIT = 1 << 16  # one cache entry per problem and direction a worker runs


def supports(p, arch=None):
    if p.layout not in ("bhsd", "bshd"):
        return ("takes the dense layouts: FlexAttention's q, k, v are [B, H, S, D] (packed sequences would need a "
                "document mask_mod, a paged cache its experimental PagedAttention, neither built here)")
    if min(p.head_dim_qk, p.head_dim_v) < MIN_HEAD_DIM:
        return f"FlexAttention's Triton kernel takes head dims of {MIN_HEAD_DIM} or more (its tl.dot)"
    if max(p.head_dim_qk, p.head_dim_v) > MAX_HEAD_DIM:
        return (f"head dims over {MAX_HEAD_DIM}: FlexAttention's Triton kernel stages tiles of them, rounded up to "
                "a power of two, in shared memory, which they outgrow (pytorch/pytorch#143832, attention-gym#14)")
    if p.batch == 0 or p.seq_q == 0 or p.seq_k == 0:
        return "an empty batch or sequence: a user has no attention to run (no create_block_mask, no grid)"
    return True


def _deterministic(p):
    # The forward stores each O and lse tile once. The backward stores dQ, dK and dV once per tile
    # (no atomics in the flex_attention_backward template), dsinks is eager PyTorch's reductions;
    # a captured buffer's gradient (dbias) is a scatter with atomic adds (zeros_and_scatter's
    # scatter_mode "atomic_add", torch/_inductor/kernel/flex_attention.py).
    return p.direction == "forward" or not p.dbias


# --- The problem's masks and scores over plain values: the same code runs on Python ints
# (python/tests/test_torch_flex.py) and on FlexAttention's int32 index tensors, so it uses only
# +, -, //, abs, comparisons, & and indexing by a tuple; the mods close over plain values and
# tensors, never over the problem object (Dynamo would trace its __getattr__).

def _pick(flags, *xs):
    """The xs whose flag is set, as a tuple."""
    out = ()
    for flag, x in zip(flags, xs):
        if flag:
            out = out + (x,)
    return out


def mask_axes(p):
    """Which of attn_mask's axes (batch, query head, query) it has; a broadcast one is 1 long
    (families/sdpa/problem.cpp, mask_shape: [B or 1, Hq or 1, Sq or 1, Sk])."""
    return (p.attn_mask.per_batch, p.attn_mask.per_head, p.attn_mask.per_query)


def mask_view_shape(p):
    """attn_mask's shape without its broadcast axes: the view the mods index (a reshape of the
    contiguous input, so dbias, its gradient, comes back in the same view)."""
    return _pick(mask_axes(p), p.batch, p.heads_q, p.seq_q) + (p.seq_k,)


def mask_index(axes, b, h, i, j):
    """The index of (batch b, query head h, query i, key j) into mask_view_shape's view."""
    return _pick(axes, b, h, i) + (j,)


def alibi_index(per_batch, b, h):
    """alibi_slopes' index: [Hq] per head, [B, Hq] per (batch, head)."""
    return (b, h) if per_batch else (h,)


def alibi_distance(offset, i, j):
    """ALiBi's |i + Sk − Sq − j|: the lower-right distance (FlashAttention-2's alibi_slopes);
    offset = Sk − Sq."""
    return abs(i + offset - j)


def keep_mod(p, blocks=None, bool_mask=None):
    """The mask_mod keep(b, h, i, j): whether query row i of (batch b, query head h) sees key j —
    families/sdpa/problem.cpp's first_key/last_key (causal upper-left or lower-right, the window
    around the lower-right diagonal, inclusive, -1 unbounded; the chunk of C keys holding the row's
    position a = i + Sk − Sq), then the block mask `blocks` [B, Hq, ⌈Sq/block_q⌉, ⌈Sk/block_k⌉]
    and the boolean attn_mask `bool_mask` (mask_view_shape's view), each None when absent."""
    offset = p.seq_k - p.seq_q
    upper_left, lower_right = p.mask == "causal_upper_left", p.mask == "causal_lower_right"
    left, right = p.window
    chunk = p.chunk
    block_q, block_k = p.block_mask
    axes = mask_axes(p)

    def keep(b, h, i, j):
        a = i + offset  # row i's key on the lower-right diagonal
        ok = j >= 0
        if upper_left:
            ok = ok & (j <= i)
        if lower_right:
            ok = ok & (j <= a)
        if left >= 0:
            ok = ok & (j >= a - left)
        if right >= 0:
            ok = ok & (j <= a + right)
        if chunk > 0:
            # the chunk [⌊a/C⌋·C, ⌊a/C⌋·C + C) holds no key (j >= 0) when a < 0: the floor of a
            # negative a is never needed
            ok = ok & (a >= 0) & (a // chunk == j // chunk)
        if blocks is not None:
            ok = ok & blocks[b, h, i // block_q, j // block_k]
        if bool_mask is not None:
            ok = ok & bool_mask[mask_index(axes, b, h, i, j)]
        return ok

    return keep


def needs_mask_mod(p):
    """Whether some key is masked by position or by the boolean/block masks (else no BlockMask)."""
    return (p.mask != "none" or tuple(p.window) != (-1, -1) or p.chunk > 0 or p.block_mask != (0, 0)
            or p.attn_mask.kind == "bool")


def block_mask_batch_heads(p):
    """create_block_mask's B and H: the batch and query heads where keep_mod reads them (the block
    mask; a boolean attn_mask per batch entry or per head), else None (one mask for all)."""
    sparse, boolean = p.block_mask != (0, 0), p.attn_mask.kind == "bool"
    return (p.batch if sparse or boolean and p.attn_mask.per_batch else None,
            p.heads_q if sparse or boolean and p.attn_mask.per_head else None)


def _score_mod(torch, p, slopes, bias):
    """The score_mod: softcap, then ALiBi, then the additive attn_mask (the contract's order; the
    score arrives scaled), or None when there is nothing to modify."""
    cap, offset = p.softcap, p.seq_k - p.seq_q
    per_batch_slopes, axes = p.alibi == "per_batch_head", mask_axes(p)
    if cap == 0 and slopes is None and bias is None:
        return None

    def score_mod(score, b, h, i, j):
        if cap > 0:
            score = cap * torch.tanh(score / cap)
        if slopes is not None:
            score = score - slopes[alibi_index(per_batch_slopes, b, h)] * alibi_distance(offset, i, j)
        if bias is not None:
            score = score + bias[mask_index(axes, b, h, i, j)]
        return score

    return score_mod


# --- FlexAttention itself.

_compiled = None


def _flex(torch):
    """torch.compile(flex_attention) once per process, the recompile limits raised first."""
    global _compiled
    if _compiled is None:
        import torch._dynamo
        import torch._inductor.config
        from torch.nn.attention.flex_attention import flex_attention

        config = torch._dynamo.config
        # recompile_limit was cache_size_limit before pytorch/pytorch#143709 (the old names stay as
        # aliases): at its default of 8 a worker's 9th problem would run flex_attention eagerly.
        for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                     "accumulated_cache_size_limit"):
            if hasattr(config, name):
                setattr(config, name, RECOMPILE_LIMIT)
        # Compile in this process: no pool of compile subprocesses under opcts's worker, which
        # opcts kills at a case's timeout. The kernels are the same.
        torch._inductor.config.compile_threads = 1
        # dynamic=False, as transformers compiled it (src/transformers/integrations/flex_attention.py,
        # WrappedFlexAttention): each problem gets its static kernel, whatever the worker ran before.
        _compiled = torch.compile(flex_attention, dynamic=False, fullgraph=True)
    return _compiled


def _lse_request():
    """FlexAttention's logsumexp: return_aux=AuxRequest(lse=True) where the module has it (PyTorch
    2.9+, where return_lse is deprecated), else return_lse=True; and how to read (out, lse) from
    the result. Either is the natural log: the kernel's is base 2 and flex_attention multiplies it
    by ln 2 (torch/nn/attention/flex_attention.py, _finalize_outputs; pytorch/pytorch#133159)."""
    import torch.nn.attention.flex_attention as fa

    if hasattr(fa, "AuxRequest"):
        return {"return_aux": fa.AuxRequest(lse=True)}, lambda r: (r[0], r[1].lse)
    return {"return_lse": True}, lambda r: (r[0], r[1])


def _block_mask(p, blocks, bool_mask, device):
    """create_block_mask over keep_mod at FlexAttention's default 128 × 128 blocks, which its
    Triton tiles divide (the case's own block sizes, 16 × 32 and the like, are not multiples of
    the kernel's BLOCK_M and BLOCK_N, which its template asserts): the case's block mask is read
    per element by the mask_mod, and FlexAttention skips the 128-blocks where it keeps nothing."""
    if not needs_mask_mod(p):
        return None
    from torch.nn.attention.flex_attention import create_block_mask

    batch, heads = block_mask_batch_heads(p)
    return create_block_mask(keep_mod(p, blocks, bool_mask), batch, heads, p.seq_q, p.seq_k, device=device)


def check_arguments(p):
    """Refuses a problem the contract calls invalid, naming the argument, before FlexAttention
    sees it (create_block_mask and the kernel would run it): heads_q not a multiple of heads_kv, a
    window bound below -1, a negative softcap, in that order."""
    bad = [(p.heads_kv <= 0 or p.heads_q % p.heads_kv != 0, "heads_kv", "heads_q must be a multiple of heads_kv"),
           (p.window_left < -1, "window_left", "out of range (-1 is unbounded)"),
           (p.window_right < -1, "window_right", "out of range (-1 is unbounded)"),
           (p.softcap < 0, "softcap", "negative (0 is off)")]
    for failed, arg, why in bad:
        if failed:
            raise opcts.InvalidArgument(arg, why)


def _bhsd(p, x):
    """A q-, k-, v- or O-shaped tensor as BHSD (bshd's a permuted view of the same memory)."""
    return x.permute(0, 2, 1, 3) if p.layout == "bshd" else x


@opcts.impl("sdpa", name="torch.flex_attention", backend="cuda", deterministic=_deterministic, supports=supports,
            abi_minor=8)
def flex_attention(p, t, ctx):
    # No accumulation declared: the kernel's online softmax steps over BLOCK_N keys chosen per
    # dtype and head dim by Inductor's heuristics (and the decoding kernel splits the keys for
    # short queries), so its lse is judged per key, which holds for any online softmax.
    import torch

    check_arguments(p)
    backward = p.direction == "backward"
    q, k, v = (_bhsd(p, opcts.as_torch(t[n])) for n in ("q", "k", "v"))
    with torch.cuda.stream(opcts.torch_stream(ctx)):
        if backward:
            q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
        bias = bool_mask = slopes = sinks = blocks = None
        if p.attn_mask.kind != "none":
            mask = opcts.as_torch(t.attn_mask).reshape(mask_view_shape(p))
            if p.attn_mask.kind == "bool":
                bool_mask = mask.bool()
            else:
                bias = mask.detach().requires_grad_() if p.dbias else mask
        if p.alibi != "none":
            slopes = opcts.as_torch(t.alibi_slopes)
        if p.sinks:
            sinks = opcts.as_torch(t.sinks)
            sinks = sinks.detach().requires_grad_() if backward else sinks
        if p.block_mask != (0, 0):
            blocks = opcts.as_torch(t.block_mask).bool()
        request, unpack = _lse_request()
        with torch.set_grad_enabled(backward):
            # No exception is turned into a SKIP here: what FlexAttention cannot take is supports()'s
            # to say, and a failure on a problem it takes (a graph break, a lowering error) is the
            # case's ERROR.
            out, lse = unpack(_flex(torch)(
                q, k, v, score_mod=_score_mod(torch, p, slopes, bias),
                block_mask=_block_mask(p, blocks, bool_mask, q.device), scale=p.scale,
                enable_gqa=p.heads_q != p.heads_kv, **request))
            if sinks is not None:
                # torchtitan's gpt-oss Attention.forward (torchtitan/models/gpt_oss/model/model.py):
                # O·sigmoid(lse − sink); transformers' s_aux branch (src/transformers/integrations/
                # flex_attention.py) the same as exp(lse − logaddexp(lse, sink)). The factor in fp32,
                # O rounded back to the dtype once (torchtitan rounds the factor to it first).
                sink = sinks[None, :, None]
                out = (out * torch.sigmoid(lse - sink).unsqueeze(-1)).to(out.dtype)
                lse = torch.logaddexp(lse, sink)
        if not backward:
            _bhsd(p, opcts.as_torch(t.O)).copy_(out)
            opcts.as_torch(t.lse).copy_(lse)
            return
        inputs = [("dQ", q), ("dK", k), ("dV", v)]
        inputs += [("dbias", bias)] if p.dbias else []
        inputs += [("dsinks", sinks)] if sinks is not None else []
        grads = torch.autograd.grad(out, [x for _, x in inputs], _bhsd(p, opcts.as_torch(t.dO)), allow_unused=True)
        for (name, x), g in zip(inputs, grads):
            got = opcts.as_torch(t[name])
            got = _bhsd(p, got) if name in ("dQ", "dK", "dV") else got.view(x.shape)
            if g is None:  # no row sees a key: nothing reaches the input
                got.zero_()
            else:
                got.copy_(g)
