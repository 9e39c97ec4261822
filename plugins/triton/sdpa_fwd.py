"""triton.sdpa: a scaled dot-product attention forward kernel in Triton, the fused-attention
structure generated kernels use (FlashAttention-2, Dao 2023, Algorithm 1): one program per block
of BLOCK_M query rows of one (batch, query head); an online softmax over blocks of BLOCK_N keys,
scores in fp32 in log2 units (exp2), P rounded to the input dtype for P·V, fp32 accumulators;
logsumexp written in natural log (-inf for a row that sees no key, whose output is 0).

  mask 0: none; 1: causal upper-left (key j <= row i); 2: causal lower-right (j <= i + Sk - Sq)
  GQA:    query head h reads key/value head h // group (group = Hq / Hkv)

The scale is passed as its fp32 bit pattern (scale_bits, an int32). Strides are in elements,
for the logical [B, H, S, D] order (so BHSD and BSHD storage both work); the last dimension is
contiguous; D <= HEAD_DIM (the padded power of two the kernel is compiled for). Compiled ahead of
time by build.sh with triton.tools.compile; grid (grid_bh, grid_m, 1) = (B * Hq, ceil(Sq /
BLOCK_M), 1).
"""
import triton
import triton.language as tl


@triton.jit
def sdpa_fwd(Q, K, V, O, LSE,
             sqb, sqh, sqs, skb, skh, sks, svb, svh, svs, sob, soh, sos,
             Hq, group, Sq, Sk, D, scale_bits, mask, grid_m, grid_bh,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    pid_bh = tl.program_id(0)  # B·Hq programs can exceed the 65535 a grid's y dimension allows
    pid_m = tl.program_id(1)
    b = pid_bh // Hq
    h = pid_bh % Hq
    hk = h // group
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    d_ok = offs_d < D
    row_ok = offs_m < Sq
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqs + offs_d[None, :],
                mask=row_ok[:, None] & d_ok[None, :], other=0.0)
    k_base = K + b * skb + hk * skh
    v_base = V + b * svb + hk * svh
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    # The scale arrives as its fp32 bits in an int32: Triton's AOT launcher declares fp32 scalars
    # as C doubles and hands the kernel the double's first 4 bytes (seen with Triton 3.6).
    scale = scale_bits.to(tl.float32, bitcast=True)
    qk_scale = scale * 1.4426950408889634  # log2(e): exp(x) = exp2(x·log2 e)
    shift = Sk - Sq
    # The keys any row of this block may see, [0, hi): causal masks end the loop early, and V rows
    # past hi are never loaded, so a NaN in a key no row sees cannot reach P·V as 0·NaN.
    rows_end = tl.minimum(Sq, (pid_m + 1) * BLOCK_M)
    hi = Sk
    if mask == 1:
        hi = tl.minimum(Sk, rows_end)
    if mask == 2:
        hi = tl.maximum(tl.minimum(Sk, rows_end + shift), 0)
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        col_ok = offs_n < hi
        k = tl.load(k_base + offs_n[None, :] * sks + offs_d[:, None], mask=col_ok[None, :] & d_ok[:, None], other=0.0)
        s = tl.dot(q, k) * qk_scale
        valid = col_ok[None, :] & row_ok[:, None]
        if mask == 1:
            valid = valid & (offs_n[None, :] <= offs_m[:, None])
        if mask == 2:
            valid = valid & (offs_n[None, :] <= offs_m[:, None] + shift)
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: no NaN
        p = tl.exp2(s - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + offs_n[:, None] * svs + offs_d[None, :], mask=col_ok[:, None] & d_ok[None, :], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    seen = l_i > 0
    out = acc / tl.where(seen, l_i, 1.0)[:, None]
    tl.store(O + b * sob + h * soh + offs_m[:, None] * sos + offs_d[None, :], out.to(O.dtype.element_ty),
             mask=row_ok[:, None] & d_ok[None, :])
    lse = tl.where(seen, (m_i + tl.log2(tl.where(seen, l_i, 1.0))) * 0.6931471805599453, float("-inf"))
    tl.store(LSE + pid_bh * Sq + offs_m, lse, mask=row_ok)
