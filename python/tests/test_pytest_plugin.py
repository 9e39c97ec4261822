"""opcts.pytest_plugin: the numpy examples collected and run as pytest items (id = case id),
-k selecting a part, a failure's message and repro unchanged, a broken plugin stopping the
session. Needs the opcts binary (OPCTS_BIN, set by CTest) built with the Python plugin host."""

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
EXAMPLES = os.path.join(ROOT, "plugins", "python", "examples")
FAULTS = os.path.join(ROOT, "tests", "python_plugins", "faults.py")
OPCTS = os.environ.get("OPCTS_BIN")

pytestmark = pytest.mark.skipif(not OPCTS or not os.path.exists(OPCTS), reason="OPCTS_BIN names no opcts binary")


def run_pytest(tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), OPCTS_BIN=OPCTS)
    junit = tmp_path / "junit.xml"
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "opcts.pytest_plugin", "-p", "no:cacheprovider",
                        "--rootdir", str(tmp_path), f"--junitxml={junit}", *args], cwd=tmp_path, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    cases = {}
    if junit.exists():
        for tc in ET.parse(junit).getroot().iter("testcase"):
            props = {p.get("name"): p.get("value") for p in tc.iter("property")}
            state = "failed" if tc.find("failure") is not None else "skipped" if tc.find("skipped") is not None else "passed"
            cases[props.get("opcts_case_id", tc.get("name"))] = (state, props, tc)
    return r, cases


def test_the_numpy_examples_are_collected_and_pass(tmp_path):
    r, cases = run_pytest(tmp_path, f"--opcts-plugin={EXAMPLES}/numpy_cast.py", f"--opcts-plugin={EXAMPLES}/numpy_sdpa.py",
                          "--opcts-filter=cast.np_*", "--opcts-filter=sdpa.np_*")
    assert r.returncode == 0, r.stdout
    states = [s for s, _, _ in cases.values()]
    assert states.count("failed") == 0
    assert sum(1 for i in cases if i.startswith("cast.np_cast/")) >= 70
    assert sum(1 for i, (s, _, _) in cases.items() if i.startswith("sdpa.np_sdpa/") and s == "passed") >= 130
    # SKIPs keep opcts's reason; ids are the case ids. A Python impl declares plugin ABI 1.0, so
    # the varlen (1.1), paged (1.2), chunked-local (1.4), sink (1.5), ALiBi (1.6), dbias and
    # query-broadcast mask (1.7: _dbias, _amask…k, _bmask…k), block-sparse (1.8: _blk) and fp8 (1.9:
    # _fp8) cases SKIP saying so.
    skipped = {i: tc.find("skipped").get("message") for i, (s, _, tc) in cases.items() if s == "skipped"}
    assert skipped
    for i, why in skipped.items():
        packed = ("_varlen" in i or "_paged" in i or "_chunk" in i or "_sink" in i or "_alibi" in i
                  or "_dbias" in i or "_blk" in i or "_fp8" in i or re.search(r"_[ab]mask[bh]*k(_|$)", i))
        want = "needs plugin ABI 1." if packed else "np.sdpa: computes the forward only"
        assert want in why, (i, why)
    assert "cast.np_cast/fp32_to_e4m3fn_satfinite_edges" in cases
    assert cases["cast.np_cast/fp32_to_e4m3fn_satfinite_edges"][1]["opcts_outcome"] == "PASS"


def test_k_selects_and_failures_keep_opctss_message(tmp_path):
    r, cases = run_pytest(tmp_path, f"--opcts-plugin={FAULTS}", "--opcts-filter=cast.pyfault_lazy/*",
                          "--opcts-filter=cast.pyfault_raises/*", "-k", "fp32_to_e4m3fn_satfinite")
    assert r.returncode == 1, r.stdout
    assert set(cases) == {"cast.pyfault_lazy/fp32_to_e4m3fn_satfinite_edges",
                          "cast.pyfault_raises/fp32_to_e4m3fn_satfinite_edges"}, r.stdout
    lazy = cases["cast.pyfault_lazy/fp32_to_e4m3fn_satfinite_edges"]
    assert lazy[0] == "failed" and lazy[1]["opcts_outcome"] == "FAIL"
    assert "never written?" in lazy[2].find("failure").text
    assert "repro: " in lazy[2].find("failure").text
    raised = cases["cast.pyfault_raises/fp32_to_e4m3fn_satfinite_edges"]
    assert raised[1]["opcts_outcome"] == "ERROR"
    assert "ERROR cast.pyfault_raises/fp32_to_e4m3fn_satfinite_edges: pyfault.raises: ZeroDivisionError" in \
        raised[2].find("failure").text
    assert "2 deselected" not in r.stdout and "deselected" in r.stdout


def test_x_stops_at_the_first_failure(tmp_path):
    r, cases = run_pytest(tmp_path, f"--opcts-plugin={FAULTS}", "--opcts-filter=cast.pyfault_lazy/*", "-x")
    assert r.returncode == 1
    assert [s for s, _, _ in cases.values()] == ["failed"], r.stdout


def test_a_plugin_that_cannot_be_used_stops_the_session(tmp_path):
    broken = os.path.join(ROOT, "tests", "python_plugins", "broken_import.py")
    r, _ = run_pytest(tmp_path, f"--opcts-plugin={broken}")
    assert r.returncode == 4, r.stdout  # pytest's usage error
    assert "NameError: name 'no_such_name' is not defined" in r.stdout
