"""The corpus through ``tutorcompile.compile(fullgraph=True)``: captured whole, as torch.compile
captures it (stdlib unittest; skipped where torch is not installed).

``torch.compile(fn, backend="eager", fullgraph=True)`` captures every call of
``corpus.CASES`` (``benchmarks/conformance.py`` measures it), so ours must too: one graph, no
break, and CPython's answer. A few constructs are captured by *replaying* what the traced code
did to the world after the graph (assignments to globals, attribute writes and deletions, the
``__enter__``/``__exit__`` of a Python context manager): those get a test each that checks the
effect itself, not only the return value. Run with the repository root on ``PYTHONPATH``::

    python -m unittest tests.dynamo_conformance.test_fullgraph_conformance
"""

import contextlib
import copy
import dataclasses
import unittest

try:
    import torch

    import tutorcompile as tc
    from tutorcompile.dynamo import GraphBreakError
except ImportError:  # the torch-free interpreters of the conformance run
    torch = None

from tests.dynamo_conformance import corpus


def _name(case):
    fn, args, kwargs = case[:3]
    return f"{fn.__name__}{args!r}{kwargs or ''}"


@unittest.skipIf(torch is None, "needs torch")
class TestFullgraphCorpus(unittest.TestCase):
    def setUp(self):
        tc.reset()

    def tearDown(self):
        tc.reset()

    def test_every_case_is_captured_whole(self):
        for case in corpus.CASES:
            fn, args, kwargs = case
            with self.subTest(case=_name(case)):
                tc.reset()
                expected = fn(*copy.deepcopy(args), **copy.deepcopy(kwargs))
                compiled = tc.compile(fn, backend="eager", fullgraph=True)
                got = compiled(*copy.deepcopy(args), **copy.deepcopy(kwargs))
                self.assertEqual(got, expected)
                self.assertIs(type(got), type(expected))

    def test_an_exception_leaving_the_frame_is_a_break(self):
        # the real run must raise it: under fullgraph that is an error naming the construct
        # (or the call's own TypeError, for arguments that do not bind)
        for fn, args, kwargs, exc_type in corpus.RAISING:
            with self.subTest(case=fn.__name__):
                tc.reset()
                with self.assertRaises((GraphBreakError, exc_type)):
                    tc.compile(fn, backend="eager", fullgraph=True)(*args, **kwargs)
                tc.reset()
                with self.assertRaises(exc_type):
                    tc.compile(fn, backend="eager")(*args, **kwargs)


# --- side effects replayed after the graph -------------------------------------------------
LAST = None


def writes_a_global(x):
    global LAST
    LAST = x * 2          # a tensor the graph computes
    return LAST + 1       # read back inside the frame: the pending value, not the module's


def deletes_a_global(x):
    global LAST
    del LAST
    return x + 1


class Holder:
    def __init__(self):
        self.cache = 1


def deletes_an_attribute(x, h):
    y = x * h.cache
    del h.cache
    h.seen = hasattr(h, "cache")
    return y


class Recorder:
    """A context manager written in Python, reached from outside the frame."""

    def __init__(self):
        self.log = []
        self.depth = 0

    def __enter__(self):
        self.log.append("enter")
        self.depth += 1
        return self

    def __exit__(self, typ, val, tb):
        self.log.append(f"exit {typ.__name__ if typ else None}")
        self.depth -= 1
        return typ is KeyError


def with_outside_manager(x, rec, fail):
    with rec as r:
        y = x * r.depth
        if fail:
            raise KeyError("suppressed by __exit__")
    return y + rec.depth


def with_a_break_inside(x, rec):
    with rec:
        y = x + 1
        print("a break inside the block")
    return y * 2


@contextlib.contextmanager
def pure_scope(k):
    yield k * 2


@contextlib.contextmanager
def logged_scope(log):
    log.append("in")
    yield 3
    log.append("out")  # must come after the block's own writes


def with_contextmanagers(x, log):
    with pure_scope(3) as k:
        y = x * k
    with logged_scope(log) as j:
        log.append("body")
        y = y + j
    return y


@dataclasses.dataclass
class Scaled:
    t: object
    k: int = 2


def dataclass_of_a_tensor(x):
    s = Scaled(x)
    return dataclasses.asdict(s)["t"] * s.k   # asdict deep-copies the tensor: a break


