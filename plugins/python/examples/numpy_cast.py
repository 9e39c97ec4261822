"""numpy host impl of cast (families/cast/cast.hpp), judged bit for bit by opcts:

    opcts run --arch host --tier smoke --plugin plugins/python/examples/numpy_cast.py --filter 'cast.np_*'

Encoding (fp32, fp16 or bf16 x to a narrow y) rounds to nearest even with an unbounded exponent
range, then applies the overflow policy: satfinite clamps to ±max, nonsaturating gives Inf
(e5m2) or NaN (the fn and fnuz formats); the finite formats (e2m1fn, e2m3fn, e3m2fn) have
neither and saturate, and a NaN becomes +max there. Unsigned formats (ue4m3, e8m0fnu) encode |x|;
FNUZ has no -0. e8m0fnu rounds to a power of two by `rounding`. int4/uint4 round to nearest even
and saturate (NaN to 0). Decoding (a narrow x to fp32 y) is exact, every NaN code +NaN.
numpy has no narrow types: x and y hold codes (uint8; e2m1fn, int4 and uint4 two a byte, element
2i in the low nibble), bf16 as uint16.
"""

import numpy as np

import opcts

# name: (exponent bits, mantissa bits, bias, specials, signed)
FORMATS = {
    "e4m3fn": (4, 3, 7, "fn", True),
    "e4m3fnuz": (4, 3, 8, "fnuz", True),
    "e5m2": (5, 2, 15, "ieee", True),
    "e5m2fnuz": (5, 2, 16, "fnuz", True),
    "ue4m3": (4, 3, 7, "fn", False),
    "e2m3fn": (2, 3, 1, "finite", True),
    "e3m2fn": (3, 2, 3, "finite", True),
    "e2m1fn": (2, 1, 1, "finite", True),
}
PACKED = ("e2m1fn", "int4", "uint4")
WIDE = ("fp32", "fp16", "bf16")


def max_finite(ebits, mbits, bias, specials):
    emax = (1 << ebits) - 1 - (1 if specials == "ieee" else 0) - bias
    top = 2.0 - (2.0 if specials == "fn" else 1.0) * 2.0 ** -mbits
    return top * 2.0 ** emax


def encode(x, fmt, satfinite):
    """Codes of float64 values x in a minifloat format (uint8)."""
    ebits, mbits, bias, specials, signed = FORMATS[fmt]
    nan = np.isnan(x)
    neg = np.signbit(x) & signed
    a = np.abs(x)
    top = max_finite(ebits, mbits, bias, specials)
    emin = 1 - bias
    with np.errstate(invalid="ignore", over="ignore"):
        _, e = np.frexp(np.where(np.isfinite(a), a, 1.0))
        q = np.ldexp(1.0, np.maximum(e - 1, emin) - mbits)
        r = np.rint(a / q) * q  # a / q is exact (q a power of two); rint ties to even
    over = ~nan & (r > top)  # ±Inf included
    if satfinite or specials == "finite":
        r = np.where(over, top, r)
        over, over_code = np.zeros_like(over), None
    else:
        over_code = {"ieee": ((1 << ebits) - 1) << mbits, "fn": (1 << (ebits + mbits)) - 1, "fnuz": 0x80}[specials]
    r = np.where(over | nan, 0.0, r)
    _, e = np.frexp(r)
    ex = e - 1
    sub = ex < emin
    mant_sub = np.ldexp(r, bias - 1 + mbits)
    mant_norm = np.ldexp(r, mbits - ex) - (1 << mbits)
    code = np.where(sub, mant_sub, ((ex + bias) << mbits) + mant_norm)
    code = np.where(r == 0, 0, code).astype(np.int64)
    sign_bit = 1 << (ebits + mbits) if signed else 0
    if specials == "fnuz":
        neg = neg & (r != 0)  # no -0
    code = code | np.where(neg, sign_bit, 0)
    if over_code is not None:
        code = np.where(over, over_code | (np.where(neg, sign_bit, 0) if specials != "fnuz" else 0), code)
    nan_code = {"ieee": (((1 << ebits) - 1) << mbits) | (1 << (mbits - 1)), "fn": (1 << (ebits + mbits)) - 1,
                "fnuz": 0x80}.get(specials)
    if nan_code is None:  # finite formats: NaN -> +max
        code = np.where(nan, (1 << (ebits + mbits)) - 1, code)  # +max: every bit but the sign
    else:
        code = np.where(nan, nan_code | (np.where(np.signbit(x), sign_bit, 0) if specials != "fnuz" else 0), code)
    return code.astype(np.uint8)


