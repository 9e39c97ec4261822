"""A case's tensors as an impl sees them.

Host impls (backend="host") get numpy arrays viewing opcts's own buffers (no copies): write an
output in place (`y[...] = ...`, `np.copyto(y, ...)`, `out=y`), never rebind it. Device impls get
`DeviceTensor`s: DLPack producers (`__dlpack__`, `__dlpack_device__`) over opcts's device memory,
which `as_torch`, `as_cupy` (or any `from_dlpack`) view without copies. numpy, torch and cupy are
imported only when a helper needs them."""

import ctypes
from collections import namedtuple

from ._dtypes import dtype_name, is_codes, numpy_dtype

TensorSpec = namedtuple("TensorSpec", "name dtype shape strides packing is_output data_ptr")

_np = None
_HostArray = None
_views = {}  # (code, bits) -> (numpy dtype, its itemsize, the opcts dtype name)


def _numpy():
    global _np, _HostArray
    if _np is None:
        import numpy

        class HostArray(numpy.ndarray):
            """A numpy view of an opcts host tensor; `opcts_dtype` is its opcts dtype name
            (bf16, e4m3fn, ...: those numpy lacks are held as their codes). Arrays derived from
            it (slices, results) say None."""

            opcts_dtype = None

        _np, _HostArray = numpy, HostArray
    return _np


