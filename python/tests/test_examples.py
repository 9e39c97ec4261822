"""The examples: every file is valid Python (the GPU ones are only compiled here: Triton, PyTorch
and CuPy run on the GPU machine), and the numpy cast's encoder agrees with known codes."""

import glob
import importlib.util
import os
import py_compile

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "plugins", "python", "examples", "*.py")))


def test_there_are_host_and_gpu_examples():
    names = {os.path.basename(p) for p in EXAMPLES}
    assert {"numpy_cast.py", "numpy_sdpa.py", "triton_sdpa.py", "torch_sdpa.py", "torch_flex.py",
            "cupy_cast.py"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_every_example_compiles(path, tmp_path):
    py_compile.compile(path, cfile=str(tmp_path / "out.pyc"), doraise=True)


@pytest.mark.parametrize("path", [p for p in EXAMPLES if os.path.basename(p) in
                                  ("triton_sdpa.py", "torch_sdpa.py", "torch_flex.py", "cupy_cast.py")],
                         ids=os.path.basename)
def test_gpu_examples_say_they_need_a_gpu(path):
    with open(path) as f:
        assert f.readline().startswith('"""NEEDS A GPU')


def load(name):
    spec = importlib.util.spec_from_file_location("example_" + name, os.path.join(ROOT, "plugins", "python", "examples",
                                                                                    name + ".py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def test_numpy_cast_encodes_known_codes():
    m = load("numpy_cast")
    x = np.array([0.0, -0.0, 1.0, 448.0, 464.0, 465.0, -1e9, np.nan, 2.0 ** -9, 2.0 ** -10])
    # e4m3fn: 464 ties to 448 (even), 465 overflows: 0x7E satfinite, 0x7F (NaN) nonsaturating.
    assert list(m.encode(x, "e4m3fn", True)) == [0x00, 0x80, 0x38, 0x7E, 0x7E, 0x7E, 0xFE, 0x7F, 0x01, 0x00]
    assert list(m.encode(x, "e4m3fn", False))[5:7] == [0x7F, 0xFF]
    assert m.encode(np.array([-0.0]), "e4m3fnuz", True)[0] == 0  # no -0 in FNUZ
    assert m.encode(np.array([np.nan]), "e2m1fn", True)[0] == 0x7  # finite formats: NaN -> +max
    assert list(m.encode_e8m0(np.array([1.0, 1.5, 3.0, 0.0]), "rne", True)) == [127, 128, 129, 0]
    assert list(m.encode_e8m0(np.array([1.5]), "floor", True)) == [127]
    assert list(m.encode_int4(np.array([-9.0, 2.5, 7.6, np.nan]), True)) == [8, 2, 7, 0]
    assert m.decode_table("e5m2")[0x7C] == np.inf


def first_python_block(path):
    with open(path) as f:
        text = f.read()
    start = text.index("```python\n") + len("```python\n")
    return text[start:text.index("```", start)]


@pytest.mark.skipif(not os.environ.get("OPCTS_BIN"), reason="needs OPCTS_BIN (CTest's python_package sets it)")
def test_the_docs_first_example_passes_and_its_planted_twin_fails(tmp_path):
    """docs/python.md's first example, as a new user copies it: PASS on its one smoke case; with
    the exponent bias off by one, FAIL (a bound that could not see that would pass both)."""
    import subprocess
    code = first_python_block(os.path.join(ROOT, "docs", "python.md"))
    assert "codes - 127" in code
    for text, want in ((code, "1 PASS, 0 FAIL"), (code.replace("codes - 127", "codes - 126"), "0 PASS, 1 FAIL")):
        (tmp_path / "my_kernels.py").write_text(text)
        r = subprocess.run([os.environ["OPCTS_BIN"], "run", "--arch", "host", "--tier", "smoke", "--plugin",
                            "my_kernels.py", "--filter", "cast.mine_*", "--cases-dir", os.path.join(ROOT, "cases")],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert want in r.stdout + r.stderr, r.stdout + r.stderr
