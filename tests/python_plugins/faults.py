"""Python impls that break one rule each (tests/test_python_plugin.cpp): the verdicts a C plugin
gets for the same faults. All are cast impls; each case's fault is its impl's name."""

import ctypes
import time

import numpy as np

import opcts


def helper(x):
    return x / 0  # ZeroDivisionError two frames down: the record names both


@opcts.impl("cast", name="pyfault.raises", backend="host")
def raises(p, t, ctx):
    t.y[...] = 0
    helper(1)


@opcts.impl("cast", name="pyfault.unsupported", backend="host")
def unsupported(p, t, ctx):
    raise opcts.Unsupported("this library refuses " + p.to)


@opcts.impl("cast", name="pyfault.segfault", backend="host")
def segfault(p, t, ctx):
    ctypes.string_at(0)  # reads address 0: SIGSEGV in this worker


@opcts.impl("cast", name="pyfault.hang", backend="host")
def hang(p, t, ctx):
    while True:  # pure Python: the GIL is released now and then, nothing returns
        time.sleep(0.01)


@opcts.impl("cast", name="pyfault.gil", backend="host")
def gil(p, t, ctx):
    # PyDLL keeps the GIL across the call: C code that never returns it.
    ctypes.PyDLL(None).sleep(3600)


@opcts.impl("cast", name="pyfault.lazy", backend="host")
def lazy(p, t, ctx):
    return  # writes nothing: the outputs keep the 0xFF bytes they arrived with


@opcts.impl("cast", name="pyfault.scribble", backend="host")
def scribble(p, t, ctx):
    t.x[0] = 1  # inputs are read-only by contract: opcts compares them after the run


@opcts.impl("cast", name="pyfault.outside", backend="host")
def outside(p, t, ctx):
    y = t.y
    y[...] = 0
    ctypes.memset(y.ctypes.data + y.nbytes, 0x11, 4)  # the guard bytes after y


@opcts.impl("cast", name="pyfault.exit", backend="host")
def exits(p, t, ctx):
    raise SystemExit(3)  # an impl's SystemExit is its ERROR, not the worker's end


def skip_all(p, arch):
    raise opcts.Unsupported("no problem of " + arch.name)


@opcts.impl("cast", name="pyfault.skipper", backend="host", supports=skip_all)
def skipper(p, t, ctx):
    raise AssertionError("never called: supports refuses everything")


def broken_supports(p, arch):
    return p.no_such_field  # an AttributeError: the impl's bug, not a refusal


@opcts.impl("cast", name="pyfault.badsupports", backend="host", supports=broken_supports)
def badsupports(p, t, ctx):
    raise AssertionError("never called: its supports() raises")


@opcts.impl("cast", name="pyfault.noop", backend="host")
def noop(p, t, ctx):
    np.copyto(t.y, 0)


# Import and run counts per process, for the test that the module is imported once per worker.
import os as _os  # noqa: E402

_log = _os.environ.get("OPCTS_TEST_PY_LOG")
if _log:
    with open(_log, "a") as f:
        f.write(f"import {_os.getpid()}\n")


@opcts.impl("cast", name="pyfault.counted", backend="host")
def counted(p, t, ctx):
    np.copyto(t.y, 0)
    if _log:
        with open(_log, "a") as f:
            f.write(f"run {_os.getpid()}\n")
