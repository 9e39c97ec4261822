"""opcts cases as pytest items: `pytest -p opcts.pytest_plugin --opcts-plugin my_kernels.py`.

Each case of the selection (`opcts list` with the same --arch, --tier, --filter, --exclude and
plugins) is one item whose id is the case id; `-k`, `-x`, `--junitxml`, `-q` and CI habits work
as usual. The cases run in one `opcts run` over what pytest kept (after -k and deselection), with
opcts's workers, references, tolerances, manifests and crash isolation; each item then reports
its record: PASS passes, SKIP skips with opcts's reason, XFAIL is an xfail, and FAIL, ERROR,
CRASH, TIMEOUT, XPASS, FLAKE, MISTRUSTED and MISSING fail with opcts's message and repro line,
unchanged. A plugin that cannot be used stops the session (opcts's exit 2) with its message.

Options (each also read from the environment variable in brackets):
  --opcts-bin PATH         the opcts binary [OPCTS_BIN; default: `opcts` on PATH]
  --opcts-plugin P         a plugin: FILE.py, py:package.module or a shared library (repeatable)
  --opcts-arch A           the arch [default host]      --opcts-tier T   smoke|default|full [smoke]
  --opcts-filter G         glob over case ids or impl names (repeatable)
  --opcts-exclude G        glob to leave out (repeatable)
  --opcts-manifest F       a manifest (a plugin's accumulator models and known failures)
  --opcts-arg ARG          any other `opcts run` argument (repeatable: --opcts-arg=--bitwise)
Without --opcts-plugin and --opcts-filter the plugin adds nothing.
"""

import json
import os
import shlex
import shutil
import subprocess
import tempfile

import pytest

_FAILING = ("FAIL", "ERROR", "CRASH", "TIMEOUT", "XPASS", "FLAKE", "MISTRUSTED", "MISSING")


def pytest_addoption(parser):
    g = parser.getgroup("opcts", "opcts cases as pytest items (opcts.pytest_plugin)")
    g.addoption("--opcts-bin", default=os.environ.get("OPCTS_BIN"), help="the opcts binary (default: opcts on PATH)")
    g.addoption("--opcts-plugin", action="append", default=[], help="FILE.py, py:package.module or a .so (repeatable)")
    g.addoption("--opcts-arch", default="host", help="arch to plan for (default host)")
    g.addoption("--opcts-tier", default="smoke", help="smoke, default or full (default smoke)")
    g.addoption("--opcts-filter", action="append", default=[], help="glob over case ids or impl names (repeatable)")
    g.addoption("--opcts-exclude", action="append", default=[], help="glob to leave out (repeatable)")
    g.addoption("--opcts-manifest", default=None, help="manifest file")
    g.addoption("--opcts-arg", action="append", default=[], help="another `opcts run` argument (repeatable)")


class OpctsCaseFailed(Exception):
    pass


class _Session:
    """The selection, and the one `opcts run` that produces every item's record."""

    def __init__(self, config):
        self.config = config
        o = config.option
        self.bin = o.opcts_bin or shutil.which("opcts")
        self.common = ["--arch", o.opcts_arch, "--tier", o.opcts_tier]
        for p in o.opcts_plugin:
            self.common += ["--plugin", p]
        for f in o.opcts_filter:
            self.common += ["--filter", f]
        for x in o.opcts_exclude:
            self.common += ["--exclude", x]
        if o.opcts_manifest:
            self.common += ["--manifest", o.opcts_manifest]
        self.extra = list(o.opcts_arg)
        self.records = None
        self.all_ids = []
        self.selected = None

    def wanted(self):
        o = self.config.option
        return bool(o.opcts_plugin or o.opcts_filter)

    def _opcts(self, args):
        if not self.bin:
            raise pytest.UsageError("opcts.pytest_plugin: no opcts binary (give --opcts-bin or OPCTS_BIN, or put opcts on PATH)")
        return subprocess.run([self.bin] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def list_ids(self):
        r = self._opcts(["list"] + self.common)
        if r.returncode != 0:
            raise pytest.UsageError(f"opcts list failed (exit {r.returncode}):\n{r.stderr}{r.stdout}")
        self.all_ids = [ln.strip() for ln in r.stdout.splitlines() if ln.strip()]
        return self.all_ids

    def run(self):
        """Runs the kept items' cases once; their records by id."""
        if self.records is not None:
            return self.records
        self.records = {}
        selection = list(self.common)
        if self.selected is not None and len(self.selected) < len(self.all_ids):
            # -k or deselection kept a part: exactly those ids (no glob character is in an id).
            selection = [a for a in self.common]
            keep = []
            i = 0
            while i < len(selection):
                if selection[i] in ("--filter", "--exclude"):
                    i += 2
                    continue
                keep.append(selection[i])
                i += 1
            selection = keep
            for case_id in self.selected:
                selection += ["--filter", case_id]
        with tempfile.TemporaryDirectory(prefix="opcts-pytest-") as d:
            results = os.path.join(d, "results.jsonl")
            args = ["run"] + selection + ["--results", results, "--allow-empty"] + self.extra
            r = self._opcts(args)
            self.output = r.stdout + r.stderr
            if r.returncode not in (0, 1):
                raise pytest.UsageError(f"opcts run failed (exit {r.returncode}): {' '.join(map(shlex.quote, args))}\n"
                                        f"{self.output}")
            if os.path.exists(results):
                with open(results) as f:
                    for line in f:
                        line = line.strip()
                        if not line:
                            continue
                        rec = json.loads(line)
                        if "id" in rec and "outcome" in rec:
                            self.records[rec["id"]] = rec
        return self.records


class OpctsCase(pytest.Item):
    """One opcts case; its id is the case id."""

    def __init__(self, *, case_id, opcts_session, **kw):
        super().__init__(**kw)
        self.case_id = case_id
        self.opcts_session = opcts_session
        self.record = None

    def runtest(self):
        rec = self.opcts_session.run().get(self.case_id)
        self.record = rec
        if rec is None:
            raise OpctsCaseFailed(f"MISSING {self.case_id}: no record from opcts run\n{self.opcts_session.output[-2000:]}")
        outcome, message = rec["outcome"], rec.get("message", "")
        # The exact id, outcome and impl in --junitxml (whose names spell '/' as '.').
        for key, value in (("opcts_case_id", self.case_id), ("opcts_outcome", outcome), ("opcts_impl", rec.get("impl", ""))):
            self.user_properties.append((key, value))
        if outcome == "PASS":
            return
        if outcome == "SKIP":
            pytest.skip(message or "SKIP")
        if outcome == "XFAIL":
            pytest.xfail(message or "XFAIL")
        text = f"{outcome} {self.case_id}: {message}"
        if rec.get("repro"):
            text += f"\n  repro: {rec['repro']}"
        raise OpctsCaseFailed(text)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, OpctsCaseFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return "opcts", None, self.case_id


def pytest_configure(config):
    config._opcts = _Session(config)


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect
def pytest_collection_modifyitems(session, config, items):
    s = config._opcts
    if not s.wanted():
        return
    cases = [OpctsCase.from_parent(session, name=case_id, nodeid=case_id, case_id=case_id, opcts_session=s)
             for case_id in s.list_ids()]
    items.extend(cases)
    # Counted as collected (the terminal's "collected N items", -k's deselected counts).
    config.hook.pytest_collectreport(report=pytest.CollectReport("opcts", "passed", None, cases))


def pytest_collection_finish(session):
    s = session.config._opcts
    if s.wanted():
        s.selected = [i.case_id for i in session.items if isinstance(i, OpctsCase)]
