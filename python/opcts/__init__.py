"""opcts for Python: kernels written as Python callables, judged by opcts.

    import numpy as np
    import opcts

    @opcts.impl("cast", name="np.e8m0", backend="host",
                supports=lambda p: (p.from_, p.to) == ("e8m0fnu", "fp32") or "decodes e8m0fnu only")
    def decode_e8m0(p, t, ctx):
        codes = t.x.astype(np.int32)  # the byte codes: 2^(code - 127), 255 is NaN
        t.y[...] = np.where(codes == 255, np.nan, np.ldexp(1.0, codes - 127))

    opcts run --arch host --plugin my_kernels.py --filter 'cast.np_*'

Each decorated function is one impl of a family, registered through opcts's plugin ABI
(include/opcts/plugin.h) when `opcts run --plugin FILE.py` (or `--plugin py:package.module`)
imports the module in each process that runs plugins: the same references, tolerances,
manifests, crash isolation, JUnit and gate as any impl. docs/python.md is the guide.

This package is pure Python and imports nothing heavy: numpy, torch and cupy are imported by the
helpers that need them, when first called.
"""

import inspect as _inspect
import re as _re
from collections import namedtuple as _namedtuple

from ._tensors import DeviceTensor, Tensors, TensorSpec, as_cupy, as_numpy, as_torch  # noqa: F401
from ._params import Problem  # noqa: F401

__all__ = ["impl", "InvalidArgument", "Unsupported", "Problem", "Tensors", "TensorSpec", "DeviceTensor", "Context",
           "Arch", "as_numpy", "as_torch", "as_cupy", "torch_stream", "cupy_stream", "impls", "FAMILIES"]

FAMILIES = ("sdpa", "scaled_mm", "cast", "int4_mm", "scatter_add", "index_add", "index_select", "grouped_mm")
BACKENDS = ("host", "cuda", "hip")


class InvalidArgument(Exception):
    """Refuse an argument: a negative case's right answer (OPCTS_INVALID_ARGUMENT). `argument`
    names it as the case expects ("heads_kv", "K", "a_scale", "index", ...)."""

    def __init__(self, argument, why=""):
        super().__init__(f"invalid {argument}: {why}" if why else f"invalid {argument}")
        self.argument = str(argument)
        self.why = str(why) or f"invalid {argument}"


class Unsupported(Exception):
    """This valid problem cannot run here. Raised by `run`, an ERROR (OPCTS_UNSUPPORTED: a
    library refusing a valid combination, recorded as an xfail if known); raised by `supports`,
    a SKIP with `why`."""

    def __init__(self, why):
        super().__init__(why)
        self.why = str(why)


class TacticUnavailable(Exception):
    """Raised by `run`: the case's tactic (ctx.tactic), listed for the problem, is one this machine
    does not offer (OPCTS_TACTIC_UNAVAILABLE): a SKIP with `why`."""

    def __init__(self, why):
        super().__init__(why)
        self.why = str(why)


Arch = _namedtuple("Arch", "name backend compute_major compute_minor warp_size smem_per_block_kib caps")
Context = _namedtuple("Context", "stream device arch tactic", defaults=(None,))
Context.__doc__ = """Where a case runs: `stream` (the cudaStream_t / hipStream_t as an int, 0 on
the host: enqueue all work on it and do not synchronise it), `device` (GPU ordinal, -1 on the
host), `arch` (an Arch: name, backend, compute capability, warp size, shared memory, caps),
`tactic` (the case's tactic, one of what the impl's `tactics` listed for the problem; None for an
impl without tactics)."""

_NAME = _re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")


class ImplInfo:
    """What `@impl` recorded: the function and its declaration."""

    __slots__ = ("family", "name", "backend", "fn", "supports", "deterministic", "accumulation", "reason", "caps",
                 "planted", "abi_minor", "invariant", "tactics", "module", "_run_arity", "_supports_arity")

    def __init__(self, family, name, backend, fn, supports, deterministic, accumulation, reason, caps, planted,
                 abi_minor=0, invariant=(), tactics=None):
        self.family, self.name, self.backend, self.fn = family, name, backend, fn
        self.supports, self.deterministic, self.accumulation = supports, deterministic, accumulation
        self.reason, self.caps, self.planted = reason, tuple(caps), bool(planted)
        self.abi_minor = int(abi_minor)
        self.invariant = invariant if callable(invariant) else tuple(invariant)
        self.tactics = tactics
        self.module = getattr(fn, "__module__", None)
        self._run_arity = _arity(fn, 3)
        self._supports_arity = _arity(supports, 2) if supports is not None else 0

    def __repr__(self):
        return f"<opcts impl {self.name} ({self.family}, {self.backend})>"


def _arity(fn, most):
    try:
        params = _inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return most
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return most
    return min(most, sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)))


_IMPLS = []


def impls():
    """Every impl registered in this interpreter, in registration order."""
    return list(_IMPLS)


# The invariance contracts' axes (docs/cli.md, --invariance) and their plugin ABI bits (ABI 1.10;
# packing and tactic 1.12).
INVARIANCE_AXES = {"batch_size": 1, "batch_position": 2, "packing": 4, "tactic": 8}


