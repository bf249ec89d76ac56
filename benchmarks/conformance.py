"""Our Dynamo against torch.compile on every small function the test suite holds.

    python benchmarks/conformance.py                       # eager, fullgraph (both compilers)
    python benchmarks/conformance.py --settings eager,inductor,fullgraph
    python benchmarks/conformance.py --no-torch-compile --top 20

The functions are the repository's capture suites, in the style of PyTorch's own Dynamo
tests: the torch-free VM corpus (``tests/dynamo_conformance/corpus.py``: every call of
``CASES`` and the calls of ``RAISING``, which must raise the same exception), the ~50
functions and modules of ``tests/test_stage3_differential.py`` and the real-model constructs
of ``tests/test_stage3_constructs.py``. For each setting -- ``eager`` and ``inductor``
(backend, graph breaks allowed) and ``fullgraph`` (backend eager, ``fullgraph=True``) -- it
counts the functions whose compiled result equals eager Python/PyTorch's (tensors with
rtol = atol = 1e-5; a ``fullgraph`` run that raises counts as not compiled), for
``tc.compile`` and ``torch.compile`` measured in one run, and lists the most common reasons
of tutorcompile's graph breaks (from ``tc.explain``) with the functions that hit them.
"""

from __future__ import annotations

import argparse
import collections
import copy
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402

import tutorcompile as tc  # noqa: E402
from tests import test_stage3_constructs as constructs  # noqa: E402
from tests import test_stage3_differential as differential  # noqa: E402
from tests.dynamo_conformance import corpus  # noqa: E402

SETTINGS = {"eager": dict(backend="eager"), "inductor": dict(backend="inductor"),
            "fullgraph": dict(backend="eager", fullgraph=True)}


class Case:
    """One call: ``fn(*make_args())``, expected to return what eager returns or to raise
    ``raises``."""

    def __init__(self, name, fn, make_args, kwargs=None, raises=None):
        self.name, self.fn, self.make_args = name, fn, make_args
        self.kwargs, self.raises = kwargs or {}, raises


def _copying(args):
    return lambda: copy.deepcopy(args)


def cases() -> list[Case]:
    out = []
    for fn, args, kwargs in corpus.CASES:
        out.append(Case(f"corpus.{fn.__name__}{args!r}"[:70], fn, _copying(args), kwargs))
    for fn, args, kwargs, exc in corpus.RAISING:
        out.append(Case(f"corpus.{fn.__name__}{args!r} raises", fn, _copying(args), kwargs,
                        exc))
    for name, (fn, make_inputs) in differential.CASES.items():
        out.append(Case(f"differential.{name}", fn, _seeded(make_inputs)))
    for fn, makers in constructs.CASES:
        out.append(Case(f"constructs.{fn.__name__}", fn, _seeded(
            lambda makers=makers: (torch.randn(3), *[m() for m in makers]))))
    return out


def _seeded(make):
    def make_args():
        torch.manual_seed(0)
        return make()
    return make_args


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        try:
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        except AssertionError:
            return False
        return True
    if isinstance(a, (list, tuple)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(_same(x, y) for x, y in zip(a, b)))
    if isinstance(a, dict):
        return (type(a) is type(b) and list(a) == list(b)
                and all(_same(a[k], b[k]) for k in a))
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:
        return False


def _run(case: Case, fn):
    """('ok', value) or ('raised', exception)."""
    module = case.fn if isinstance(case.fn, torch.nn.Module) else None
    state = copy.deepcopy(module.state_dict()) if module is not None else None
    try:
        return "ok", fn(*case.make_args(), **case.kwargs)
    except Exception as e:
        return "raised", e
    finally:
        if module is not None:
            module.load_state_dict(state)


def right(case: Case, compiler: str, setting: str) -> tuple[bool, str]:
    """Whether ``compiler`` ('tc' or 'torch') under ``setting`` gives eager's answer, and the
    failure's first line when it does not."""
    want = _run(case, case.fn)
    if compiler == "tc":
        tc.reset()
        compiled = tc.compile(case.fn, **SETTINGS[setting])
    else:
        torch._dynamo.reset()
        compiled = torch.compile(case.fn, **SETTINGS[setting])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _run(case, compiled)
    if case.raises is not None:
        ok = got[0] == "raised" and type(got[1]) is case.raises
    else:
        ok = got[0] == want[0] == "ok" and _same(got[1], want[1])
    why = "" if ok else (f"{type(got[1]).__name__}: {got[1]}" if got[0] == "raised"
                         else "wrong result")
    return ok, why.strip().split("\n")[0][:160]


def break_reasons(case: Case) -> list[str]:
    """tutorcompile's graph-break and skipped-frame reasons for one call (``tc.explain``,
    backend eager)."""
    if case.raises is not None:
        return []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = tc.explain(case.fn)(*case.make_args(), **case.kwargs)
    except Exception as e:
        return [f"explain raised {type(e).__name__}"]
    skipped = [s.split(": ", 1)[-1] for s in out.skipped_frames]  # "frame: reason"
    return [r.split("\n")[0] for r in [b.reason for b in out.break_reasons] + skipped]


def _normalise(reason: str) -> str:
    """A reason without the details that differ between functions (quoted names, numbers)."""
    import re
    return re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "…", reason)[:110]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--settings", default="eager,fullgraph",
                        help=f"comma-separated, of {', '.join(SETTINGS)}")
    parser.add_argument("--no-torch-compile", action="store_true")
    parser.add_argument("--top", type=int, default=12, help="break reasons to list")
    parser.add_argument("-v", "--verbose", action="store_true", help="every failure")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    compilers = ["tc"] if args.no_torch_compile else ["tc", "torch"]
    settings = args.settings.split(",")
    all_cases = cases()
    score = {(c, s): 0 for c in compilers for s in settings}
    failures = collections.defaultdict(list)
    reasons = collections.defaultdict(list)
    for i, case in enumerate(all_cases):
        for setting in settings:
            for compiler in compilers:
                ok, why = right(case, compiler, setting)
                score[compiler, setting] += ok
                if not ok:
                    failures[compiler, setting].append(f"{case.name}: {why}")
        for reason in set(break_reasons(case)):
            reasons[_normalise(reason)].append(case.name)
        print(f"  {i + 1}/{len(all_cases)} {case.name}", file=sys.stderr)
    tc.reset()
    torch._dynamo.reset()

    n = len(all_cases)
    print(f"{n} functions ({len(corpus.CASES) + len(corpus.RAISING)} VM corpus calls, "
          f"{len(differential.CASES)} differential, {len(constructs.CASES)} constructs)")
    print("| setting | " + " | ".join(compilers) + " |")
    print("|---|" + "---|" * len(compilers))
    for s in settings:
        label = {"fullgraph": "compiles with fullgraph=True and is right"}.get(
            s, f"right answer, backend={s}")
        print(f"| {label} | " + " | ".join(f"{score[c, s]}/{n}" for c in compilers) + " |")
    for key, items in failures.items():
        print(f"\n{key[0]} {key[1]}: {len(items)} not right")
        for line in items if args.verbose else items[:40]:
            print("  " + line)
    broken = {name for names in reasons.values() for name in names}
    print(f"\nTop tutorcompile graph-break / skipped-frame reasons ({len(broken)} functions "
          "with one):")
    for reason, names in sorted(reasons.items(), key=lambda kv: -len(kv[1]))[:args.top]:
        print(f"  {len(names):3d}  {reason}   [{', '.join(names[:4])}"
              f"{', …' if len(names) > 4 else ''}]")
    return {"score": score, "failures": failures, "reasons": reasons}


if __name__ == "__main__":
    main()