def encode_e8m0(x, rounding, satfinite):
    a = np.abs(x)
    with np.errstate(invalid="ignore"):
        m, e2 = np.frexp(np.where(np.isfinite(a) & (a > 0), a, 1.0))
    e = e2 - 1
    if rounding == "ceil":
        e = e + (m != 0.5)
    elif rounding == "rne":
        e = e + (m >= 0.75)
    over = 0xFE if satfinite else 0xFF
    code = np.clip(e + 127, 0, 255)
    code = np.where(e > 127, over, code)
    code = np.where(a == 0, 0, code)
    code = np.where(np.isinf(a), over, code)
    code = np.where(np.isnan(x), 0xFF, code)
    return code.astype(np.uint8)


def encode_int4(x, signed):
    lo, hi = (-8, 7) if signed else (0, 15)
    with np.errstate(invalid="ignore"):
        v = np.clip(np.rint(np.nan_to_num(x, nan=0.0, posinf=hi, neginf=lo)), lo, hi).astype(np.int64)
    return (v & 0xF).astype(np.uint8)


def decode_table(fmt):
    """fp32 value of every code of a format (NaN codes +NaN)."""
    if fmt in ("int4", "uint4"):
        c = np.arange(16)
        return (((c ^ 8) - 8) if fmt == "int4" else c).astype(np.float32)
    if fmt == "e8m0fnu":
        c = np.arange(256)
        return np.where(c == 255, np.nan, np.ldexp(1.0, c - 127)).astype(np.float32)
    ebits, mbits, bias, specials, signed = FORMATS[fmt]
    n = 1 << (ebits + mbits + (1 if signed else 0))
    c = np.arange(n)
    exp = (c >> mbits) & ((1 << ebits) - 1)
    mant = c & ((1 << mbits) - 1)
    v = np.where(exp == 0, np.ldexp(mant.astype(np.float64), 1 - bias - mbits),
                 np.ldexp((mant + (1 << mbits)).astype(np.float64), exp - bias - mbits))
    neg = (c >> (ebits + mbits)) & 1 if signed else np.zeros_like(c)
    v = np.where(neg == 1, -v, v)
    all_exp = exp == (1 << ebits) - 1
    if specials == "ieee":
        v = np.where(all_exp & (mant == 0), np.where(neg == 1, -np.inf, np.inf), v)
        v = np.where(all_exp & (mant != 0), np.nan, v)
    elif specials == "fn":
        v = np.where(all_exp & (mant == (1 << mbits) - 1), np.nan, v)
    elif specials == "fnuz":
        v = np.where(c == 0x80, np.nan, v)
    return v.astype(np.float32)


def unpack(b, n):
    codes = np.empty(b.size * 2, dtype=np.uint8)
    codes[0::2] = b & 0xF
    codes[1::2] = b >> 4
    return codes[:n]


def pack_into(y, codes):
    if codes.size % 2:
        codes = np.append(codes, np.uint8(0))
    y[...] = (codes[0::2] | (codes[1::2] << 4)).reshape(y.shape)


def wide_values(x, dtype):
    if dtype == "bf16":
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def supports(p):
    if p.from_ in WIDE and (p.to in FORMATS or p.to in ("e8m0fnu", "int4", "uint4")):
        return True
    if p.to == "fp32" and (p.from_ in FORMATS or p.from_ in ("e8m0fnu", "int4", "uint4")):
        return True
    return f"converts fp32/fp16/bf16 to the narrow formats and back to fp32, not {p.from_} to {p.to}"


@opcts.impl("cast", name="np.cast", backend="host", deterministic=True, supports=supports)
def cast(p, t, ctx):
    x, y = t.x, t.y
    if p.to == "fp32":  # decoding: a table lookup per code
        codes = unpack(x.reshape(-1), p.n) if p.from_ in PACKED else x.reshape(-1)
        table = decode_table(p.from_)
        y.reshape(-1)[...] = table[codes & (table.size - 1)]  # bits above the format's width ignored
        return
    v = wide_values(x.reshape(-1), p.from_)
    satfinite = p.overflow == "satfinite"
    if p.to == "e8m0fnu":
        codes = encode_e8m0(v, p.rounding, satfinite)
    elif p.to in ("int4", "uint4"):
        codes = encode_int4(v, p.to == "int4")
    else:
        codes = encode(v, p.to, satfinite)
    if p.to in PACKED:
        pack_into(y, codes)
    else:
        y.reshape(-1)[...] = codes
