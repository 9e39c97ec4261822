"""python3 -m opcts manifest FILE.py|py:package.module --arch ARCH [--extends NAME] [-o OUT]

Writes a manifest (docs/manifests.md) that extends the arch's and holds one `tolerance:` entry
per accumulation the module's impls declare (@opcts.impl(accumulation=..., reason=...)): how
opcts learns an impl's accumulator model, which the plugin ABI does not carry. Pass it to runs
with --manifest, and lint it with the plugin loaded:
    opcts manifest lint --arch ARCH --manifest OUT --plugin FILE.py
"""

import argparse
import importlib
import os
import sys

import opcts
from opcts import _host

_ACCUMULATOR_KEYS = {"bits", "rounding", "promote_every"}


def _yaml_str(s):
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def entries(impls):
    """The tolerance entries (as YAML lines) of impls that declare an accumulation."""
    lines = []
    for d in impls:
        if d.accumulation is None:
            continue
        match = f"{d.family}.{d.name.replace('.', '_')}/*"
        acc = d.accumulation
        if isinstance(acc, str):
            per_output = [(None, f"accumulation: {acc}")]
        elif set(acc) <= _ACCUMULATOR_KEYS:
            inner = ", ".join(f"{k}: {acc[k]}" for k in ("bits", "rounding", "promote_every") if k in acc)
            per_output = [(None, f"accumulator: {{{inner}}}")]
        else:
            per_output = [(out, f"accumulation: {name}") for out, name in acc.items()]
        for output, what in per_output:
            lines.append(f"  - match: {_yaml_str(match)}")
            if output:
                lines.append(f"    output: {output}")
            lines.append(f"    {what}")
            lines.append(f"    reason: {_yaml_str(d.reason)}")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m opcts", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    m = sub.add_parser("manifest", help="a manifest of the module's declared accumulations")
    m.add_argument("module", help="FILE.py or py:package.module")
    m.add_argument("--arch", required=True, help="the arch whose manifest it extends (host, sm90, ...)")
    m.add_argument("--extends", default=None,
                   help="the manifest it extends (default: the arch's, in the cases/ beside this package)")
    m.add_argument("-o", "--output", default=None, help="file to write (default: standard output)")
    a = ap.parse_args(argv)
    got = _host.load(a.module)
    if isinstance(got, str):
        print(f"opcts: {got}", file=sys.stderr)
        return 2
    impls = [opcts._IMPLS[i] for i, *_ in got]
    extends = a.extends
    if extends is None:  # python/opcts/ of a clone and share/opcts/python/opcts/ of an install
        built_in = os.path.join(os.path.dirname(os.path.abspath(opcts.__file__)), "..", "..", "cases", "manifests",
                                a.arch + ".yaml")
        extends = os.path.normpath(built_in) if os.path.isfile(built_in) else a.arch
    lines = [f"# Written by `python3 -m opcts manifest {a.module} --arch {a.arch}`: the accumulations its impls declare.",
             f"arch: {a.arch}", f"extends: [{_yaml_str(extends)}]",
             f"description: {_yaml_str(a.arch + ' with the Python impls of ' + os.path.basename(a.module))}"]
    body = entries(impls)
    if body:
        lines += ["", "tolerance:"] + body
    text = "\n".join(lines) + "\n"
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