def _invariance_names(axes, where):
    if isinstance(axes, str) or not all(isinstance(a, str) for a in axes):
        raise TypeError(f"{where}: invariant is a sequence of axis names ({', '.join(INVARIANCE_AXES)})")
    unknown = [a for a in axes if a not in INVARIANCE_AXES]
    if unknown:
        raise ValueError(f"{where}: unknown invariance axis {unknown[0]!r} (one of {', '.join(INVARIANCE_AXES)})")
    return tuple(axes)


def impl(family, *, name, backend="host", deterministic=True, accumulation=None, supports=None, caps=(),
         planted=False, reason=None, abi_minor=0, invariant=(), tactics=None):
    """Registers the decorated function `fn(p, t, ctx)` (or `fn(p, t)`) as an impl of `family`.

    - `name`: "<prefix>.<name>" of lowercase letters, digits, '_' and '.' (case ids spell it
      with '_' for '.': `cast.np_cast/...`), unique over every impl.
    - `backend`: "host" (numpy arrays over host memory), "cuda" or "hip" (DeviceTensors).
    - `deterministic`: True, False, or `fn(p)`: whether two runs give the same bytes (what
      `opcts run --bitwise` holds the impl to).
    - `accumulation`: how the impl accumulates, for its tolerance: a structure name the
      family's reference knows ("online_block64" for sdpa's lse, "per_add" for scatter_add /
      index_add), a dict {"bits", "rounding", "promote_every"} for the scaled GEMMs, or a dict
      {output: name}. opcts reads it from a manifest: `python3 -m opcts manifest FILE --arch A`
      writes the entries (docs/python.md); `reason` is what derives it (required with it).
    - `supports`: `fn(p, arch)` (or `fn(p)`): True or None to run the problem; False or a
      string (the reason), or raising Unsupported(why), to SKIP it. Called in a probe process.
    - `caps`: capabilities of cases/archs.yaml the impl needs; `planted`: a deliberately wrong
      impl (its cases exist only with --include-planted and must FAIL).
    - `abi_minor`: the plugin ABI minor version whose problems the impl handles (docs/plugins.md,
      "ABI versions"): 0 gets none of the later additions (sdpa's varlen layout is 1, its paged
      KV cache 2), which SKIP saying so.
    - `invariant`: the axes over which the outputs are the same bit for bit, a sequence of
      "batch_size" (a batch entry computed alone), "batch_position" (at another position of
      the batch), "packing" (the batch in the family's other layout: sdpa's dense batch as
      varlen sequences, or back) and "tactic" (every tactic of the problem gives the same bytes),
      or `fn(p)` returning one: what `opcts run --invariance` holds the impl to.
    - `tactics`: `fn(p)` returning the tactics the impl can run p with, its default first (names
      of 1 to 32 of a-z, 0-9 and '_', a letter first, fixed by the problem alone): each is a case
      of its own, `<case id>/<tactic>`, whose run finds it in `ctx.tactic` (docs/plugins.md,
      list_tactics). Raise TacticUnavailable(why) from the run for one this machine does not offer (a
      SKIP). Called in a probe process.

    `fn` writes the outputs and returns nothing; it refuses an argument by raising
    InvalidArgument(argument, why) and a valid problem it cannot run by raising Unsupported(why).
    Any other exception is the case's ERROR, with the traceback's last frames."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r} (one of {', '.join(FAMILIES)})")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"impl name {name!r} is not <prefix>.<name> of lowercase letters, digits, '_' and '.'")
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r} is not host, cuda or hip")
    if not (isinstance(deterministic, bool) or callable(deterministic)):
        raise TypeError("deterministic is True, False or a function of the problem")
    if tactics is not None and not callable(tactics):
        raise TypeError("tactics is a function (p) -> a list of tactic names")
    if supports is not None and not callable(supports):
        raise TypeError("supports is a function (p, arch) -> True | False | reason")
    if not callable(invariant):
        invariant = _invariance_names(invariant, f"impl {name}")
    if not isinstance(abi_minor, int) or isinstance(abi_minor, bool) or abi_minor < 0:
        raise TypeError("abi_minor is a number >= 0 (the plugin ABI minor version the impl handles)")
    if accumulation is not None:
        if not isinstance(accumulation, (str, dict)):
            raise TypeError("accumulation is a structure name or a dict")
        if not reason:
            raise ValueError(f"impl {name}: accumulation needs a reason (what in the kernel makes it so)")

    def register(fn):
        if not callable(fn):
            raise TypeError("@opcts.impl decorates a function")
        for other in _IMPLS:
            if other.name == name:
                raise ValueError(f"impl {name} is registered twice")
        info = ImplInfo(family, name, backend, fn, supports, deterministic, accumulation, reason, caps, planted,
                        abi_minor, invariant, tactics)
        _IMPLS.append(info)
        fn.opcts_impl = info
        return fn

    return register


def torch_stream(ctx):
    """The case's stream as a torch.cuda.ExternalStream: `with torch.cuda.stream(
    opcts.torch_stream(ctx)):` puts PyTorch's (and Triton's) launches on it."""
    import torch

    return torch.cuda.ExternalStream(ctx.stream, device=torch.device("cuda", max(ctx.device, 0)))


def cupy_stream(ctx):
    """The case's stream as a cupy.cuda.ExternalStream (`with opcts.cupy_stream(ctx):`)."""
    import cupy

    return cupy.cuda.ExternalStream(ctx.stream, ctx.device)
