"""The opcts Python API without opcts itself: the decorator's checks, problems decoded from the
ABI's parameter bytes, tensors as numpy views of the caller's memory (no copies), what an impl
raises mapped onto the ABI's statuses, DLPack capsules of device tensors, and the manifest
entries of declared accumulations."""

import ctypes

import numpy as np
import pytest

import opcts
from opcts import _host, _params, _tensors
from opcts.__main__ import entries

ARCH = ("host", "host", 0, 0, 1, 0, ("fp64",))


def test_the_package_imports_nothing_heavy():
    import subprocess
    import sys

    code = "import sys, opcts; print(any(m in sys.modules for m in ('numpy', 'torch', 'cupy')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": opcts.__path__[0] + "/.."}).stdout.strip()
    assert out == "False"


@pytest.mark.parametrize("kw, error", [
    (dict(family="nope", name="a.b"), "unknown family"),
    (dict(family="cast", name="NoDot"), "is not <prefix>.<name>"),
    (dict(family="cast", name="a.b", backend="tpu"), "backend 'tpu'"),
    (dict(family="cast", name="a.b", accumulation="per_add"), "needs a reason"),
    (dict(family="sdpa", name="a.b", invariant=("batch_order",)), "unknown invariance axis 'batch_order'"),
    (dict(family="sdpa", name="a.b", invariant="batch_size"), "sequence of axis names"),
])
def test_the_decorator_refuses_malformed_declarations(kw, error):
    family = kw.pop("family")
    with pytest.raises((ValueError, TypeError), match=error):
        opcts.impl(family, **kw)


def test_invariance_axes_become_the_abi_bitmask():
    @opcts.impl("sdpa", name="inv.both", invariant=("batch_size", "batch_position"))
    def both(p, t):
        pass

    @opcts.impl("sdpa", name="inv.forward_only", invariant=lambda p: ["batch_size"] if p.direction == "forward" else [])
    def forward_only(p, t):
        pass

    @opcts.impl("sdpa", name="inv.all", invariant=("batch_size", "batch_position", "packing", "tactic"))
    def every_axis(p, t):
        pass

    index = {d.name: i for i, d in enumerate(opcts._IMPLS)}
    assert _host.invariance(index["inv.both"], sdpa_bytes()) == 3
    assert _host.invariance(index["inv.all"], sdpa_bytes()) == 15  # ABI 1.12: packing 4, tactic 8
    assert _host.invariance(index["inv.forward_only"], sdpa_bytes()) == 1
    assert _host.invariance(index["inv.forward_only"], sdpa_bytes(direction=1)) == 0


def sdpa_bytes(**over):
    c = _params.SdpaParams()
    c.struct_size = ctypes.sizeof(c)
    c.dtype.code, c.dtype.bits, c.dtype.lanes = 4, 16, 1
    for k, v in dict(batch=2, heads_q=8, heads_kv=2, seq_q=33, seq_k=70, head_dim=96, head_dim_v=64, scale=0.125,
                     mask=2, window_left=16, window_right=-1, attn_mask=1, mask_per_head=1, layout=1).items():
        setattr(c, k, v)
    for k, v in over.items():
        setattr(c, k, v)
    return bytes(c)


def test_sdpa_problems_carry_the_fields_of_opcts_list_fields():
    p = _params.problem("sdpa", sdpa_bytes())
    assert p.family == "sdpa" and p.dtype == "bf16" and p.batch == 2
    assert p.heads == (8, 2) and p.heads.q == 8 and p.heads.kv == 2 and p.heads_q == 8
    assert p.seq == (33, 70) and p.head_dim == (96, 64) and p.head_dim.v == 64 and p.head_dim_qk == 96
    assert p.mask == "causal_lower_right" and p.window == (16, -1) and p.softcap == 0
    assert p.attn_mask == ("bool", False, True, True) and p.layout == "bshd" and p.direction == "forward"
    assert p.attn_mask.per_query and not p.dbias
    assert p.scale == 0.125 and p.abi.head_dim == 96
    with pytest.raises(AttributeError, match="no field 'poison_masked'"):
        p.poison_masked


