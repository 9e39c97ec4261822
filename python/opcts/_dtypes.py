"""DLPack (code, bits) pairs of include/opcts/plugin.h, their opcts names and numpy views."""

# (code, bits) -> the opcts dtype name (`opcts list --fields`' spelling).
NAMES = {
    (2, 64): "fp64", (2, 32): "fp32", (2, 16): "fp16", (4, 16): "bf16",
    (10, 8): "e4m3fn", (11, 8): "e4m3fnuz", (12, 8): "e5m2", (13, 8): "e5m2fnuz", (14, 8): "e8m0fnu",
    (200, 8): "ue4m3", (15, 6): "e2m3fn", (16, 6): "e3m2fn", (17, 4): "e2m1fn",
    (0, 4): "int4", (1, 4): "uint4", (6, 8): "bool8", (0, 8): "int8", (1, 8): "uint8",
    (0, 16): "int16", (0, 32): "int32", (0, 64): "int64", (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64",
}
CODES = {v: k for k, v in NAMES.items()}

# numpy's spelling of the dtypes it has; the others are handed as their codes (unsigned integers
# of the element's storage: uint16 for bf16, uint8 for 8- and 6-bit formats, uint8 bytes holding
# two 4-bit codes each).
NUMPY = {
    "fp64": "float64", "fp32": "float32", "fp16": "float16", "bool8": "bool", "int8": "int8", "uint8": "uint8",
    "int16": "int16", "int32": "int32", "int64": "int64", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
}


def dtype_name(code, bits):
    return NAMES.get((code, bits), f"dl{code}x{bits}")


def numpy_dtype(code, bits):
    """numpy's dtype for an element of (code, bits), or the unsigned code storage numpy lacks."""
    name = NUMPY.get(NAMES.get((code, bits)))
    if name is not None:
        return name
    return "uint16" if bits == 16 else "uint8"


def is_codes(name):
    """Whether a numpy view of dtype `name` holds codes (numpy has no such type)."""
    return name not in NUMPY