class Table(dict):
    def lookup(self, key):
        return self.get(key, 0) * 10


def builds_a_dict_subclass(x):
    t = Table(a=x)
    t["b"] = x + 1
    return t, t.lookup("b")


@unittest.skipIf(torch is None, "needs torch")
class TestReplayedSideEffects(unittest.TestCase):
    def setUp(self):
        tc.reset()

    def tearDown(self):
        global LAST
        LAST = None
        tc.reset()

    def test_global_assignment_is_replayed(self):
        global LAST
        x = torch.randn(3)
        compiled = tc.compile(writes_a_global, backend="eager", fullgraph=True)
        torch.testing.assert_close(compiled(x), x * 2 + 1)
        torch.testing.assert_close(LAST, x * 2)
        x2 = torch.randn(3)
        LAST = None
        compiled(x2)  # the graph is reused; the write happens on every call
        torch.testing.assert_close(LAST, x2 * 2)

    def test_global_deletion_is_replayed(self):
        global LAST
        LAST = 5
        tc.compile(deletes_a_global, backend="eager", fullgraph=True)(torch.ones(2))
        self.assertNotIn("LAST", globals())
        LAST = None

    def test_attribute_deletion_is_replayed(self):
        x = torch.randn(3)
        h = Holder()
        compiled = tc.compile(deletes_an_attribute, backend="eager", fullgraph=True)
        torch.testing.assert_close(compiled(x, h), x)
        self.assertFalse(hasattr(h, "cache"))
        self.assertIs(h.seen, False)
        with self.assertRaises(AttributeError):  # as eager: this object has no ``cache``
            tc.compile(deletes_an_attribute, backend="eager")(x, h)

    def test_with_block_runs_enter_and_exit(self):
        x = torch.randn(3)
        for fail in (False, True):
            with self.subTest(fail=fail):
                tc.reset()
                rec, ref = Recorder(), Recorder()
                compiled = tc.compile(with_outside_manager, backend="eager", fullgraph=True)
                torch.testing.assert_close(compiled(x, rec, fail),
                                           with_outside_manager(x, ref, fail))
                self.assertEqual(rec.log, ref.log)
                self.assertEqual(rec.depth, 0)

    def test_break_inside_with_block_runs_the_frame_uncompiled(self):
        x = torch.randn(3)
        rec = Recorder()
        out = tc.explain(with_a_break_inside)(x, rec)
        self.assertEqual(rec.log, ["enter", "exit None"])  # once each, never replayed twice
        self.assertTrue(any("inside a with-block" in s for s in out.skipped_frames))
        rec = Recorder()
        torch.testing.assert_close(tc.compile(with_a_break_inside, backend="eager")(x, rec),
                                   (x + 1) * 2)
        self.assertEqual(rec.log, ["enter", "exit None"])

    def test_generator_context_managers_keep_the_order_of_writes(self):
        x = torch.randn(3)
        log = []
        torch.testing.assert_close(tc.compile(with_contextmanagers, backend="eager")(x, log),
                                   x * 6 + 3)
        self.assertEqual(log, ["in", "body", "out"])
        # the generators are resumed when their context manager asks (enter, then exit),
        # so even one that writes is captured, its writes in the program's order
        tc.reset()
        log = []
        torch.testing.assert_close(tc.compile(with_contextmanagers, backend="eager",
                                              fullgraph=True)(x, log), x * 6 + 3)
        self.assertEqual(log, ["in", "body", "out"])

    def test_asdict_of_a_tensor_field_breaks(self):
        x = torch.randn(3)
        out = tc.explain(dataclass_of_a_tensor)(x)
        self.assertTrue(any("asdict" in b.reason for b in out.break_reasons))
        torch.testing.assert_close(tc.compile(dataclass_of_a_tensor, backend="eager")(x),
                                   x * 2)

    def test_dict_subclass_keeps_its_class(self):
        x = torch.randn(3)
        t, looked_up = tc.compile(builds_a_dict_subclass, backend="eager",
                                  fullgraph=True)(x)
        self.assertIs(type(t), Table)
        torch.testing.assert_close(t["b"], x + 1)
        torch.testing.assert_close(looked_up, (x + 1) * 10)


if __name__ == "__main__":
    unittest.main()
