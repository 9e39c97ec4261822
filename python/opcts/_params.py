"""The families' parameter structs (include/opcts/plugin.h) as ctypes, and the problem objects
an impl receives: the fields named as `opcts list --fields FAMILY` names them, plus the C
struct's own names for every value (`p.abi` is the struct itself)."""

import ctypes
from collections import namedtuple

from ._dtypes import dtype_name


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


_i32, _i64, _u32, _f64 = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint32, ctypes.c_double


class SdpaParams(ctypes.Structure):
    _fields_ = [("struct_size", _u32), ("dtype", _DType), ("batch", _i64), ("heads_q", _i64), ("heads_kv", _i64),
                ("seq_q", _i64), ("seq_k", _i64), ("head_dim", _i64), ("head_dim_v", _i64), ("scale", _f64),
                ("mask", _i32), ("window_left", _i64), ("window_right", _i64), ("softcap", _f64),
                ("attn_mask", _i32), ("mask_per_batch", _i32), ("mask_per_head", _i32), ("layout", _i32),
                ("direction", _i32), ("page_size", _i64), ("num_pages", _i64), ("max_pages_per_seq", _i64),
                ("kv_layout", _i32), ("attention_chunk", _i64), ("sinks", _i32), ("alibi", _i32),
                ("mask_query_broadcast", _i32), ("dbias", _i32), ("block_mask_q", _i64), ("block_mask_k", _i64),
                ("fp8", _i32), ("fp8_format", _DType), ("descale", _i32), ("fp8_out", _i32)]


class ScaledMmParams(ctypes.Structure):
    _fields_ = [("struct_size", _u32), ("m", _i64), ("n", _i64), ("k", _i64), ("a_elem", _DType), ("b_elem", _DType),
                ("out", _DType), ("bias", _i32), ("recipe", _i32), ("a_row_major", _i32), ("b_col_major", _i32),
                ("lda", _i64), ("ldb", _i64), ("scale_layout", _i32), ("mx_rceil", _i32), ("fast_accum", _i32)]


class CastParams(ctypes.Structure):
    _fields_ = [("struct_size", _u32), ("from_", _DType), ("to", _DType), ("satfinite", _i32),
                ("e8m0_rounding", _i32), ("n", _i64)]


class Int4MmParams(ctypes.Structure):
    _fields_ = [("struct_size", _u32), ("dtype", _DType), ("m", _i64), ("n", _i64), ("k", _i64),
                ("group_size", _i64), ("format", _i32), ("inner_k_tiles", _i32)]


class ScatterAddParams(ctypes.Structure):
    _fields_ = [("struct_size", _u32), ("dtype", _DType), ("index", _DType), ("outer", _i64), ("n", _i64),
                ("m", _i64), ("inner", _i64)]


class IndexAddParams(ctypes.Structure):
    _fields_ = ScatterAddParams._fields_ + [("alpha", _f64)]


IndexSelectParams = ScatterAddParams


class GroupedMmParams(ctypes.Structure):
    _fields_ = [("struct_size", _u32), ("mode", _i32), ("recipe", _i32), ("groups", _i64), ("m", _i64),
                ("n", _i64), ("k", _i64)]


STRUCTS = {
    "sdpa": SdpaParams, "scaled_mm": ScaledMmParams, "cast": CastParams, "int4_mm": Int4MmParams,
    "scatter_add": ScatterAddParams, "index_add": IndexAddParams, "index_select": IndexSelectParams,
    "grouped_mm": GroupedMmParams,
}

Heads = namedtuple("Heads", "q kv")
Seq = namedtuple("Seq", "q k")
HeadDim = namedtuple("HeadDim", "qk v")
Window = namedtuple("Window", "left right")
AttnMask = namedtuple("AttnMask", "kind per_batch per_head per_query")
Elem = namedtuple("Elem", "a b")

_SDPA_MASK = ("none", "causal_upper_left", "causal_lower_right")
_SDPA_ATTN = ("none", "bool", "additive")
_E8M0 = ("rne", "floor", "ceil")
_RECIPES = ("tensorwise", "rowwise", "blockwise_1x128_128x128", "blockwise_1x128_1x128", "mxfp8", "mxfp4", "nvfp4")
_INT4 = ("tinygemm", "tinygemm_unpacked", "awq", "gptq", "q4_0")
_GROUPED_MODE = ("2d_3d", "3d_3d", "2d_2d", "3d_2d")
_GROUPED_RECIPE = ("bf16", "rowwise", "mxfp8", "rowwise_fnuz")


def _pick(table, i):
    return table[i] if 0 <= i < len(table) else i