def test_cast_problems_spell_from_as_from_():
    c = _params.CastParams(struct_size=ctypes.sizeof(_params.CastParams), satfinite=0, e8m0_rounding=2, n=7)
    c.from_.code, c.from_.bits, c.to.code, c.to.bits = 2, 32, 14, 8
    p = _params.problem("cast", bytes(c))
    assert (p.from_, getattr(p, "from"), p.to, p.overflow, p.rounding, p.n) == ("fp32", "fp32", "e8m0fnu",
                                                                                "nonsaturating", "ceil", 7)


def tensor(name, arr, code, bits, is_output):
    """A tensor as python_host.cpp hands it over: a tuple with a memoryview of the memory."""
    view = memoryview((ctypes.c_char * arr.nbytes).from_address(arr.ctypes.data)).cast("B")
    return (name, arr.ctypes.data, code, bits, arr.shape, tuple(s // arr.itemsize for s in arr.strides), 0,
            int(is_output), view)


def cast_case(x, y):
    c = _params.CastParams(struct_size=ctypes.sizeof(_params.CastParams), satfinite=1, n=x.size)
    c.from_.code, c.from_.bits, c.to.code, c.to.bits = 2, 32, 2, 16
    return bytes(c), (tensor("x", x, 2, 32, False), tensor("y", y, 2, 16, True))


_seen = {}


@opcts.impl("cast", name="apitest.half", backend="host")
def half(p, t, ctx):
    _seen.update(x=t.x, y=t.y, ctx=ctx, outputs=t.outputs, spec=t.spec("y"))
    t.y[...] = t.x


@opcts.impl("cast", name="apitest.refuses", backend="host")
def refuses(p, t):
    raise opcts.InvalidArgument("K", "K must be a multiple of 16")


@opcts.impl("cast", name="apitest.unsupported", backend="host")
def unsupported(p, t, ctx):
    raise opcts.Unsupported("no such path in this library")


def inner():
    raise ValueError("boom " + "x" * 600)


@opcts.impl("cast", name="apitest.raises", backend="host")
def raises(p, t, ctx):
    inner()


def index(name):
    return next(i for i, d in enumerate(opcts.impls()) if d.name == name)


def test_host_tensors_are_numpy_views_of_the_callers_memory():
    x = np.arange(6, dtype=np.float32).reshape(6)
    y = np.full(6, np.nan, dtype=np.float16)
    params, tensors = cast_case(x, y)
    assert _host.run(index("apitest.half"), params, tensors, 0, -1, ARCH) is None
    assert list(y) == [0, 1, 2, 3, 4, 5]  # written in place
    assert np.shares_memory(_seen["x"], x) and np.shares_memory(_seen["y"], y)
    assert isinstance(_seen["y"], np.ndarray) and _seen["y"].opcts_dtype == "fp16"
    assert _seen["ctx"].stream == 0 and _seen["ctx"].device == -1 and _seen["ctx"].arch.name == "host"
    assert _seen["outputs"] == ["y"] and _seen["spec"].dtype == "fp16" and _seen["spec"].is_output
    assert opcts.as_numpy(_seen["y"]) is _seen["y"]


def test_bf16_and_narrow_formats_arrive_as_their_codes():
    a = np.array([0x3F80, 0xC000], dtype=np.uint16)
    view = memoryview((ctypes.c_char * a.nbytes).from_address(a.ctypes.data)).cast("B")
    arr = _tensors.host_array("q", 4, 16, (2,), (1,), 0, view)
    assert arr.dtype == np.uint16 and arr.opcts_dtype == "bf16" and list(arr) == [0x3F80, 0xC000]
    packed = np.array([0x21, 0x03], dtype=np.uint8)  # four e2m1fn codes, two a byte
    view = memoryview((ctypes.c_char * 2).from_address(packed.ctypes.data)).cast("B")
    arr = _tensors.host_array("y", 17, 4, (1, 4), (4, 1), 1, view)
    assert arr.shape == (1, 2) and arr.opcts_dtype == "e2m1fn"


def test_refusals_and_errors_map_onto_the_abi_statuses():
    x, y = np.zeros(4, np.float32), np.zeros(4, np.float16)
    params, tensors = cast_case(x, y)
    assert _host.run(index("apitest.refuses"), params, tensors, 0, -1, ARCH) == (1, "K", "K must be a multiple of 16")
    assert _host.run(index("apitest.unsupported"), params, tensors, 0, -1, ARCH) == (2, "", "no such path in this library")
    status, argument, message = _host.run(index("apitest.raises"), params, tensors, 0, -1, ARCH)
    assert status == 3 and argument == ""
    assert message.startswith("ValueError: boom xxx")
    assert len(message.encode()) <= _host.MESSAGE_BYTES
    assert "test_api.py" in message and "in inner: raise ValueError" in message  # the last frames


def test_supports_answers_none_or_a_reason():
    info = opcts.impls()[index("apitest.half")]
    for answer, want in ((True, None), (None, None), (False, "not supported (its supports() gave no reason)"),
                         ("fp32 only", "fp32 only")):
        info.supports, info._supports_arity = (lambda p, a, r=answer: r), 2
        assert _host.supports(index("apitest.half"), b"", ARCH) == want
    info.supports = lambda p, a: (_ for _ in ()).throw(opcts.Unsupported("not on " + a.name))
    assert _host.supports(index("apitest.half"), b"", ARCH) == "not on host"
    info.supports = None


def test_a_supports_that_raises_is_the_cases_error_not_a_skip():
    info = opcts.impls()[index("apitest.half")]
    info.supports, info._supports_arity = (lambda p, a: {}["missing"]), 2
    try:
        assert _host.supports(index("apitest.half"), b"", ARCH) is None  # runs, so that run() reports it
        x, y = np.zeros(4, np.float32), np.zeros(4, np.float16)
        params, tensors = cast_case(x, y)
        status, argument, message = _host.run(index("apitest.half"), params, tensors, 0, -1, ARCH)
        assert status == 3 and argument == "" and message.startswith("supports() raised KeyError: 'missing'")
    finally:
        info.supports = None


def test_device_tensors_are_dlpack_capsules_over_the_same_memory():
    buf = (ctypes.c_uint16 * 12)()
    t = _tensors.DeviceTensor("q", ctypes.addressof(buf), 4, 16, (1, 3, 4), (12, 4, 1), 0, False, 1, 0xABC, "cuda")
    assert t.__dlpack_device__() == (2, 1) and t.dtype == "bf16" and t.codes.dtype == "uint16"
    cap = t.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    m = _tensors._DLManagedTensor.from_address(get(cap, b"dltensor"))
    d = m.dl_tensor
    assert d.data == ctypes.addressof(buf) and d.ndim == 3 and (d.dtype.code, d.dtype.bits, d.dtype.lanes) == (4, 16, 1)
    assert [d.shape[i] for i in range(3)] == [1, 3, 4] and [d.strides[i] for i in range(3)] == [12, 4, 1]
    assert (d.device.device_type, d.device.device_id) == (2, 1)
    with pytest.raises(TypeError, match="device memory"):
        opcts.as_numpy(t)


def test_declared_accumulations_become_manifest_entries():
    class D:
        family, name, reason = "sdpa", "mine.flash", "blocks of 64 keys"
        accumulation = {"lse": "online_block64"}

    class G(D):
        family, name, accumulation = "scaled_mm", "mine.gemm", {"bits": 14, "rounding": "truncate", "promote_every": 128}

    lines = entries([D, G])
    assert '  - match: "sdpa.mine_flash/*"' in lines and "    output: lse" in lines
    assert "    accumulation: online_block64" in lines
    assert "    accumulator: {bits: 14, rounding: truncate, promote_every: 128}" in lines
