"""opcts_bench_suite's Python no-op impls (one per family with an ABI parameter struct): each
gets its problem and a numpy view of every output, and writes nothing. Against the C no-op
beside it, the per-case cost of the Python plugin host (plugins/python)."""

import numpy  # noqa: F401  as a numpy impl's module does: imported with it, once per process

import opcts


def _make(family):
    @opcts.impl(family, name="bench.py_noop_" + family, backend="host")
    def noop(p, t, ctx):
        for name in t.outputs:
            t[name]

    return noop


for _f in opcts.FAMILIES:
    _make(_f)
