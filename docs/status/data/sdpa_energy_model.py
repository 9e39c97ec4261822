# A model of host.flash's forward arithmetic (families/sdpa/host/sdpa_flash.cpp: fp32 scores,
# P rounded to the dtype once, an fp32 P·V accumulator, 64-key tiles, one output rounding) and of
# its pv_in_dtype plant (the accumulator rounded to the dtype after every tile), on the suite's
# normal(0, 1) q, k, v and scale 1/√D. Prints each one's Σ err² (err = O − fp64 O) over the
# model's expectation of a correct kernel's: Σ spacing_out²/12 (the output rounding, uniform)
# plus Σ_j (u·e_j·v_jd)²/3 / l² (the P roundings, as families/sdpa/bound.hpp models them).
# docs/status/host.md (issue 32) quotes its figures. Needs numpy (Debian: python3-numpy).
import sys

import numpy as np

rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
def bf16(x):
    x = np.asarray(x, np.float32); b = x.view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)
def fp16(x): return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)
def spacing(dt, x):  # ulp of |x| in dtype
    x = np.abs(x); 
    if dt == 'bf16': e = np.floor(np.log2(np.maximum(x, 1e-38))); return 2.0 ** (e - 7)
    e = np.floor(np.log2(np.maximum(x, 2.0**-14))); return 2.0 ** (e - 10)
def run(dt, sq, sk, d, heads=4, tile=64, plant=False):
    rnd = bf16 if dt == 'bf16' else fp16
    u = 2.0**-8 if dt == 'bf16' else 2.0**-11
    q = rnd(rng.standard_normal((heads, sq, d))); k = rnd(rng.standard_normal((heads, sk, d))); v = rnd(rng.standard_normal((heads, sk, d)))
    scale = np.float32(1 / np.sqrt(d))
    errs, var_model = [], []
    for h in range(heads):
        s64 = (q[h].astype(np.float64) @ k[h].T.astype(np.float64)) * float(scale)
        p64 = np.exp(s64 - s64.max(1, keepdims=True)); l64 = p64.sum(1, keepdims=True)
        O = (p64 @ v[h].astype(np.float64)) / l64
        s = (q[h] @ k[h].T).astype(np.float32) * scale
        for i in range(sq):
            m = -np.inf; l = np.float32(0); acc = np.zeros(d, np.float32)
            for j0 in range(0, sk, tile):
                st = s[i, j0:j0+tile]; mn = max(m, st.max()); c = np.float32(np.exp(np.float32(m - mn))) if m > -np.inf else np.float32(0)
                l = np.float32(l * c); acc = (acc * c).astype(np.float32)
                pj = np.exp((st - mn).astype(np.float32)).astype(np.float32)
                l = np.float32(l + pj.sum(dtype=np.float32))
                acc = (acc + rnd(pj) @ v[h, j0:j0+tile]).astype(np.float32)
                if plant: acc = rnd(acc)
                m = mn
            o = rnd(acc / l)
            errs.append(o - O[i])
            # model: final rounding uniform: spacing²/12; P rounding: Σ_j (b_j v_j)²/3 / l², b_j = u·e_j
            e = p64[i]  # relative to exact max; fine
            sp = spacing(dt, O[i])
            var_model.append(sp**2 / 12 + ((u * e)[:, None] ** 2 * v[h].astype(np.float64) ** 2).sum(0) / 3 / l64[i, 0] ** 2)
    errs = np.concatenate(errs); var_model = np.concatenate(var_model)
    return (errs**2).sum(), var_model.sum(), len(errs)
for dt in ['bf16', 'fp16']:
    for (sq, sk, d) in [(4, 256, 64), (4, 256, 8), (4, 587, 16), (8, 1024, 64), (64, 256, 160), (1, 128, 64)]:
        c, vm, n = run(dt, sq, sk, d); p, vm2, _ = run(dt, sq, sk, d, plant=True)
        print(f"{dt} sq{sq} sk{sk} d{d} N={n}: correct/model {c/vm:.2f}  plant/model {p/vm2:.2f}")