def host_array(name, code, bits, shape, strides, packing, view):
    """A numpy view of a host tensor (memoryview `view` over its bytes), strides in elements."""
    kind = _views.get((code, bits))
    if kind is None:
        np = _numpy()
        dt = np.dtype(numpy_dtype(code, bits))
        kind = _views[(code, bits)] = (dt, dt.itemsize, dtype_name(code, bits))
    dt, size, opcts_dtype = kind
    if packing == 1:  # two 4-bit codes a byte, element 2i in the low nibble: the bytes
        flat = len(view)
        whole = len(shape) >= 1 and shape[-1] % 2 == 0 and flat * 2 == _count(shape)
        arr = _HostArray(tuple(shape[:-1]) + (shape[-1] // 2,) if whole else (flat,), dtype=_np.uint8, buffer=view)
    else:
        arr = _HostArray(shape, dtype=dt, buffer=view, strides=[s * size for s in strides])
    arr.opcts_dtype = opcts_dtype
    return arr


def _count(shape):
    n = 1
    for s in shape:
        n *= s
    return n


# ---- DLPack (dlpack.h v0.8 / 1.x's unversioned DLManagedTensor) --------------------------------


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]


_noop_deleter = _Deleter(lambda _: None)  # opcts owns the memory; the struct lives in _live
_CAPSULE_NAME = b"dltensor"
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_live = []  # the DLPack structs handed out during the current case (cleared by the next)

_KDL_CUDA, _KDL_ROCM, _KDL_CPU = 2, 10, 1


class DeviceTensor:
    """A tensor in device memory: `data_ptr`, `dtype` (opcts name), `shape`, `strides` (in
    elements), `device` (ordinal), `stream` (the case's cudaStream_t / hipStream_t as an int).
    A DLPack producer: `torch.from_dlpack(t)`, `cupy.from_dlpack(t)`; `t.codes` is the same
    memory typed as unsigned codes (for a consumer without bf16 or fp8)."""

    __slots__ = ("name", "data_ptr", "code", "bits", "shape", "strides", "packing", "is_output", "device", "stream",
                 "backend")

    def __init__(self, name, ptr, code, bits, shape, strides, packing, is_output, device, stream, backend):
        self.name, self.data_ptr, self.code, self.bits = name, ptr, code, bits
        self.shape, self.strides, self.packing, self.is_output = tuple(shape), tuple(strides), packing, is_output
        self.device, self.stream, self.backend = device, stream, backend

    @property
    def dtype(self):
        return dtype_name(self.code, self.bits)

    @property
    def codes(self):
        """The same memory as unsigned integer codes (uint16 for bf16, uint8 for 8-bit formats;
        packed 4-bit tensors as their bytes, the last extent halved)."""
        shape, strides = self.shape, self.strides
        if self.packing == 1:
            shape = shape[:-1] + ((shape[-1] + 1) // 2,) if shape else shape
            return DeviceTensor(self.name, self.data_ptr, 1, 8, shape, strides, 0, self.is_output, self.device,
                                self.stream, self.backend)
        bits = 16 if self.bits == 16 else 8 if self.bits <= 8 else self.bits
        return DeviceTensor(self.name, self.data_ptr, 1, bits, shape, strides, 0, self.is_output, self.device,
                            self.stream, self.backend)

    def __dlpack_device__(self):
        return (_KDL_ROCM if self.backend == "hip" else _KDL_CUDA, self.device)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        # The data is ready on the case's stream (opcts put the inputs there before run); a
        # consumer working on that stream (opcts.torch_stream(ctx)) needs no synchronisation.
        n = len(self.shape)
        shape = (ctypes.c_int64 * max(n, 1))(*self.shape)
        strides = (ctypes.c_int64 * max(n, 1))(*self.strides)
        bits = 8 if self.bits == 6 else self.bits
        m = _DLManagedTensor()
        m.dl_tensor = _DLTensor(self.data_ptr, _DLDevice(*self.__dlpack_device__()), n,
                                _DLDataType(self.code, bits, 1), shape, strides, 0)
        m.manager_ctx = None
        m.deleter = _noop_deleter
        _live.append((m, shape, strides))
        return _capsule_new(ctypes.addressof(m), _CAPSULE_NAME, None)

    def __repr__(self):
        return f"DeviceTensor({self.name!r}, {self.dtype}, shape={self.shape}, device={self.device})"


class Tensors:
    """A case's tensors by name: `t["q"]` or `t.q`, `"attn_mask" in t`, `t.spec("q")` (name,
    dtype, shape, strides, packing, is_output, data_ptr), `t.inputs` and `t.outputs` (names).
    Host tensors are numpy arrays (made when first asked for); device tensors DeviceTensors."""

    __slots__ = ("_raw", "_made", "_host", "_device", "_stream", "_backend")

    def __init__(self, raw, host, device, stream, backend):
        self._raw = {r[0]: r for r in raw}
        self._made = {}
        self._host, self._device, self._stream, self._backend = host, device, stream, backend

    def __getitem__(self, name):
        v = self._made.get(name)
        if v is None:
            r = self._raw[name]
            _, ptr, code, bits, shape, strides, packing, is_output, view = r
            if self._host:
                v = host_array(name, code, bits, shape, strides, packing, view)
            else:
                v = DeviceTensor(name, ptr, code, bits, shape, strides, packing, is_output, self._device,
                                 self._stream, self._backend)
            self._made[name] = v
        return v

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no tensor {name!r} in this case (it has {', '.join(self._raw)})") from None

    def __contains__(self, name):
        return name in self._raw

    def __iter__(self):
        return iter(self._raw)

    def __len__(self):
        return len(self._raw)

    def keys(self):
        return self._raw.keys()

    def items(self):
        return [(k, self[k]) for k in self._raw]

    @property
    def inputs(self):
        return [k for k, r in self._raw.items() if not r[7]]

    @property
    def outputs(self):
        return [k for k, r in self._raw.items() if r[7]]

    def spec(self, name):
        _, ptr, code, bits, shape, strides, packing, is_output, _ = self._raw[name]
        return TensorSpec(name, dtype_name(code, bits), tuple(shape), tuple(strides), packing, bool(is_output), ptr)

    def __repr__(self):
        return "Tensors(" + ", ".join(f"{k}: {self.spec(k).dtype}{list(self.spec(k).shape)}" for k in self._raw) + ")"


def new_case():
    _live.clear()


# ---- Views in other libraries (imported when first used) -------------------------------------

_TORCH_CODES = {"bf16": "bfloat16", "e4m3fn": "float8_e4m3fn", "e5m2": "float8_e5m2", "e4m3fnuz": "float8_e4m3fnuz",
                "e5m2fnuz": "float8_e5m2fnuz", "e8m0fnu": "float8_e8m0fnu"}


def as_numpy(t):
    """A host tensor as numpy (the array itself). Device memory has no numpy view: copy it with
    as_torch(t).cpu().numpy() or cupy.asnumpy(as_cupy(t)), on the case's stream."""
    np = _numpy()
    if isinstance(t, np.ndarray):
        return t
    if isinstance(t, DeviceTensor):
        raise TypeError(f"tensor {t.name!r} is in device memory: numpy cannot view it (use as_torch or as_cupy)")
    return np.asarray(t)


def as_torch(t):
    """A torch.Tensor viewing the same memory: from_dlpack for device tensors (bf16 and fp8 as
    torch's own dtypes), from_numpy for host arrays (codes reinterpreted as torch's dtype where
    torch has one)."""
    import torch

    if isinstance(t, DeviceTensor):
        return torch.utils.dlpack.from_dlpack(t.__dlpack__())
    x = torch.from_numpy(as_numpy(t))
    name = _TORCH_CODES.get(getattr(t, "opcts_dtype", None) or "")
    if name is not None and hasattr(torch, name):
        x = x.view(getattr(torch, name))
    return x


def as_cupy(t):
    """A cupy.ndarray viewing a device tensor (through DLPack); dtypes cupy lacks (bf16, fp8)
    as their codes."""
    import cupy

    if not isinstance(t, DeviceTensor):
        raise TypeError("as_cupy takes a device tensor (backend='cuda' or 'hip')")
    src = t.codes if is_codes(t.dtype) and t.dtype not in ("int4", "uint4") or t.packing == 1 else t
    return cupy.from_dlpack(src)