class Problem:
    """One case's problem: `family`, the fields of `opcts list --fields FAMILY` that the plugin
    ABI carries, the C struct's names (`heads_q`, `seq_k`, ...) and the struct itself (`abi`).
    Fields the ABI does not carry (sdpa's poison_masked, cast's input, expect_error) are absent:
    an impl must find a negative case's defect in the tensors, as a library would."""

    def __init__(self, family, abi, fields):
        self.family = family
        self.abi = abi
        self.__dict__.update(fields)

    def __getattr__(self, name):  # p.from_ is cast's `from`; getattr(p, "from") works too
        if name == "from" and "from_" in self.__dict__:
            return self.__dict__["from_"]
        raise AttributeError(f"{self.family} problem has no field {name!r}")

    def fields(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("family", "abi")}

    def __repr__(self):
        inner = ", ".join(f"{k}={v!r}" for k, v in self.fields().items())
        return f"{self.family}.Problem({inner})"


def _c_names(c):
    out = {}
    for name, _ in c._fields_:
        if name == "struct_size":
            continue
        v = getattr(c, name)
        out[name] = dtype_name(v.code, v.bits) if isinstance(v, _DType) else v
    return out


def _sdpa(c):
    f = _c_names(c)
    f.update(dtype=dtype_name(c.dtype.code, c.dtype.bits), heads=Heads(c.heads_q, c.heads_kv),
             seq=Seq(c.seq_q, c.seq_k), head_dim=HeadDim(c.head_dim, c.head_dim_v), head_dim_qk=c.head_dim,
             mask=_pick(_SDPA_MASK, c.mask), window=Window(c.window_left, c.window_right),
             attn_mask=AttnMask(_pick(_SDPA_ATTN, c.attn_mask), bool(c.mask_per_batch), bool(c.mask_per_head),
                                not c.mask_query_broadcast),
             dbias=bool(c.dbias), block_mask=(c.block_mask_q, c.block_mask_k),
             fp8=("none", "qkv", "kv")[c.fp8] if c.fp8 in (0, 1, 2) else c.fp8,
             descale=("per_tensor", "per_head")[c.descale] if c.descale in (0, 1) else c.descale,
             fp8_out=bool(c.fp8_out),
             layout=("bhsd", "bshd", "varlen", "paged")[c.layout] if c.layout in (0, 1, 2, 3) else c.layout,
             kv_layout=("nhd", "hnd")[c.kv_layout] if c.kv_layout in (0, 1) else c.kv_layout, chunk=c.attention_chunk,
             sinks=bool(c.sinks), alibi=("none", "per_head", "per_batch_head")[c.alibi] if c.alibi in (0, 1, 2) else c.alibi,
             direction=("forward", "backward")[c.direction] if c.direction in (0, 1) else c.direction)
    return f


def _cast(c):
    f = _c_names(c)
    f.update(overflow="satfinite" if c.satfinite else "nonsaturating", rounding=_pick(_E8M0, c.e8m0_rounding))
    return f


def _scaled_mm(c):
    f = _c_names(c)
    f.update(recipe=_pick(_RECIPES, c.recipe), elem=Elem(f["a_elem"], f["b_elem"]),
             layout=("t" if c.a_row_major else "n") + ("n" if c.b_col_major else "t"),
             scale_layout="row_major" if c.scale_layout == 1 else "swizzled",
             mx_mode="rceil" if c.mx_rceil else "floor", bias=bool(c.bias), fast_accum=bool(c.fast_accum))
    return f


def _int4_mm(c):
    f = _c_names(c)
    f.update(format=_pick(_INT4, c.format), group=c.group_size)
    return f


def _grouped_mm(c):
    f = _c_names(c)
    f.update(mode=_pick(_GROUPED_MODE, c.mode), recipe=_pick(_GROUPED_RECIPE, c.recipe))
    return f


_FIELDS = {"sdpa": _sdpa, "cast": _cast, "scaled_mm": _scaled_mm, "int4_mm": _int4_mm, "grouped_mm": _grouped_mm}
_cache = {}


def problem(family, data):
    """The problem object for a parameter struct's bytes (cached: cases repeat their problems)."""
    key = (family, data)
    p = _cache.get(key)
    if p is None:
        struct = STRUCTS.get(family)
        if struct is None:
            p = Problem(family, data, {})
        else:
            buf = data.ljust(ctypes.sizeof(struct), b"\0")[: ctypes.sizeof(struct)]
            c = struct.from_buffer_copy(buf)
            p = Problem(family, c, _FIELDS.get(family, _c_names)(c))
        if len(_cache) > 4096:
            _cache.clear()
        _cache[key] = p
    return p
