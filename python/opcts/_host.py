"""The Python side of the plugin host (plugins/python/python_host.cpp): imports the user's
module, lists its impls, and calls them with each case's problem, tensors and context, mapping
what they raise onto the plugin ABI's statuses. Not a public API."""

import importlib
import importlib.util
import os
import sys
import traceback

import opcts
from opcts import _params, _tensors

# include/opcts/plugin.h's opcts_status
OK, INVALID_ARGUMENT, UNSUPPORTED, INTERNAL, TACTIC_UNAVAILABLE = 0, 1, 2, 3, 4
MESSAGE_BYTES = 500  # opcts_report.message holds 511 bytes; the impl's name goes before it
_arches = {}
_OWN = os.path.dirname(os.path.abspath(__file__)) + os.sep  # this package's frames are left out


def _short(filename):
    return os.path.basename(filename) if filename else "?"


def _frames(tb, limit):
    """The last `limit` frames of a traceback as 'file.py:12 in fn: source', most recent last."""
    out = []
    frames = [fs for fs in traceback.extract_tb(tb) if not fs.filename.startswith(_OWN)] or traceback.extract_tb(tb)
    for fs in frames[-limit:]:
        line = (fs.line or "").strip()
        out.append(f"{_short(fs.filename)}:{fs.lineno} in {fs.name}" + (f": {line}" if line else ""))
    return out


def _exception_text(e, budget):
    """'Type: message [traceback: a.py:3 in f: src -> b.py:9 in g: src]' within `budget` bytes:
    the exception first, then as many of the last frames as fit (the most recent kept)."""
    head = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    head = head.replace("\n", " ")
    if len(head) > budget // 2:
        head = head[: budget // 2 - 3] + "..."
    frames = _frames(e.__traceback__, 6)
    while frames:
        text = f"{head} [traceback, most recent call last: {' -> '.join(frames)}]"
        if len(text.encode()) <= budget:
            return text
        frames = frames[1:]
    return head


def _import_error(spec, e):
    # The traceback's last lines: the user's frames (opcts's and importlib's own left out).
    frames = [fs for fs in traceback.extract_tb(e.__traceback__)
              if not fs.filename.startswith(_OWN) and "importlib" not in fs.filename]
    lines = "".join(traceback.format_list(frames[-3:])).rstrip().splitlines()
    lines += [ln.rstrip() for ln in traceback.format_exception_only(type(e), e)]
    return f"importing {spec} raised {type(e).__name__}: {e}\n  traceback's last lines:\n    " + "\n    ".join(
        ln for ln in lines[-10:] if ln.strip())


def _import_file(path):
    name = os.path.splitext(os.path.basename(path))[0]
    if not name.isidentifier() or name in sys.modules:
        name = "opcts_plugin_" + "".join(c if c.isalnum() else "_" for c in name)
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # the module's own imports find its neighbours
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load(spec):
    """Imports `spec` (a .py path, or "py:package.module") and returns its impls as tuples
    (index, family, name, backend, caps, planted, has_deterministic_callback, abi_minor,
    has_invariance_callback, has_tactics_callback), or a
    string: why it cannot be used."""
    before = len(opcts._IMPLS)
    try:
        if spec.startswith("py:"):
            importlib.import_module(spec[3:])
        else:
            path = os.path.abspath(spec)
            if not os.path.isfile(path):
                return f"no such Python file: {spec}"
            _import_file(path)
    except BaseException as e:  # SystemExit and KeyboardInterrupt from a module are its errors too
        return _import_error(spec, e)
    added = list(enumerate(opcts._IMPLS))[before:]
    if not added:
        return (f"importing {spec} registered no impl (decorate functions with @opcts.impl; a module already "
                "imported by an earlier --plugin registers nothing again)")
    if any(d.backend == "host" for _, d in added):
        try:
            _tensors._numpy()  # host tensors are numpy views: numpy is imported now, not in a case
        except ImportError as e:
            return f"{spec} has host impls, whose tensors are numpy arrays, and numpy cannot be imported: {e}"
    return [(i, d.family, d.name, d.backend, list(d.caps), d.planted, d.deterministic is not True, d.abi_minor,
             callable(d.invariant) or len(d.invariant) > 0, d.tactics is not None) for i, d in added]



def _arch(t):
    a = _arches.get(t)
    if a is None:
        a = _arches[t] = opcts.Arch(*t[:6], caps=tuple(t[6]))
    return a


def _ask_supports(info, p, a):
    """The impl's own answer: None (run it) or a reason; what it raises goes through."""
    r = info.supports(p, a) if info._supports_arity >= 2 else info.supports(p)
    if r is None or r is True:
        return None
    if r is False:
        return "not supported (its supports() gave no reason)"
    return str(r)


def supports(index, params, arch):
    """None when the impl runs the problem, else the SKIP's reason.

    A supports() that raises anything but opcts.Unsupported answers "runs": the worker's run()
    asks it again and reports the exception as the case's ERROR, so a broken supports() cannot
    turn an impl's cases into SKIPs (the plugin ABI's supports has no error status)."""
    info = opcts._IMPLS[index]
    if info.supports is None:
        return None
    p = _params.problem(info.family, params)
    try:
        return _ask_supports(info, p, _arch(arch))
    except opcts.Unsupported as e:
        return e.why or "not supported"
    except Exception:
        return None


def deterministic(index, params):
    info = opcts._IMPLS[index]
    d = info.deterministic
    return bool(d(_params.problem(info.family, params))) if callable(d) else bool(d)


def invariance(index, params):
    """The impl's invariance axes on the problem as the ABI's bitmask (0 when its function raises or
    names an axis opcts does not know: it declares nothing then)."""
    info = opcts._IMPLS[index]
    axes = info.invariant
    try:
        if callable(axes):
            axes = opcts._invariance_names(axes(_params.problem(info.family, params)) or (), f"impl {info.name}")
        return sum(opcts.INVARIANCE_AXES[a] for a in set(axes))
    except Exception:
        return 0


def tactics(index, params):
    """The impl's tactics for the problem, '\n'-separated (plugin ABI list_tactics); what its
    function raises goes through (the Python host answers -1 with it: the case is an ERROR
    quoting it)."""
    info = opcts._IMPLS[index]
    return "\n".join(str(t) for t in info.tactics(_params.problem(info.family, params)) or ())


def run(index, params, tensors, stream, device, arch, tactic=None):
    """Runs one case: None when the impl returned, else (status, argument, message)."""
    info = opcts._IMPLS[index]
    _tensors.new_case()
    try:
        p = _params.problem(info.family, params)
        a = _arch(arch)
        if info.supports is not None:
            try:
                _ask_supports(info, p, a)
            except opcts.Unsupported:
                pass  # a refusal, answered in the parent process already
            except BaseException as e:
                traceback.print_exc(file=sys.stderr)
                sys.stderr.flush()
                return (INTERNAL, "", "supports() raised " + _exception_text(e, MESSAGE_BYTES - 20))
        t = _tensors.Tensors(tensors, info.backend == "host", device, stream, info.backend)
        if info._run_arity >= 3:
            info.fn(p, t, opcts.Context(stream, device, a, tactic))
        else:
            info.fn(p, t)
        return None
    except opcts.InvalidArgument as e:
        return (INVALID_ARGUMENT, e.argument, e.why)
    except opcts.Unsupported as e:
        return (UNSUPPORTED, "", e.why)
    except opcts.TacticUnavailable as e:
        return (TACTIC_UNAVAILABLE, "", e.why)
    except BaseException as e:  # an ERROR: the record says what and where
        traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        return (INTERNAL, "", _exception_text(e, MESSAGE_BYTES))
