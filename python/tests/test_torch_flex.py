"""plugins/python/examples/torch_flex.py's parts that need no torch: the keep predicate its mask_mod
is, held to families/sdpa/problem.cpp's first_key/last_key read as written (every causal
alignment, window and chunk, on shapes with Sq < Sk, Sq > Sk and Sq = Sk), the case's block mask
read by ranges of rows and keys, a boolean attn_mask through its broadcast axes (the contract's
mask_strides), the ALiBi distance and index, create_block_mask's batch and heads, and supports()'s
SKIPs. Problems are decoded from the ABI's parameter bytes, as the plugin host hands them over."""

import ctypes
import importlib.util
import itertools
import math
import os
import random

import pytest

import opcts
from opcts import _params

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _load():
    path = os.path.join(ROOT, "plugins", "python", "examples", "torch_flex.py")
    spec = importlib.util.spec_from_file_location("example_torch_flex", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)  # registers torch.flex_attention; imports no torch
    return m


flex = _load()

MASKS = {"none": 0, "causal_upper_left": 1, "causal_lower_right": 2}
LAYOUTS = {"bhsd": 0, "bshd": 1, "varlen": 2, "paged": 3}


def problem(mask="none", layout="bhsd", direction=0, attn_mask=0, alibi=0, **over):
    """An sdpa problem (bf16 unless dtype_code/dtype_bits say otherwise) as opcts's ABI bytes decode."""
    c = _params.SdpaParams()
    c.struct_size = ctypes.sizeof(c)
    c.dtype.code, c.dtype.bits, c.dtype.lanes = 4, 16, 1
    fields = dict(batch=1, heads_q=2, heads_kv=1, seq_q=5, seq_k=7, head_dim=64, head_dim_v=64, scale=0.125,
                  mask=MASKS[mask], window_left=-1, window_right=-1, attn_mask=attn_mask, layout=LAYOUTS[layout],
                  direction=direction, alibi=alibi)
    fields.update(over)
    for k, v in fields.items():
        setattr(c, k, v)
    return _params.problem("sdpa", bytes(c))


