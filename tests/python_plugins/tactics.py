"""A Python impl with tactics (tests/test_python_plugin.cpp): e4m3fn codes decoded to fp32 three
ways, listed by `tactics`: "table" (right), "flushed" (subnormal codes read as zero: a fast but
wrong tactic) and "absent" (opcts.TacticUnavailable: a SKIP). Each reaches the run in ctx.tactic.
And an impl whose tactics function raises: its cases are ERRORs quoting the exception."""

import numpy as np

import opcts


def decode_table():
    c = np.arange(256)
    e, m = (c >> 3) & 15, (c & 7).astype(np.float64)
    v = np.where(e == 0, m * 2.0**-9, (1 + m / 8) * 2.0 ** (e - 7.0))
    v = np.where((e == 15) & (m == 7), np.nan, v)
    return np.where(c & 0x80, -v, v).astype(np.float32)


def supports(p):
    return p.from_ == "e4m3fn" and p.to == "fp32" or "decodes e4m3fn to fp32 only"


@opcts.impl("cast", name="pytactic.decode", backend="host", supports=supports,
            tactics=lambda p: ["table", "flushed", "absent"])
def decode(p, t, ctx):
    if ctx.tactic == "absent":
        raise opcts.TacticUnavailable("no such tactic on this machine")
    codes = t.x.reshape(-1)
    y = decode_table()[codes]
    if ctx.tactic == "flushed":
        y = np.where((codes & 0x78) == 0, np.float32(0), y)
    t.y.reshape(-1)[...] = y


def no_tactics(p):
    raise ValueError("no tactics for this shape")


@opcts.impl("cast", name="pytactic.unlisted", backend="host", supports=supports, tactics=no_tactics)
def unlisted(p, t, ctx):
    t.y.reshape(-1)[...] = decode_table()[t.x.reshape(-1)]