def contract_visible(p, i, j):
    """Problem::first_key / last_key / visible of families/sdpa/problem.cpp, line by line."""
    def chunk_start(i):
        a = i + p.seq_k - p.seq_q
        return (a // p.chunk if a >= 0 else -((-a + p.chunk - 1) // p.chunk)) * p.chunk

    first = 0 if p.window_left < 0 else max(0, i + p.seq_k - p.seq_q - p.window_left)
    if p.chunk > 0:
        first = max(first, chunk_start(i))
    last = p.seq_k - 1
    if p.chunk > 0:
        last = min(last, chunk_start(i) + p.chunk - 1)
    if p.mask == "causal_upper_left":
        last = min(last, i)
    if p.mask == "causal_lower_right":
        last = min(last, i + p.seq_k - p.seq_q)
    if p.window_right >= 0:
        last = min(last, i + p.seq_k - p.seq_q + p.window_right)
    return first <= j <= last


class Flat:
    """A row-major flat list seen with `shape`, indexed by a tuple (as a torch tensor is)."""

    def __init__(self, data, shape):
        self.data, self.shape = data, tuple(shape)
        assert len(data) == math.prod(self.shape)

    def __getitem__(self, idx):
        assert len(idx) == len(self.shape) and all(0 <= x < n for x, n in zip(idx, self.shape)), (idx, self.shape)
        flat = 0
        for x, n in zip(idx, self.shape):
            flat = flat * n + x
        return self.data[flat]


SHAPES = [(5, 7), (7, 5), (6, 6), (1, 9), (9, 1), (4, 13)]
WINDOWS = [(-1, -1), (0, 0), (2, -1), (-1, 1), (3, 0), (0, 2), (1, 1), (0, -1)]
CHUNKS = [0, 1, 3, 4]


@pytest.mark.parametrize("mask", list(MASKS))
def test_keep_is_the_contracts_causal_window_and_chunk(mask):
    checked = kept = 0
    for (sq, sk), (left, right), chunk in itertools.product(SHAPES, WINDOWS, CHUNKS):
        p = problem(mask, seq_q=sq, seq_k=sk, window_left=left, window_right=right, attention_chunk=chunk)
        keep = flex.keep_mod(p)
        for b, h, i, j in itertools.product(range(p.batch), range(p.heads_q), range(sq), range(sk)):
            want = contract_visible(p, i, j)
            assert bool(keep(b, h, i, j)) == want, (p, (b, h, i, j), want)
            checked += 1
            kept += want
        assert flex.needs_mask_mod(p) == (mask != "none" or (left, right) != (-1, -1) or chunk > 0)
    assert 0 < kept < checked  # both answers occur


def contract_block_rows(p, bits):
    """The case's block mask read as ranges: query block qb of (b, h) reads key block kb, so rows
    [qb·bq, min(qb·bq + bq, Sq)) see keys [kb·bk, min(kb·bk + bk, Sk)) (sdpa.hpp, block_q)."""
    bq, bk = p.block_mask
    shape = (p.batch, p.heads_q, -(-p.seq_q // bq), -(-p.seq_k // bk))
    seen = set()
    for b, h, qb, kb in itertools.product(*(range(n) for n in shape)):
        if bits[((b * shape[1] + h) * shape[2] + qb) * shape[3] + kb]:
            for i, j in itertools.product(range(qb * bq, min(qb * bq + bq, p.seq_q)),
                                          range(kb * bk, min(kb * bk + bk, p.seq_k))):
                seen.add((b, h, i, j))
    return shape, seen


@pytest.mark.parametrize("blocks", [(1, 1), (2, 3), (4, 2), (3, 5), (16, 16)])
def test_keep_reads_the_block_mask_by_blocks_of_rows_and_keys(blocks):
    rng = random.Random(5)
    for (sq, sk), mask, window in itertools.product([(7, 11), (11, 7), (9, 9)], MASKS, [(-1, -1), (3, 0)]):
        p = problem(mask, batch=2, heads_q=3, heads_kv=1, seq_q=sq, seq_k=sk, window_left=window[0],
                    window_right=window[1], block_mask_q=blocks[0], block_mask_k=blocks[1])
        shape = (p.batch, p.heads_q, -(-sq // blocks[0]), -(-sk // blocks[1]))
        bits = [int(rng.random() < 0.6) for _ in range(math.prod(shape))]
        want_shape, read = contract_block_rows(p, bits)
        assert shape == want_shape
        keep = flex.keep_mod(p, blocks=Flat(bits, shape))
        for b, h, i, j in itertools.product(range(2), range(3), range(sq), range(sk)):
            want = contract_visible(p, i, j) and (b, h, i, j) in read
            assert bool(keep(b, h, i, j)) == want, (p, (b, h, i, j))
        assert flex.needs_mask_mod(p) and flex.block_mask_batch_heads(p) == (2, 3)


def contract_mask_offset(p, b, h, i, j):
    """families/sdpa/problem.cpp's mask_strides: the element of (b, h, i, j) in the contiguous
    attn_mask [B or 1, Hq or 1, Sq or 1, Sk], stride 0 along a broadcast axis."""
    hs = (p.seq_q if p.attn_mask.per_query else 1) * p.seq_k
    sb = ((p.heads_q if p.attn_mask.per_head else 1) * hs) if p.attn_mask.per_batch else 0
    sh = hs if p.attn_mask.per_head else 0
    ss = p.seq_k if p.attn_mask.per_query else 0
    return b * sb + h * sh + i * ss + j


@pytest.mark.parametrize("per_batch, per_head, per_query", list(itertools.product((False, True), repeat=3)))
def test_keep_and_the_bias_read_the_attn_mask_through_its_broadcast_axes(per_batch, per_head, per_query):
    rng = random.Random(7)
    for kind, mask in itertools.product((1, 2), MASKS):
        p = problem(mask, batch=2, heads_q=4, heads_kv=2, seq_q=6, seq_k=5, attn_mask=kind,
                    mask_per_batch=int(per_batch), mask_per_head=int(per_head), mask_query_broadcast=int(not per_query))
        full = ((2 if per_batch else 1), (4 if per_head else 1), (6 if per_query else 1), 5)
        data = [rng.randrange(2) for _ in range(math.prod(full))]
        view = Flat(data, flex.mask_view_shape(p))  # torch's reshape of the contiguous input
        assert math.prod(view.shape) == math.prod(full)
        axes = flex.mask_axes(p)
        keep = flex.keep_mod(p, bool_mask=view if kind == 1 else None)
        for b, h, i, j in itertools.product(range(2), range(4), range(6), range(5)):
            element = data[contract_mask_offset(p, b, h, i, j)]
            assert view[flex.mask_index(axes, b, h, i, j)] == element
            want = contract_visible(p, i, j) and (element != 0 if kind == 1 else True)
            assert bool(keep(b, h, i, j)) == want
        assert flex.needs_mask_mod(p) == (kind == 1 or mask != "none")
        assert flex.block_mask_batch_heads(p) == ((2 if kind == 1 and per_batch else None),
                                                  (4 if kind == 1 and per_head else None))


def test_alibi_is_the_lower_right_distance_and_reads_its_slope():
    for sq, sk in SHAPES:
        offset = sk - sq
        for i, j in itertools.product(range(sq), range(sk)):
            assert flex.alibi_distance(offset, i, j) == abs(i + sk - sq - j)
    slopes = Flat(list(range(2 * 3)), (2, 3))  # [B, Hq]
    assert slopes[flex.alibi_index(True, 1, 2)] == 5
    assert Flat([10, 11, 12], (3,))[flex.alibi_index(False, 1, 2)] == 12  # [Hq]: the batch entry is not read


def test_nothing_masked_means_no_block_mask():
    assert not flex.needs_mask_mod(problem())
    assert not flex.needs_mask_mod(problem(attn_mask=2, alibi=1, sinks=1, softcap=30.0))


@pytest.mark.parametrize("over, why", [
    (dict(layout="varlen"), "dense layouts"),
    (dict(layout="paged"), "dense layouts"),
    (dict(head_dim=8, head_dim_v=8), "16 or more"),
    (dict(head_dim=64, head_dim_v=8), "16 or more"),
    (dict(head_dim=576, head_dim_v=512), "over 256"),
    (dict(head_dim=128, head_dim_v=512), "over 256"),
    (dict(batch=0), "empty"),
    (dict(seq_q=0), "empty"),
    (dict(seq_k=0), "empty"),
])
def test_supports_skips_what_flexattention_cannot_run(over, why):
    got = flex.supports(problem(**over), None)
    assert isinstance(got, str) and why in got


@pytest.mark.parametrize("over", [
    {}, dict(layout="bshd"), dict(direction=1), dict(head_dim=16, head_dim_v=16), dict(head_dim=256, head_dim_v=256),
    dict(head_dim=192, head_dim_v=128), dict(head_dim=21, head_dim_v=21), dict(dtype_bits=32),
    dict(mask="causal_lower_right", seq_q=1, seq_k=32768), dict(block_mask_q=16, block_mask_k=32),
    dict(attention_chunk=16, sinks=1, alibi=2, softcap=30.0, attn_mask=2, dbias=1, direction=1),
    # negative cases reach run, which refuses them naming the argument
    dict(heads_q=3, heads_kv=2), dict(window_left=-2), dict(window_right=-3), dict(softcap=-1.0),
])
def test_supports_runs_the_rest(over):
    over = dict(over)
    bits = over.pop("dtype_bits", None)
    p = problem(**over)
    if bits:
        c = _params.SdpaParams.from_buffer_copy(bytes(p.abi))
        c.dtype.code, c.dtype.bits = 2, 32
        p = _params.problem("sdpa", bytes(c))
        assert p.dtype == "fp32"
    assert flex.supports(p, None) is True


def test_the_impl_declares_its_abi_minor_determinism_and_case_id_name():
    info = flex.flex_attention.opcts_impl
    assert (info.family, info.name, info.backend, info.abi_minor) == ("sdpa", "torch.flex_attention", "cuda", 8)
    assert info.accumulation is None  # judged per key: the kernel's key tile is Inductor's choice
    assert info.deterministic(problem()) and info.deterministic(problem(direction=1, attn_mask=2))
    assert not info.deterministic(problem(direction=1, attn_mask=2, dbias=1))  # dbias: atomic adds
    assert info.name.replace(".", "_") == "torch_flex_attention"  # sdpa.torch_flex_attention/<problem id>


@pytest.mark.parametrize("over, arg", [
    (dict(heads_q=3, heads_kv=2), "heads_kv"), (dict(heads_kv=0), "heads_kv"), (dict(window_left=-2), "window_left"),
    (dict(window_right=-3), "window_right"), (dict(softcap=-1.0), "softcap"),
    (dict(heads_q=3, heads_kv=2, softcap=-1.0), "heads_kv"),  # the contract's order
])
def test_run_refuses_invalid_problems_naming_the_argument(over, arg):
    with pytest.raises(opcts.InvalidArgument) as e:
        flex.check_arguments(problem(**over))
    assert e.value.argument == arg
    flex.check_arguments(problem())  # a valid one passes
